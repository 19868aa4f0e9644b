package storetest

import (
	"errors"
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
