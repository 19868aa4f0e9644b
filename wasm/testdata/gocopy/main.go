// Command gocopy copies stdin to stdout: a Go module with no work of its
// own, for the benchmarks (what a call of a Go module started ahead costs
// at least).
package main

import (
	"io"
	"os"
)

func main() { io.Copy(os.Stdout, os.Stdin) }
