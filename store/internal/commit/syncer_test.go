package commit

import (
	"errors"
	"testing"
	"time"
)

// Many commits within one window cost one sync, which advances the durable
// point to the last of them; Close syncs what is pending.
func TestSyncerCoalescesAndCloseSyncs(t *testing.T) {
	var calls int
	s := NewSyncer(time.Hour, func() error { calls++; return nil })
	for seq := int64(1); seq <= 100; seq++ {
		s.Committed(seq)
	}
	if s.DurableSeq() != 0 {
		t.Fatalf("durable point %d before any sync", s.DurableSeq())
	}
	s.Close()
	if calls != 1 || s.Syncs() != 1 || s.DurableSeq() != 100 {
		t.Fatalf("calls %d, syncs %d, durable %d: want one sync covering seq 100", calls, s.Syncs(), s.DurableSeq())
	}
	s.Close() // idempotent
}

// A failed sync leaves the commits pending; the next sync covers them.
func TestSyncerRetriesAfterFailure(t *testing.T) {
	done := make(chan struct{})
	var calls int
	s := NewSyncer(time.Millisecond, func() error {
		calls++
		if calls == 1 {
			return errors.New("disk on fire")
		}
		if calls == 2 {
			close(done)
		}
		return nil
	})
	s.Committed(7)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("no retry after a failed sync")
	}
	s.Close()
	if s.Failures() != 1 || s.Syncs() < 1 || s.DurableSeq() != 7 {
		t.Fatalf("failures %d, syncs %d, durable %d", s.Failures(), s.Syncs(), s.DurableSeq())
	}
}

// A strict store's Syncer (window 0) runs no goroutine and only keeps the
// durable point.
func TestSyncerStrict(t *testing.T) {
	s := NewSyncer(0, func() error { t.Fatal("a strict syncer synced"); return nil })
	s.MarkDurable(5)
	s.MarkDurable(3)
	if s.DurableSeq() != 5 {
		t.Fatalf("durable %d", s.DurableSeq())
	}
	s.Close()
}
