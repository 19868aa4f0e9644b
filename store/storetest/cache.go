package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Backends may keep the admission state (session starts, overrides,
// counters) and the audit head from one group commit to the next
// (docs/storage.md, "Cache across batches"). These tests change that state
// between two batches of one Store — from a second Store (as another
// process would) and from the same Store outside its committer — and check
// that the next batch sees the change. Each Admit waits for its own batch,
// so consecutive calls are consecutive batches. A backend without such a
// cache passes them trivially; one whose cache outlives a change fails them.

// AdmitCalls runs one Admit of call i in sess with one "calls"
// acquisition (default limit max) and the more given.
func AdmitCalls(t *testing.T, s store.Store, sess string, i int, max int64, more ...store.Acquisition) store.AdmitResult {
	t.Helper()
	res, err := s.Admit(context.Background(), &store.AdmitRequest{Session: sess, Record: StartRecord(sess, i),
		Acquire: append([]store.Acquisition{{Counter: "calls", N: 1, Max: max}}, more...)})
	if err != nil {
		t.Fatalf("Admit %d: %v", i, err)
	}
	return res
}

// Counter is the value of the session's counter name.
func Counter(t *testing.T, s store.Store, sess, name string) int64 {
	t.Helper()
	m, err := s.Counters(context.Background(), sess)
	if err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// CheckTrail checks that the trail holds seqs 1..n once each, in order, and
// verifies against the head.
func CheckTrail(t *testing.T, s store.Store, n int64) {
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
// against one session's cap: each must see the other's commits, so exactly
// max are admitted, each refusal sees the exact count, and the chain is
// contiguous and verifies.
func testCacheTwoStoresAlternate(t *testing.T, open Opener) {
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
			ss := []store.Store{open(t), open(t)}
			const max, calls = 17, 40
			admitted := 0
			var seq int64
			for i := range calls {
				rec := StartRecord("s", i)
				res, err := ss[pattern.pick(i)].Admit(context.Background(), &store.AdmitRequest{Session: "s", Record: rec,
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
				if got := Counter(t, s, "s", "calls"); got != max {
					t.Fatalf("counter = %d, want %d", got, max)
				}
			}
			for i := range 10 { // plain appends, alternating too: the cached head must follow
				r := Record(i)
				if err := ss[i%2].AppendAudit(context.Background(), r); err != nil {
					t.Fatal(err)
				}
				if want := int64(max + i + 1); r.Seq != want {
					t.Fatalf("append %d got seq %d, want %d", i, r.Seq, want)
				}
			}
			CheckTrail(t, ss[0], max+10)
		})
	}
}

// Writes of admission state outside the committer between two batches of
// the first Store — by a second Store and by the first Store itself — are
// seen by the next batch. The table runs once per writer.
func testCacheWritesBetweenBatches(t *testing.T, open Opener) {
	ctx := context.Background()
	type step struct {
		do        func(t *testing.T, w store.Store) // nil: just admit
		admitted  bool
		wantCount int64 // "calls" after the step
	}
	setOverride := func(max int64) func(*testing.T, store.Store) {
		return func(t *testing.T, w store.Store) {
			if err := w.SetLimitOverride(ctx, "s", "calls", max); err != nil {
				t.Fatal(err)
			}
		}
	}
	reset := func(t *testing.T, w store.Store) {
		if err := w.ResetSession(ctx, "s"); err != nil {
			t.Fatal(err)
		}
	}
	acquire := func(n int64) func(*testing.T, store.Store) {
		return func(t *testing.T, w store.Store) {
			if _, ok, err := w.Acquire(ctx, "s", "calls", n, 100); err != nil || !ok {
				t.Fatalf("Acquire: %v %v", ok, err)
			}
		}
	}
	refusedAcquire := func(t *testing.T, w store.Store) { // takes nothing, but is a write
		if cur, ok, err := w.Acquire(ctx, "s", "calls", 1, 0); err != nil || ok || cur != 5 {
			t.Fatalf("Acquire over max: %d %v %v", cur, ok, err)
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
			{refusedAcquire, false, 5},
			{reset, true, 1},
			{acquire(4), false, 5}, // 1 + 4 = 5: the admit finds the cap full
		}},
	}
	for _, writer := range []string{"other store", "same store"} {
		for _, tc := range tests {
			t.Run(writer+"/"+tc.name, func(t *testing.T) {
				admitter := open(t)
				w := open(t)
				if writer == "same store" {
					w = admitter
				}
				appended := int64(0)
				for i, st := range tc.steps {
					if st.do != nil {
						st.do(t, w)
					}
					res := AdmitCalls(t, admitter, "s", i, max)
					if res.Admitted != st.admitted {
						t.Fatalf("step %d: admitted = %v (hit %+v), want %v", i, res.Admitted, res.Hit, st.admitted)
					}
					if res.Admitted {
						appended++
					}
					if got := Counter(t, admitter, "s", "calls"); got != st.wantCount {
						t.Fatalf("step %d: counter = %d, want %d", i, got, st.wantCount)
					}
				}
				CheckTrail(t, w, appended)
			})
		}
	}
}

// Many sessions over several batches keep exact counts while a cache
// fills; a second Store then takes over and finds every count, and the
// first, whose cache is then stale, finds the second's.
func testCacheManySessions(t *testing.T, open Opener) {
	ss := []store.Store{open(t), open(t)}
	const sessions, rounds, max = 150, 3, 2
	for r := range rounds {
		for i := range sessions {
			sess := fmt.Sprintf("s%d", i)
			if res := AdmitCalls(t, ss[0], sess, r*sessions+i, max); res.Admitted != (r < max) {
				t.Fatalf("round %d session %s: admitted = %v", r, sess, res.Admitted)
			}
		}
	}
	for i := range sessions {
		sess := fmt.Sprintf("s%d", i)
		if res := AdmitCalls(t, ss[1], sess, i, max); res.Admitted || res.Hit == nil || res.Hit.Current != max {
			t.Fatalf("second store, session %s: %+v", sess, res)
		}
		if res := AdmitCalls(t, ss[1], sess, i, max+1); !res.Admitted {
			t.Fatalf("second store, session %s, raised default: refused %+v", sess, res.Hit)
		}
		if res := AdmitCalls(t, ss[0], sess, i, max+1); res.Admitted || res.Hit.Current != max+1 {
			t.Fatalf("first store again, session %s: %+v", sess, res)
		}
	}
	CheckTrail(t, ss[0], sessions*max+sessions)
}

// RunClock runs the checks that need to set the Stores' clock: open returns
// an Opener whose Stores use now as their clock (Options.Now).
func RunClock(t *testing.T, open func(now func() time.Time) Opener) {
	t.Run("SessionClock", func(t *testing.T) { testSessionClock(t, open) })
	t.Run("PinTimesAtEpoch", func(t *testing.T) { testPinTimesAtEpoch(t, open) })
}

// A pin made or accepted when the clock reads the Unix epoch still has a
// time (0 µs stores as 1 µs): PinnedAt and PendingAt are never the zero
// time of "not set".
func testPinTimesAtEpoch(t *testing.T, open func(now func() time.Time) Opener) {
	s := open(func() time.Time { return time.Unix(0, 0) })(t)
	ctx := context.Background()
	v1, v2 := pinHash("epoch-v1"), pinHash("epoch-v2")
	p, err := s.ObservePin(ctx, "fs", "read", v1, nil)
	if err != nil || p.PinnedAt.IsZero() {
		t.Fatalf("first sight at the epoch: %+v %v", p, err)
	}
	if p, err = s.ObservePin(ctx, "fs", "read", v2, nil); err != nil || p.PendingHash != v2 || p.PendingAt.IsZero() {
		t.Fatalf("change at the epoch: %+v %v", p, err)
	}
	if p, err = s.AcceptPin(ctx, "fs", "read", v2); err != nil || p.Hash != v2 || p.PinnedAt.IsZero() {
		t.Fatalf("accept at the epoch: %+v %v", p, err)
	}
}

// ResetSession by another Store between batches restarts the clock that
// Admit's runtime cap measures; SessionStart by another Store is the start
// the next batch uses; a runtime override set between batches applies.
func testSessionClock(t *testing.T, open func(now func() time.Time) Opener) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	o := open(clock)
	s, other := o(t), o(t)
	ctx := context.Background()
	run := func(i int) store.AdmitResult {
		t.Helper()
		res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: StartRecord("s", i), MaxRuntime: time.Minute})
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
