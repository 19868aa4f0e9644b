// Package upstream imports the tools of upstream MCP servers (world-config
// "mcp_servers:") as armory tools named mcp.<server>.<tool>, governed by the
// one pipeline like any tool.
//
// Lifecycle: Start connects to every server when the world loads (stdio
// servers are started as processes; HTTP servers are reached with the
// streamable transport), each bounded by Options.StartTimeout, and lists its
// tools. A server that fails is reported (Set.Unavailable) and does not fail
// the world. A stdio server that exits later is restarted with bounded
// exponential backoff; calls fail cleanly meanwhile. Close stops every
// server and kills each stdio server's process group.
//
// Pinning: the SHA-256 of each tool's definition (name, description, input
// and output schema) is recorded in the store at first sight. A tool whose
// definition differs from its pin is withheld from every registry until a
// human accepts the change (armory toolbox pins accept), and a pinned tool
// whose definition changes while armory runs (after a restart) refuses its
// calls.
//
// The package is named upstream rather than toolbox/mcp: a package named mcp
// would shadow the go-sdk's mcp package in every file that uses both, and
// upstream servers have a run-time lifecycle (processes, supervision, pins
// in the store) that the static toolbox package does not.
package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// Pins is what pinning needs of the store (store.Pins; every store.Store
// has it).
type Pins interface {
	ObservePin(ctx context.Context, server, tool, hash string, def json.RawMessage) (*store.ToolPin, error)
}

