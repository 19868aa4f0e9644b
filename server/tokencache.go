package server

import (
	"sync"
	"time"

	"github.com/armory-dev/armory/store"
)

// maxCachedTokens bounds the token cache. Only tokens the store confirmed
// are cached, so the bound is reached only by that many distinct valid
// tokens in one TTL.
const maxCachedTokens = 1024

// tokenCache remembers, for a bounded time, the tokens the store returned
// for a hash, so that a client's every request does not read the store.
// Only valid tokens are cached: an unknown or revoked token is looked up in
// the store every time (a token created meanwhile works at once, and
// guesses cannot fill the cache). A token revoked in the store (by any
// process) stops working once its entry expires, within ttl of the lookup
// that cached it. It is safe for concurrent use.
type tokenCache struct {
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]tokenEntry
}

type tokenEntry struct {
	tok     store.Token
	expires time.Time
}

// newTokenCache returns a cache keeping entries for ttl, or nil (no
// caching) for ttl ≤ 0.
func newTokenCache(ttl time.Duration, now func() time.Time) *tokenCache {
	if ttl <= 0 {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return &tokenCache{ttl: ttl, now: now, entries: map[string]tokenEntry{}}
}

// get returns a copy of the cached token of hash when its entry has not
// expired. A nil cache has nothing.
func (c *tokenCache) get(hash string) (*store.Token, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok {
		return nil, false
	}
	if !c.now().Before(e.expires) {
		delete(c.entries, hash)
		return nil, false
	}
	t := e.tok
	return &t, true
}

// put caches a copy of t (which the store just returned) under its hash
// for ttl. At the bound it first drops expired entries, then, if still
// full, an arbitrary one.
func (c *tokenCache) put(t *store.Token) {
	if c == nil || t == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[t.Hash]; !ok && len(c.entries) >= maxCachedTokens {
		for h, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, h)
			}
		}
		for h := range c.entries {
			if len(c.entries) < maxCachedTokens {
				break
			}
			delete(c.entries, h)
		}
	}
	c.entries[t.Hash] = tokenEntry{tok: *t, expires: now.Add(c.ttl)}
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
