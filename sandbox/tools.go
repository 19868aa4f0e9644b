package sandbox

import (
	"bytes"
	"strings"
	"sync"
)

// RequirementKind is the armory.Requirement kind of tools that run
// processes through this package (tool.cli, tool.python, toolbox tools).
const RequirementKind = "sandbox"

// Requirement reports whether processes can run here with backend, the
// world's sandbox setting: "" (the best available), "bwrap", "landlock" or
// "none" (explicitly unconfined). It returns nil when they can, an
// *UnavailableError (matching ErrUnavailable, one reason per backend) when
// they cannot, and an error wrapping ErrPolicy for an unknown backend name.
// "none" needs MaybeRunHelper to have been called in main, like the
// landlock backend. The first call probes the host (see Detect); later
// calls are cheap. Safe for concurrent use.
func Requirement(backend string) error {
	return Detect().Check(Backend(backend))
}

// LineHold is how many bytes of an unfinished line LineProgress holds back
// before it forwards them anyway.
const LineHold = 4 << 10

// LineProgress adapts fn, which takes one human-readable message per call,
// to a ProgressFunc. Output is forwarded in line-sized pieces: each message
// holds the complete lines of one chunk of one stream (stderr messages are
// prefixed "[stderr] "); an unfinished line is held until it ends or
// reaches LineHold bytes. Invalid UTF-8 is replaced. fn therefore sees at
// most the bytes the ProgressFunc received, plus the prefixes. flush sends
// what is still held; call it once Run has returned. fn is never called
// concurrently. A nil fn gives a nil ProgressFunc and a no-op flush.
func LineProgress(fn func(msg string)) (progress ProgressFunc, flush func()) {
	if fn == nil {
		return nil, func() {}
	}
	lp := &lineProgress{fn: fn}
	return lp.write, lp.flush
}

type lineProgress struct {
	mu       sync.Mutex
	fn       func(string)
	out, err []byte // held unfinished line per stream
}

func (l *lineProgress) write(stream string, chunk []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	held := &l.out
	if stream == "stderr" {
		held = &l.err
	}
	*held = append(*held, chunk...)
	cut := bytes.LastIndexByte(*held, '\n') + 1
	if len(*held)-cut >= LineHold {
		cut = len(*held)
	}
	if cut > 0 {
		l.send(stream, (*held)[:cut])
		*held = append((*held)[:0], (*held)[cut:]...)
	}
}

func (l *lineProgress) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.out) > 0 {
		l.send("stdout", l.out)
		l.out = l.out[:0]
	}
	if len(l.err) > 0 {
		l.send("stderr", l.err)
		l.err = l.err[:0]
	}
}

func (l *lineProgress) send(stream string, b []byte) {
	msg := strings.ToValidUTF8(string(b), "\uFFFD")
	if stream == "stderr" {
		msg = "[stderr] " + msg
	}
	l.fn(msg)
}
