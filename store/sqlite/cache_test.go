package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

// The committer keeps session starts, overrides, counter values and the
// audit head from one batch to the next. The conformance suite
// (storetest: CacheTwoStoresAlternate, CacheWritesBetweenBatches,
// CacheManySessions) changes that state between batches from this Store
// and from others; this file adds what needs SQLite's own clock option.

func startRec(sess string, i int) *audit.Record {
	r := storetest.Record(i)
	r.Session, r.Phase, r.Status = sess, audit.PhaseStart, audit.StatusRunning
	return r
}

// ResetSession between batches restarts the session clock that Admit's
// runtime cap measures, and SessionStart creating a session between batches
// is the start the next batch uses.
func TestCacheSessionClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	s, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "a.db"), sqlite.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	run := func(i int) store.AdmitResult {
		t.Helper()
		res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: startRec("s", i), MaxRuntime: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	start := now
	if res := run(0); !res.Admitted || !res.SessionStart.Equal(start) {
		t.Fatalf("first admit: %+v", res)
	}
	now = now.Add(2 * time.Minute)
	if res := run(1); res.Admitted || res.Hit == nil || res.Hit.Counter != store.LimitSessionRuntime {
		t.Fatalf("admit after the runtime: %+v", res)
	}
	if err := s.ResetSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	// SessionStart (outside the committer) starts the clock now.
	got, err := s.SessionStart(ctx, "s")
	if err != nil || !got.Equal(now) {
		t.Fatalf("SessionStart = %v, %v; want %v", got, err, now)
	}
	if res := run(2); !res.Admitted || !res.SessionStart.Equal(now) {
		t.Fatalf("admit after reset: %+v, want start %v", res, now)
	}
	// An override of the runtime set between batches applies.
	now = now.Add(30 * time.Second)
	if err := s.SetLimitOverride(ctx, "s", store.LimitSessionRuntime, 10); err != nil {
		t.Fatal(err)
	}
	if res := run(3); res.Admitted || res.Hit == nil || res.Hit.Max != 10 {
		t.Fatalf("admit over the override: %+v", res)
	}
}

// A NoSync batch is committed with synchronous=NORMAL on a FULL Store, and
// the writer connection is FULL again for whatever it writes next; a
// NORMAL Store has nothing to relax (its commits count as durable, with its
// own setting).
func TestNoSyncRestoresFull(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		sync             string
		want             int
		durable, relaxed int64
	}{
		{"FULL", 2, 0, 1},
		{"NORMAL", 1, 1, 0},
	} {
		t.Run(tc.sync, func(t *testing.T) {
			s, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "a.db"), sqlite.Options{Synchronous: tc.sync})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c0 := s.CommitCounts()
			res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: startRec("s", 0), NoSync: true,
				Acquire: []store.Acquisition{{Counter: "tool_calls", N: 1, Max: 10}}})
			if err != nil || !res.Admitted {
				t.Fatalf("admit: %+v %v", res, err)
			}
			c := s.CommitCounts()
			if c.Durable-c0.Durable != tc.durable || c.Relaxed-c0.Relaxed != tc.relaxed {
				t.Fatalf("commits %+v → %+v", c0, c)
			}
			if v, err := sqlite.WriterSynchronous(s); err != nil || v != tc.want {
				t.Fatalf("writer's synchronous after a NoSync batch: %d %v, want %d", v, err, tc.want)
			}
			storetest.CheckTrail(t, s, 1)
		})
	}
}
