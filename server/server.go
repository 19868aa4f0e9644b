// Package server is Armory's network surface: it serves a world's agents
// over the Model Context Protocol (streamable HTTP at /agents/{id}/mcp, and
// stdio), a REST API under /api, Server-Sent Events of the pipeline's events
// and Prometheus metrics.
//
// The server decides nothing about tools: every tool call, from MCP and
// from REST, goes through pipeline.Pipeline.Execute, the one enforcement path.
// What the server adds is transport safety (Host and Origin checks against
// DNS rebinding, body and time limits), authentication (bearer tokens,
// scoped to one agent or admin) and one error model: a JSON body
// {"error":{"kind","message"}} whose status comes from httpStatus (errors.go).
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/skills"
)

// Version is reported to MCP clients.
const Version = "0.1.0"

// Defaults of Options.EventReplay and Options.EventPeerLinger.
const (
	DefaultEventReplay     = 1024
	DefaultEventPeerLinger = time.Minute
)

// Options configure a Server. Zero fields take the defaults documented on
// each; New copies the struct, so later changes by the caller do not reach
// the server.
type Options struct {
	// Addr is the address the server listens on ("127.0.0.1:7411"); its
	// host is accepted in Host headers besides the loopback names.
	Addr string
	// AllowHosts are further Host header values to accept: a hostname
	// ("armory.internal") matches any port, "host:port" only that port.
	AllowHosts []string
	// AllowOrigins are origins ("https://console.example") allowed besides
	// the same origin, for requests that carry an Origin header.
	AllowOrigins []string
	// ApprovalWait bounds how long an MCP tools/call waits for an approval
	// before returning a pending result (default 60s).
	ApprovalWait time.Duration
	// MaxCallWait bounds the "wait" a REST call may ask for (default 10m).
	MaxCallWait time.Duration
	// MaxBodyBytes bounds every request body (default 1 MiB).
	MaxBodyBytes int64
	// ReadHeaderTimeout bounds reading request headers (default 10s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request (default 30s).
	ReadTimeout time.Duration
	// WriteTimeout bounds writing a response (default 30s). Tool calls (MCP
	// and REST) and event streams are exempt as a whole (a call is bounded
	// by its approval wait and the tool's own timeout, a stream by its
	// client), but each of their writes must finish within WriteTimeout of
	// its start: a client that stops reading has its response cut.
	WriteTimeout time.Duration
	// IdleTimeout bounds idle keep-alive connections (default 120s).
	IdleTimeout time.Duration
	// ShutdownTimeout bounds how long Serve drains in-flight tool calls
	// after its context ends (default 30s); calls still running then are
	// cancelled.
	ShutdownTimeout time.Duration
	// MCPSessionTimeout closes MCP sessions idle this long (default 10m,
	// DefaultMCPSessionTimeout): no POST of the session in that time (an
	// open GET stream does not count).
	MCPSessionTimeout time.Duration
	// MCPSessionsPerToken bounds the stateful MCP sessions one token has
	// open at once (default 64); an initialize past it is refused.
	MCPSessionsPerToken int
	// MCPSessions bounds the stateful MCP sessions open at once on the
	// server, every token together (default 4096).
	MCPSessions int
	// TokenCacheTTL is how long a bearer token the store confirmed is
	// trusted without reading the store again. The default (0, or
	// negative) trusts no token longer than its store allows: on a store
	// with a token epoch (SQLite: every revocation, by any process,
	// changes it) a checked token is cached while the epoch is unchanged,
	// so a revoked token stops working at its next request and a request
	// reads a small file instead of the store; on other stores every
	// request reads the store. A positive TTL caches on any store at the
	// price of a revoked token working for up to TTL longer in every
	// server on that store. Unknown and revoked tokens are never cached.
	TokenCacheTTL time.Duration
	// EventBuffer is each event-stream client's buffer (default 64
	// events); a client that falls that far behind is disconnected.
	EventBuffer int
	// EventReplay is how many of the latest events the server keeps for
	// clients that reconnect with Last-Event-ID (default 1024,
	// DefaultEventReplay; negative: none). A client that missed more, or
	// missed them while the server was not listening to the other
	// processes, gets a "gap" event instead.
	EventReplay int
	// EventPeerLinger is how long the server keeps listening to the other
	// processes' events after its last /api/events stream closes (default
	// 1m, DefaultEventPeerLinger; negative: it stops as the last stream
	// closes). A client that reconnects within it resumes without a gap.
	EventPeerLinger time.Duration
	// Logger logs requests that fail and server life events (default:
	// discard). Tokens are never logged.
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:7411"
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ApprovalWait, 60*time.Second)
	def(&o.MaxCallWait, 10*time.Minute)
	def(&o.ReadHeaderTimeout, 10*time.Second)
	def(&o.ReadTimeout, 30*time.Second)
	def(&o.WriteTimeout, 30*time.Second)
	def(&o.IdleTimeout, 120*time.Second)
	def(&o.ShutdownTimeout, 30*time.Second)
	def(&o.MCPSessionTimeout, DefaultMCPSessionTimeout)
	if o.MCPSessionsPerToken <= 0 {
		o.MCPSessionsPerToken = DefaultMCPSessionsPerToken
	}
	if o.MCPSessions <= 0 {
		o.MCPSessions = DefaultMCPSessions
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = 1 << 20
	}
	if o.EventBuffer <= 0 {
		o.EventBuffer = 64
	}
	switch {
	case o.EventReplay == 0:
		o.EventReplay = DefaultEventReplay
	case o.EventReplay < 0:
		o.EventReplay = 0
	}
	if o.EventPeerLinger == 0 {
		o.EventPeerLinger = DefaultEventPeerLinger
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Server serves one world's agents. It is safe for concurrent use.
type Server struct {
	p    *pipeline.Pipeline
	h    *roster.Roster
	st   Store
	opts Options

	mcpServers map[string]*mcp.Server // by agent; grows as agents are created (agentMCP)
	mcpMu      sync.RWMutex
	mcpHTTP    http.Handler
	sessions   *sessionTable
	events     *hub
	peers      peerWatch // the other processes' events, while events has a stream
	kinds      []string  // the kinds of event the engine raises (?kind=)
	tokens     *tokenCache
	metrics    *metrics
	calls      tracker
	handler    http.Handler
	hosts      hostPolicy
	agents     AgentControl  // the services module's agents, nil without it
	humans     Humans        // the services module's human API, nil without it
	skills     SkillsAPI     // the skills module's human API, nil without it
	channels   ChannelReader // the services module's conversations, nil without it
	// unwatch removes the registry watchers that keep the MCP servers'
	// tool lists current, and the event relay's subscription (Close).
	unwatch []func()
}

// New builds the server around e's pipeline, roster and store (an engine
// opened without its pipeline is KindInvalid) and subscribes to e's
// events. Errors: KindInvalid for a tool whose input schema is not an
// object schema (MCP requires one) or a bad Addr. The engine stays the
// caller's: close the server first, then the engine.
func New(e *engine.Engine, opts Options) (*Server, error) {
	if e == nil || e.Pipeline() == nil {
		return nil, armory.E("server.New", armory.KindInvalid, "the engine has no pipeline (opened with engine.Pipeline skipped)")
	}
	opts.defaults()
	s := &Server{p: e.Pipeline(), h: e.Roster(), st: e.Store(), opts: opts}
	if m, ok := e.Module(services.Name).(AgentControl); ok {
		s.agents = m
	}
	if m, ok := e.Module(services.Name).(Humans); ok {
		s.humans = m
	}
	if m, ok := e.Module(skills.Name).(SkillsAPI); ok {
		s.skills = m
	}
	if m, ok := e.Module(services.Name).(ChannelReader); ok {
		s.channels = m
	}
	s.events = newHub(opts.EventBuffer, opts.EventReplay)
	s.kinds = e.EventKinds()
	s.tokens = newTokenCache(opts.TokenCacheTTL, nil)
	if s.tokens == nil {
		s.tokens = newEpochTokenCache(s.st.TokenEpoch)
	}
	s.metrics = newMetrics(s.st)
	var err error
	if s.hosts, err = newHostPolicy(opts.Addr, opts.AllowHosts, opts.AllowOrigins); err != nil {
		return nil, err
	}
	s.unwatch = append(s.unwatch, e.Subscribe(s.onEvent))
	s.peers.subscribe = e.SubscribePeers
	s.peers.linger = opts.EventPeerLinger
	s.unwatch = append(s.unwatch, s.peers.close)
	if err := s.buildMCP(); err != nil {
		s.Close()
		return nil, err
	}
	s.handler = s.routes()
	return s, nil
}

// Close detaches the server from its roster's registries and the engine's
// events: tools registered or removed later no longer change its MCP tool
// lists. It does not stop
// Serve (cancel its context) and may be called more than once.
func (s *Server) Close() {
	s.mcpMu.Lock() // an agent's MCP server built meanwhile adds a watcher
	defer s.mcpMu.Unlock()
	for _, f := range s.unwatch {
		f()
	}
	s.unwatch = nil
}

// Pipeline returns the server's pipeline.
func (s *Server) Pipeline() *pipeline.Pipeline { return s.p }

// Handler returns the server's HTTP handler (every route, with the Host,
// Origin and body checks).
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting connections, ends event streams, waits up to ShutdownTimeout
// for in-flight tool calls to finish, then cancels what still runs and
// closes every connection. It returns nil after a shutdown caused by ctx,
// or the error that stopped serving.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.opts.ReadHeaderTimeout,
		ReadTimeout:       s.opts.ReadTimeout,
		WriteTimeout:      s.opts.WriteTimeout,
		IdleTimeout:       s.opts.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return base },
		ErrorLog:          slog.NewLogLogger(s.opts.Logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.opts.Logger.Info("shutting down", "in_flight_calls", s.calls.count())
	s.events.close()
	// Shutdown stops accepting and waits for active requests; the grace
	// beyond ShutdownTimeout lets cancelled calls write their audit entries
	// and responses.
	const grace = 10 * time.Second
	shut := make(chan struct{})
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout+grace)
		defer cancel()
		srv.Shutdown(sctx)
		close(shut)
	}()
	if !s.calls.wait(s.opts.ShutdownTimeout) {
		s.opts.Logger.Warn("shutdown: cancelling calls still running", "calls", s.calls.count())
	}
	// Calls are done (or out of time): end what remains (MCP streams, and
	// calls past the drain time, whose finish entries are still written).
	cancelBase()
	select {
	case <-shut:
	case <-time.After(grace):
	}
	srv.Close()
	return nil
}

