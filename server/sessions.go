package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// mcpSessionHeader is the streamable HTTP transport's session header.
const mcpSessionHeader = "Mcp-Session-Id"

// JSON-RPC error codes of the session layer (the implementation-defined
// server error range). An unknown session is -32001 with HTTP 404, as the
// MCP TypeScript SDK answers it, so clients that re-initialize on it do so
// here too.
const (
	codeUnknownSession = CodeSessionNotFound
	codeSessionLimit   = -32002
	codeInvalidRequest = -32600 // JSON-RPC's own "invalid request"
)

// Default MCP session limits (Options).
const (
	DefaultMCPSessionsPerToken = 64
	DefaultMCPSessions         = 4096
	DefaultMCPSessionTimeout   = 10 * time.Minute
)

// sessionOwner is who opened an MCP session: the agent of the URL it was
// opened on and the token that opened it. Every later request naming the
// session must come from the same owner.
type sessionOwner struct{ agent, token string }

// mcpSession is one open stateful MCP session.
type mcpSession struct {
	owner sessionOwner
	caps  string // the caps session its calls count against
	// channel is the conversation its calls are made in (X-Armory-Channel
	// at initialize), "" for none.
	channel string
}

// sessionTable binds MCP sessions to their owners and bounds how many are
// open, per token and in total. A session is counted from the moment its
// initialize is admitted (a reservation) until the SDK closes it (DELETE,
// idle timeout, shutdown). It is safe for concurrent use.
type sessionTable struct {
	perToken, total int           // limits
	idle            time.Duration // idle timeout (the SDK closes idle sessions)

	mu    sync.Mutex
	byID  map[string]*mcpSession
	count map[string]int // token id → sessions and reservations
	open  int            // sessions and reservations

	refusedToken, refusedTotal, probes prometheus.Counter
}

func newSessionTable(perToken, total int, idle time.Duration) *sessionTable {
	return &sessionTable{
		perToken: perToken, total: total, idle: idle,
		byID: map[string]*mcpSession{}, count: map[string]int{},
		refusedToken: prometheus.NewCounter(prometheus.CounterOpts{Name: "armory_mcp_sessions_refused_total",
			Help: "MCP initializes refused because a session limit was reached, by limit.", ConstLabels: prometheus.Labels{"limit": "per_token"}}),
		refusedTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "armory_mcp_sessions_refused_total",
			Help: "MCP initializes refused because a session limit was reached, by limit.", ConstLabels: prometheus.Labels{"limit": "total"}}),
		probes: prometheus.NewCounter(prometheus.CounterOpts{Name: "armory_mcp_session_probes_total",
			Help: "Requests that named an MCP session another agent or token opened (refused as unknown and audited)."}),
	}
}

// reserve counts a session about to be opened by own, or returns an error
// of kind KindBlocked when a limit is reached.
func (t *sessionTable) reserve(own sessionOwner) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.count[own.token] >= t.perToken {
		t.refusedToken.Inc()
		return armory.E("mcp", armory.KindBlocked, fmt.Sprintf("too many MCP sessions: this token has %d open, the limit per token is %d; close sessions you no longer use (HTTP DELETE) or wait for idle ones to expire", t.count[own.token], t.perToken))
	}
	if t.open >= t.total {
		t.refusedTotal.Inc()
		return armory.E("mcp", armory.KindBlocked, fmt.Sprintf("too many MCP sessions: the server has %d open, its limit is %d; try again when idle sessions have expired", t.open, t.total))
	}
	t.count[own.token]++
	t.open++
	return nil
}

// release gives back a reservation that opened no session.
func (t *sessionTable) release(own sessionOwner) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dec(own.token)
}

func (t *sessionTable) dec(token string) {
	if t.count[token]--; t.count[token] <= 0 {
		delete(t.count, token)
	}
	t.open--
}

// add turns a reservation into session id.
func (t *sessionTable) add(id string, ms *mcpSession) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.byID[id] = ms
}

