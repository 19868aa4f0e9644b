package server

import (
	"fmt"
	"testing"
	"time"

	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

func TestTokenCache(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	clock := func() time.Time { return now }
	tok := &store.Token{ID: "t1", Hash: HashToken("armory_a"), Agent: "dev"}
	cases := []struct {
		name  string
		ttl   time.Duration
		after time.Duration // since the put
		hit   bool
	}{
		{"fresh entry", time.Second, 0, true},
		{"just before expiry", time.Second, time.Second - time.Nanosecond, true},
		{"at expiry", time.Second, time.Second, false},
		{"after expiry", time.Second, time.Hour, false},
		{"disabled (negative ttl)", -1, 0, false},
		{"disabled (zero ttl)", 0, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now = t0
			c := newTokenCache(tc.ttl, clock)
			c.put(tok, "")
			now = t0.Add(tc.after)
			got, ok := c.get(tok.Hash, "")
			if ok != tc.hit {
				t.Fatalf("hit = %v, want %v", ok, tc.hit)
			}
			if ok && (got.ID != "t1" || got.Agent != "dev") {
				t.Fatalf("got %+v", got)
			}
			if _, ok := c.get(HashToken("armory_other"), ""); ok {
				t.Fatal("a hash never put was found")
			}
		})
	}
}

func TestTokenCacheReturnsCopies(t *testing.T) {
	c := newTokenCache(time.Hour, nil)
	tok := &store.Token{ID: "t1", Hash: HashToken("armory_a"), Agent: "dev"}
	c.put(tok, "")
	tok.Admin = true // the caller's value changes after the put
	got, _ := c.get(tok.Hash, "")
	got.Agent = "ops" // and a reader changes what it got
	again, ok := c.get(tok.Hash, "")
	if !ok || again.Admin || again.Agent != "dev" {
		t.Fatalf("cache entry was changed through a pointer: %+v", again)
	}
}

// TestTokenCacheBound: the cache never holds more than maxCachedTokens
// entries, expired ones are dropped first, and the newest entry is kept.
func TestTokenCacheBound(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	now := t0
	c := newTokenCache(time.Minute, func() time.Time { return now })
	for i := range maxCachedTokens {
		c.put(&store.Token{ID: fmt.Sprint(i), Hash: HashToken(fmt.Sprint("old", i)), Agent: "dev"}, "")
	}
	if n := c.len(); n != maxCachedTokens {
		t.Fatalf("%d entries, want %d", n, maxCachedTokens)
	}
	now = t0.Add(2 * time.Minute) // every entry has expired
	c.put(&store.Token{ID: "new", Hash: HashToken("new"), Agent: "dev"}, "")
	if n := c.len(); n != 1 {
		t.Fatalf("%d entries after a put at the bound with all expired, want 1", n)
	}
	for i := range 3 * maxCachedTokens {
		c.put(&store.Token{ID: fmt.Sprint(i), Hash: HashToken(fmt.Sprint("live", i)), Agent: "dev"}, "")
		if n := c.len(); n > maxCachedTokens {
			t.Fatalf("%d entries, over the bound %d", n, maxCachedTokens)
		}
	}
	last := HashToken(fmt.Sprint("live", 3*maxCachedTokens-1))
	if _, ok := c.get(last, ""); !ok {
		t.Fatal("the newest entry was evicted")
	}
}

// TestHubPublishWithoutSubscribersIsFree: with no event stream open, the
// events every call publishes are not encoded.
func TestHubPublishWithoutSubscribersIsFree(t *testing.T) {
	h := newHub(4, 16)
	e := pipeline.Event{Kind: pipeline.EventCallFinished, Agent: "dev", Message: "call x"}
	if n := testing.AllocsPerRun(100, func() { h.publish(e) }); n != 0 {
		t.Fatalf("publish with no subscribers: %v allocations, want 0", n)
	}
	sub, _, _ := h.subscribe(eventFilter{}, nil)
	h.publish(e)
	if m := string(<-sub.ch); m == "" {
		t.Fatal("subscriber got nothing")
	}
}

// TestEpochTokenCache: in epoch mode an entry is valid only under the epoch
// it was read under, and a lookup that raced an epoch change is not kept.
func TestEpochTokenCache(t *testing.T) {
	epoch, fail := "e1", false
	c := newEpochTokenCache(func() (string, error) {
		if fail {
			return "", fmt.Errorf("stat failed")
		}
		return epoch, nil
	})
	tok := &store.Token{ID: "t1", Hash: HashToken("armory_a"), Agent: "dev"}

	c.put(tok, c.currentEpoch())
	if _, ok := c.get(tok.Hash, c.currentEpoch()); !ok {
		t.Fatal("miss under the same epoch")
	}
	epoch = "e2" // a revocation somewhere
	if _, ok := c.get(tok.Hash, c.currentEpoch()); ok {
		t.Fatal("hit after the epoch changed")
	}
	if c.len() != 0 {
		t.Fatal("stale entry kept")
	}
	// A lookup that started under e2 but finished under e3 is not kept.
	before := c.currentEpoch()
	epoch = "e3"
	c.put(tok, before)
	if c.len() != 0 {
		t.Fatal("a lookup that raced a revocation was cached")
	}
	// No epoch (it cannot be read): nothing is cached or trusted.
	c.put(tok, c.currentEpoch())
	fail = true
	if _, ok := c.get(tok.Hash, c.currentEpoch()); ok {
		t.Fatal("trusted without an epoch")
	}
	c.put(tok, c.currentEpoch())
	if c.len() != 0 {
		t.Fatal("cached without an epoch")
	}
}

// len returns the number of entries (expired ones included).
func (c *tokenCache) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
