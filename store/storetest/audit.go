package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

func testAuditAppendAndList(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatalf("empty trail: %v", err)
	}
	var written []*audit.Record
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 12 {
		r := Record(i)
		r.Time = base.Add(time.Duration(i) * time.Minute)
		mustAppend(t, ctx, s, r)
		if r.Seq != int64(i+1) || r.Hash == "" {
			t.Fatalf("record %d: seq %d hash %q", i, r.Seq, r.Hash)
		}
		if i > 0 && r.PrevHash != written[i-1].Hash {
			t.Fatalf("record %d not chained", i)
		}
		written = append(written, r)
	}
	if h, err := s.AuditHead(ctx); err != nil || h != (audit.Head{Seq: 12, Hash: written[11].Hash}) {
		t.Fatalf("head %+v, %v", h, err)
	}
	seqsOf := func(rs []*audit.Record) []int64 {
		var out []int64
		for _, r := range rs {
			out = append(out, r.Seq)
		}
		return out
	}
	tests := []struct {
		name string
		f    store.AuditFilter
		want []int64
	}{
		{"all newest first", store.AuditFilter{}, []int64{12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{"oldest first", store.AuditFilter{Oldest: true, Limit: 3}, []int64{1, 2, 3}},
		{"limit", store.AuditFilter{Limit: 2}, []int64{12, 11}},
		{"agent", store.AuditFilter{Agent: "agent-1"}, []int64{10, 6, 2}},
		{"tool", store.AuditFilter{Tool: "terminal.run"}, []int64{12, 9, 6, 3}},
		{"status", store.AuditFilter{Status: audit.StatusBlocked}, []int64{12, 9, 6, 3}},
		{"session", store.AuditFilter{Session: "session-0"}, []int64{10, 7, 4, 1}},
		{"agent and status", store.AuditFilter{Agent: "agent-0", Status: audit.StatusSuccess}, []int64{1}},
		{"since", store.AuditFilter{Since: base.Add(9 * time.Minute)}, []int64{12, 11, 10}},
		{"after seq", store.AuditFilter{AfterSeq: 10}, []int64{12, 11}},
		{"after seq oldest", store.AuditFilter{AfterSeq: 3, Oldest: true, Limit: 2}, []int64{4, 5}},
		{"before seq", store.AuditFilter{BeforeSeq: 3}, []int64{2, 1}},
		{"call id", store.AuditFilter{CallID: written[4].ID}, []int64{5}},
		{"no match", store.AuditFilter{Agent: "nobody"}, nil},
	}
	for _, tc := range tests {
		got, err := s.ListAudit(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(seqsOf(got), tc.want) {
			t.Errorf("%s: got seqs %v, want %v", tc.name, seqsOf(got), tc.want)
		}
	}
	// The default limit holds.
	for i := range store.DefaultLimit + 5 {
		mustAppend(t, ctx, s, Record(100+i))
	}
	if got, err := s.ListAudit(ctx, store.AuditFilter{}); err != nil || len(got) != store.DefaultLimit || got[0].Seq != int64(12+store.DefaultLimit+5) {
		t.Fatalf("default limit: %d records, %v", len(got), err)
	}
	// What comes back is exactly what was written.
	sameRecords(t, s, written)
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
	// IterAudit stops at the callback's error.
	stop := errors.New("stop")
	n := 0
	if err := s.IterAudit(ctx, func(*audit.Record) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("IterAudit: %v after %d", err, n)
	}
}

func testAuditRoundTrip(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	tricky := []func(r *audit.Record){
		func(r *audit.Record) { r.Args = json.RawMessage(`{"q":"<script>&</script>","u":"\u2028 é 日本"}`) },
		func(r *audit.Record) { r.Args = json.RawMessage("{\"bad\":\"\xff\xfe\"}") },
		func(r *audit.Record) { r.Args = nil; r.Stages = nil },
		func(r *audit.Record) { r.Args = json.RawMessage(`not json`) },
		func(r *audit.Record) { r.Agent = "nul\x00byte"; r.Result = "bad \xc3\x28 utf8" },
		func(r *audit.Record) { r.Args = json.RawMessage(` { "spaced" : [ 1 , 2 ] } `) },
		func(r *audit.Record) {
			r.Result = strings.Repeat("x", 100000)
			r.Stages = []audit.Stage{{Name: "veto", Decision: "deny", Reasons: []string{"a", "", "c"}}}
		},
		func(r *audit.Record) { r.Time = time.Date(2026, 5, 6, 7, 8, 9, 123456789, time.FixedZone("CET", 3600)) },
		func(r *audit.Record) { r.Status = audit.StatusRunning; r.Phase = audit.PhaseStart; r.DurationMS = -1 },
	}
	var written []*audit.Record
	for i, mutate := range tricky {
		r := Record(i)
		mutate(r)
		mustAppend(t, ctx, s, r)
		written = append(written, r)
	}
	got := sameRecords(t, s, written)
	for i := range written {
		if got[i].ComputeHash() != got[i].Hash {
			t.Fatalf("record %d: stored form does not hash to its hash", i+1)
		}
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

func testAuditGroupCommit(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	const workers, each = 64, 40
	var wg sync.WaitGroup
	seqs := make([][]int64, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				r := Record(w*each + i)
				if err := s.AppendAudit(ctx, r); err != nil {
					t.Errorf("append: %v", err)
					return
				}
				seqs[w] = append(seqs[w], r.Seq)
			}
		})
	}
	wg.Wait()
	all := slices.Concat(seqs...)
	slices.Sort(all)
	for i, q := range all {
		if q != int64(i+1) {
			t.Fatalf("returned seqs are not 1..%d: position %d has %d", workers*each, i, q)
		}
	}
	// Every acknowledged record is durable: a new Store sees them all.
	s2 := open(t)
	n, _ := countAudit(t, ctx, s2)
	if n != workers*each {
		t.Fatalf("%d records stored, want %d", n, workers*each)
	}
	if err := s2.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

func testAuditTwoStores(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	const per = 300
	var wg sync.WaitGroup
	for k, s := range stores {
		for g := range 8 {
			wg.Go(func() {
				for i := range per / 8 {
					if err := s.AppendAudit(ctx, Record(k*1000+g*100+i)); err != nil {
						t.Errorf("append: %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	n, seqs := countAudit(t, ctx, stores[0])
	if n != 2*(per/8)*8 {
		t.Fatalf("%d records, want %d", n, 2*(per/8)*8)
	}
	for i, q := range seqs {
		if q != int64(i+1) {
			t.Fatalf("seq gap at %d: %d", i, q)
		}
	}
	for _, s := range stores {
		if err := s.VerifyAudit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

func testAuditClosedAndCanceled(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	// A canceled context may or may not win against an idle committer, but
	// the record is never half-written and the chain stays valid.
	r := Record(1)
	if err := s.AppendAudit(canceled, r); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled append: %v", err)
	}
	mustAppend(t, ctx, s, Record(2))
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.AppendAudit(ctx, Record(3)); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := s.ListAudit(ctx, store.AuditFilter{}); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("list after close: %v", err)
	}
	if _, _, err := s.Acquire(ctx, "s", "c", 1, 1); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("acquire after close: %v", err)
	}
}