// remove forgets session id and frees its count; removing an unknown id
// does nothing.
func (t *sessionTable) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms, ok := t.byID[id]
	if !ok {
		return
	}
	delete(t.byID, id)
	t.dec(ms.owner.token)
}

func (t *sessionTable) lookup(id string) (*mcpSession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	ms, ok := t.byID[id]
	return ms, ok
}

// counts returns the open sessions (reservations included) in total and
// per token.
func (t *sessionTable) counts() (int, map[string]int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	per := make(map[string]int, len(t.count))
	for k, v := range t.count {
		per[k] = v
	}
	return t.open, per
}

var (
	descSessions = prometheus.NewDesc("armory_mcp_sessions", "Open stateful MCP sessions (initializes in progress included).", nil, nil)
	descByToken  = prometheus.NewDesc("armory_mcp_sessions_by_token", "Open stateful MCP sessions of each token that has any.", []string{"token"}, nil)
	descLimit    = prometheus.NewDesc("armory_mcp_sessions_limit", "The MCP session limits, per token and in total.", []string{"limit"}, nil)
	descIdle     = prometheus.NewDesc("armory_mcp_session_idle_timeout_seconds", "How long an MCP session may go without a request before it is closed.", nil, nil)
)

// Describe and Collect make the table a Prometheus collector of its counts.
func (t *sessionTable) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSessions
	ch <- descByToken
	ch <- descLimit
	ch <- descIdle
}

func (t *sessionTable) Collect(ch chan<- prometheus.Metric) {
	open, per := t.counts()
	ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(open))
	for tok, n := range per {
		ch <- prometheus.MustNewConstMetric(descByToken, prometheus.GaugeValue, float64(n), tok)
	}
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(t.perToken), "per_token")
	ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(t.total), "total")
	ch <- prometheus.MustNewConstMetric(descIdle, prometheus.GaugeValue, t.idle.Seconds())
}

func (t *sessionTable) register(reg *prometheus.Registry) {
	reg.MustRegister(t, t.refusedToken, t.refusedTotal, t.probes)
}

// SessionRef names an MCP session without revealing its id: "mcp-" and
// the first 16 hex digits of the id's SHA-256. Logs, audit records and caps
// session names use it; the id itself is a credential of its client.
func SessionRef(id string) string {
	h := sha256.Sum256([]byte(id))
	return "mcp-" + hex.EncodeToString(h[:8])
}

// tokenKey carries the request's authenticated token (agentScoped).
type tokenKey struct{}

func requestToken(ctx context.Context) *store.Token {
	t, _ := ctx.Value(tokenKey{}).(*store.Token)
	return t
}

// sdkUser hands the go-sdk the owner of a request as the token's user, so
// that the SDK's own check (a session answers only the user that opened it)
// holds as well as the session table's.
func sdkUser(next http.Handler) http.Handler {
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		t := requestToken(ctx)
		if t == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: r.PathValue("id") + "\n" + t.ID}, nil
	}
	return auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
}

