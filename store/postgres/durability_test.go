package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/postgres"
	"github.com/armory-dev/armory/store/storetest"
)

func batchedOpts(window time.Duration) postgres.Options {
	return postgres.Options{Durability: store.Batched, Window: window}
}

func TestBatched(t *testing.T) {
	baseDSN(t)
	for _, window := range []time.Duration{0, time.Second} {
		t.Run(window.String(), func(t *testing.T) {
			open, _ := opener(batchedOpts(window))
			storetest.RunBatched(t, open)
		})
	}
}

func TestBatchedInvalid(t *testing.T) {
	dsn := freshSchema(t)
	for _, o := range []postgres.Options{{Durability: "lazy"}, {Durability: store.Batched, Window: -time.Millisecond},
		{Durability: store.Batched, Window: store.MaxDurabilityWindow + 1}} {
		if s, err := postgres.OpenWith(context.Background(), dsn, o); err == nil {
			s.Close()
			t.Fatalf("%+v accepted", o)
		}
	}
}

func openBatched(dsn string) (store.Store, error) {
	return postgres.OpenWith(context.Background(), dsn, batchedOpts(0))
}

func TestCrashHelperProcess(t *testing.T) { storetest.CrashHelperProcess(t, openBatched) }

// A batched store killed mid-load loses nothing it acknowledged.
func TestCrashBatched(t *testing.T) {
	storetest.CrashProcess(t, freshSchema(t), openBatched)
}
