package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/store"
)

// TokenPrefix starts every Armory token, so that secret scanners can find
// leaked ones.
const TokenPrefix = "armory_"

// HashToken returns the hex SHA-256 of a token: what the store keeps.
func HashToken(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// CreateToken makes a new random token (32 bytes from crypto/rand), stores
// its hash and returns the secret, which exists nowhere else: show it once.
// An admin token has agent == ""; an agent token names its agent. Errors:
// the store's (see store.Tokens.CreateToken).
func CreateToken(ctx context.Context, st TokenStore, agent string, admin bool, name string) (string, *store.Token, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, armory.E("token", armory.KindInternal, "no randomness", err)
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	t := &store.Token{Hash: HashToken(secret), Admin: admin, Agent: agent, Name: name}
	if err := st.CreateToken(ctx, t); err != nil {
		return "", nil, store.Err("token", err)
	}
	return secret, t, nil
}

// EnsureAdminToken creates an admin token when the store has no unrevoked
// one, and returns its secret ("" when one existed).
func EnsureAdminToken(ctx context.Context, st TokenStore) (string, error) {
	ts, err := st.ListTokens(ctx)
	if err != nil {
		return "", store.Err("token", err)
	}
	for _, t := range ts {
		if t.Admin && t.RevokedAt.IsZero() {
			return "", nil
		}
	}
	secret, _, err := CreateToken(ctx, st, "", true, "created on first start")
	return secret, err
}

var (
	errNoToken    = armory.E("", armory.KindUnauthenticated, "a bearer token is required (Authorization: Bearer <token>; create one with: armory token create AGENT)")
	errBadToken   = armory.E("", armory.KindUnauthenticated, "the bearer token is not valid (unknown or revoked)")
	errNotAdmin   = armory.E("", armory.KindPermission, "this needs an admin token")
	errWrongAgent = armory.E("", armory.KindPermission, "this token does not reach that agent")
)

// authenticate returns the token of the request's bearer credentials. The
// secret is hashed at once and never logged; the stored hash is compared in
// constant time. A valid token is cached for Options.TokenCacheTTL (see
// tokenCache); a revoked one stops working within that time.
func (s *Server) authenticate(r *http.Request) (*store.Token, error) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if h == "" || !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, errNoToken
	}
	secret = strings.TrimSpace(secret)
	if secret == "" || len(secret) > 512 {
		return nil, errBadToken
	}
	return s.tokenByHash(r.Context(), HashToken(secret))
}

// tokenByHash returns the unrevoked token whose secret hashes to hash, from
// the token cache or the store.
func (s *Server) tokenByHash(ctx context.Context, hash string) (*store.Token, error) {
	epoch := s.tokens.currentEpoch()
	if t, ok := s.tokens.get(hash, epoch); ok {
		return t, nil
	}
	t, err := s.st.LookupToken(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errBadToken
	}
	if err != nil {
		return nil, store.Err("auth", err)
	}
	if subtle.ConstantTimeCompare([]byte(t.Hash), []byte(hash)) != 1 {
		return nil, errBadToken
	}
	s.tokens.put(t, epoch)
	return t, nil
}

// stillValid reports whether t, which authenticated a request that is
// still streaming, has not been revoked since (as authenticate would see it
// now, token cache included). A long response checks it before each write,
// so that a revoked token's streams carry nothing more.
func (s *Server) stillValid(ctx context.Context, t *store.Token) bool {
	_, err := s.tokenByHash(ctx, t.Hash)
	return err == nil
}

// tokenBound is the response writer of an event stream: before each write
// it checks that the request's token is still valid; once it is not, the
// write fails, end is called (it ends the stream) and nothing more is
// written.
type tokenBound struct {
	http.ResponseWriter
	valid func() bool
	end   func()

	mu      sync.Mutex
	revoked bool
}

func (w *tokenBound) check() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.revoked && !w.valid() {
		w.revoked = true
		w.end()
	}
	return !w.revoked
}

func (w *tokenBound) Write(p []byte) (int, error) {
	if !w.check() {
		return 0, errRevokedMidStream
	}
	return w.ResponseWriter.Write(p)
}

// FlushError sends what Write let through (it checked the token).
func (w *tokenBound) FlushError() error {
	w.mu.Lock()
	revoked := w.revoked
	w.mu.Unlock()
	if revoked {
		return errRevokedMidStream
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *tokenBound) Flush() { w.FlushError() }

func (w *tokenBound) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var errRevokedMidStream = errors.New("the token of this stream was revoked")

// admin wraps a handler that only admin tokens reach.
func (s *Server) admin(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !t.Admin {
			s.writeError(w, r, errNotAdmin)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
	}
}

// anyToken wraps a handler that every valid token reaches; the handler
// scopes what an agent token sees (requestToken).
func (s *Server) anyToken(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		next(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
	}
}

// agentScoped wraps a handler of /…/{id}/…: admin tokens reach every agent,
// an agent token only its own. A token for another agent gets the same 403
// whether or not the agent exists. The handler finds the token in the
// request's context (requestToken).
func (s *Server) agentScoped(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		id := r.PathValue("id")
		if !t.Admin && t.Agent != id {
			s.writeError(w, r, errWrongAgent)
			return
		}
		if _, err := s.h.Agent(id); err != nil {
			s.writeError(w, r, armory.E("", armory.KindNotFound, "unknown agent "+quote(id)))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), tokenKey{}, t)))
	})
}

func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}
