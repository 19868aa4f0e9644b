package commit

import (
	"sync"
	"sync/atomic"
	"time"
)

// LastSeq is the highest Seq among the records a committed batch appended
// (refused admissions append nothing), or 0.
func LastSeq(entries []Entry) int64 {
	var last int64
	for _, e := range entries {
		if !e.Appended() {
			continue
		}
		last = max(last, e.Rec.Seq)
	}
	return last
}

// Syncer makes relaxed commits durable within a window, coalescing every
// commit of the window into one call of sync (a store.Batched store's
// background syncer), and keeps the store's durable point: the highest
// Seq known durable, from its syncs or from durable commits (MarkDurable).
//
// It holds no queue: a dirty flag and the highest Seq committed since the
// last sync, so any number of commits costs one goroutine and one sync
// per window. A failed sync leaves the commits pending; the next is tried
// a window later.
type Syncer struct {
	window time.Duration
	sync   func() error

	mu      sync.Mutex
	dirty   bool
	pending int64 // highest Seq committed since the last sync

	wake    chan struct{}
	closing chan struct{}
	done    chan struct{}
	once    sync.Once

	syncs, failures atomic.Int64
	durable         atomic.Int64
}

// NewSyncer returns a Syncer. With window > 0 it starts the goroutine that
// calls sync at most window after a commit; with 0 it only keeps the
// durable point (a strict store).
func NewSyncer(window time.Duration, sync func() error) *Syncer {
	s := &Syncer{window: window, sync: sync, wake: make(chan struct{}, 1), closing: make(chan struct{}), done: make(chan struct{})}
	if window > 0 {
		go s.run()
	} else {
		close(s.done)
	}
	return s
}

// Committed notes a relaxed commit whose last record is seq (0: none): it
// will be durable after the next sync, at most a window from now.
func (s *Syncer) Committed(seq int64) {
	s.mu.Lock()
	was := s.dirty
	s.dirty = true
	s.pending = max(s.pending, seq)
	s.mu.Unlock()
	if !was {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// MarkDurable notes a durable commit whose last record is seq.
func (s *Syncer) MarkDurable(seq int64) { s.advance(seq) }

func (s *Syncer) advance(seq int64) {
	for {
		cur := s.durable.Load()
		if seq <= cur || s.durable.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// Syncs is how many syncs succeeded; Failures how many did not.
func (s *Syncer) Syncs() int64    { return s.syncs.Load() }
func (s *Syncer) Failures() int64 { return s.failures.Load() }

// DurableSeq is the highest Seq known durable.
func (s *Syncer) DurableSeq() int64 { return s.durable.Load() }

func (s *Syncer) run() {
	defer close(s.done)
	t := time.NewTimer(s.window)
	t.Stop()
	for {
		select {
		case <-s.wake:
		case <-s.closing:
			s.flush()
			return
		}
		t.Reset(s.window)
		select {
		case <-t.C:
		case <-s.closing:
			t.Stop()
			s.flush()
			return
		}
		s.flush()
	}
}

// flush syncs what is pending, if anything.
func (s *Syncer) flush() {
	s.mu.Lock()
	dirty, seq := s.dirty, s.pending
	s.dirty, s.pending = false, 0
	s.mu.Unlock()
	if !dirty {
		return
	}
	if err := s.sync(); err != nil {
		s.failures.Add(1)
		s.Committed(seq) // still pending: retried a window later
		return
	}
	s.syncs.Add(1)
	s.advance(seq)
}

// Close makes what is pending durable (one last sync) and stops the
// goroutine. The store calls it after its last commit, before it closes
// what sync uses.
func (s *Syncer) Close() {
	s.once.Do(func() { close(s.closing) })
	<-s.done
}