// sessionGuard binds stateful MCP sessions to their owners and bounds
// them. A request naming a session (Mcp-Session-Id, any method, any
// revision) reaches the SDK only when the session is open and its owner is
// the request's agent and token; otherwise it is answered as an unknown
// session (404, JSON-RPC error -32001), and when the session exists under
// another owner the request is audited as a probe. A request that would
// open a session (a POST without Mcp-Session-Id on a revision with
// sessions) is refused with 403 and JSON-RPC error -32002 when the token
// or the server is at its limit. Every response of a session carries its
// caps session name in X-Armory-Session.
func (s *Server) sessionGuard(next http.Handler) http.Handler {
	t := s.sessions
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := requestToken(r.Context())
		if tok == nil { // agentScoped always sets it
			s.writeError(w, r, errNoToken)
			return
		}
		own := sessionOwner{agent: r.PathValue("id"), token: tok.ID}
		if r.Method == http.MethodGet || listenRequest(r.Context()) {
			// An event stream (a session's GET stream, a sessionless
			// subscriptions/listen) lasts as long as its client keeps it:
			// it ends at its first write after the token is revoked,
			// instead of carrying that write.
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			w = &tokenBound{ResponseWriter: w, valid: func() bool { return s.stillValid(ctx, tok) }, end: cancel}
			r = r.WithContext(ctx)
		}
		if id := r.Header.Get(mcpSessionHeader); id != "" {
			ms, ok := t.lookup(id)
			if !ok || ms.owner != own {
				if ok {
					s.recordProbe(r, own, ms, id)
				}
				s.writeRPCError(w, r, http.StatusNotFound, codeUnknownSession, armory.E("mcp", armory.KindNotFound,
					"unknown MCP session: it expired, was closed, or was not opened by this token on this agent; initialize a new session"))
				return
			}
			w.Header().Set(SessionHeader, ms.caps)
			next.ServeHTTP(w, r)
			return
		}
		if listenRequest(r.Context()) {
			// A sessionless subscriptions/listen lasts as long as its
			// client keeps it, as a session does: it counts as one
			// while it is open.
			if err := t.reserve(own); err != nil {
				s.writeRPCError(w, r, httpStatus(armory.KindOf(err)), codeSessionLimit, err)
				return
			}
			defer t.release(own)
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost || sessionlessRequest(r) {
			next.ServeHTTP(w, r)
			return
		}
		caps := ""
		if name := r.Header.Get(SessionHeader); name != "" {
			caps = ScopeSession(own.agent, name)
			if len(caps) > pipeline.MaxSessionBytes || !utf8.ValidString(caps) {
				s.writeRPCError(w, r, http.StatusBadRequest, codeInvalidRequest, armory.E("mcp", armory.KindInvalid,
					fmt.Sprintf("the %s header must name a session in at most %d bytes of UTF-8 (agent prefix included)", SessionHeader, pipeline.MaxSessionBytes)))
				return
			}
		}
		channel := r.Header.Get(ChannelHeader)
		if len(channel) > pipeline.MaxChannelBytes || !utf8.ValidString(channel) {
			s.writeRPCError(w, r, http.StatusBadRequest, codeInvalidRequest, armory.E("mcp", armory.KindInvalid,
				fmt.Sprintf("the %s header must name a conversation in at most %d bytes of UTF-8", ChannelHeader, pipeline.MaxChannelBytes)))
			return
		}
		if err := t.reserve(own); err != nil {
			s.writeRPCError(w, r, httpStatus(armory.KindOf(err)), codeSessionLimit, err)
			return
		}
		sw := &sessionStart{ResponseWriter: w, s: s, own: own, caps: caps, channel: channel}
		defer func() {
			if !sw.registered {
				t.release(own)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// sessionStart watches the response to a request that may open a session:
// when the SDK sends the new session's id (in the response headers, before
// the client can use it) the session is bound to its owner.
type sessionStart struct {
	http.ResponseWriter
	s          *Server
	own        sessionOwner
	caps       string
	channel    string
	wrote      bool
	registered bool
}

func (sw *sessionStart) WriteHeader(code int) {
	if !sw.wrote {
		sw.wrote = true
		if id := sw.Header().Get(mcpSessionHeader); id != "" {
			if sw.caps == "" {
				sw.caps = ScopeSession(sw.own.agent, SessionRef(id))
			}
			sw.Header().Set(SessionHeader, sw.caps)
			sw.s.bindSession(id, &mcpSession{owner: sw.own, caps: sw.caps, channel: sw.channel})
			sw.registered = true
		}
	}
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *sessionStart) Write(b []byte) (int, error) {
	if !sw.wrote {
		sw.WriteHeader(http.StatusOK)
	}
	return sw.ResponseWriter.Write(b)
}

func (sw *sessionStart) Flush() {
	if !sw.wrote {
		sw.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(sw.ResponseWriter).Flush()
}

func (sw *sessionStart) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// bindSession records session id (its reservation becomes the session) and
// forgets it when the SDK closes it.
func (s *Server) bindSession(id string, ms *mcpSession) {
	s.sessions.add(id, ms)
	var ss *mcp.ServerSession
	if srv := s.agentMCP(ms.owner.agent); srv != nil {
		for c := range srv.Sessions() {
			if c.ID() == id {
				ss = c
				break
			}
		}
	}
	if ss == nil { // already closed
		s.sessions.remove(id)
		return
	}
	go func() {
		ss.Wait()
		s.sessions.remove(id)
	}()
}

// recordProbe audits a request that named a session of another owner. The
// record names the prober's agent and token id and the session by its ref.
func (s *Server) recordProbe(r *http.Request, own sessionOwner, ms *mcpSession, id string) {
	s.sessions.probes.Inc()
	ref := SessionRef(id)
	s.opts.Logger.Warn("refused a request naming another client's MCP session", "agent", own.agent, "token", own.token, "session", ref, "method", r.Method)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
	defer cancel()
	err := s.p.RecordProbe(ctx, pipeline.Probe{
		Agent: own.agent, Session: ScopeSession(own.agent, ref), What: "mcp.session", Stage: "session",
		Reasons: []string{fmt.Sprintf("token %s on agent %s sent %s with MCP session %s, which token %s opened on agent %s",
			own.token, own.agent, r.Method, ref, ms.owner.token, ms.owner.agent)},
		Result: "refused as an unknown session",
	})
	if err != nil {
		s.opts.Logger.Error("a session probe could not be audited", "agent", own.agent, "err", err)
	}
}

// rpcError is a JSON-RPC 2.0 error response.
type rpcError struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Kind armory.Kind `json:"kind"`
		} `json:"data"`
	} `json:"error"`
}

// writeRPCError answers an MCP request that the session layer refused with
// a JSON-RPC error object: the request's id when the body is one JSON-RPC
// request and the session is known (else null), code, the error's message and its kind in data.
func (s *Server) writeRPCError(w http.ResponseWriter, r *http.Request, status, code int, err error) {
	var e rpcError
	e.JSONRPC = "2.0"
	e.ID = json.RawMessage("null")
	// An unknown session is answered with id null, as the error is not
	// about one request: clients (the go-sdk's among them) then take the
	// 404 for the end of their session and initialize a new one.
	if code != codeUnknownSession && r.Method == http.MethodPost && r.Body != nil {
		b, _ := io.ReadAll(r.Body) // bounded by guardHTTP's MaxBytesReader
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if b = bytes.TrimSpace(b); len(b) > 0 && b[0] == '{' && json.Unmarshal(b, &req) == nil && len(req.ID) > 0 {
			e.ID = req.ID
		}
	}
	e.Error.Code = code
	e.Error.Message = armory.Message(err)
	e.Error.Data.Kind = armory.KindOf(err)
	writeJSON(w, status, e)
}

// redactSessions is a slog handler that replaces the value of every
// "session_id" attribute (the go-sdk logs session ids under that key) with
// its SessionRef, so that no session id reaches a log in clear.
type redactSessions struct{ slog.Handler }

func (h redactSessions) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactSessions) WithAttrs(as []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(as))
	for i, a := range as {
		red[i] = redactAttr(a)
	}
	return redactSessions{h.Handler.WithAttrs(red)}
}

func (h redactSessions) WithGroup(name string) slog.Handler {
	return redactSessions{h.Handler.WithGroup(name)}
}

func redactAttr(a slog.Attr) slog.Attr {
	if a.Key == "session_id" {
		if id := a.Value.Resolve().String(); id != "" {
			return slog.String("session", SessionRef(id))
		}
	}
	return a
}