// Options configure Start. Zero fields get the defaults shown.
type Options struct {
	// Pins records and checks tool definitions. Required when the world
	// has mcp_servers.
	Pins Pins
	// StartTimeout bounds connecting to one server and listing its tools
	// (default 30s).
	StartTimeout time.Duration
	// CallTimeout bounds one tool call (default 2m).
	CallTimeout time.Duration
	// MaxOutput bounds the text (and structured value) of one result
	// (default 256 KiB).
	MaxOutput int
	// MaxStderr is how much of a stdio server's stderr is kept, the last
	// bytes (default 64 KiB); the rest is drained and dropped.
	MaxStderr int
	// MaxTools bounds the tools taken from one server (default 512).
	MaxTools int
	// BackoffMin and BackoffMax bound the delay before restarting a server
	// that exited: BackoffMin doubled per failed attempt, at most
	// BackoffMax (defaults 500ms and 30s). A server that stayed up for
	// BackoffMax starts again from BackoffMin.
	BackoffMin, BackoffMax time.Duration
	// TerminateWait is how long Close waits for a stdio server to exit
	// after closing its stdin, before signals (default 2s).
	TerminateWait time.Duration
	// Logger receives restarts and failures (default: discard).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 2 * time.Minute
	}
	if o.MaxOutput <= 0 {
		o.MaxOutput = 256 << 10
	}
	if o.MaxStderr <= 0 {
		o.MaxStderr = 64 << 10
	}
	if o.MaxTools <= 0 {
		o.MaxTools = 512
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 500 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(30*time.Second, o.BackoffMin)
	}
	if o.TerminateWait <= 0 {
		o.TerminateWait = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Backoff returns the delay before restart attempt n (0-based): min·2ⁿ,
// at most max.
func Backoff(n int, min, max time.Duration) time.Duration {
	d := min
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	return int64Min(d, max)
}

func int64Min(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// Set is the upstream servers of one world. It is safe for concurrent use.
type Set struct {
	servers     []*server
	tools       []armory.Tool
	unavailable map[string]string
	warnings    world.Diagnostics
}

// Start connects to every upstream server of w in parallel and returns the
// set of their usable tools. Per-server failures are not errors: they are
// in Unavailable and Warnings. The error is non-nil only for a missing
// Options.Pins (KindInvalid) when w has servers. ctx bounds the start only;
// servers run until Close.
func Start(ctx context.Context, w *world.World, opts Options) (*Set, error) {
	opts.defaults()
	s := &Set{unavailable: map[string]string{}}
	if len(w.MCPServers) == 0 {
		return s, nil
	}
	if opts.Pins == nil {
		return nil, armory.E("upstream.Start", armory.KindInvalid, "upstream MCP servers need a store to pin their tool definitions")
	}
	type out struct {
		tools []armory.Tool
		unav  map[string]string
		warns world.Diagnostics
	}
	outs := make([]out, len(w.MCPServers))
	var wg sync.WaitGroup
	for i, cfg := range w.MCPServers {
		srv := newServer(cfg, w.Dir, w.Sandbox, opts)
		s.servers = append(s.servers, srv)
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := &outs[i]
			o.unav = map[string]string{}
			o.tools, o.warns = srv.start(ctx, o.unav)
		}()
	}
	wg.Wait()
	for _, o := range outs {
		s.tools = append(s.tools, o.tools...)
		maps.Copy(s.unavailable, o.unav)
		s.warnings = append(s.warnings, o.warns...)
	}
	sortTools(s.tools)
	return s, nil
}

// Warnings returns what the start found worth telling (tools refused for
// their names or sizes, servers that failed), located at the server's line.
func (s *Set) Warnings() world.Diagnostics { return slices.Clone(s.warnings) }

// Tools returns the tools of the servers that started, sorted by name:
// what the engine adds to the roster's catalog.
func (s *Set) Tools() []armory.Tool { return slices.Clone(s.tools) }

// Unavailable returns, per server ("mcp.fs") or tool name, why tools the
// world declares are not in the catalog (a server that failed to start, a
// definition withheld until a human accepts it).
func (s *Set) Unavailable() map[string]string { return maps.Clone(s.unavailable) }

// Close stops every server: it closes each session, waits up to
// Options.TerminateWait for stdio servers to exit, then kills each one's
// process group. Calls in flight fail. Close is idempotent.
func (s *Set) Close() error {
	var wg sync.WaitGroup
	for _, srv := range s.servers {
		wg.Add(1)
		go func() { defer wg.Done(); srv.close() }()
	}
	wg.Wait()
	return nil
}

// server is one upstream server and its supervisor.
type server struct {
	cfg     world.MCPServer
	dir     string
	backend string // the world's sandbox backend, for a sandboxed stdio server
	opts    Options
	client  *mcp.Client
	stderr  *tail

	mu       sync.Mutex
	sess     *mcp.ClientSession
	child    child
	state    string
	lastErr  string
	restarts int
	hashes   map[string]string // upstream tool name → hash seen on the live session
	closed   bool

	done chan struct{}
	wg   sync.WaitGroup
}

// child is the process of a running stdio server: its pid and, when the
// server is sandboxed, the sandbox that stops it. The zero value (an HTTP
// server, or none) stops nothing.
type child struct {
	pid int
	box *sandbox.Server
}

// kill stops the process and everything it started: the sandbox (which
// also reaps it), or the process group.
func (c child) kill() {
	if c.box != nil {
		c.box.Stop()
		return
	}
	killGroup(c.pid)
}

func newServer(cfg world.MCPServer, dir, backend string, opts Options) *server {
	return &server{
		cfg:     cfg,
		dir:     dir,
		backend: backend,
		opts:    opts,
		client:  mcp.NewClient(&mcp.Implementation{Name: "armory", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}),
		stderr:  newTail(opts.MaxStderr),
		state:   "starting",
		done:    make(chan struct{}),
	}
}

func (s *server) stdio() bool { return len(s.cfg.Command) > 0 }

func (s *server) family() string { return Family + "." + s.cfg.Name }

// start connects, lists and pins the tools, and starts supervision. It
// records unavailable families and tools in unav.
func (s *server) start(ctx context.Context, unav map[string]string) ([]armory.Tool, world.Diagnostics) {
	var ds world.Diagnostics
	sess, c, listed, err := s.connect(ctx)
	if err != nil {
		why := fmt.Sprintf("upstream MCP server %q is unavailable: %v", s.cfg.Name, err)
		if t := s.stderr.String(); t != "" {
			why += fmt.Sprintf(" (its stderr ends: %s)", clip(strings.TrimSpace(lastLines(t, 5)), 1024))
		}
		unav[s.family()] = why
		ds.Warnf(world.ConfigFile, s.cfg.Line, "%s", why)
		s.mu.Lock()
		s.state, s.lastErr = "failed", err.Error()
		s.mu.Unlock()
		return nil, ds
	}
	stdio := s.stdio()
	var tools []armory.Tool
	byMapped := map[string][]*mcp.Tool{}
	for _, t := range listed {
		mapped, ok := MapName(t.Name)
		if !ok || len(FullName(s.cfg.Name, mapped)) > 128 {
			ds.Warnf(world.ConfigFile, s.cfg.Line, "mcp_servers.%s: tool %q is refused: its name cannot be mapped to an armory tool name (letters, digits, _ - and ., at most 128 characters in all)", s.cfg.Name, clip(t.Name, 200))
			continue
		}
		byMapped[mapped] = append(byMapped[mapped], t)
	}
	hashes := map[string]string{}
	names := slices.Sorted(maps.Keys(byMapped))
	for _, mapped := range names {
		group := byMapped[mapped]
		full := FullName(s.cfg.Name, mapped)
		if len(group) > 1 {
			var ups []string
			for _, t := range group {
				ups = append(ups, fmt.Sprintf("%q", t.Name))
			}
			ds.Warnf(world.ConfigFile, s.cfg.Line, "mcp_servers.%s: tools %s are refused: they all map to %s", s.cfg.Name, strings.Join(ups, ", "), full)
			unav[full] = fmt.Sprintf("upstream tools %s of server %q all map to this name; none is offered", strings.Join(ups, ", "), s.cfg.Name)
			continue
		}
		t := group[0]
		def, hash, err := Definition(t)
		if err == nil && len(def) > MaxDefinition {
			err = fmt.Errorf("its definition is %d bytes; the limit is %d", len(def), MaxDefinition)
		}
		if err != nil {
			ds.Warnf(world.ConfigFile, s.cfg.Line, "mcp_servers.%s: tool %q is refused: %v", s.cfg.Name, t.Name, err)
			unav[full] = fmt.Sprintf("upstream tool %q is refused: %v", t.Name, err)
			continue
		}
		hashes[t.Name] = hash
		pctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
		pin, err := s.opts.Pins.ObservePin(pctx, s.cfg.Name, t.Name, hash, def)
		cancel()
		if err != nil {
			unav[full] = fmt.Sprintf("the definition of upstream tool %q could not be checked against its pin: %v", t.Name, err)
			continue
		}
		if pin.Hash != hash {
			unav[full] = fmt.Sprintf("withheld: the definition of upstream tool %q of server %q changed since it was pinned; a human must accept it (armory toolbox pins list %s; armory toolbox pins accept %s %s)", t.Name, s.cfg.Name, s.cfg.Name, s.cfg.Name, t.Name)
			ds.Warnf(world.ConfigFile, s.cfg.Line, "%s is withheld: its definition changed since it was pinned", full)
			continue
		}
		if len(tools) >= s.opts.MaxTools {
			ds.Warnf(world.ConfigFile, s.cfg.Line, "mcp_servers.%s: more than %d tools; the rest are refused", s.cfg.Name, s.opts.MaxTools)
			unav[full] = fmt.Sprintf("server %q offers more than %d tools", s.cfg.Name, s.opts.MaxTools)
			continue
		}
		in, _ := jsonObject(t.InputSchema)
		if len(in) == 0 || string(in) == "null" {
			in = armory.EmptyObjectSchema
		}
		out, _ := jsonObject(t.OutputSchema)
		tools = append(tools, &Tool{
			srv:      s,
			upstream: t.Name,
			hash:     hash,
			spec:     armory.Spec{Name: full, Description: clip(t.Description, MaxDescription), InputSchema: in, OutputSchema: out},
			man:      s.manifest(stdio, t.Annotations),
		})
	}
	s.mu.Lock()
	s.sess, s.child, s.hashes, s.state = sess, c, hashes, "up"
	closed := s.closed
	s.mu.Unlock()
	if closed {
		s.stop(sess, c)
		return tools, ds
	}
	s.wg.Add(1)
	go s.supervise(sess, c)
	return tools, ds
}

// connect starts (or reaches) the server, initializes a session and lists
// its tools, all within Options.StartTimeout.
func (s *server) connect(ctx context.Context) (*mcp.ClientSession, child, []*mcp.Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.StartTimeout)
	defer cancel()
	env, err := expandAll(s.cfg.Env, "env")
	if err != nil {
		return nil, child{}, nil, err
	}
	headers, err := expandAll(s.cfg.Headers, "headers")
	if err != nil {
		return nil, child{}, nil, err
	}
	var tr mcp.Transport
	var cmd *exec.Cmd
	var c child
	switch {
	case s.stdio() && s.cfg.Sandbox != nil:
		box, err := s.startSandboxed(env)
		if err != nil {
			return nil, child{}, nil, fmt.Errorf("cannot start in its sandbox: %v", clip(err.Error(), 1024))
		}
		c = child{pid: box.Pid(), box: box}
		tr = &mcp.IOTransport{Reader: box.Stdout, Writer: box.Stdin}
	case s.stdio():
		cmd = s.command(env)
		tr = &mcp.CommandTransport{Command: cmd, TerminateDuration: s.opts.TerminateWait}
	default:
		hc := &http.Client{Transport: headerTransport{base: http.DefaultTransport, headers: headers}}
		tr = &mcp.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}
	}
	sess, err := s.client.Connect(ctx, tr, nil)
	if cmd != nil && cmd.Process != nil {
		c.pid = cmd.Process.Pid
	}
	if err != nil {
		c.kill()
		if cmd != nil && cmd.Process != nil {
			go cmd.Wait() // reap; WaitDelay bounds it
		}
		if ctx.Err() != nil {
			return nil, child{}, nil, fmt.Errorf("no answer within %s", s.opts.StartTimeout)
		}
		return nil, child{}, nil, fmt.Errorf("cannot connect: %v", clip(err.Error(), 1024))
	}
	if c.box != nil {
		// The session ends when the sandboxed server exits (its stdout
		// closes); make sure it does not outlive a session closed first.
		go func() { sess.Wait(); c.box.Stop() }()
	}
	var tools []*mcp.Tool
	var cursor string
	for {
		res, err := sess.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			s.stop(sess, c)
			if ctx.Err() != nil {
				return nil, child{}, nil, fmt.Errorf("tools/list: no answer within %s", s.opts.StartTimeout)
			}
			return nil, child{}, nil, fmt.Errorf("tools/list failed: %v", clip(err.Error(), 1024))
		}
		tools = append(tools, res.Tools...)
		if res.NextCursor == "" || len(tools) > 4*s.opts.MaxTools {
			break
		}
		cursor = res.NextCursor
	}
	return sess, c, tools, nil
}

