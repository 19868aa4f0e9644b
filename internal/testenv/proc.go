package testenv

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

// Marker returns a unique, valid extra argument for GNU sleep ("0.000NNN"
// seconds) that marks the processes of one test in /proc (see PIDsWith); it
// also serves as a unique file name part.
func Marker() string {
	return fmt.Sprintf("0.000%09d", rand.IntN(1e9))
}

// PIDsWith lists the processes other than this one whose command line
// contains m. With live, zombies (exited, not yet reaped) are left out.
func PIDsWith(m string, live bool) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(b, []byte(m)) {
			continue
		}
		if live {
			st, _ := os.ReadFile("/proc/" + e.Name() + "/stat")
			if i := bytes.LastIndexByte(st, ')'); i > 0 && bytes.HasPrefix(st[i+1:], []byte(" Z")) {
				continue
			}
		}
		out = append(out, pid)
	}
	return out
}
