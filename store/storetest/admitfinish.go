package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

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
