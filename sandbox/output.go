package sandbox

import (
	"fmt"
	"io"
	"sync"
)

// ProgressFunc receives output as it arrives. stream is "stdout" or
// "stderr". For each stream it sees at most the kept bytes (MaxOutput) and,
// when the stream was truncated, one final chunk holding the truncation
// marker. Calls are serialized (never concurrent) and all happen before Run
// returns. chunk must not be modified or retained after the call (copy it).
// The function runs on the goroutine that drains the pipe: a slow callback
// slows the child down but cannot make it deadlock once the cap is reached.
type ProgressFunc func(stream string, chunk []byte)

// progressSink serializes calls to a ProgressFunc.
type progressSink struct {
	mu sync.Mutex
	fn ProgressFunc
}

func (p *progressSink) emit(stream string, chunk []byte) {
	if p == nil || p.fn == nil || len(chunk) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fn(stream, chunk)
}

var scratchPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// capture drains one stream: it keeps the first max bytes, counts every
// byte, and forwards kept bytes to the progress sink.
type capture struct {
	stream string
	max    int
	kept   []byte
	total  int64
	sink   *progressSink
	tee    io.Writer // every byte, or nil
}

func newCapture(stream string, max int, sink *progressSink) *capture {
	return &capture{stream: stream, max: max, kept: make([]byte, 0, min(max, 64<<10)), sink: sink}
}

// drain reads r until EOF or a read error (such as the pipe being closed
// under it), then emits the truncation marker if bytes were dropped.
func (c *capture) drain(r io.Reader) {
	bp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(bp)
	buf := *bp
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.total += int64(n)
			if c.tee != nil {
				_, _ = c.tee.Write(buf[:n])
			}
			if room := c.max - len(c.kept); room > 0 {
				take := min(room, n)
				start := len(c.kept)
				c.kept = append(c.kept, buf[:take]...)
				c.sink.emit(c.stream, c.kept[start:len(c.kept):len(c.kept)])
			}
		}
		if err != nil {
			break
		}
	}
	if m := c.marker(); m != nil {
		c.sink.emit(c.stream, m)
	}
}

// marker returns the truncation marker, or nil when nothing was dropped.
func (c *capture) marker() []byte {
	dropped := c.total - int64(len(c.kept))
	if dropped <= 0 {
		return nil
	}
	return fmt.Appendf(nil, "\n(%d bytes, truncated)", dropped)
}

// result returns the kept bytes followed by the marker, if any.
func (c *capture) result() []byte {
	m := c.marker()
	if m == nil {
		return c.kept
	}
	return append(c.kept, m...)
}
