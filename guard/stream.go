package guard

import (
	"context"
	"fmt"
	"sync"

	"github.com/armory-dev/armory/world"
)

// streamMeter counts a running call's progress messages against the
// session's stream_events cap: every message a caller receives is one
// event (the call's result was one already, taken at admission). Each
// message takes its event from the store before it is delivered (Acquire,
// exact across processes); when the cap is reached the message is dropped
// and the tool is stopped.
type streamMeter struct {
	p       *Pipeline
	s       *state
	ctx     context.Context
	cancel  context.CancelFunc
	deliver func(string)

	mu       sync.Mutex
	stopped  bool
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
	m := &streamMeter{p: p, s: s, ctx: ctx, cancel: cancel, deliver: s.c.Progress}
	return tctx, m, m.progress
}

func (m *streamMeter) progress(msg string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return
	}
	cur, ok, err := m.p.st.Acquire(context.WithoutCancel(m.ctx), m.s.c.Session, world.LimitStreamEvents, 1, m.p.Limit(m.s.ag, world.LimitStreamEvents))
	if err != nil || !ok {
		m.stopped, m.cur, m.err = true, cur, err
		m.max = m.p.Limit(m.s.ag, world.LimitStreamEvents)
		if ov, oerr := m.p.st.LimitOverrides(m.ctx, m.s.c.Session); oerr == nil {
			if v, has := ov[world.LimitStreamEvents]; has {
				m.max = v
			}
		}
		m.cancel()
		return
	}
	m.deliver(msg)
}

// done releases the meter and reports why it stopped the stream ("" when
// it did not).
func (m *streamMeter) done() string {
	if m == nil {
		return ""
	}
	m.cancel()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.stopped {
		return ""
	}
	if m.err != nil {
		return fmt.Sprintf("the stream was stopped: Armory could not count its events (%v)", m.err)
	}
	return fmt.Sprintf("Safety limit reached: %s (%d/%d) while the tool was streaming; the tool was stopped", world.LimitStreamEvents, m.cur, m.max)
}
