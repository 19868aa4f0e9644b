package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/armory-dev/armory/store"
)

func tokenHash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func testTokens(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	if ts, err := s.ListTokens(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("fresh store: %v %v", ts, err)
	}
	admin := &store.Token{Hash: tokenHash("admin-secret"), Admin: true, Name: "first"}
	if err := s.CreateToken(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if admin.ID == "" || admin.CreatedAt.IsZero() {
		t.Fatalf("create did not fill ID and CreatedAt: %+v", admin)
	}
	agent := &store.Token{ID: "tok-agent", Hash: tokenHash("agent-secret"), Agent: "architect"}
	if err := s.CreateToken(ctx, agent); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		tok  *store.Token
		want error
	}{
		{"short hash", &store.Token{Hash: "abc", Admin: true}, store.ErrInvalid},
		{"upper-case hash", &store.Token{Hash: fmt.Sprintf("%064X", 0xabcdef), Admin: true}, store.ErrInvalid},
		{"neither admin nor agent", &store.Token{Hash: tokenHash("x")}, store.ErrInvalid},
		{"both admin and agent", &store.Token{Hash: tokenHash("y"), Admin: true, Agent: "a"}, store.ErrInvalid},
		{"duplicate hash", &store.Token{Hash: tokenHash("agent-secret"), Agent: "reviewer"}, store.ErrConflict},
		{"duplicate id", &store.Token{ID: "tok-agent", Hash: tokenHash("z"), Agent: "reviewer"}, store.ErrConflict},
	} {
		if err := s.CreateToken(ctx, tc.tok); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}

	got, err := s.LookupToken(ctx, tokenHash("agent-secret"))
	if err != nil || got.ID != "tok-agent" || got.Agent != "architect" || got.Admin || !got.RevokedAt.IsZero() || got.Hash != tokenHash("agent-secret") {
		t.Fatalf("lookup agent token: %+v %v", got, err)
	}
	if !got.CreatedAt.Equal(agent.CreatedAt) {
		t.Errorf("created_at round trip: %v != %v", got.CreatedAt, agent.CreatedAt)
	}
	if got, err := s.LookupToken(ctx, tokenHash("admin-secret")); err != nil || !got.Admin || got.Name != "first" {
		t.Fatalf("lookup admin token: %+v %v", got, err)
	}
	if _, err := s.LookupToken(ctx, tokenHash("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown hash: %v", err)
	}
	if _, err := s.LookupToken(ctx, "' OR 1=1 --"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("injection-shaped hash: %v", err)
	}

	ts, err := s.ListTokens(ctx)
	if err != nil || len(ts) != 2 || ts[0].ID != admin.ID || ts[1].ID != "tok-agent" {
		t.Fatalf("list: %v %v", ts, err)
	}

	if err := s.RevokeToken(ctx, "tok-agent"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LookupToken(ctx, tokenHash("agent-secret")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a revoked token must not be found: %v", err)
	}
	if err := s.RevokeToken(ctx, "tok-agent"); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second revoke: %v", err)
	}
	if err := s.RevokeToken(ctx, "no-such"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke unknown: %v", err)
	}
	ts, _ = s.ListTokens(ctx)
	if len(ts) != 2 || ts[1].RevokedAt.IsZero() || !ts[0].RevokedAt.IsZero() {
		t.Fatalf("list after revoke: %+v %+v", ts[0], ts[1])
	}
	// The hash of a revoked token stays taken: it can never come back.
	if err := s.CreateToken(ctx, &store.Token{Hash: tokenHash("agent-secret"), Agent: "architect"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("reusing a revoked hash: %v", err)
	}

	s.Close()
	if _, err := s.LookupToken(ctx, tokenHash("admin-secret")); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed lookup: %v", err)
	}
	if err := s.CreateToken(ctx, &store.Token{Hash: tokenHash("late"), Admin: true}); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed create: %v", err)
	}
}

// testTokensRace: a token created through one Store is seen by another,
// and of many concurrent revokes through two Stores exactly one wins.
func testTokensRace(t *testing.T, open Opener) {
	ctx := ctxT(t)
	a, b := open(t), open(t)
	tok := &store.Token{Hash: tokenHash("shared"), Agent: "scribe"}
	if err := a.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if got, err := b.LookupToken(ctx, tok.Hash); err != nil || got.ID != tok.ID {
		t.Fatalf("other store: %+v %v", got, err)
	}
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		won, lost int
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := []store.Store{a, b}[i%2].RevokeToken(ctx, tok.ID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrConflict):
				lost++
			default:
				t.Errorf("revoke: %v", err)
			}
		}()
	}
	wg.Wait()
	if won != 1 || lost != 7 {
		t.Fatalf("revokes: %d won, %d lost; want 1 and 7", won, lost)
	}
	if _, err := a.LookupToken(ctx, tok.Hash); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked through the other store: %v", err)
	}
}

// testTokenEpoch: a backend that has a token epoch ("" is none) changes it
// with every revocation, through this Store or another one on the database,
// and keeps it while nothing is revoked.
func testTokenEpoch(t *testing.T, open Opener) {
	ctx := ctxT(t)
	a, b := open(t), open(t)
	epoch := func() string {
		t.Helper()
		e, err := a.TokenEpoch()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	tok := &store.Token{Hash: tokenHash("epoch"), Agent: "scribe"}
	if err := a.CreateToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	e0 := epoch()
	if e := epoch(); e != e0 {
		t.Fatalf("epoch changed without a revocation: %q then %q", e0, e)
	}
	if err := b.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	e1 := epoch()
	if e0 == "" && e1 == "" {
		return // no epoch: nothing may be cached by it
	}
	if e0 == e1 {
		t.Fatalf("epoch %q unchanged after another Store revoked a token", e0)
	}
	if err := a.RevokeToken(ctx, tok.ID); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second revocation: %v", err)
	}
}