// tracker counts in-flight tool calls.
type tracker struct {
	mu sync.Mutex
	n  int
}

func (t *tracker) begin() { t.mu.Lock(); t.n++; t.mu.Unlock() }
func (t *tracker) end()   { t.mu.Lock(); t.n--; t.mu.Unlock() }
func (t *tracker) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}

// wait reports whether the count reached zero within d.
func (t *tracker) wait(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for t.count() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// onEvent receives this process's pipeline's events: they count in its
// metrics and stream to its event clients.
func (s *Server) onEvent(e pipeline.Event) {
	if e.Kind == pipeline.EventLimitReached {
		s.metrics.limits.Inc()
	}
	s.events.publish(e)
}

// ---- errors ----

// errorBody is the one error model of the HTTP surface.
type errorBody struct {
	Error struct {
		Kind    armory.Kind `json:"kind"`
		Message string      `json:"message"`
	} `json:"error"`
}

// writeError writes err as {"error":{"kind","message"}} with the status of
// its kind (httpStatus). A request body over the limit is KindTooLarge (413).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		err = armory.E("", armory.KindTooLarge, fmt.Sprintf("the request body is larger than %d bytes", mb.Limit))
	}
	kind := armory.KindOf(err)
	status := httpStatus(kind)
	if kind == armory.KindUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="armory"`)
	}
	if status >= 500 {
		s.opts.Logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	var b errorBody
	b.Error.Kind = kind
	b.Error.Message = armory.Message(err)
	writeJSON(w, status, b)
}
