package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

// opener opens Stores with opts, each test on its own database file (in
// directories that do not exist yet).
func opener(opts sqlite.Options) (storetest.Opener, func(t *testing.T) string) {
	return storetest.OpenerOf(func(t *testing.T) string { return filepath.Join(t.TempDir(), "nested", "dir", "armory.db") },
		func(path string) (store.Store, error) { return sqlite.OpenWith(path, opts) })
}

func TestConformance(t *testing.T) {
	open, _ := opener(sqlite.Options{})
	storetest.Run(t, open)
}

func TestTamper(t *testing.T) {
	open, pathFor := opener(sqlite.Options{})
	storetest.Tamper(t, open, execOn(pathFor))
}

// execOn returns a function that runs one statement on the test's database.
func execOn(pathFor func(*testing.T) string) func(t *testing.T, query string) {
	return func(t *testing.T, query string) {
		db, err := sql.Open("sqlite", pathFor(t)+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(query); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
}

func TestNewerSchema(t *testing.T) {
	_, pathFor := opener(sqlite.Options{})
	storetest.NewerSchema(t, pathFor(t), openDSN, execOn(pathFor))
}

func openDSN(dsn string) (store.Store, error) { return sqlite.OpenWith(dsn, sqlite.Options{}) }

func TestHelperProcess(t *testing.T) { storetest.HelperProcess(t, openDSN) }

func TestCrossProcess(t *testing.T) {
	storetest.CrossProcess(t, filepath.Join(t.TempDir(), "armory.db"), openDSN)
}

func BenchmarkAppendAudit(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s, err := sqlite.OpenWith(filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchmarkAppend(b, s)
		})
	}
}

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

func batchedOpts(window time.Duration) sqlite.Options {
	return sqlite.Options{Durability: store.Batched, Window: window}
}

func TestBatched(t *testing.T) {
	for _, window := range []time.Duration{0, time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			open, _ := opener(batchedOpts(window))
			storetest.RunBatched(t, open)
		})
	}
}

func TestBatchedInvalid(t *testing.T) {
	dir := t.TempDir()
	for _, o := range []sqlite.Options{{Durability: "lazy"}, {Durability: store.Batched, Window: -time.Millisecond},
		{Durability: store.Batched, Window: store.MaxDurabilityWindow + 1}} {
		if s, err := sqlite.OpenWith(filepath.Join(dir, "x.db"), o); err == nil {
			s.Close()
			t.Fatalf("%+v accepted", o)
		}
	}
}

func openBatched(dsn string) (store.Store, error) { return sqlite.OpenWith(dsn, batchedOpts(0)) }

func TestCrashHelperProcess(t *testing.T) { storetest.CrashHelperProcess(t, openBatched) }

// A batched store killed mid-load loses nothing it acknowledged.
func TestCrashBatched(t *testing.T) {
	storetest.CrashProcess(t, filepath.Join(t.TempDir(), "armory.db"), openBatched)
}
