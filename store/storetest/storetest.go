// Package storetest is the conformance suite that every store.Store backend
// runs: one set of behaviours, checked against a real database.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Opener opens a Store for a test. The first call for a given t must return
// a Store on a fresh, empty database; later calls with the same t must
// return further Stores on that same database (as another process would
// open it). The opener registers Close with t.Cleanup; the suite may also
// close Stores itself (Close is idempotent).
type Opener func(t *testing.T) store.Store

// Run runs the whole conformance suite against the backend that open opens.
func Run(t *testing.T, open Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"AuditAppendAndList", testAuditAppendAndList},
		{"AuditRoundTrip", testAuditRoundTrip},
		{"AuditGroupCommit64", testAuditGroupCommit},
		{"AuditTwoStores", testAuditTwoStores},
		{"AuditClosedAndCanceled", testAuditClosedAndCanceled},
		{"ApprovalLifecycle", testApprovalLifecycle},
		{"ApprovalEscalation", testApprovalEscalation},
		{"ApprovalDoubleDecisionRace", testApprovalDoubleDecisionRace},
		{"WaitApprovalOtherStore", testWaitApprovalOtherStore},
		{"WaitApprovalBlocks", testWaitApprovalBlocks},
		{"CountersExact", testCountersExact},
		{"CountersExactTwoStores", testCountersExactTwoStores},
		{"CounterLimits", testCounterLimits},
		{"Overrides", testOverrides},
		{"ResetSession", testResetSession},
		{"SessionStart", testSessionStart},
		{"AdmitExactTwoStoresMixed", testAdmitExact},
		{"AdmitRefusalAppliesNothing", testAdmitRefusal},
		{"AdmitOverride", testAdmitOverride},
		{"AdmitRuntime", testAdmitRuntime},
		{"AdmitInvalidAndClosed", testAdmitInvalid},
		{"AdmitMixedWithAppend", testAdmitMixedWithAppend},
		{"AdmitNoSync", testAdmitNoSync},
		{"AdmitFinishExactTwoStores", testAdmitFinishExact},
		{"AdmitFinishDurability", testAdmitFinishDurability},
		{"AdmitRepeatTwoStores", testAdmitRepeatTwoStores},
		{"SessionGenerations", testSessionGenerations},
		{"ReleaseTwoStores", testRelease},
		{"DurablePointStrict", testDurablePointStrict},
		{"CacheTwoStoresAlternate", testCacheTwoStoresAlternate},
		{"CacheWritesBetweenBatches", testCacheWritesBetweenBatches},
		{"CacheManySessions", testCacheManySessions},
		{"Tokens", testTokens},
		{"TokensTwoStoresAndRevokeRace", testTokensRace},
		{"Pins", testPins},
		{"PinsFirstObserverWinsTwoStores", testPinsRace},
		{"RunClaims", testRunClaims},
		{"RunClaimsExpiry", testRunClaimsExpiry},
		{"RunClaimsRace", testRunClaimsRace},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Record returns a realistic audit record for call i (about 400 bytes).
func Record(i int) *audit.Record {
	return &audit.Record{
		ID:      audit.NewID(),
		Phase:   audit.PhaseFinish,
		Agent:   fmt.Sprintf("agent-%d", i%4),
		Session: fmt.Sprintf("session-%d", i%3),
		Task:    "task-1",
		Tool:    []string{"file.read", "file.write", "terminal.run"}[i%3],
		Args:    json.RawMessage(fmt.Sprintf(`{"path":"src/file-%d.go","limit":4096}`, i)),
		Stages: []audit.Stage{
			{Name: "lookup", Decision: "allow"},
			{Name: "access", Decision: "allow", Reasons: []string{"group developers grants file.*"}},
			{Name: "caps", Decision: "allow", Reasons: []string{"calls 12/400"}},
			{Name: "permission", Decision: "auto"},
		},
		Permission: "auto",
		Status:     []audit.Status{audit.StatusSuccess, audit.StatusError, audit.StatusBlocked}[i%3],
		Result:     "read 1234 bytes",
		DurationMS: int64(i % 50),
	}
}

