package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
)

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

func mustCreateApproval(t *testing.T, ctx context.Context, s store.Store, a *store.Approval) {
	t.Helper()
	if err := s.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
}

func testApprovalLifecycle(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	a := newApproval("alice")
	mustCreateApproval(t, ctx, s, a)
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
	mustCreateApproval(t, ctx, s, b)
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
	mustCreateApproval(t, ctx, s, a)
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
	mustCreateApproval(t, ctx, stores[0], a)
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
	mustCreateApproval(t, ctx, waiter, a)
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
	mustCreateApproval(t, ctx, s, a)
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
