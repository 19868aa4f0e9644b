package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

// The committer keeps session starts, overrides, counter values and the
// audit head from one batch to the next. The conformance suite
// (storetest: CacheTwoStoresAlternate, CacheWritesBetweenBatches,
// CacheManySessions) changes that state between batches from this Store
// and from others; this file adds what needs SQLite's own clock option.

// The session clock across batches (storetest.RunClock) on Stores with a
// set clock.
func TestClock(t *testing.T) {
	storetest.RunClock(t, func(now func() time.Time) storetest.Opener {
		open, _ := opener(sqlite.Options{Now: now})
		return open
	})
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
			res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: storetest.StartRecord("s", 0), NoSync: true,
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
