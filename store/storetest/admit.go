package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// StartRecord is the start record of call i in session sess.
func StartRecord(sess string, i int) *audit.Record {
	r := Record(i)
	r.Session, r.Phase, r.Status = sess, audit.PhaseStart, audit.StatusRunning
	return r
}

// 1,000 concurrent callers against a cap of 400, split across two Stores,
// three in four through Admit (which also takes a second counter), one in
// four through plain Acquire: exactly 400 succeed, every value 1..400 is
// seen once, exactly the admitted calls have a start record, and the chain
// verifies.
func testAdmitExact(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	var (
		wg                 sync.WaitGroup
		mu                 sync.Mutex
		values             []int64
		admitted, acquired int
		ids                = map[string]bool{}
	)
	for i := range 1000 {
		s := stores[i%2]
		wg.Go(func() {
			if i%4 == 3 {
				cur, ok, err := s.Acquire(ctx, "sess", "tool_calls", 1, 400)
				if err != nil {
					t.Errorf("acquire: %v", err)
					return
				}
				if ok {
					mu.Lock()
					acquired++
					values = append(values, cur)
					mu.Unlock()
				}
				return
			}
			rec := StartRecord("sess", i)
			res, err := s.Admit(ctx, &store.AdmitRequest{Session: "sess", Record: rec, MaxRuntime: time.Hour,
				Acquire: []store.Acquisition{{Counter: "tool_calls", N: 1, Max: 400}, {Counter: "events", N: 2, Max: 1 << 40}}})
			if err != nil {
				t.Errorf("admit: %v", err)
				return
			}
			if res.SessionStart.IsZero() {
				t.Errorf("admit: no session start")
			}
			if !res.Admitted {
				if res.Hit == nil || *res.Hit != (store.LimitHit{Counter: "tool_calls", Current: 400, Max: 400}) {
					t.Errorf("refused with %+v, want tool_calls 400/400", res.Hit)
				}
				if rec.Seq != 0 || rec.Hash != "" {
					t.Errorf("a refused record was sealed: seq %d", rec.Seq)
				}
				return
			}
			if rec.Seq == 0 || rec.Hash == "" {
				t.Errorf("admitted record not sealed")
			}
			mu.Lock()
			admitted++
			ids[rec.ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if admitted+acquired != 400 {
		t.Fatalf("%d admitted + %d acquired, want exactly 400", admitted, acquired)
	}
	t.Logf("%d admitted, %d acquired", admitted, acquired)
	m, err := stores[0].Counters(ctx, "sess")
	if err != nil || m["tool_calls"] != 400 || m["events"] != int64(2*admitted) {
		t.Fatalf("counters %v (%v), want tool_calls 400, events %d", m, err, 2*admitted)
	}
	slices.Sort(values)
	if len(slices.Compact(values)) != len(values) {
		t.Fatalf("plain acquisitions saw a value twice: %v", values)
	}
	n, _ := countAudit(t, ctx, stores[1])
	if n != int64(admitted) {
		t.Fatalf("%d records stored, want %d (one per admitted call)", n, admitted)
	}
	err = stores[1].IterAudit(ctx, func(r *audit.Record) error {
		if !ids[r.ID] {
			return fmt.Errorf("record %d (%s) of a call that was not admitted", r.Seq, r.ID)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := stores[0].VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// A refused admission applies none of its acquisitions (not even those
// before the one that does not fit) and appends nothing.
func testAdmitRefusal(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	mustAppend(t, ctx, s, Record(0))
	if _, ok, err := s.Acquire(ctx, "s", "b", 3, 3); !ok || err != nil {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	head0, _ := s.AuditHead(ctx)
	tests := []struct {
		name string
		acq  []store.Acquisition
		hit  store.LimitHit
	}{
		{"second does not fit", []store.Acquisition{acq("a", 1, 10), acq("b", 1, 3), acq("c", 1, 10)}, store.LimitHit{Counter: "b", Current: 3, Max: 3}},
		{"first does not fit", []store.Acquisition{acq("c", 11, 10), acq("a", 1, 10)}, store.LimitHit{Counter: "c", Current: 0, Max: 10}},
		{"same counter twice", []store.Acquisition{acq("a", 6, 10), acq("a", 5, 10)}, store.LimitHit{Counter: "a", Current: 6, Max: 10}},
	}
	for _, tc := range tests {
		rec := StartRecord("s", 1)
		res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: rec, Acquire: tc.acq})
		if err != nil || res.Admitted || res.Hit == nil || *res.Hit != tc.hit {
			t.Fatalf("%s: %+v %+v %v, want hit %+v", tc.name, res, res.Hit, err, tc.hit)
		}
		if rec.Seq != 0 {
			t.Fatalf("%s: refused record got seq %d", tc.name, rec.Seq)
		}
	}
	if m, _ := s.Counters(ctx, "s"); m["a"] != 0 || m["b"] != 3 || m["c"] != 0 {
		t.Fatalf("a refused admission changed counters: %v", m)
	}
	if head, _ := s.AuditHead(ctx); head != head0 {
		t.Fatalf("a refused admission moved the head: %+v → %+v", head0, head)
	}
	// The same counter twice within the limit takes both.
	rec := StartRecord("s", 2)
	res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: rec, Acquire: []store.Acquisition{acq("a", 4, 10), acq("a", 6, 10), acq("b", 0, 3)}})
	if err != nil || !res.Admitted || res.Hit != nil || rec.Seq != head0.Seq+1 {
		t.Fatalf("admit: %+v %v seq %d", res, err, rec.Seq)
	}
	if m, _ := s.Counters(ctx, "s"); m["a"] != 10 || m["b"] != 3 {
		t.Fatalf("counters %v", m)
	}
	got, err := s.ListAudit(ctx, store.AuditFilter{CallID: rec.ID})
	if err != nil || len(got) != 1 || got[0].Hash != rec.Hash || got[0].Session != "s" {
		t.Fatalf("admitted record: %v %v", got, err)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// Overrides set through another Store replace Max, as for Acquire.
func testAdmitOverride(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s, other := open(t), open(t)
	admit := func(max int64) store.AdmitResult {
		t.Helper()
		res, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: StartRecord("s", 0), Acquire: []store.Acquisition{acq("calls", 1, max)}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if err := other.SetLimitOverride(ctx, "s", "calls", 2); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if res := admit(100); !res.Admitted {
			t.Fatalf("admit %d under override 2: %+v", i, res.Hit)
		}
	}
	if res := admit(100); res.Admitted || *res.Hit != (store.LimitHit{Counter: "calls", Current: 2, Max: 2}) {
		t.Fatalf("admit over override: %+v %+v", res, res.Hit)
	}
	if err := other.SetLimitOverride(ctx, "s", "calls", 3); err != nil {
		t.Fatal(err)
	}
	if res := admit(1); !res.Admitted {
		t.Fatalf("admit after extend: %+v", res.Hit)
	}
	if err := other.SetLimitOverride(ctx, "s", "calls", -1); err != nil {
		t.Fatal(err)
	}
	if res := admit(3); res.Admitted || *res.Hit != (store.LimitHit{Counter: "calls", Current: 3, Max: 3}) {
		t.Fatalf("admit after removing the override: %+v %+v", res, res.Hit)
	}
	if res := admit(4); !res.Admitted {
		t.Fatalf("admit under max 4: %+v", res.Hit)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// The runtime cap: Admit starts the session clock on first use (the same
// one SessionStart reports), and refuses once the session has run longer
// than MaxRuntime or the "session_runtime" override.
func testAdmitRuntime(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	req := func(sess string, max time.Duration) *store.AdmitRequest {
		return &store.AdmitRequest{Session: sess, Record: StartRecord(sess, 0), MaxRuntime: max, Acquire: []store.Acquisition{acq("calls", 1, 100)}}
	}
	res, err := s.Admit(ctx, req("r", time.Hour))
	if err != nil || !res.Admitted {
		t.Fatalf("first admit: %+v %v", res, err)
	}
	start, err := s.SessionStart(ctx, "r")
	if err != nil || !start.Equal(res.SessionStart) {
		t.Fatalf("SessionStart %v, Admit reported %v (%v)", start, res.SessionStart, err)
	}
	time.Sleep(5 * time.Millisecond)
	res, err = s.Admit(ctx, req("r", time.Millisecond))
	if err != nil || res.Admitted || *res.Hit != (store.LimitHit{Counter: store.LimitSessionRuntime, Current: 0, Max: 0}) || !res.SessionStart.Equal(start) {
		t.Fatalf("admit past the runtime cap: %+v %+v %v", res, res.Hit, err)
	}
	if m, _ := s.Counters(ctx, "r"); m["calls"] != 1 {
		t.Fatalf("refused by runtime but counted: %v", m)
	}
	// The override (seconds) replaces MaxRuntime…
	if err := s.SetLimitOverride(ctx, "r", store.LimitSessionRuntime, 0); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.Admit(ctx, req("r", time.Hour)); res.Admitted || res.Hit.Counter != store.LimitSessionRuntime {
		t.Fatalf("override 0 s: %+v", res)
	}
	if err := s.SetLimitOverride(ctx, "r", store.LimitSessionRuntime, 3600); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.Admit(ctx, req("r", time.Millisecond)); !res.Admitted {
		t.Fatalf("override 3600 s: %+v", res.Hit)
	}
	// …but MaxRuntime 0 is no runtime cap at all.
	if err := s.SetLimitOverride(ctx, "r", store.LimitSessionRuntime, 0); err != nil {
		t.Fatal(err)
	}
	if res, _ := s.Admit(ctx, req("r", 0)); !res.Admitted {
		t.Fatalf("no runtime cap: %+v", res.Hit)
	}
	// A session reset restarts the clock.
	if err := s.ResetSession(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetLimitOverride(ctx, "r", store.LimitSessionRuntime, -1); err != nil {
		t.Fatal(err)
	}
	res, err = s.Admit(ctx, req("r", time.Hour))
	if err != nil || !res.Admitted || !res.SessionStart.After(start) {
		t.Fatalf("after reset: %+v %v (start %v)", res, err, start)
	}
	// A refused first admission still starts the clock.
	res, err = s.Admit(ctx, &store.AdmitRequest{Session: "new", Record: StartRecord("new", 0), Acquire: []store.Acquisition{acq("calls", 2, 1)}})
	if err != nil || res.Admitted || res.SessionStart.IsZero() {
		t.Fatalf("refused first admission: %+v %v", res, err)
	}
	if st, _ := s.SessionStart(ctx, "new"); !st.Equal(res.SessionStart) {
		t.Fatalf("session clock %v, admit reported %v", st, res.SessionStart)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

func testAdmitInvalid(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	for _, req := range []*store.AdmitRequest{
		nil,
		{Session: "s"},
		{Session: "s", Record: Record(0), Acquire: []store.Acquisition{acq("a", -1, 10)}},
		{Session: "s", Record: Record(0), Acquire: []store.Acquisition{acq("", 1, 10)}},
		{Session: "s", Record: Record(0), MaxRuntime: -time.Second},
	} {
		if _, err := s.Admit(ctx, req); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("Admit(%+v) = %v, want ErrInvalid", req, err)
		}
	}
	if m, _ := s.Counters(ctx, "s"); len(m) != 0 {
		t.Fatalf("invalid admissions changed counters: %v", m)
	}
	s.Close()
	if _, err := s.Admit(ctx, &store.AdmitRequest{Session: "s", Record: Record(0)}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("admit after close: %v", err)
	}
}

// Admissions and plain appends share the group commit and one chain.
func testAdmitMixedWithAppend(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			if i%2 == 0 {
				if err := s.AppendAudit(ctx, Record(i)); err != nil {
					t.Errorf("append: %v", err)
				}
				return
			}
			sess := fmt.Sprintf("s%d", i%5)
			res, err := s.Admit(ctx, &store.AdmitRequest{Session: sess, Record: StartRecord(sess, i), Acquire: []store.Acquisition{acq("calls", 1, 10)}})
			if err != nil {
				t.Errorf("admit: %v", err)
			} else if !res.Admitted && res.Hit.Current != 10 {
				t.Errorf("refused below the cap: %+v", res.Hit)
			}
		})
	}
	wg.Wait()
	n, _ := countAudit(t, ctx, s)
	if n != 100+5*10 {
		t.Fatalf("%d records, want 150 (100 appended, 10 admitted per session)", n)
	}
	for i := range 5 {
		if m, _ := s.Counters(ctx, fmt.Sprintf("s%d", i)); m["calls"] != 10 {
			t.Fatalf("session %d counters %v", i, m)
		}
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

func acq(counter string, n, max int64) store.Acquisition {
	return store.Acquisition{Counter: counter, N: n, Max: max}
}

// commitCounter is what every backend reports of its group commits.
type commitCounter interface {
	CommitCounts() store.CommitCounts
}

func commitCounts(t *testing.T, s store.Store) store.CommitCounts {
	t.Helper()
	cc, ok := s.(commitCounter)
	if !ok {
		t.Fatalf("%T does not report CommitCounts", s)
	}
	return cc.CommitCounts()
}

// A NoSync admission is committed without waiting for stable storage, and
// only that is relaxed: the record and the counters are committed (another
// Store sees them at once, caps stay exact across Stores) and every other
// write is durable. A batch that mixes NoSync admissions with records that
// must be durable is durable.
func testAdmitNoSync(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	admit := func(s store.Store, i int, noSync bool) store.AdmitResult {
		t.Helper()
		res, err := s.Admit(ctx, &store.AdmitRequest{Session: "ro", Record: StartRecord("ro", i), NoSync: noSync,
			Acquire: []store.Acquisition{acq("tool_calls", 1, 3)}})
		if err != nil {
			t.Fatalf("admit %d: %v", i, err)
		}
		return res
	}
	c0 := commitCounts(t, s1)
	if res := admit(s1, 0, true); !res.Admitted {
		t.Fatalf("first NoSync admission refused: %+v", res.Hit)
	}
	if c := commitCounts(t, s1); c.Relaxed != c0.Relaxed+1 || c.Durable != c0.Durable {
		t.Fatalf("a lone NoSync admission: commits %+v → %+v, want one more relaxed", c0, c)
	}
	// Committed, not merely queued: the other Store sees the record and the counter.
	if h, err := s2.AuditHead(ctx); err != nil || h.Seq != 1 {
		t.Fatalf("other store's head after a NoSync admission: %+v %v", h, err)
	}
	if c, err := s2.Counters(ctx, "ro"); err != nil || c["tool_calls"] != 1 {
		t.Fatalf("other store's counters after a NoSync admission: %v %v", c, err)
	}
	// Caps stay exact across Stores, relaxed or not.
	if !admit(s2, 1, true).Admitted || !admit(s1, 2, false).Admitted {
		t.Fatal("admissions within the cap refused")
	}
	if res := admit(s2, 3, true); res.Admitted || res.Hit == nil || *res.Hit != (store.LimitHit{Counter: "tool_calls", Current: 3, Max: 3}) {
		t.Fatalf("4th admission against a cap of 3: %+v", res)
	}
	// Everything else is durable (a refused admission's batch included).
	c1 := commitCounts(t, s1)
	if res := admit(s1, 4, false); res.Admitted {
		t.Fatal("5th admission against a cap of 3 admitted")
	}
	mustAppend(t, ctx, s1, Record(5))
	if c := commitCounts(t, s1); c.Durable != c1.Durable+2 || c.Relaxed != c1.Relaxed {
		t.Fatalf("an admission and an append without NoSync: commits %+v → %+v, want two more durable", c1, c)
	}
	// Concurrent NoSync admissions and durable appends share batches: each
	// batch with a durable record in it is durable.
	c2 := commitCounts(t, s1)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			if i%2 == 0 {
				if _, err := s1.Admit(ctx, &store.AdmitRequest{Session: fmt.Sprint("mix", i), Record: StartRecord(fmt.Sprint("mix", i), i), NoSync: true,
					Acquire: []store.Acquisition{acq("tool_calls", 1, 10)}}); err != nil {
					t.Errorf("admit: %v", err)
				}
				return
			}
			if err := s1.AppendAudit(ctx, Record(i)); err != nil {
				t.Errorf("append: %v", err)
			}
		})
	}
	wg.Wait()
	c3 := commitCounts(t, s1)
	if d := c3.Durable - c2.Durable; d < 1 || d+c3.Relaxed-c2.Relaxed > 64 {
		t.Fatalf("64 mixed calls: commits %+v → %+v", c2, c3)
	}
	CheckTrail(t, s2, 3+1+64)
}

// 600 concurrent admissions that carry their finish record
// (AdmitRequest.Finish), split across two Stores, against a cap of 150,
// mixed with plain appends: exactly 150 are admitted; each admitted call has
// exactly its start and its finish record, the finish right after the start
// (no other record between them), both sealed in the caller's records; a
// refused call has no record at all; the counters say 150; the chain
// verifies.
func testAdmitFinishExact(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	const calls, limit = 600, 150
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted = map[string]bool{}
		refused  = map[string]bool{}
		appended = map[string]bool{}
	)
	for i := range calls {
		s := stores[i%2]
		wg.Go(func() {
			if i%5 == 4 {
				r := Record(i)
				if err := s.AppendAudit(ctx, r); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				mu.Lock()
				appended[r.ID] = true
				mu.Unlock()
				return
			}
			start := StartRecord("sess", i)
			fin := start.Clone()
			fin.Phase, fin.Status, fin.Result, fin.DurationMS = audit.PhaseFinish, audit.StatusSuccess, fmt.Sprint("result ", i), 3
			res, err := s.Admit(ctx, &store.AdmitRequest{Session: "sess", Record: start, Finish: fin, MaxRuntime: time.Hour,
				Acquire: []store.Acquisition{{Counter: "tool_calls", N: 1, Max: limit}}})
			if err != nil {
				t.Errorf("admit: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !res.Admitted {
				if res.Hit == nil || *res.Hit != (store.LimitHit{Counter: "tool_calls", Current: limit, Max: limit}) {
					t.Errorf("refused with %+v, want tool_calls %d/%d", res.Hit, limit, limit)
				}
				if start.Seq != 0 || fin.Seq != 0 || fin.Hash != "" {
					t.Errorf("a refused call's records were sealed: %d %d", start.Seq, fin.Seq)
				}
				refused[start.ID] = true
				return
			}
			if start.Seq == 0 || fin.Seq != start.Seq+1 || fin.PrevHash != start.Hash || fin.Hash == "" {
				t.Errorf("admitted call sealed as start %d %q, finish %d prev %q", start.Seq, start.Hash, fin.Seq, fin.PrevHash)
			}
			admitted[start.ID] = true
		})
	}
	wg.Wait()
	if len(admitted) != limit || len(admitted)+len(refused)+len(appended) != calls {
		t.Fatalf("%d admitted, %d refused, %d appended; want exactly %d admitted of %d", len(admitted), len(refused), len(appended), limit, calls)
	}
	m, err := stores[1].Counters(ctx, "sess")
	if err != nil || m["tool_calls"] != limit {
		t.Fatalf("counters %v (%v), want tool_calls %d", m, err, limit)
	}
	var prev *audit.Record
	seen := map[string]int{}
	err = stores[1].IterAudit(ctx, func(r *audit.Record) error {
		defer func() { prev = r }()
		switch {
		case refused[r.ID]:
			return fmt.Errorf("record %d of refused call %s", r.Seq, r.ID)
		case appended[r.ID]:
			seen[r.ID]++
			return nil
		case !admitted[r.ID]:
			return fmt.Errorf("record %d of an unknown call %s", r.Seq, r.ID)
		}
		seen[r.ID]++
		if r.Phase == audit.PhaseFinish {
			if prev == nil || prev.ID != r.ID || prev.Phase != audit.PhaseStart || r.Status != audit.StatusSuccess {
				return fmt.Errorf("finish record %d of %s does not follow its start", r.Seq, r.ID)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for id := range admitted {
		if seen[id] != 2 {
			t.Fatalf("admitted call %s has %d records, want 2", id, seen[id])
		}
	}
	for id := range appended {
		if seen[id] != 1 {
			t.Fatalf("appended record %s stored %d times", id, seen[id])
		}
	}
	if n, _ := countAudit(t, ctx, stores[0]); n != int64(2*limit+len(appended)) {
		t.Fatalf("%d records, want %d", n, 2*limit+len(appended))
	}
	if err := stores[0].VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// An admission with its finish record is committed durably unless NoSync,
// and a refused one (repetition, then the runtime cap) appends neither.
func testAdmitFinishDurability(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	c0 := commitCounts(t, s)
	start := StartRecord("d", 1)
	fin := start.Clone()
	fin.Phase, fin.Status = audit.PhaseFinish, audit.StatusSuccess
	res, err := s.Admit(ctx, &store.AdmitRequest{Session: "d", Record: start, Finish: fin, NoSync: false,
		Repeat: &store.Repeat{Sum: 7, Max: 2}})
	if err != nil || !res.Admitted {
		t.Fatalf("admit: %+v %v", res, err)
	}
	if c := commitCounts(t, s); c.Durable != c0.Durable+1 || c.Relaxed != c0.Relaxed {
		t.Fatalf("commits %+v → %+v, want one more durable", c0, c)
	}
	if c := commitCounts(t, s); c.DurableSeq != fin.Seq {
		t.Fatalf("durable point %d, want the finish record's %d", c.DurableSeq, fin.Seq)
	}
	head, _ := s.AuditHead(ctx)
	start2 := StartRecord("d", 2)
	fin2 := start2.Clone()
	fin2.Phase = audit.PhaseFinish
	res, err = s.Admit(ctx, &store.AdmitRequest{Session: "d", Record: start2, Finish: fin2, Repeat: &store.Repeat{Sum: 7, Max: 2}})
	if err != nil || res.Admitted || res.Hit == nil || res.Hit.Counter != store.RepetitionCounter {
		t.Fatalf("a repetition was not refused: %+v %v", res, err)
	}
	if h, _ := s.AuditHead(ctx); h != head || fin2.Seq != 0 {
		t.Fatalf("a refused admission appended: head %+v → %+v", head, h)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}
