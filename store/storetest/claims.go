package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
)

// claims returns s as store.RunClaims; every backend implements it.
func claims(t *testing.T, s store.Store) store.RunClaims {
	t.Helper()
	rc, ok := s.(store.RunClaims)
	if !ok {
		t.Fatalf("%T does not implement store.RunClaims", s)
	}
	return rc
}

// approved creates an approval and approves it.
func approved(t *testing.T, ctx context.Context, s store.Store) string {
	t.Helper()
	a := &store.Approval{Agent: "dev", Tool: "deploy", Args: json.RawMessage(`{"env":"prod"}`), Reason: "confirm", Level: "confirm"}
	if err := s.CreateApproval(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.DecideApproval(ctx, a.ID, store.StatusApproved, "human", "ok"); err != nil {
		t.Fatal(err)
	}
	return a.ID
}

// waitExpired waits (bounded) until id's claim reads as expired.
func waitExpired(t *testing.T, ctx context.Context, rc store.RunClaims, id string) {
	t.Helper()
	for {
		c, err := rc.InspectRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if c.Expired {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("claim %s never expired: %+v", id, c)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

func result(t *testing.T, ctx context.Context, s store.Store, id string) string {
	t.Helper()
	a, err := s.GetApproval(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return string(a.Result)
}

// testRunClaims: one holder across two Stores on one database; renew,
// finish and the refusals of everyone else.
func testRunClaims(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	a, b := claims(t, s1), claims(t, s2)

	// Only an approved approval without a result can be claimed.
	if _, _, err := a.ClaimRun(ctx, "nope", "A", "call-1", time.Hour); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown approval: %v", err)
	}
	pending := &store.Approval{Agent: "dev", Tool: "deploy"}
	if err := s1.CreateApproval(ctx, pending); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.ClaimRun(ctx, pending.ID, "A", "call-1", time.Hour); !errors.Is(err, store.ErrConflict) {
		t.Errorf("pending approval: %v", err)
	}
	id := approved(t, ctx, s1)
	for _, bad := range []struct {
		holder, call string
		ttl          time.Duration
	}{{"", "c", time.Hour}, {"A", "", time.Hour}, {"A", "c", 0}, {"A", "c", -time.Second}} {
		if _, _, err := a.ClaimRun(ctx, id, bad.holder, bad.call, bad.ttl); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("ClaimRun(%+v): %v", bad, err)
		}
	}
	if _, err := a.InspectRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("inspect before any claim: %v", err)
	}
	if err := a.RenewRun(ctx, id, "A", time.Hour); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("renew before any claim: %v", err)
	}

	c, won, err := a.ClaimRun(ctx, id, "A", "call-1", time.Hour)
	if err != nil || !won || c.Holder != "A" || c.CallID != "call-1" || c.State != store.RunRunning || c.Expired || !c.Expires.After(c.ClaimedAt) {
		t.Fatalf("first claim: %+v %v %v", c, won, err)
	}
	// The other Store (another process) loses, and sees who holds it.
	c, won, err = b.ClaimRun(ctx, id, "B", "call-2", time.Hour)
	if err != nil || won || c.Holder != "A" || c.CallID != "call-1" {
		t.Fatalf("second claim: %+v %v %v", c, won, err)
	}
	if err := a.RenewRun(ctx, id, "A", time.Hour); err != nil {
		t.Errorf("holder renews: %v", err)
	}
	if err := b.RenewRun(ctx, id, "B", time.Hour); !errors.Is(err, store.ErrConflict) {
		t.Errorf("another renews: %v", err)
	}
	if _, err := b.InterruptRun(ctx, id, "B", json.RawMessage(`"interrupted"`)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("interrupting a live lease: %v", err)
	}
	if err := b.FinishRun(ctx, id, "B", json.RawMessage(`"B's"`)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("another finishes: %v", err)
	}
	if got := result(t, ctx, s2, id); got != "" {
		t.Fatalf("a result before the holder finished: %s", got)
	}
	if err := a.FinishRun(ctx, id, "A", json.RawMessage(`{"status":"success"}`)); err != nil {
		t.Fatalf("holder finishes: %v", err)
	}
	if got := result(t, ctx, s2, id); got != `{"status":"success"}` {
		t.Fatalf("stored result: %s", got)
	}
	c, err = b.InspectRun(ctx, id)
	if err != nil || c.State != store.RunFinished || c.Holder != "A" || c.Expired || c.ResolvedAt.IsZero() {
		t.Fatalf("finished claim: %+v %v", c, err)
	}
	// Nothing changes a finished claim, and no one claims it again.
	if err := a.FinishRun(ctx, id, "A", json.RawMessage(`"again"`)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("finish twice: %v", err)
	}
	if err := a.RenewRun(ctx, id, "A", time.Hour); !errors.Is(err, store.ErrConflict) {
		t.Errorf("renew a finished claim: %v", err)
	}
	if _, won, err := b.ClaimRun(ctx, id, "B", "call-3", time.Hour); won || err != nil {
		t.Errorf("claim a finished run: %v %v", won, err)
	}
	if got := result(t, ctx, s1, id); got != `{"status":"success"}` {
		t.Fatalf("result changed: %s", got)
	}
	if err := s2.SetApprovalResult(ctx, id, json.RawMessage(`"over"`)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("SetApprovalResult over a finished run: %v", err)
	}
	// An approval whose result is stored cannot be claimed.
	done := approved(t, ctx, s1)
	if err := s1.SetApprovalResult(ctx, done, json.RawMessage(`"ran"`)); err != nil {
		t.Fatal(err)
	}
	if _, won, err := b.ClaimRun(ctx, done, "B", "call-4", time.Hour); won || !errors.Is(err, store.ErrConflict) {
		t.Errorf("claim an approval with a result: %v %v", won, err)
	}
}

// testRunClaimsExpiry: a claim whose lease ends is interrupted by another
// Store, once; its late holder can neither renew nor finish it. A holder
// that renews in time keeps it.
func testRunClaimsExpiry(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	a, b := claims(t, s1), claims(t, s2)

	// A lapsed lease renewed by its holder before anyone took it over is
	// live again.
	kept := approved(t, ctx, s1)
	if _, won, err := a.ClaimRun(ctx, kept, "A", "call-k", time.Millisecond); !won || err != nil {
		t.Fatal(won, err)
	}
	waitExpired(t, ctx, b, kept)
	if err := a.RenewRun(ctx, kept, "A", time.Hour); err != nil {
		t.Fatalf("late renew: %v", err)
	}
	if c, err := b.InspectRun(ctx, kept); err != nil || c.Expired {
		t.Fatalf("after renew: %+v %v", c, err)
	}
	if _, err := b.InterruptRun(ctx, kept, "B", json.RawMessage(`"x"`)); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("interrupt after renew: %v", err)
	}

	id := approved(t, ctx, s1)
	if _, won, err := a.ClaimRun(ctx, id, "A", "call-1", time.Millisecond); !won || err != nil {
		t.Fatal(won, err)
	}
	waitExpired(t, ctx, b, id)
	// An expired claim is still not claimable: it is resolved, not rerun.
	if c, won, err := b.ClaimRun(ctx, id, "B", "call-2", time.Hour); won || err != nil || !c.Expired || c.Holder != "A" {
		t.Fatalf("claim over an expired lease: %+v %v %v", c, won, err)
	}
	if _, err := b.InterruptRun(ctx, id, "", json.RawMessage(`"x"`)); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("no resolver: %v", err)
	}
	const interrupted = `{"status":"interrupted"}`
	c, err := b.InterruptRun(ctx, id, "B", json.RawMessage(interrupted))
	if err != nil || c.State != store.RunInterrupted || c.Holder != "A" || c.CallID != "call-1" || c.ResolvedBy != "B" || c.Expired || c.ResolvedAt.IsZero() {
		t.Fatalf("interrupt: %+v %v", c, err)
	}
	if got := result(t, ctx, s1, id); got != interrupted {
		t.Fatalf("stored result: %s", got)
	}
	// The late holder lost it: it can neither renew nor store its result.
	if err := a.RenewRun(ctx, id, "A", time.Hour); !errors.Is(err, store.ErrConflict) {
		t.Errorf("renew after interruption: %v", err)
	}
	if err := a.FinishRun(ctx, id, "A", json.RawMessage(`"late"`)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("finish after interruption: %v", err)
	}
	if _, err := a.InterruptRun(ctx, id, "C", json.RawMessage(`"again"`)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("interrupt twice: %v", err)
	}
	if got := result(t, ctx, s2, id); got != interrupted {
		t.Fatalf("result changed: %s", got)
	}
	if _, err := b.InterruptRun(ctx, "nope", "B", nil); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("interrupt unknown: %v", err)
	}
}

// testRunClaimsRace: many callers on two Stores claim one approval at once
// (exactly one wins), then many interrupt its expired claim at once
// (exactly one resolves it, and the result is stored once).
func testRunClaimsRace(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.RunClaims{claims(t, open(t)), claims(t, open(t))}
	s := open(t)
	id := approved(t, ctx, s)
	const n = 16
	var wins, interrupts atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, won, err := stores[i%2].ClaimRun(ctx, id, "holder-"+string(rune('a'+i)), "call", time.Millisecond)
			if err != nil {
				t.Error(err)
			}
			if won {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Fatalf("%d callers won the claim", wins.Load())
	}
	waitExpired(t, ctx, stores[0], id)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := stores[i%2].InterruptRun(ctx, id, "resolver", json.RawMessage(`{"by":`+string(rune('0'+i%10))+`}`))
			switch {
			case err == nil:
				interrupts.Add(1)
			case !errors.Is(err, store.ErrConflict):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if interrupts.Load() != 1 {
		t.Fatalf("%d callers interrupted the claim", interrupts.Load())
	}
	if c, err := stores[1].InspectRun(ctx, id); err != nil || c.State != store.RunInterrupted {
		t.Fatalf("%+v %v", c, err)
	}
}