func mustAppend(t testing.TB, ctx context.Context, s store.Store, r *audit.Record) {
	t.Helper()
	if err := s.AppendAudit(ctx, r); err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
}

func countAudit(t *testing.T, ctx context.Context, s store.Store) (n int64, seqs []int64) {
	t.Helper()
	err := s.IterAudit(ctx, func(r *audit.Record) error {
		n++
		seqs = append(seqs, r.Seq)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n, seqs
}

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
	got, err := s.ListAudit(ctx, store.AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range written {
		if !reflect.DeepEqual(got[i], written[i]) {
			t.Fatalf("record %d differs:\n got %+v\nwant %+v", i+1, got[i], written[i])
		}
	}
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
	got, err := s.ListAudit(ctx, store.AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range written {
		if !reflect.DeepEqual(got[i], written[i]) {
			t.Fatalf("record %d differs after storage:\n got %+v\nwant %+v", i+1, got[i], written[i])
		}
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

func newApproval(agent string) *store.Approval {
	return &store.Approval{
		Agent:    agent,
		Session:  "s1",
		Task:     "t1",
		Tool:     "git.push",
		Args:     json.RawMessage(`{"remote":"origin"}`),
		ArgsHash: "sha256:0123abcd",
		Reason:   "git.push requires approval",
		Level:    "confirm",
	}
}

func testApprovalLifecycle(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	a := newApproval("alice")
	if err := s.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.Status != store.StatusPending || a.Route != store.RouteHuman || a.CreatedAt.IsZero() {
		t.Fatalf("defaults not applied: %+v", a)
	}
	got, err := s.GetApproval(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, a) {
		t.Fatalf("get:\n got %+v\nwant %+v", got, a)
	}
	dup := newApproval("bob")
	dup.ID = a.ID
	if err := s.CreateApproval(ctx, dup); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate id: %v", err)
	}
	if _, err := s.GetApproval(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	b := newApproval("bob")
	b.Route = store.RouteAgent("reviewer")
	b.Level = "always_confirm"
	if err := s.CreateApproval(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateApproval(ctx, &store.Approval{Agent: "x", Status: "weird"}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad status: %v", err)
	}
	list := func(f store.ApprovalFilter) []string {
		as, err := s.ListApprovals(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range as {
			ids = append(ids, x.ID)
		}
		return ids
	}
	if ids := list(store.ApprovalFilter{Status: store.StatusPending}); len(ids) != 2 {
		t.Fatalf("pending: %v", ids)
	}
	if ids := list(store.ApprovalFilter{Route: "agent:reviewer"}); !slices.Equal(ids, []string{b.ID}) {
		t.Fatalf("route filter: %v", ids)
	}
	if ids := list(store.ApprovalFilter{Agent: "alice", Session: "s1"}); !slices.Equal(ids, []string{a.ID}) {
		t.Fatalf("agent filter: %v", ids)
	}
	if ids := list(store.ApprovalFilter{Limit: 1}); len(ids) != 1 {
		t.Fatalf("limit: %v", ids)
	}

	if err := s.SetApprovalResult(ctx, a.ID, json.RawMessage(`{"ok":true}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("result on pending approval: %v", err)
	}
	if err := s.DecideApproval(ctx, a.ID, "maybe", "bob", ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("invalid decision: %v", err)
	}
	if err := s.DecideApproval(ctx, a.ID, store.StatusPending, "bob", ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("decision pending: %v", err)
	}
	if err := s.DecideApproval(ctx, "nope", store.StatusApproved, "bob", ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("decide unknown: %v", err)
	}
	if err := s.DecideApproval(ctx, a.ID, store.StatusApproved, "boss", "looks fine"); err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.ApprovalStatus{store.StatusDenied, store.StatusApproved, store.StatusEscalated, store.StatusExpired} {
		if err := s.DecideApproval(ctx, a.ID, d, "eve", "again"); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("second decision %s: %v", d, err)
		}
	}
	got, err = s.GetApproval(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusApproved || got.DecidedBy != "boss" || got.DecisionReason != "looks fine" || got.DecidedAt.IsZero() {
		t.Fatalf("decided approval: %+v", got)
	}
	if err := s.SetApprovalResult(ctx, a.ID, json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetApprovalResult(ctx, a.ID, json.RawMessage(`{"ok":false}`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second result: %v", err)
	}
	if err := s.SetApprovalResult(ctx, "nope", json.RawMessage(`1`)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("result unknown: %v", err)
	}
	got, _ = s.GetApproval(ctx, a.ID)
	if string(got.Result) != `{"ok":true}` {
		t.Fatalf("stored result %s", got.Result)
	}
	if err := s.DecideApproval(ctx, b.ID, store.StatusDenied, "reviewer", "no"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetApprovalResult(ctx, b.ID, json.RawMessage(`1`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("result on denied approval: %v", err)
	}
	if ids := list(store.ApprovalFilter{Status: store.StatusPending}); len(ids) != 0 {
		t.Fatalf("pending after decisions: %v", ids)
	}
}

func testApprovalEscalation(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	a := newApproval("alice")
	a.Route = store.RouteAgent("reviewer")
	if err := s.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.DecideApproval(ctx, a.ID, store.StatusEscalated, "reviewer", "needs a human"); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetApproval(ctx, a.ID)
	if got.Status != store.StatusEscalated || got.Route != store.RouteHuman {
		t.Fatalf("after escalation: %+v", got)
	}
	if err := s.DecideApproval(ctx, a.ID, store.StatusEscalated, "reviewer", "again"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("escalating twice: %v", err)
	}
	if err := s.DecideApproval(ctx, a.ID, store.StatusDenied, "boss", "no"); err != nil {
		t.Fatalf("deciding an escalated approval: %v", err)
	}
	got, _ = s.GetApproval(ctx, a.ID)
	if got.Status != store.StatusDenied || got.DecidedBy != "boss" {
		t.Fatalf("final: %+v", got)
	}
}

func testApprovalDoubleDecisionRace(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	a := newApproval("alice")
	if err := stores[0].CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	var ok, conflict atomic.Int32
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			d := store.StatusApproved
			if i%2 == 1 {
				d = store.StatusDenied
			}
			err := stores[i%2].DecideApproval(ctx, a.ID, d, fmt.Sprintf("decider-%d", i), "")
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, store.ErrConflict):
				conflict.Add(1)
			default:
				t.Errorf("decide: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || conflict.Load() != 15 {
		t.Fatalf("%d decisions succeeded, %d conflicted; want 1 and 15", ok.Load(), conflict.Load())
	}
}

func testWaitApprovalOtherStore(t *testing.T, open Opener) {
	ctx := ctxT(t)
	waiter, decider := open(t), open(t)
	a := newApproval("alice")
	a.Route = store.RouteAgent("reviewer")
	if err := waiter.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	type result struct {
		a   *store.Approval
		err error
	}
	done := make(chan result, 1)
	go func() {
		got, err := waiter.WaitApproval(ctx, a.ID)
		done <- result{got, err}
	}()
	// Escalation does not end the wait; only a final decision does.
	if err := decider.DecideApproval(ctx, a.ID, store.StatusEscalated, "reviewer", "human please"); err != nil {
		t.Fatal(err)
	}
	if err := decider.DecideApproval(ctx, a.ID, store.StatusApproved, "boss", "ok"); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.a.Status != store.StatusApproved || r.a.DecidedBy != "boss" {
		t.Fatalf("woke with %+v", r.a)
	}
	// An already decided approval returns at once.
	if got, err := waiter.WaitApproval(ctx, a.ID); err != nil || got.Status != store.StatusApproved {
		t.Fatalf("wait on decided: %+v %v", got, err)
	}
	if _, err := waiter.WaitApproval(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("wait unknown: %v", err)
	}
}

func testWaitApprovalBlocks(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	a := newApproval("alice")
	if err := s.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.DecideApproval(ctx, a.ID, store.StatusEscalated, "reviewer", ""); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.WaitApproval(short, a.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait on an escalated approval: %v", err)
	}
	// Close ends a wait.
	done := make(chan error, 1)
	go func() {
		_, err := s.WaitApproval(ctx, a.ID)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the waiter start (either order is correct)
	s.Close()
	if err := <-done; !errors.Is(err, store.ErrClosed) {
		t.Fatalf("wait across Close: %v", err)
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
