package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/armory-dev/armory/world"
)

// streamChunk is how many stream events a streaming call reserves at a
// time; what it does not use is given back when it ends (Store.Release).
const streamChunk = 32

// streamMeter counts a running call's progress messages against the
// session's stream_events cap: every message a caller receives is one
// event (the call's result was one already, taken at admission). Events
// are reserved from the store in chunks (Acquire, exact across processes),
// a message is delivered only against a reserved event, and the unused
// part of the last chunk is given back at the end, so the session's count
// is exact once the call ends (while it runs, at most streamChunk-1 events
// are reserved ahead). When no more can be reserved the message is dropped
// and the tool is stopped.
type streamMeter struct {
	p       *Pipeline
	s       *state
	ctx     context.Context
	cancel  context.CancelFunc
	deliver func(string)

	mu       sync.Mutex
	chunk    int64 // the next reservation's size (falls to 1 near the cap)
	reserved int64 // reserved and not yet used
	stopped  bool  // no more messages are delivered
	capped   bool  // stopped by the cap (or a store failure: err)
	cur, max int64
	err      error
}

// meter wraps s.c.Progress (nil stays nil: a caller that receives no
// progress is streamed nothing). It returns the context the tool runs
// under, cancelled when the cap stops the stream.
func (p *Pipeline) meter(ctx context.Context, s *state) (context.Context, *streamMeter, func(string)) {
	if s.c.Progress == nil {
		return ctx, nil, nil
	}
	tctx, cancel := context.WithCancel(ctx)
	m := &streamMeter{p: p, s: s, ctx: context.WithoutCancel(ctx), cancel: cancel, deliver: s.c.Progress, chunk: streamChunk}
	return tctx, m, m.progress
}

func (m *streamMeter) progress(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	limit := m.p.Limit(m.s.ag, world.LimitStreamEvents)
	for m.reserved == 0 {
		cur, ok, err := m.p.st.Acquire(m.ctx, m.s.c.Session, world.LimitStreamEvents, m.chunk, limit)
		switch {
		case err != nil:
			m.stopped, m.capped, m.err = true, true, err
		case ok:
			m.reserved = m.chunk
			continue
		case m.chunk > 1:
			m.chunk = 1 // near the cap: one event at a time
			continue
		default:
			m.stopped, m.capped, m.cur, m.max = true, true, cur, limit
			if ov, oerr := m.p.st.LimitOverrides(m.ctx, m.s.c.Session); oerr == nil {
				if v, has := ov[world.LimitStreamEvents]; has {
					m.max = v
				}
			}
		}
		m.cancel()
		return
	}
	m.reserved--
	m.deliver(msg)
}

// done gives back what the meter reserved and did not use, and reports why
// it stopped the stream ("" when it did not).
func (m *streamMeter) done() string {
	if m == nil {
		return ""
	}
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true // a message sent after the tool returned is not delivered
	if m.reserved > 0 {
		if _, err := m.p.st.Release(m.ctx, m.s.c.Session, world.LimitStreamEvents, m.reserved); err == nil {
			m.reserved = 0
		}
	}
	if !m.capped {
		return ""
	}
	if m.err != nil {
		return fmt.Sprintf("the stream was stopped: Armory could not count its events (%v)", m.err)
	}
	return fmt.Sprintf("Safety limit reached: %s (%d/%d) while the tool was streaming; the tool was stopped", world.LimitStreamEvents, m.cur, m.max)
}
