package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
)

// Loop detection across two Stores: 20 identical admissions, alternating
// between the Stores, of which exactly Max-1 in a row are admitted; a
// justified one passes; another call starts a new run; ResetSession forgets
// the run.
func testAdmitRepeatTwoStores(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	admit := func(i int, sum int64, justified bool) store.AdmitResult {
		t.Helper()
		res, err := stores[i%2].Admit(ctx, &store.AdmitRequest{Session: "rep", Record: StartRecord("rep", i),
			Acquire: []store.Acquisition{{Counter: "calls", N: 1, Max: 1000}},
			Repeat:  &store.Repeat{Sum: sum, Max: 5, Justified: justified}})
		if err != nil {
			t.Fatalf("admit %d: %v", i, err)
		}
		return res
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for i := range 20 {
		wg.Go(func() {
			res := admit(i, 42, false)
			mu.Lock()
			defer mu.Unlock()
			if res.Admitted {
				admitted++
			} else if res.Hit == nil || *res.Hit != (store.LimitHit{Counter: store.RepetitionCounter, Current: 4, Max: 5}) {
				t.Errorf("refused with %+v, want repetition 4/5", res.Hit)
			}
		})
	}
	wg.Wait()
	if admitted != 4 {
		t.Fatalf("%d identical calls admitted, want 4", admitted)
	}
	if !admit(100, 42, true).Admitted {
		t.Fatal("a justified repetition was refused")
	}
	if admit(101, 42, false).Admitted {
		t.Fatal("a repetition after the justified one was admitted")
	}
	if !admit(102, 43, false).Admitted || !admit(103, 42, false).Admitted {
		t.Fatal("another call did not start a new run")
	}
	for i := range 3 {
		admit(104+i, 42, false)
	}
	if admit(107, 42, false).Admitted {
		t.Fatal("the fifth identical call in a row was admitted")
	}
	if err := stores[0].ResetSession(ctx, "rep"); err != nil {
		t.Fatal(err)
	}
	if !admit(108, 42, false).Admitted {
		t.Fatal("a reset session still remembers the run")
	}
	c, err := stores[1].Counters(ctx, "rep")
	if err != nil {
		t.Fatal(err)
	}
	if c[store.RepeatCountCounter] != 1 || c["calls"] != 1 {
		t.Fatalf("counters after reset and one call: %v", c)
	}
}

// GetSession and SessionGenerations: start and last activity (Admit records
// it), names of generations ordered newest first, a reset session without a
// start, nothing written by reading.
func testSessionGenerations(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	base := "ag_1%:default"
	info, err := s.GetSession(ctx, base)
	if err != nil || !info.Started.IsZero() || !info.LastActive.IsZero() || info.ID != base {
		t.Fatalf("unknown session: %+v %v", info, err)
	}
	gens, err := s.SessionGenerations(ctx, base, 0)
	if err != nil || len(gens) != 0 {
		t.Fatalf("no generations yet: %v %v", gens, err)
	}
	names := []string{base, base + "#2", base + "#9", base + "#10", "ag_1%:defaultX", "ag_1%:default2", "bg_1%:default#3", "ag_1:default#4"}
	for i, n := range names {
		if res, err := s.Admit(ctx, &store.AdmitRequest{Session: n, Record: StartRecord(n, i)}); err != nil || !res.Admitted {
			t.Fatalf("admit %s: %+v %v", n, res, err)
		}
	}
	gens, err = s.SessionGenerations(ctx, base, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range gens {
		got = append(got, g.ID)
		if g.Started.IsZero() || g.LastActive.IsZero() || g.LastActive.Before(g.Started) {
			t.Errorf("%s: started %v, last active %v", g.ID, g.Started, g.LastActive)
		}
	}
	want := []string{base + "#10", base + "#9", base + "#2", base}
	if len(got) != len(want) {
		t.Fatalf("generations %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("generations %v, want %v", got, want)
		}
	}
	if gens, _ := s.SessionGenerations(ctx, base, 2); len(gens) != 2 || gens[0].ID != base+"#10" {
		t.Fatalf("limit 2: %v", gens)
	}
	before, _ := s.GetSession(ctx, base+"#9")
	time.Sleep(2 * time.Millisecond) // the clock must move for a later activity to differ
	if res, err := s.Admit(ctx, &store.AdmitRequest{Session: base + "#9", Record: StartRecord(base+"#9", 50)}); err != nil || !res.Admitted {
		t.Fatal(err)
	}
	after, _ := s.GetSession(ctx, base+"#9")
	if after.Started != before.Started || !after.LastActive.After(before.LastActive) {
		t.Fatalf("a second call: before %+v, after %+v", before, after)
	}
	if err := s.ResetSession(ctx, base+"#9"); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.GetSession(ctx, base+"#9"); !info.Started.IsZero() || !info.LastActive.IsZero() {
		t.Fatalf("after reset: %+v", info)
	}
	if gens, _ := s.SessionGenerations(ctx, base, 0); len(gens) != 3 {
		t.Fatalf("a reset generation is still listed: %v", gens)
	}
}

// Release gives back what Acquire took, never below zero, exactly under
// concurrency across two Stores, and an Admit after it sees the new value.
func testRelease(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	if cur, err := stores[0].Release(ctx, "rel", "events", 3); err != nil || cur != 0 {
		t.Fatalf("release of a missing counter: %d %v", cur, err)
	}
	if _, err := stores[0].Release(ctx, "rel", "events", -1); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("negative release: %v", err)
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			s := stores[i%2]
			if _, ok, err := s.Acquire(ctx, "rel", "events", 5, 1000); err != nil || !ok {
				t.Errorf("acquire: %v %v", ok, err)
				return
			}
			if _, err := s.Release(ctx, "rel", "events", 2); err != nil {
				t.Errorf("release: %v", err)
			}
		})
	}
	wg.Wait()
	c, err := stores[1].Counters(ctx, "rel")
	if err != nil || c["events"] != 300 {
		t.Fatalf("after 100 × (+5, −2): %v %v", c, err)
	}
	// stores[1]'s committer now caches the counter (301); stores[0] and
	// stores[1] itself then release it: the next admission must see 0.
	if res, err := stores[1].Admit(ctx, &store.AdmitRequest{Session: "rel", Record: StartRecord("rel", 0),
		Acquire: []store.Acquisition{{Counter: "events", N: 1, Max: 1 << 40}}}); err != nil || !res.Admitted {
		t.Fatalf("admit: %+v %v", res, err)
	}
	if cur, err := stores[1].Release(ctx, "rel", "events", 1); err != nil || cur != 300 {
		t.Fatalf("release on the caching store: %d %v", cur, err)
	}
	if cur, err := stores[0].Release(ctx, "rel", "events", 1000); err != nil || cur != 0 {
		t.Fatalf("release past zero: %d %v", cur, err)
	}
	res, err := stores[1].Admit(ctx, &store.AdmitRequest{Session: "rel", Record: StartRecord("rel", 1),
		Acquire: []store.Acquisition{{Counter: "events", N: 1, Max: 1}}})
	if err != nil || !res.Admitted {
		t.Fatalf("admit after release: %+v %v", res, err)
	}
}