// manifest is Manifest, narrowed for a sandboxed stdio server: no network
// capability unless its sandbox grants the network.
func (s *server) manifest(stdio bool, ann *mcp.ToolAnnotations) armory.Manifest {
	m := Manifest(stdio, ann)
	if sb := s.cfg.Sandbox; stdio && sb != nil && !sb.Network {
		m.Capabilities = slices.DeleteFunc(m.Capabilities, func(c armory.Capability) bool { return c == armory.CapNetwork })
	}
	return m
}

// startSandboxed starts a stdio server confined by the world's sandbox
// backend: its own state folder <world>/.armory/upstreams/<name>/ is its
// workspace, HOME and working directory (created 0700, kept across
// restarts: caches survive), plus the configured writable and read-only
// paths and network; its environment is the sandbox's allow-list and env.
func (s *server) startSandboxed(env map[string]string) (*sandbox.Server, error) {
	state := filepath.Join(s.dir, ".armory", "upstreams", s.cfg.Name)
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, err
	}
	argv := slices.Clone(s.cfg.Command)
	if strings.Contains(argv[0], "/") && !filepath.IsAbs(argv[0]) {
		argv[0] = filepath.Join(s.dir, argv[0])
	}
	sb := s.cfg.Sandbox
	return sandbox.StartServer(sandbox.Confinement{
		Backend:   sandbox.Backend(s.backend),
		Workspace: state,
		Network:   sb.Network,
		Writable:  sb.Writable,
		ReadOnly:  sb.ReadOnly,
		Env:       env,
	}, argv, s.stderr)
}

