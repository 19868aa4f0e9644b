package sqlite

import (
	"context"
	"time"
)

// WriterSynchronous returns the writer connection's PRAGMA synchronous
// (1 NORMAL, 2 FULL), for tests.
func WriterSynchronous(s *Store) (int, error) {
	var v int
	err := s.w.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&v)
	return v, err
}

// PollInterval is the interval s's poller used last, for tests.
func PollInterval(s *Store) time.Duration { return time.Duration(s.ev.interval.Load()) }

// Pace returns the intervals a pollPace gives for woken, in order.
func Pace(woken ...bool) []time.Duration {
	var p pollPace
	out := make([]time.Duration, len(woken))
	for i, w := range woken {
		out[i] = p.next(w)
	}
	return out
}

const (
	EventPoll    = eventPoll
	EventWakeGap = eventWakeGap
)

// SetEventPoll sets s's slow poll interval (in place of EventPoll), and
// with watch false turns the watch of the events file off; call it before
// s's first subscription.
func SetEventPoll(s *Store, d time.Duration, watch bool) { s.ev.slow, s.ev.noWatch = d, !watch }

// EventWakes is how many times the watch of s's events file woke its
// poller.
func EventWakes(s *Store) int64 { return s.ev.watched.Load() }
