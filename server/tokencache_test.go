package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store/sqlite"
)

// TestTokenRevocationWithCache: a token revoked in the store stops working
// within Options.TokenCacheTTL (at once when caching is off), and neither
// unknown nor revoked tokens are ever cached.
func TestTokenRevocationWithCache(t *testing.T) {
	const path = "/api/agents/reviewer/tools"
	cases := []struct {
		name string
		ttl  time.Duration
	}{
		{"caching off", -1},
		{"short ttl", 100 * time.Millisecond},
		{"default ttl", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, server.Options{TokenCacheTTL: tc.ttl})
			secret, tok, err := server.CreateToken(context.Background(), e.st, "reviewer", false, "t")
			if err != nil {
				t.Fatal(err)
			}
			if st, body, _ := e.do("GET", path, secret, ""); st != 200 {
				t.Fatalf("valid token: %d %s", st, body)
			}
			if err := e.st.RevokeToken(context.Background(), tok.ID); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			for {
				st, _, _ := e.do("GET", path, secret, "")
				if st == 401 {
					break
				}
				if st != 200 {
					t.Fatalf("status %d", st)
				}
				if tc.ttl <= 0 {
					t.Fatal("a revoked token worked with caching off (the default)")
				}
				if time.Since(start) > 30*time.Second {
					t.Fatal("a revoked token kept working far past the TTL")
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Once refused it stays refused (the refusal is not cached as
			// a success, and the revoked token is not re-cached).
			for range 3 {
				if st, _, _ := e.do("GET", path, secret, ""); st != 401 {
					t.Fatalf("revoked token: %d", st)
				}
			}
		})
	}
}

// TestTokenCacheKeepsRevokedWithinTTL shows the other side of the
// contract: within the TTL a cached token is trusted without the store.
func TestTokenCacheKeepsRevokedWithinTTL(t *testing.T) {
	e := start(t, server.Options{TokenCacheTTL: time.Hour})
	secret, tok, err := server.CreateToken(context.Background(), e.st, "reviewer", false, "t")
	if err != nil {
		t.Fatal(err)
	}
	const path = "/api/agents/reviewer/tools"
	if st, _, _ := e.do("GET", path, secret, ""); st != 200 {
		t.Fatal(st)
	}
	e.st.RevokeToken(context.Background(), tok.ID)
	if st, _, _ := e.do("GET", path, secret, ""); st != 200 {
		t.Fatalf("cached token refused within its TTL: %d (is the cache used?)", st)
	}
	// A token first seen after revocation was never cached: refused.
	secret2, tok2, _ := server.CreateToken(context.Background(), e.st, "reviewer", false, "t2")
	e.st.RevokeToken(context.Background(), tok2.ID)
	if st, _, _ := e.do("GET", path, secret2, ""); st != 401 {
		t.Fatalf("revoked, never cached token: %d", st)
	}
}

// TestUnknownTokenNotCached: a refusal is not remembered, so a token
// created after a failed attempt with it works at once.
func TestUnknownTokenNotCached(t *testing.T) {
	e := start(t, server.Options{TokenCacheTTL: time.Hour})
	const path = "/api/agents/reviewer/tools"
	if st, _, _ := e.do("GET", path, "armory_not-yet", ""); st != 401 {
		t.Fatal(st)
	}
	secret, _, err := server.CreateToken(context.Background(), e.st, "reviewer", false, "t")
	if err != nil {
		t.Fatal(err)
	}
	if st, body, _ := e.do("GET", path, secret, ""); st != 200 {
		t.Fatalf("new token: %d %s", st, body)
	}
}

// TestTokenEpochCache: with the default options on SQLite, a checked token
// is cached by the store's token epoch: requests after the first do not
// read the store, and a revocation by ANOTHER Store on the same database
// (another process, armory token revoke) stops the token at its next
// request, including while requests keep coming.
func TestTokenEpochCache(t *testing.T) {
	const path = "/api/agents/reviewer/tools"
	e := start(t, server.Options{})
	secret, tok, err := server.CreateToken(context.Background(), e.st, "reviewer", false, "t")
	if err != nil {
		t.Fatal(err)
	}
	other, err := sqlite.OpenWith(e.db, sqlite.Options{}) // another process's store on the same file
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for range 3 {
		if st, body, _ := e.do("GET", path, secret, ""); st != 200 {
			t.Fatalf("valid token: %d %s", st, body)
		}
	}
	// Requests in flight while the token is revoked: once RevokeToken has
	// returned, no request that starts afterwards succeeds.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				e.do("GET", path, secret, "")
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	if err := other.RevokeToken(context.Background(), tok.ID); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if st, _, _ := e.do("GET", path, secret, ""); st != 401 {
			t.Fatalf("request %d after the revocation by another store: %d", i, st)
		}
	}
	close(stop)
	wg.Wait()
	// A token created by the other store works at once.
	secret2, _, err := server.CreateToken(context.Background(), other, "reviewer", false, "t2")
	if err != nil {
		t.Fatal(err)
	}
	if st, _, _ := e.do("GET", path, secret2, ""); st != 200 {
		t.Fatalf("token created elsewhere: %d", st)
	}
}
