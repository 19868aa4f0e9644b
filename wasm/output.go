package wasm

import (
	"bytes"
	"fmt"
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

// headTail keeps the first head and the last tail bytes written (a
// module's stderr: a Go program's fatal error starts it, a panic's stack
// runs to its end) and counts all of them.
type headTail struct {
	head, tail int
	h, t       []byte
	total      int64
}

func (w *headTail) Write(p []byte) (int, error) {
	n0 := len(p)
	w.total += int64(n0)
	if room := w.head - len(w.h); room > 0 {
		n := min(room, len(p))
		w.h = append(w.h, p[:n]...)
		p = p[n:]
	}
	if len(p) >= w.tail {
		w.t = append(w.t[:0], p[len(p)-w.tail:]...)
		return n0, nil
	}
	w.t = append(w.t, p...)
	if len(w.t) > 2*w.tail {
		w.t = w.t[:copy(w.t, w.t[len(w.t)-w.tail:])]
	}
	return n0, nil
}

// text is what was kept, with a note of what was dropped between.
func (w *headTail) text() string {
	t := w.t
	if len(t) > w.tail {
		t = t[len(t)-w.tail:]
	}
	kept := int64(len(w.h) + len(t))
	if kept == w.total {
		return string(w.h) + string(t)
	}
	return fmt.Sprintf("%s\n[… %d bytes of stderr left out …]\n%s", w.h, w.total-kept, t)
}

// input is a module's stdin: the call's arguments, set when the call
// binds the instance; empty before. An instance started ahead of its call
// waits for them instead (waitFor).
type input struct {
	r *bytes.Reader
	// Started ahead: the module's first read closes ready and waits for
	// feed (the call) or done (the instance stopped: the read ends,
	// empty).
	ready  chan struct{}
	feed   chan fed
	done   <-chan struct{}
	waited bool
}

// fed is what a call hands a module waiting in its read: the arguments,
// and bind, run in the read before it returns them (on the module's
// goroutine: nothing else of the module runs meanwhile).
type fed struct {
	args []byte
	bind func()
}

// waitFor makes reads wait for a call's arguments, or for done.
func (in *input) waitFor(done <-chan struct{}) {
	in.ready, in.feed, in.done = make(chan struct{}), make(chan fed, 1), done
}

// take starts reading what a call handed over.
func (in *input) take(f fed) {
	if f.bind != nil {
		f.bind()
	}
	in.r = bytes.NewReader(f.args)
}

func (in *input) Read(p []byte) (int, error) {
	if in.r == nil && in.feed != nil {
		if !in.waited {
			in.waited = true
			close(in.ready)
		}
		select {
		case f := <-in.feed:
			in.take(f)
		default:
			select {
			case f := <-in.feed:
				in.take(f)
			case <-in.done:
				return 0, io.EOF
			}
		}
	}
	if in.r == nil {
		return 0, io.EOF
	}
	return in.r.Read(p)
}