func acquireMany(t *testing.T, ctx context.Context, stores []store.Store, total int, max int64) (ok int, values []int64) {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		got int
	)
	for i := range total {
		s := stores[i%len(stores)]
		wg.Go(func() {
			cur, okk, err := s.Acquire(ctx, "sess", "tool_calls", 1, max)
			if err != nil {
				t.Errorf("acquire: %v", err)
				return
			}
			if cur > max {
				t.Errorf("current %d above max %d", cur, max)
			}
			if okk {
				mu.Lock()
				got++
				values = append(values, cur)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return got, values
}

func checkExact(t *testing.T, ctx context.Context, s store.Store, ok int, values []int64) {
	t.Helper()
	if ok != 400 {
		t.Fatalf("%d acquisitions succeeded, want exactly 400", ok)
	}
	slices.Sort(values)
	for i, v := range values {
		if v != int64(i+1) {
			t.Fatalf("successful acquisitions saw values %v…, want 1..400 each once", values[:min(len(values), 10)])
		}
	}
	m, err := s.Counters(ctx, "sess")
	if err != nil || m["tool_calls"] != 400 {
		t.Fatalf("counters %v, %v", m, err)
	}
}

func testCountersExact(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	ok, values := acquireMany(t, ctx, []store.Store{s}, 1000, 400)
	checkExact(t, ctx, s, ok, values)
}

func testCountersExactTwoStores(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	ok, values := acquireMany(t, ctx, stores, 1000, 400)
	checkExact(t, ctx, stores[1], ok, values)
}

func testCounterLimits(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	steps := []struct {
		n, max  int64
		wantCur int64
		wantOK  bool
	}{
		{5, 4, 0, false}, // more than the limit at once: refused, nothing created
		{0, 4, 0, true},  // n = 0 reads
		{4, 4, 4, true},  // exactly the limit
		{1, 4, 4, false}, // one more: refused
		{0, 4, 4, true},
		{3, 10, 7, true}, // a larger max (another cap) applies per call
		{4, 10, 7, false},
		{3, 10, 10, true},
	}
	for i, st := range steps {
		cur, ok, err := s.Acquire(ctx, "s", "edits:a.go", st.n, st.max)
		if err != nil || cur != st.wantCur || ok != st.wantOK {
			t.Fatalf("step %d Acquire(%d, max %d) = %d, %v, %v; want %d, %v", i, st.n, st.max, cur, ok, err, st.wantCur, st.wantOK)
		}
	}
	if _, _, err := s.Acquire(ctx, "s", "x", -1, 10); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("negative n: %v", err)
	}
	// Counters are per session and per counter.
	if cur, ok, _ := s.Acquire(ctx, "other", "edits:a.go", 1, 1); cur != 1 || !ok {
		t.Fatalf("other session: %d %v", cur, ok)
	}
	m, err := s.Counters(ctx, "s")
	if err != nil || !reflect.DeepEqual(m, map[string]int64{"edits:a.go": 10}) {
		t.Fatalf("counters %v %v", m, err)
	}
	if m, _ := s.Counters(ctx, "none"); m == nil || len(m) != 0 {
		t.Fatalf("unknown session counters: %v", m)
	}
}

func testOverrides(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	for range 3 {
		if _, ok, _ := s.Acquire(ctx, "s", "calls", 1, 3); !ok {
			t.Fatal("acquire under limit failed")
		}
	}
	if _, ok, _ := s.Acquire(ctx, "s", "calls", 1, 3); ok {
		t.Fatal("acquire over limit succeeded")
	}
	// `armory session extend`: another Store (process) raises the limit.
	other := open(t)
	if err := other.SetLimitOverride(ctx, "s", "calls", 5); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if cur, ok, err := s.Acquire(ctx, "s", "calls", 1, 3); !ok || err != nil || cur != int64(4+i) {
			t.Fatalf("acquire under override: %d %v %v", cur, ok, err)
		}
	}
	if _, ok, _ := s.Acquire(ctx, "s", "calls", 1, 3); ok {
		t.Fatal("acquire over override succeeded")
	}
	if err := s.SetLimitOverride(ctx, "s", "calls", 7); err != nil {
		t.Fatal(err)
	}
	m, err := s.LimitOverrides(ctx, "s")
	if err != nil || !reflect.DeepEqual(m, map[string]int64{"calls": 7}) {
		t.Fatalf("overrides %v %v", m, err)
	}
	if err := s.SetLimitOverride(ctx, "s", "calls", -1); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.LimitOverrides(ctx, "s"); len(m) != 0 {
		t.Fatalf("override not removed: %v", m)
	}
	if _, ok, _ := s.Acquire(ctx, "s", "calls", 1, 3); ok {
		t.Fatal("acquire after removing the override succeeded")
	}
}

func testResetSession(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	start, err := s.SessionStart(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	s.Acquire(ctx, "s", "calls", 3, 3)
	s.Acquire(ctx, "s", "edits", 1, 3)
	s.Acquire(ctx, "keep", "calls", 2, 3)
	if err := s.SetLimitOverride(ctx, "s", "calls", 10); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // so that a new start time differs
	if err := s.ResetSession(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.Counters(ctx, "s"); len(m) != 0 {
		t.Fatalf("counters after reset: %v", m)
	}
	if m, _ := s.Counters(ctx, "keep"); m["calls"] != 2 {
		t.Fatalf("other session touched: %v", m)
	}
	if m, _ := s.LimitOverrides(ctx, "s"); m["calls"] != 10 {
		t.Fatalf("override lost: %v", m)
	}
	again, err := s.SessionStart(ctx, "s")
	if err != nil || !again.After(start) {
		t.Fatalf("session did not restart: %v then %v (%v)", start, again, err)
	}
	if cur, ok, _ := s.Acquire(ctx, "s", "calls", 10, 3); !ok || cur != 10 {
		t.Fatalf("acquire after reset with override: %d %v", cur, ok)
	}
}

func testSessionStart(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	before := time.Now().Add(-time.Second)
	var wg sync.WaitGroup
	starts := make([]time.Time, 20)
	for i := range starts {
		wg.Go(func() {
			st, err := stores[i%2].SessionStart(ctx, "s")
			if err != nil {
				t.Errorf("session start: %v", err)
			}
			starts[i] = st
		})
	}
	wg.Wait()
	for _, st := range starts {
		if !st.Equal(starts[0]) {
			t.Fatalf("different start times: %v vs %v", st, starts[0])
		}
	}
	if starts[0].Before(before) || starts[0].After(time.Now().Add(time.Second)) || starts[0].Location() != time.UTC {
		t.Fatalf("start time %v", starts[0])
	}
	other, _ := stores[0].SessionStart(ctx, "other")
	if other.Before(starts[0]) {
		t.Fatal("sessions share start times")
	}
}