// expandAll expands the ${NAME} references of the values of m from
// armory's environment (world.ExpandEnv). Its errors name the key and the
// variable, never a value.
func expandAll(m map[string]string, what string) (map[string]string, error) {
	if m == nil {
		return nil, nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := world.ExpandEnv(m[k], os.LookupEnv)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %v", what, k, err)
		}
		out[k] = v
	}
	return out, nil
}

// command builds the stdio server's process: argv from the config (a
// relative program path is taken from the world folder), a reduced
// environment (PATH, HOME, LANG and env, the expanded configured env), the world folder
// as working directory, its own process group, stderr drained into a
// bounded tail, SIGKILL when armory dies.
func (s *server) command(cfgEnv map[string]string) *exec.Cmd {
	prog := s.cfg.Command[0]
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(s.dir, prog)
	}
	cmd := exec.Command(prog, s.cfg.Command[1:]...)
	cmd.Dir = s.dir
	env := []string{}
	for _, k := range []string{"PATH", "HOME", "LANG"} {
		if v, ok := os.LookupEnv(k); ok {
			if _, set := cfgEnv[k]; !set {
				env = append(env, k+"="+v)
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(cfgEnv)) {
		env = append(env, k+"="+cfgEnv[k])
	}
	cmd.Env = env
	cmd.Stderr = s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = s.opts.TerminateWait
	return cmd
}

// supervise waits for the session to end and, unless the server is being
// closed, restarts it with bounded exponential backoff. The backoff level
// grows with every failed attempt and every session that ended within
// BackoffMax of its start, and falls back to zero after a longer session.
func (s *server) supervise(sess *mcp.ClientSession, c child) {
	defer s.wg.Done()
	level, upSince := 0, time.Now()
	for {
		waitErr := sess.Wait()
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		s.sess, s.child, s.state = nil, child{}, "restarting"
		s.lastErr = "the server exited"
		if waitErr != nil {
			s.lastErr = "the server exited: " + clip(waitErr.Error(), 512)
		}
		s.mu.Unlock()
		c.kill() // the leader is dead or dying: take its group (or sandbox) with it
		s.stop(sess, child{})
		if time.Since(upSince) >= s.opts.BackoffMax {
			level = 0
		}
		s.opts.Logger.Warn("upstream MCP server exited; restarting", "server", s.cfg.Name, "err", waitErr)
		for {
			delay := Backoff(level, s.opts.BackoffMin, s.opts.BackoffMax)
			level++
			select {
			case <-s.done:
				return
			case <-time.After(delay):
			}
			ns, nc, listed, err := s.connect(context.Background())
			if err != nil {
				s.mu.Lock()
				s.lastErr = "restart failed: " + err.Error()
				s.mu.Unlock()
				s.opts.Logger.Warn("upstream MCP server restart failed", "server", s.cfg.Name, "err", err)
				continue
			}
			hashes := map[string]string{}
			for _, t := range listed {
				if _, h, err := Definition(t); err == nil {
					hashes[t.Name] = h
				}
			}
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				s.stop(ns, nc)
				return
			}
			s.sess, s.child, s.hashes, s.state, s.lastErr = ns, nc, hashes, "up", ""
			s.restarts++
			s.mu.Unlock()
			sess, c, upSince = ns, nc, time.Now()
			break
		}
	}
}

