package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

// The committer keeps session starts, overrides, counter values and the
// audit head from one batch to the next. These tests change that state
// between two batches of one Store, from outside its committer, and check
// that the next batch sees the change (each Admit here waits for its own
// batch, so consecutive calls are consecutive batches).

func openN(t *testing.T, n int) []*sqlite.Store {
	t.Helper()
	path := filepath.Join(t.TempDir(), "armory.db")
	var out []*sqlite.Store
	for range n {
		s, err := sqlite.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

func startRec(sess string, i int) *audit.Record {
	r := storetest.Record(i)
	r.Session, r.Phase, r.Status = sess, audit.PhaseStart, audit.StatusRunning
	return r
}

// admit runs one Admit of one "calls" acquisition (default limit max).
func admit(t *testing.T, s store.Store, sess string, i int, max int64) store.AdmitResult {
	t.Helper()
	res, err := s.Admit(context.Background(), &store.AdmitRequest{Session: sess, Record: startRec(sess, i),
		Acquire: []store.Acquisition{{Counter: "calls", N: 1, Max: max}}})
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

// Two Stores (two writer connections, as two processes have) take turns
// admitting against one session's cap: each must see the other's commits
// (PRAGMA data_version), so exactly max are admitted, each seeing the exact
// count, and the audit chain stays whole.
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
			ss := openN(t, 2)
			const max, calls = 17, 40
			admitted := 0
			for i := range calls {
				res := admit(t, ss[pattern.pick(i)], "s", i, max)
				if res.Admitted {
					admitted++
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
			// Plain appends alternating too: the cached head must follow
			// the other Store's commits.
			for i := range 10 {
				r := storetest.Record(i)
				if err := ss[i%2].AppendAudit(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				if want := int64(max + i + 1); r.Seq != want {
					t.Fatalf("append %d got seq %d, want %d", i, r.Seq, want)
				}
			}
			if err := ss[0].VerifyAudit(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Writes of the same Store outside the committer (SetLimitOverride,
// ResetSession, Acquire, SessionStart) between two batches are seen by the
// next batch.
func TestCacheSameStoreWrites(t *testing.T) {
	type step struct {
		do        func(t *testing.T, s store.Store) // nil: just admit
		admitted  bool
		wantCount int64 // counter after the step
	}
	ctx := context.Background()
	setOverride := func(max int64) func(*testing.T, store.Store) {
		return func(t *testing.T, s store.Store) {
			if err := s.SetLimitOverride(ctx, "s", "calls", max); err != nil {
				t.Fatal(err)
			}
		}
	}
	reset := func(t *testing.T, s store.Store) {
		if err := s.ResetSession(ctx, "s"); err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(n int64) func(*testing.T, store.Store) {
		return func(t *testing.T, s store.Store) {
			if _, ok, err := s.Acquire(ctx, "s", "calls", n, 100); err != nil || !ok {
				t.Fatalf("Acquire: %v %v", ok, err)
			}
		}
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
			{reset, true, 1},
			{acquire(4), false, 5}, // 1 + 4 = 5: the admit finds the cap full
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openN(t, 1)[0]
			for i, st := range tc.steps {
				if st.do != nil {
					st.do(t, s)
				}
				res := admit(t, s, "s", i, max)
				if res.Admitted != st.admitted {
					t.Fatalf("step %d: admitted = %v (hit %+v), want %v", i, res.Admitted, res.Hit, st.admitted)
				}
				if got := counter(t, s, "s", "calls"); got != st.wantCount {
					t.Fatalf("step %d: counter = %d, want %d", i, got, st.wantCount)
				}
			}
		})
	}
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

// Many sessions (more than one batch's worth, over several batches) keep
// exact counts while the cache fills; a second Store then takes over and
// finds every count.
func TestCacheManySessions(t *testing.T) {
	ss := openN(t, 2)
	const sessions, rounds, max = 300, 3, 2
	for r := range rounds {
		for i := range sessions {
			sess := fmt.Sprintf("s%d", i)
			res := admit(t, ss[0], sess, r*sessions+i, max)
			if res.Admitted != (r < max) {
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
	}
	if err := ss[0].VerifyAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
}
