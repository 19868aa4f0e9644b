package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

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
