package postgres_test

import (
	"context"
	"errors"
	"fmt"
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
// wrote. These tests change that state between two batches of one Store —
// from a second Store (as another process would), from the same Store
// outside its committer, and with plain SQL — and check that the next batch
// sees the change. Each Admit here waits for its own batch, so consecutive
// calls are consecutive batches.

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

func startRec(sess string, i int) *audit.Record {
	r := storetest.Record(i)
	r.Session, r.Phase, r.Status = sess, audit.PhaseStart, audit.StatusRunning
	return r
}

// admit runs one Admit of the given acquisitions (one "calls" by default).
func admit(t *testing.T, s store.Store, sess string, i int, max int64, more ...store.Acquisition) store.AdmitResult {
	t.Helper()
	acq := append([]store.Acquisition{{Counter: "calls", N: 1, Max: max}}, more...)
	res, err := s.Admit(context.Background(), &store.AdmitRequest{Session: sess, Record: startRec(sess, i), Acquire: acq})
	if err != nil {
		t.Fatalf("Admit %d: %v", i, err)
	}
	return res
}

func counter(t *testing.T, s store.Store, sess, name string) int64 {
	t.Helper()
	m, err := s.Counters(context.Background(), sess)
	if err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// checkTrail checks that the trail holds seqs 1..n once each, in order, and
// verifies against the head.
func checkTrail(t *testing.T, s store.Store, n int64) {
	t.Helper()
	ctx := context.Background()
	var want int64 = 1
	if err := s.IterAudit(ctx, func(r *audit.Record) error {
		if r.Seq != want {
			return fmt.Errorf("seq %d, want %d", r.Seq, want)
		}
		want++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if want-1 != n {
		t.Fatalf("trail holds %d records, want %d", want-1, n)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Two Stores (two committers, as two processes have) take turns admitting
// against one session's cap: each must see the other's commits (the
// generation moved), so exactly max are admitted, each refusal sees the
// exact count, and the chain is contiguous and verifies.
func TestCacheTwoStoresAlternate(t *testing.T) {
	for _, pattern := range []struct {
		name string
		pick func(i int) int
	}{
		{"strict alternation", func(i int) int { return i % 2 }},
		{"runs of three", func(i int) int { return (i / 3) % 2 }},
		{"mostly first", func(i int) int {
			if i%5 == 4 {
				return 1
			}
			return 0
		}},
	} {
		t.Run(pattern.name, func(t *testing.T) {
			_, ss := openStores(t, 2, postgres.Options{})
			const max, calls = 17, 40
			admitted := 0
			var seq int64
			for i := range calls {
				s := ss[pattern.pick(i)]
				rec := startRec("s", i)
				res, err := s.Admit(context.Background(), &store.AdmitRequest{Session: "s", Record: rec,
					Acquire: []store.Acquisition{{Counter: "calls", N: 1, Max: max}}})
				if err != nil {
					t.Fatal(err)
				}
				if res.Admitted {
					admitted++
					if seq++; rec.Seq != seq {
						t.Fatalf("call %d got seq %d, want %d", i, rec.Seq, seq)
					}
					continue
				}
				if res.Hit == nil || res.Hit.Current != max || res.Hit.Max != max {
					t.Fatalf("call %d refused with %+v, want calls %d/%d", i, res.Hit, max, max)
				}
				if i < max {
					t.Fatalf("call %d refused below the cap", i)
				}
			}
			if admitted != max {
				t.Fatalf("admitted %d, want exactly %d", admitted, max)
			}
			for _, s := range ss {
				if got := counter(t, s, "s", "calls"); got != max {
					t.Fatalf("counter = %d, want %d", got, max)
				}
			}
			for i := range 10 { // plain appends, alternating too
				r := storetest.Record(i)
				if err := ss[i%2].AppendAudit(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				if want := int64(max + i + 1); r.Seq != want {
					t.Fatalf("append %d got seq %d, want %d", i, r.Seq, want)
				}
			}
			checkTrail(t, ss[0], max+10)
		})
	}
}

// Writes outside the committer between two batches of the first Store —
// by a second Store, by the first Store itself, and by plain SQL on the
// database — are seen by the next batch. The table is run once per writer.
func TestCacheWritesBetweenBatches(t *testing.T) {
	ctx := context.Background()
	type env struct {
		admitter, writer store.Store
		sql              func(t *testing.T, q string, args ...any)
	}
	type step struct {
		do        func(t *testing.T, e env) // nil: just admit
		admitted  bool
		wantCount int64 // "calls" after the step
	}
	setOverride := func(max int64) func(*testing.T, env) {
		return func(t *testing.T, e env) {
			if err := e.writer.SetLimitOverride(ctx, "s", "calls", max); err != nil {
				t.Fatal(err)
			}
		}
	}
	reset := func(t *testing.T, e env) {
		if err := e.writer.ResetSession(ctx, "s"); err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(n int64) func(*testing.T, env) {
		return func(t *testing.T, e env) {
			if _, ok, err := e.writer.Acquire(ctx, "s", "calls", n, 100); err != nil || !ok {
				t.Fatalf("Acquire: %v %v", ok, err)
			}
		}
	}
	refusedAcquire := func(t *testing.T, e env) { // takes nothing, but is a write
		if cur, ok, err := e.writer.Acquire(ctx, "s", "calls", 1, 0); err != nil || ok || cur != 5 {
			t.Fatalf("Acquire over max: %d %v %v", cur, ok, err)
		}
	}
	sqlSet := func(q string, args ...any) func(*testing.T, env) {
		return func(t *testing.T, e env) { e.sql(t, q, args...) }
	}
	const max = 5 // default limit of every admit below
	tests := []struct {
		name  string
		steps []step
	}{
		{"override lowers then raises", []step{
			{nil, true, 1}, {nil, true, 2}, {nil, true, 3},
			{setOverride(3), false, 3},
			{setOverride(4), true, 4},
			{nil, false, 4},
			{setOverride(-1), true, 5}, // back to the default of 5
			{nil, false, 5},
		}},
		{"reset restarts the count", []step{
			{nil, true, 1}, {nil, true, 2}, {nil, true, 3}, {nil, true, 4}, {nil, true, 5},
			{nil, false, 5},
			{reset, true, 1},
			{nil, true, 2},
			{reset, true, 1},
		}},
		{"acquire between batches", []step{
			{nil, true, 1},
			{acquire(3), true, 5},
			{nil, false, 5},
			{refusedAcquire, false, 5},
			{reset, true, 1},
			{acquire(4), false, 5}, // 1 + 4 = 5: the admit finds the cap full
		}},
		{"plain SQL writes", []step{
			{nil, true, 1}, {nil, true, 2},
			{sqlSet(`UPDATE counters SET value = 4 WHERE session = 's'`), true, 5},
			{sqlSet(`UPDATE counters SET value = 0`), true, 1},
			{sqlSet(`INSERT INTO limit_overrides (session, name, max) VALUES ('s', 'calls', 1)`), false, 1},
			{sqlSet(`DELETE FROM limit_overrides`), true, 2},
			{sqlSet(`TRUNCATE counters`), true, 1},
		}},
	}
	for _, writer := range []string{"other store", "same store"} {
		for _, tc := range tests {
			t.Run(writer+"/"+tc.name, func(t *testing.T) {
				dsn, ss := openStores(t, 2, postgres.Options{})
				e := env{admitter: ss[0], writer: ss[1]}
				if writer == "same store" {
					e.writer = ss[0]
				}
				conn, err := pgx.Connect(ctx, dsn)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(ctx)
				e.sql = func(t *testing.T, q string, args ...any) {
					if _, err := conn.Exec(ctx, q, args...); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				appended := int64(0)
				for i, st := range tc.steps {
					if st.do != nil {
						st.do(t, e)
					}
					res := admit(t, e.admitter, "s", i, max)
					if res.Admitted != st.admitted {
						t.Fatalf("step %d: admitted = %v (hit %+v), want %v", i, res.Admitted, res.Hit, st.admitted)
					}
					if res.Admitted {
						appended++
					}
					if got := counter(t, e.admitter, "s", "calls"); got != st.wantCount {
						t.Fatalf("step %d: counter = %d, want %d", i, got, st.wantCount)
					}
				}
				checkTrail(t, e.writer, appended)
			})
		}
	}
}

// A session whose start and overrides are cached gains a counter the cache
// lacks (read in the first round trip while the rest come from the cache),
// and another Store then moves that counter: the next batch reads it again.
func TestCachePartialRead(t *testing.T) {
	_, ss := openStores(t, 2, postgres.Options{})
	edits := func(max int64) store.Acquisition { return store.Acquisition{Counter: "edits", N: 2, Max: max} }
	if res := admit(t, ss[0], "s", 0, 10); !res.Admitted {
		t.Fatal(res.Hit)
	}
	if res := admit(t, ss[0], "s", 1, 10, edits(5)); !res.Admitted { // edits 2
		t.Fatal(res.Hit)
	}
	if res := admit(t, ss[0], "s", 2, 10, edits(5)); !res.Admitted { // edits 4
		t.Fatal(res.Hit)
	}
	if res := admit(t, ss[0], "s", 3, 10, edits(5)); res.Admitted || res.Hit.Counter != "edits" || res.Hit.Current != 4 {
		t.Fatalf("edits over 5: %+v", res)
	}
	if _, ok, err := ss[1].Acquire(context.Background(), "s", "edits", 0, 0); err != nil || ok {
		t.Fatalf("Acquire 0 over max 0: %v %v", ok, err)
	}
	if err := ss[1].SetLimitOverride(context.Background(), "s", "edits", 6); err != nil {
		t.Fatal(err)
	}
	if res := admit(t, ss[0], "s", 4, 10, edits(5)); !res.Admitted {
		t.Fatalf("edits under the override 6: %+v", res.Hit)
	}
	if c := counter(t, ss[1], "s", "calls"); c != 4 {
		t.Fatalf("calls = %d, want 4", c)
	}
	if c := counter(t, ss[1], "s", "edits"); c != 6 {
		t.Fatalf("edits = %d, want 6", c)
	}
	checkTrail(t, ss[1], 4)
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
	admit(t, s, "s", 0, 5)
	admit(t, s, "s", 1, 5)
	exec(`ALTER TABLE counters DISABLE TRIGGER counters_gen`)
	exec(`UPDATE counters SET value = 5`)
	exec(`ALTER TABLE counters ENABLE TRIGGER counters_gen`)
	if res := admit(t, s, "s", 2, 5); !res.Admitted {
		t.Fatalf("the batch read the counter instead of its cache: %+v", res.Hit)
	}
	if c := counter(t, s, "s", "calls"); c != 3 {
		t.Fatalf("calls = %d, want the cached 2 + 1", c)
	}
	exec(`UPDATE counters SET value = 5`) // with the trigger
	if res := admit(t, s, "s", 3, 5); res.Admitted || res.Hit.Current != 5 {
		t.Fatalf("write with the trigger not seen: %+v", res)
	}
}

// ResetSession by another Store between batches restarts the clock that
// Admit's runtime cap measures; SessionStart by another Store is the start
// the next batch uses; a runtime override set between batches applies.
func TestCacheSessionClock(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	_, ss := openStores(t, 2, postgres.Options{Now: clock})
	s, other := ss[0], ss[1]
	ctx := context.Background()
	run := func(i int) store.AdmitResult {
		t.Helper()
		res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: startRec("s", i), MaxRuntime: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(0); !res.Admitted || !res.SessionStart.Equal(now) {
		t.Fatalf("first admit: %+v", res)
	}
	now = now.Add(2 * time.Minute)
	if res := run(1); res.Admitted || res.Hit == nil || res.Hit.Counter != store.LimitSessionRuntime {
		t.Fatalf("admit after the runtime: %+v", res)
	}
	if err := other.ResetSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Second)
	got, err := other.SessionStart(ctx, "s")
	if err != nil || !got.Equal(now) {
		t.Fatalf("SessionStart = %v, %v; want %v", got, err, now)
	}
	now = now.Add(time.Second)
	if res := run(2); !res.Admitted || !res.SessionStart.Equal(now.Add(-time.Second)) {
		t.Fatalf("admit after reset: %+v, want start %v", res, now.Add(-time.Second))
	}
	now = now.Add(30 * time.Second)
	if err := other.SetLimitOverride(ctx, "s", store.LimitSessionRuntime, 10); err != nil {
		t.Fatal(err)
	}
	if res := run(3); res.Admitted || res.Hit == nil || res.Hit.Max != 10 {
		t.Fatalf("admit over the override: %+v", res)
	}
	// SessionStart of a session that has a start writes nothing: the
	// cache stays valid and the start is unchanged.
	if got, err := other.SessionStart(ctx, "s"); err != nil || !got.Equal(now.Add(-31*time.Second)) {
		t.Fatalf("SessionStart of a started session = %v, %v", got, err)
	}
}

// Many sessions over several batches keep exact counts while the cache
// fills; a second Store then takes over and finds every count.
func TestCacheManySessions(t *testing.T) {
	_, ss := openStores(t, 2, postgres.Options{})
	const sessions, rounds, max = 150, 3, 2
	for r := range rounds {
		for i := range sessions {
			sess := fmt.Sprintf("s%d", i)
			if res := admit(t, ss[0], sess, r*sessions+i, max); res.Admitted != (r < max) {
				t.Fatalf("round %d session %s: admitted = %v", r, sess, res.Admitted)
			}
		}
	}
	for i := range sessions {
		sess := fmt.Sprintf("s%d", i)
		if res := admit(t, ss[1], sess, i, max); res.Admitted || res.Hit == nil || res.Hit.Current != max {
			t.Fatalf("second store, session %s: %+v", sess, res)
		}
		if res := admit(t, ss[1], sess, i, max+1); !res.Admitted {
			t.Fatalf("second store, session %s, raised default: refused %+v", sess, res.Hit)
		}
		// and back to the first, whose cache is stale
		if res := admit(t, ss[0], sess, i, max+1); res.Admitted || res.Hit.Current != max+1 {
			t.Fatalf("first store again, session %s: %+v", sess, res)
		}
	}
	checkTrail(t, ss[0], sessions*max+sessions)
}

// The head row edited behind the Store's back without moving the
// generation (an UPDATE of audit_head fires no trigger): the next batch must
// not chain from its cached head but from the edited one, so that the
// verifier reports exactly that edit and nothing is hidden.
func TestCacheHeadEdited(t *testing.T) {
	dsn, ss := openStores(t, 1, postgres.Options{})
	s := ss[0]
	ctx := context.Background()
	admit(t, s, "s", 0, 5)
	admit(t, s, "s", 1, 5)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	const forged = "forged"
	if _, err := conn.Exec(ctx, `UPDATE audit_head SET hash = $1`, forged); err != nil {
		t.Fatal(err)
	}
	rec := startRec("s", 2)
	res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: rec, Acquire: []store.Acquisition{{Counter: "calls", N: 1, Max: 5}}})
	if err != nil || !res.Admitted {
		t.Fatalf("Admit: %v %+v", err, res)
	}
	if rec.Seq != 3 || rec.PrevHash != forged {
		t.Fatalf("record chained to seq %d prev %q, want 3 after the edited head %q", rec.Seq, rec.PrevHash, forged)
	}
	if c := counter(t, s, "s", "calls"); c != 3 {
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
