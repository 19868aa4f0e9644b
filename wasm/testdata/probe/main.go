// Command probe is a WASI program the wasm package's tests run: it reads
// one JSON object on stdin naming what to do ({"op": ...}), the ordinary
// and the hostile, and reports on stdout (or fails with a message on
// stderr and exit code 1). What it does before it reads its input is
// named by its only argument, the tool's name (before).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"
)

type request struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	To    string `json:"to"`
	Text  string `json:"text"`
	Bytes int64  `json:"bytes"`
	Code  int    `json:"code"`
}

func main() {
	before()
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fail("bad input: %v", err)
	}
	switch req.Op {
	case "echo":
		fmt.Print(req.Text)
	case "env":
		env := os.Environ()
		sort.Strings(env)
		wd, _ := os.Getwd()
		b := make([]byte, 8)
		rand.Read(b)
		out, _ := json.Marshal(map[string]any{"env": env, "args": os.Args, "wd": wd,
			"year": time.Now().Year(), "random": hex.EncodeToString(b)})
		os.Stdout.Write(out)
	case "read":
		b, err := os.ReadFile(req.Path)
		if err != nil {
			fail("%v", err)
		}
		os.Stdout.Write(b)
	case "write":
		if err := os.WriteFile(req.Path, []byte(req.Text), 0o644); err != nil {
			fail("%v", err)
		}
		fmt.Print("wrote ", req.Path)
	case "mkdir":
		if err := os.MkdirAll(req.Path, 0o755); err != nil {
			fail("%v", err)
		}
	case "remove":
		if err := os.Remove(req.Path); err != nil {
			fail("%v", err)
		}
	case "rename":
		if err := os.Rename(req.Path, req.To); err != nil {
			fail("%v", err)
		}
	case "symlink":
		if err := os.Symlink(req.To, req.Path); err != nil {
			fail("%v", err)
		}
	case "list":
		ents, err := os.ReadDir(req.Path)
		if err != nil {
			fail("%v", err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		fmt.Print(strings.Join(names, ","))
	case "append":
		f, err := os.OpenFile(req.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			fail("%v", err)
		}
		if _, err := f.WriteString(req.Text); err != nil {
			fail("%v", err)
		}
		f.Close()
	case "truncate":
		f, err := os.OpenFile(req.Path, os.O_WRONLY, 0)
		if err != nil {
			fail("%v", err)
		}
		if err := f.Truncate(req.Bytes); err != nil {
			fail("truncate: %v", err)
		}
		f.Close()
	case "spin":
		n := 0
		for {
			n++
		}
	case "sleep":
		time.Sleep(time.Hour)
	case "alloc":
		b := make([]byte, req.Bytes)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		fmt.Print(len(b))
	case "grow":
		// Memory in 1 MiB pieces, kept, until the runtime gives up.
		var keep [][]byte
		for {
			b := make([]byte, 1<<20)
			b[0] = 1
			keep = append(keep, b)
		}
	case "recurse":
		debug.SetMaxStack(1 << 40)
		fmt.Print(recurse(0))
	case "flood":
		chunk := []byte(strings.Repeat("x", 64<<10))
		for n := int64(0); req.Bytes == 0 || n < req.Bytes; n += int64(len(chunk)) {
			os.Stdout.Write(chunk)
		}
	case "stderr":
		chunk := strings.Repeat("e", 1000) + "\n"
		for n := int64(0); n < req.Bytes; n += int64(len(chunk)) {
			io.WriteString(os.Stderr, chunk)
		}
		fmt.Fprintln(os.Stderr, "the last line")
		os.Exit(req.Code)
	case "who":
		fmt.Print(who)
	case "count":
		calls++
		fmt.Print(calls)
	case "panic":
		panic("probe panics")
	default:
		fail("unknown op %q", req.Op)
	}
}

var calls int

// who is what the probe read before its input (lab.read-first).
var who string

// before does what the tool's name (lab.NAME) says to do before the probe
// reads its input; a tool of another name does nothing first.
func before() {
	if len(os.Args) == 0 {
		return
	}
	switch strings.TrimPrefix(os.Args[0], "lab.") {
	case "spin-first": // never reads its input
		n := 0
		for {
			n++
		}
	case "slow-first": // reads it after 300 ms of work
		for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		}
	case "exit-first": // never reads it
		fmt.Print("done without input")
		os.Exit(0)
	case "panic-first":
		panic("probe panics before reading its input")
	case "chatty-first": // writes a little to stdout and 1 MiB to stderr, then reads it
		fmt.Print("before;")
		io.WriteString(os.Stderr, "chatter starts\n")
		line := strings.Repeat("c", 1023) + "\n"
		for range 1024 {
			io.WriteString(os.Stderr, line)
		}
	case "flood-first": // writes to stdout without end
		chunk := []byte(strings.Repeat("x", 64<<10))
		for {
			os.Stdout.Write(chunk)
		}
	case "read-first": // reads a file of the workspace, then its input
		b, err := os.ReadFile("/workspace/data/who.txt")
		who = string(b)
		if err != nil {
			who = err.Error()
		}
	}
}

func recurse(n int) int {
	var pad [64]byte
	pad[n%64] = byte(n)
	return recurse(n+1) + int(pad[0])
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}