// current returns the live session and the hash of tool's definition on it
// ("" when the server no longer lists it), or why there is none.
func (s *server) current(tool string) (*mcp.ClientSession, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sess == nil {
		switch s.state {
		case "closed":
			return nil, "", fmt.Errorf("the upstream MCP server %q has been stopped", s.cfg.Name)
		case "restarting":
			return nil, "", fmt.Errorf("the upstream MCP server %q is restarting (%s); try again shortly", s.cfg.Name, s.lastErr)
		}
		return nil, "", fmt.Errorf("the upstream MCP server %q is not running (%s)", s.cfg.Name, s.lastErr)
	}
	return s.sess, s.hashes[tool], nil
}

// broken takes sess out of use after a transport failure and closes it, so
// that the supervisor reconnects; calls meanwhile fail as restarting.
func (s *server) broken(sess *mcp.ClientSession, err error) {
	s.mu.Lock()
	live := s.sess == sess
	if live {
		s.sess, s.state, s.lastErr = nil, "restarting", "the connection failed: "+clip(err.Error(), 512)
	}
	s.mu.Unlock()
	if live {
		s.opts.Logger.Warn("upstream MCP server connection failed", "server", s.cfg.Name, "err", err)
		go sess.Close()
	}
}

// stop closes sess and kills c (a stdio server's process).
func (s *server) stop(sess *mcp.ClientSession, c child) {
	if sess != nil {
		sess.Close()
	}
	c.kill()
}

// killGroup kills the process group that pid leads. The group still
// exists while any member lives, so its id cannot have been reused.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func (s *server) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	sess, c := s.sess, s.child
	s.sess, s.child, s.state = nil, child{}, "closed"
	close(s.done)
	s.mu.Unlock()
	s.stop(sess, c)
	s.wg.Wait()
}

// headerTransport adds the configured headers to every request.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range t.headers {
			r.Header.Set(k, v)
		}
	}
	return t.base.RoundTrip(r)
}

// tail keeps the last n bytes written to it. Safe for concurrent use.
type tail struct {
	mu  sync.Mutex
	n   int
	buf []byte
}

func newTail(n int) *tail { return &tail{n: n} }

// Write implements io.Writer; it never fails, so the stream is drained.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(p) >= t.n {
		t.buf = append(t.buf[:0], p[len(p)-t.n:]...)
		return len(p), nil
	}
	if over := len(t.buf) + len(p) - t.n; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	t.buf = append(t.buf, p...)
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// jsonObject re-encodes a schema; nil gives nil.
func jsonObject(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return json.Marshal(v)
}

// sortTools orders tools by name.
func sortTools(ts []armory.Tool) {
	sort.Slice(ts, func(i, j int) bool { return ts[i].Spec().Name < ts[j].Spec().Name })
}
