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

// tokenCache remembers the tokens the store returned for a hash, so that a
// client's every request does not read the store. Only valid tokens are
// cached: an unknown or revoked token is looked up in the store every time
// (a token created meanwhile works at once, and guesses cannot fill the
// cache). It works in one of two modes:
//
//   - by epoch (the default; store.Tokens.TokenEpoch: SQLite has one,
//     Postgres none, so there nothing is cached by epoch): an entry is valid while the store's token epoch, which every
//     revocation changes (in any process), is the one it was read under;
//     each request reads the epoch (a few bytes) instead of the store, and a revoked token
//     stops working at its next request. An entry is kept only when the
//     epoch was the same before and after the store read, so a lookup that
//     raced a revocation is not cached;
//   - by time (--token-cache-ttl): an entry is trusted for ttl, so a token
//     revoked meanwhile keeps working until its entry expires.
//
// It is safe for concurrent use.
type tokenCache struct {
	ttl   time.Duration
	now   func() time.Time
	epoch func() (string, error) // epoch mode when not nil

	mu      sync.Mutex
	entries map[string]tokenEntry
}

type tokenEntry struct {
	tok     store.Token
	expires time.Time
	epoch   string
}

// newEpochTokenCache returns a cache in epoch mode over epoch.
func newEpochTokenCache(epoch func() (string, error)) *tokenCache {
	return &tokenCache{epoch: epoch, entries: map[string]tokenEntry{}}
}

// currentEpoch returns the store's token epoch, or "" when the cache is not
// in epoch mode or the epoch cannot be read (then nothing is cached or
// trusted).
func (c *tokenCache) currentEpoch() string {
	if c == nil || c.epoch == nil {
		return ""
	}
	e, err := c.epoch()
	if err != nil {
		return ""
	}
	return e
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

// get returns a copy of the cached token of hash when its entry is still
// valid: its epoch is epoch (the current one; "" never matches), or, by
// time, it has not expired. A nil cache has nothing.
func (c *tokenCache) get(hash, epoch string) (*store.Token, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok {
		return nil, false
	}
	if c.epoch != nil {
		if epoch == "" || e.epoch != epoch {
			delete(c.entries, hash)
			return nil, false
		}
	} else if !c.now().Before(e.expires) {
		delete(c.entries, hash)
		return nil, false
	}
	t := e.tok
	return &t, true
}

// put caches a copy of t (which the store just returned) under its hash:
// by time for ttl; by epoch only when before, the epoch read before the
// store lookup, is not "" and is still current. At the bound it first drops
// expired (or stale) entries, then, if still full, an arbitrary one.
func (c *tokenCache) put(t *store.Token, before string) {
	if c == nil || t == nil {
		return
	}
	if c.epoch != nil && (before == "" || c.currentEpoch() != before) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var now time.Time
	if c.now != nil {
		now = c.now()
	}
	if _, ok := c.entries[t.Hash]; !ok && len(c.entries) >= maxCachedTokens {
		for h, e := range c.entries {
			if (c.epoch == nil && !now.Before(e.expires)) || (c.epoch != nil && e.epoch != before) {
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
	c.entries[t.Hash] = tokenEntry{tok: *t, expires: now.Add(c.ttl), epoch: before}
}
