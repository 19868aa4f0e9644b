// Package eventbus is the part of store.Events that the backends share: a
// bounded publish queue drained in batches by one goroutine, which sends
// what is still queued when its store closes (within DrainTimeout), and the
// set of subscribers that a backend's listener feeds. How a batch travels
// (Postgres NOTIFY, a table in a second SQLite file) is the backend's.
package eventbus

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// MaxPayload is the largest event payload a store sends, in bytes (less):
// PostgreSQL refuses NOTIFY payloads of 8,000 bytes or more, and the SQLite
// store keeps the same bound so that an event means the same on both.
const MaxPayload = 7900

// Bounds: events waiting to be sent, events per batch, time to send a
// batch, and time a closing store spends sending what is queued.
const (
	QueueSize    = 1024
	BatchSize    = 64
	SendTimeout  = 5 * time.Second
	DrainTimeout = 2 * time.Second
)

// Publisher queues payloads and sends them in batches from one goroutine.
// The zero value is ready; Send must be set before the first Publish.
type Publisher struct {
	// Send sends one batch (one round trip, one transaction); a failed
	// batch is lost, as events are best effort.
	Send func(ctx context.Context, batch [][]byte)

	once    sync.Once
	q       chan []byte
	dropped atomic.Int64
}

// Publish queues payload without waiting, and reports whether it was
// queued: false for a payload of MaxPayload bytes or more, and when
// QueueSize events are waiting (counted in Dropped). The
// first Publish starts the sending goroutine, counted in wg, which ends
// when stop is closed, after sending what is still queued (for at most
// DrainTimeout).
func (p *Publisher) Publish(payload []byte, stop <-chan struct{}, wg *sync.WaitGroup) bool {
	if len(payload) >= MaxPayload {
		return false
	}
	p.once.Do(func() {
		p.q = make(chan []byte, QueueSize)
		wg.Add(1)
		go p.loop(stop, wg)
	})
	select {
	case p.q <- payload:
		return true
	default:
		p.dropped.Add(1)
		return false
	}
}

// Dropped is how many payloads Publish refused because the queue was full.
func (p *Publisher) Dropped() int64 { return p.dropped.Load() }

func (p *Publisher) loop(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	batch := make([][]byte, 0, BatchSize)
	for {
		select {
		case <-stop:
			p.drain(batch)
			return
		case b := <-p.q:
			batch = append(batch[:0], b)
		}
		batch = p.fill(batch)
		ctx, cancel := context.WithTimeout(context.Background(), SendTimeout)
		p.Send(ctx, batch)
		cancel()
	}
}

// drain sends what is queued, in batches, until the queue is empty or
// DrainTimeout passes.
func (p *Publisher) drain(batch [][]byte) {
	ctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	for ctx.Err() == nil {
		if batch = p.fill(batch[:0]); len(batch) == 0 {
			return
		}
		p.Send(ctx, batch)
	}
}

// fill adds queued payloads to batch, without waiting, up to BatchSize.
func (p *Publisher) fill(batch [][]byte) [][]byte {
	for len(batch) < BatchSize {
		select {
		case b := <-p.q:
			batch = append(batch, b)
		default:
			return batch
		}
	}
	return batch
}

// Subscribers are the functions a store hands each event to, and whether
// the watcher that feeds them (a backend's poller) is running.
type Subscribers struct {
	mu       sync.Mutex
	subs     map[*func([]byte)]struct{}
	watching bool
}

// Add adds fn until the returned cancel is called. When start is not nil
// and no watcher runs, start is called (with the set locked, so it must
// not call back into it) and a watcher runs from then on, until Idle says
// otherwise.
func (s *Subscribers) Add(fn func([]byte), start func()) (cancel func()) {
	p := &fn
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[*func([]byte)]struct{}{}
	}
	s.subs[p] = struct{}{}
	if start != nil && !s.watching {
		s.watching = true
		start()
	}
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		delete(s.subs, p)
		s.mu.Unlock()
	}
}

// Idle reports whether no subscriber is left; if so the watcher must stop,
// and the next Add starts another.
func (s *Subscribers) Idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) > 0 {
		return false
	}
	s.watching = false
	return true
}

// Deliver calls every subscriber with each payload, in order, without the
// set locked.
func (s *Subscribers) Deliver(payloads ...[]byte) {
	s.mu.Lock()
	fns := make([]func([]byte), 0, len(s.subs))
	for p := range s.subs {
		fns = append(fns, *p)
	}
	s.mu.Unlock()
	for _, b := range payloads {
		for _, fn := range fns {
			fn(b)
		}
	}
}
