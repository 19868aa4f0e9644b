package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/postgres"
	"github.com/armory-dev/armory/store/storetest"
)

// The committer keeps session starts, overrides and counter values from one
// batch to the next while audit_head.gen is the generation its last batch
// wrote. The conformance suite (storetest: CacheTwoStoresAlternate,
// CacheWritesBetweenBatches, CacheManySessions) changes that state between
// batches from a second Store and from the same Store; these tests add what
// is Postgres's own: plain SQL, partly cached batches, the cache really
// used, the session clock (a clock option), an edited head. Each Admit here
// waits for its own batch, so consecutive calls are consecutive batches.

func openStores(t *testing.T, n int, opts postgres.Options) (dsn string, out []*postgres.Store) {
	t.Helper()
	dsn = freshSchema(t)
	for range n {
		s, err := postgres.OpenWith(context.Background(), dsn, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return dsn, out
}

// Plain SQL on the admission tables between two batches (an operator's
// fix, an older binary during an upgrade) is seen by the next batch: the
// statement triggers bump the generation. (Writes through a second Store
// and through the same Store: storetest's CacheWritesBetweenBatches.)
func TestCachePlainSQLWrites(t *testing.T) {
	ctx := context.Background()
	dsn, ss := openStores(t, 1, postgres.Options{})
	s := ss[0]
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	steps := []struct {
		sql       string // "" : just admit
		admitted  bool
		wantCount int64
	}{
		{"", true, 1}, {"", true, 2},
		{`UPDATE counters SET value = 4 WHERE session = 's'`, true, 5},
		{`UPDATE counters SET value = 0`, true, 1},
		{`INSERT INTO limit_overrides (session, name, max) VALUES ('s', 'calls', 1)`, false, 1},
		{`DELETE FROM limit_overrides`, true, 2},
		{`TRUNCATE counters`, true, 1},
	}
	appended := int64(0)
	for i, st := range steps {
		if st.sql != "" {
			if _, err := conn.Exec(ctx, st.sql); err != nil {
				t.Fatalf("%s: %v", st.sql, err)
			}
		}
		res := storetest.AdmitCalls(t, s, "s", i, 5)
		if res.Admitted != st.admitted {
			t.Fatalf("step %d (%s): admitted = %v (hit %+v), want %v", i, st.sql, res.Admitted, res.Hit, st.admitted)
		}
		if res.Admitted {
			appended++
		}
		if got := storetest.Counter(t, s, "s", "calls"); got != st.wantCount {
			t.Fatalf("step %d (%s): counter = %d, want %d", i, st.sql, got, st.wantCount)
		}
	}
	storetest.CheckTrail(t, s, appended)
}

// A session whose start and overrides are cached gains a counter the cache
// lacks (read in the first round trip while the rest come from the cache),
// and another Store then moves that counter: the next batch reads it again.
func TestCachePartialRead(t *testing.T) {
	_, ss := openStores(t, 2, postgres.Options{})
	edits := func(max int64) store.Acquisition { return store.Acquisition{Counter: "edits", N: 2, Max: max} }
	if res := storetest.AdmitCalls(t, ss[0], "s", 0, 10); !res.Admitted {
		t.Fatal(res.Hit)
	}
	if res := storetest.AdmitCalls(t, ss[0], "s", 1, 10, edits(5)); !res.Admitted { // edits 2
		t.Fatal(res.Hit)
	}
	if res := storetest.AdmitCalls(t, ss[0], "s", 2, 10, edits(5)); !res.Admitted { // edits 4
		t.Fatal(res.Hit)
	}
	if res := storetest.AdmitCalls(t, ss[0], "s", 3, 10, edits(5)); res.Admitted || res.Hit.Counter != "edits" || res.Hit.Current != 4 {
		t.Fatalf("edits over 5: %+v", res)
	}
	if _, ok, err := ss[1].Acquire(context.Background(), "s", "edits", 0, 0); err != nil || ok {
		t.Fatalf("Acquire 0 over max 0: %v %v", ok, err)
	}
	if err := ss[1].SetLimitOverride(context.Background(), "s", "edits", 6); err != nil {
		t.Fatal(err)
	}
	if res := storetest.AdmitCalls(t, ss[0], "s", 4, 10, edits(5)); !res.Admitted {
		t.Fatalf("edits under the override 6: %+v", res.Hit)
	}
	if c := storetest.Counter(t, ss[1], "s", "calls"); c != 4 {
		t.Fatalf("calls = %d, want 4", c)
	}
	if c := storetest.Counter(t, ss[1], "s", "edits"); c != 6 {
		t.Fatalf("edits = %d, want 6", c)
	}
	storetest.CheckTrail(t, ss[1], 4)
}

// The cache is really used: a write that bypasses the generation (its
// trigger disabled, so nothing tells the committer) is not seen, and the
// batch overwrites it with the value it cached; the same write with the
// trigger enabled is seen. (This documents why every writer must bump the
// generation; it is not something a deployment should do.)
func TestCacheIsUsed(t *testing.T) {
	dsn, ss := openStores(t, 1, postgres.Options{})
	s := ss[0]
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(q string) {
		t.Helper()
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	storetest.AdmitCalls(t, s, "s", 0, 5)
	storetest.AdmitCalls(t, s, "s", 1, 5)
	exec(`ALTER TABLE counters DISABLE TRIGGER counters_gen`)
	exec(`UPDATE counters SET value = 5`)
	exec(`ALTER TABLE counters ENABLE TRIGGER counters_gen`)
	if res := storetest.AdmitCalls(t, s, "s", 2, 5); !res.Admitted {
		t.Fatalf("the batch read the counter instead of its cache: %+v", res.Hit)
	}
	if c := storetest.Counter(t, s, "s", "calls"); c != 3 {
		t.Fatalf("calls = %d, want the cached 2 + 1", c)
	}
	exec(`UPDATE counters SET value = 5`) // with the trigger
	if res := storetest.AdmitCalls(t, s, "s", 3, 5); res.Admitted || res.Hit.Current != 5 {
		t.Fatalf("write with the trigger not seen: %+v", res)
	}
}

// The session clock across batches (storetest.RunClock) on Stores with a
// set clock.
func TestClock(t *testing.T) {
	baseDSN(t)
	storetest.RunClock(t, func(now func() time.Time) storetest.Opener {
		open, _ := opener(postgres.Options{Now: now})
		return open
	})
}

// The head row edited behind the Store's back without moving the
// generation (an UPDATE of audit_head fires no trigger): the next batch must
// not chain from its cached head but from the edited one, so that the
// verifier reports exactly that edit and nothing is hidden.
func TestCacheHeadEdited(t *testing.T) {
	dsn, ss := openStores(t, 1, postgres.Options{})
	s := ss[0]
	ctx := context.Background()
	storetest.AdmitCalls(t, s, "s", 0, 5)
	storetest.AdmitCalls(t, s, "s", 1, 5)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const forged = "forged"
	if _, err := conn.Exec(ctx, `UPDATE audit_head SET hash = $1`, forged); err != nil {
		t.Fatal(err)
	}
	rec := storetest.StartRecord("s", 2)
	res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: rec, Acquire: []store.Acquisition{{Counter: "calls", N: 1, Max: 5}}})
	if err != nil || !res.Admitted {
		t.Fatalf("Admit: %v %+v", err, res)
	}
	if rec.Seq != 3 || rec.PrevHash != forged {
		t.Fatalf("record chained to seq %d prev %q, want 3 after the edited head %q", rec.Seq, rec.PrevHash, forged)
	}
	if c := storetest.Counter(t, s, "s", "calls"); c != 3 {
		t.Fatalf("calls = %d, want 3", c)
	}
	if err := s.VerifyAudit(ctx); err == nil || !errorsIsChain(err) {
		t.Fatalf("VerifyAudit = %v, want a chain error at seq 3", err)
	}
}

func errorsIsChain(err error) bool {
	var ce *audit.ChainError
	return errors.As(err, &ce) && ce.Seq == 3
}
