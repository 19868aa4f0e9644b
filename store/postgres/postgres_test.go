package postgres_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/postgres"
	"github.com/armory-dev/armory/store/storetest"
)

// baseDSN returns the test server's DSN, or skips (locally) / fails (CI).
func baseDSN(t testing.TB) string { return testenv.PostgresDSN(t) }

// freshSchema returns a DSN on a fresh schema, dropped when t ends.
func freshSchema(t testing.TB) string { return testenv.PostgresSchema(t) }

// opener opens Stores with opts, each test on its own schema.
func opener(opts postgres.Options) (storetest.Opener, func(t *testing.T) string) {
	return storetest.OpenerOf(func(t *testing.T) string { return freshSchema(t) }, func(dsn string) (store.Store, error) {
		return postgres.OpenWith(context.Background(), dsn, opts)
	})
}

func TestConformance(t *testing.T) {
	baseDSN(t)
	open, _ := opener(postgres.Options{})
	storetest.Run(t, open)
}

func TestTamper(t *testing.T) {
	baseDSN(t)
	open, dsnFor := opener(postgres.Options{})
	storetest.Tamper(t, open, execOn(dsnFor))
}

// execOn returns a function that runs one statement on the test's schema.
func execOn(dsnFor func(*testing.T) string) func(t *testing.T, query string) {
	return func(t *testing.T, query string) {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsnFor(t))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, query); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	}
}

func TestNewerSchema(t *testing.T) {
	baseDSN(t)
	_, dsnFor := opener(postgres.Options{})
	storetest.NewerSchema(t, dsnFor(t), openDSN, execOn(dsnFor))
}

func openDSN(dsn string) (store.Store, error) {
	return postgres.OpenWith(context.Background(), dsn, postgres.Options{})
}

func TestHelperProcess(t *testing.T) { storetest.HelperProcess(t, openDSN) }

func TestCrossProcess(t *testing.T) {
	storetest.CrossProcess(t, freshSchema(t), openDSN)
}

// TestListenerReconnects kills the Store's LISTEN connection from the
// server side; a decision made afterwards must still wake the waiter.
func TestListenerReconnects(t *testing.T) {
	open, dsnFor := opener(postgres.Options{})
	waiter, decider := open(t), open(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsnFor(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	a := &store.Approval{Agent: "alice", Tool: "git.push", Reason: "test"}
	if err := waiter.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		got, err := waiter.WaitApproval(ctx, a.ID)
		if err == nil && got.Status != store.StatusApproved {
			err = store.ErrConflict
		}
		done <- err
	}()
	// Terminate every listener connection of this database.
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND query ILIKE 'LISTEN %'`); err != nil {
		t.Fatal(err)
	}
	if err := decider.DecideApproval(ctx, a.ID, store.StatusApproved, "boss", ""); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func BenchmarkAppendAudit(b *testing.B) {
	s, err := postgres.OpenWith(context.Background(), freshSchema(b), postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchmarkAppend(b, s)
}
