package wasm

import (
	"bytes"
	"io"
)

// The writers and the reader below belong to one instance and are used
// from the goroutine that runs it only (a module's code and the WASI calls
// it makes run on the caller's goroutine): no locks.

// capped keeps a module's stdout, up to max bytes. The first write past
// max calls over (once) — the call stops the module — and what follows is
// counted, not kept.
type capped struct {
	max   int
	buf   bytes.Buffer
	total int64
	over  func()
}

func (w *capped) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if room := w.max - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	if w.total > int64(w.max) && w.over != nil {
		f := w.over
		w.over = nil
		f()
	}
	return len(p), nil
}

// tail keeps the last n bytes written (a module's stderr: a Go panic or
// an error message ends there) and counts all of them.
type tail struct {
	n     int
	b     []byte
	total int64
}

func (t *tail) Write(p []byte) (int, error) {
	t.total += int64(len(p))
	if len(p) >= t.n {
		t.b = append(t.b[:0], p[len(p)-t.n:]...)
		return len(p), nil
	}
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.n {
		t.b = t.b[:copy(t.b, t.b[len(t.b)-t.n:])]
	}
	return len(p), nil
}

// bytes returns the kept tail.
func (t *tail) bytes() []byte {
	if len(t.b) > t.n {
		return t.b[len(t.b)-t.n:]
	}
	return t.b
}

// input is a module's stdin: the call's arguments, set when the call
// binds the instance; empty before.
type input struct{ r *bytes.Reader }

func (in *input) Read(p []byte) (int, error) {
	if in.r == nil {
		return 0, io.EOF
	}
	return in.r.Read(p)
}
