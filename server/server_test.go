package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// env is a real server on 127.0.0.1:0 over an engine (the example world
// and a real SQLite store, for start).
type env struct {
	t     *testing.T
	eng   *engine.Engine
	h     *roster.Roster
	st    store.Store
	srv   *server.Server
	url   string
	admin string
	db    string       // the SQLite file
	stop  func() error // shuts the server down; returns Serve's result
}

// serve opens an engine with eopts and serves it on a loopback port until
// t ends (or e.stop); the engine is closed after the server stops.
func serve(t *testing.T, eopts engine.Options, opts server.Options) *env {
	t.Helper()
	eng, err := engine.Open(context.Background(), eopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() }) // registered first: runs after the server stops
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Addr = ln.Addr().String()
	srv, err := server.New(eng, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	var serveErr error
	stop := func() error {
		once.Do(func() { cancel(); serveErr = <-done; srv.Close() })
		return serveErr
	}
	t.Cleanup(func() { stop() })
	return &env{t: t, eng: eng, h: eng.Roster(), st: eng.Store(), srv: srv, url: "http://" + ln.Addr().String(), stop: stop}
}

// start serves the example world on a SQLite store, with an admin token.
func start(t *testing.T, opts server.Options) *env {
	t.Helper()
	db := filepath.Join(t.TempDir(), "armory.db")
	return serve(t, engine.Options{World: testenv.ExampleWorld(t), DB: db}, opts).withAdmin(db)
}

// startServices serves the world of files (written to a folder of the
// test's) with the services module, on a SQLite store in that folder,
// with an admin token.
func startServices(t *testing.T, files map[string]string) *env {
	t.Helper()
	dir := testenv.WriteTree(t, t.TempDir(), files)
	db := filepath.Join(dir, "armory.db")
	return serve(t, engine.Options{World: dir, DB: db, Modules: []engine.Module{services.New(services.Options{})}}, server.Options{}).withAdmin(db)
}

// withAdmin ensures the store's admin token, keeps it in e.admin and db
// (the SQLite file) in e.db, and returns e.
func (e *env) withAdmin(db string) *env {
	e.t.Helper()
	admin, err := server.EnsureAdminToken(context.Background(), e.st)
	if err != nil || admin == "" {
		e.t.Fatalf("admin token: %q %v", admin, err)
	}
	e.admin, e.db = admin, db
	return e
}

func (e *env) token(agent string) string {
	e.t.Helper()
	secret, _, err := server.CreateToken(context.Background(), e.st, agent, false, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// bearer adds a token (and other headers) to every request.
type bearer struct {
	token  string
	header http.Header
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	for k, v := range b.header {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (e *env) mcp(agent, token string, opts *mcp.ClientOptions) *mcp.ClientSession {
	e.t.Helper()
	s, err := e.mcpConnect(agent, token, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

func (e *env) mcpConnect(agent, token string, opts *mcp.ClientOptions) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "armory-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   e.url + "/agents/" + agent + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token}},
		MaxRetries: -1,
	}, nil)
}

// do sends a request and returns status, body and headers.
func (e *env) do(method, path, token, body string, hdr ...string) (int, string, http.Header) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

type errBody struct {
	Error struct{ Kind, Message string } `json:"error"`
}

func kindOf(t *testing.T, body string) string {
	t.Helper()
	var b errBody
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.Error.Kind == "" {
		t.Fatalf("not an error body: %q", body)
	}
	return b.Error.Kind
}

func ctx30(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func regNames(t *testing.T, h *roster.Roster, id string) []string {
	ag, err := h.Agent(id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range ag.Registry.Specs() {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}

// restTools lists an agent's tools over REST (GET /api/agents/ID/tools)
// and returns their names.
func (e *env) restTools(agent, token string) []string {
	e.t.Helper()
	status, body, _ := e.do("GET", "/api/agents/"+agent+"/tools", token, "")
	var tools []server.ToolEntry
	if status != 200 || json.Unmarshal([]byte(body), &tools) != nil {
		e.t.Fatalf("tools: %d %s", status, body)
	}
	var names []string
	for _, x := range tools {
		names = append(names, x.Name)
	}
	return names
}

// callText is the text of an MCP result.
func callText(r *mcp.CallToolResult) string { return server.CallResultText(r) }

func TestMCPListsEachAgentsToolsAndCalls(t *testing.T) {
	e := start(t, server.Options{})
	ctx := ctx30(t)
	for _, id := range []string{"architect", "reviewer", "intern"} {
		cs := e.mcp(id, e.token(id), nil)
		tools, names := testenv.MCPTools(t, ctx, cs)
		for _, tl := range tools {
			if tl.Annotations == nil || tl.InputSchema == nil || tl.Description == "" {
				t.Errorf("%s/%s: missing annotations, schema or description", id, tl.Name)
			}
		}
		if want := regNames(t, e.h, id); !slices.Equal(names, want) {
			t.Errorf("%s tools/list = %v, want exactly its registry %v", id, names, want)
		}
		if !slices.IsSorted(names) {
			t.Errorf("%s: not sorted: %v", id, names)
		}
		for _, tl := range tools {
			switch tl.Name {
			case "workspace.read":
				if !tl.Annotations.ReadOnlyHint || *tl.Annotations.DestructiveHint {
					t.Errorf("workspace.read annotations: %+v", tl.Annotations)
				}
			case "workspace.delete":
				if tl.Annotations.ReadOnlyHint || !*tl.Annotations.DestructiveHint {
					t.Errorf("workspace.delete annotations: %+v", tl.Annotations)
				}
			}
		}
	}

	arch := e.mcp("architect", e.token("architect"), nil)
	res, err := arch.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.write", Arguments: map[string]any{"path": "notes/a.txt", "content": "hello\n"}})
	if err != nil || res.IsError {
		t.Fatalf("write: %v %+v", err, res)
	}
	res, err = arch.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.read", Arguments: map[string]any{"path": "notes/a.txt"}})
	if err != nil || res.IsError || callText(res) != "hello\n" {
		t.Fatalf("read: %v %+v", err, res)
	}
	if m, _ := res.Meta[server.MetaOutcome].(map[string]any); m["status"] != "success" || m["call_id"] == "" {
		t.Errorf("outcome meta: %v", res.Meta)
	}
	// Both calls went through the pipeline: they are audited.
	recs, err := e.st.ListAudit(ctx, store.AuditFilter{Agent: "architect"})
	if err != nil || len(recs) != 4 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	// The MCP session id names the session (scoped to the agent).
	if want := server.ScopeSession("architect", arch.ID()); recs[0].Session != want {
		t.Errorf("session %q, want %q", recs[0].Session, want)
	}

	// A refused call is a result with isError, never a protocol error.
	res, err = arch.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.write", Arguments: map[string]any{"path": 1}})
	if err != nil || !res.IsError || !strings.Contains(callText(res), "Invalid arguments for workspace.write") {
		t.Fatalf("refused call: %v %+v", err, res)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	var o struct{ Status, CallID string }
	if json.Unmarshal(sc, &o); o.Status != "blocked" && o.Status != "error" || !bytes.Contains(sc, []byte(`"stages"`)) {
		t.Errorf("structured outcome: %s", sc)
	}

	// The reviewer's endpoint does not have workspace.write, nor does any
	// agent have nope.tool: nothing runs, the model reads why, and each
	// probe is in the audit trail.
	rev := e.mcp("reviewer", e.token("reviewer"), nil)
	for _, name := range []string{"workspace.write", "nope.tool"} {
		// A protocol error (invalid params), as the MCP spec has it for a
		// tool the server does not list, with the pipeline's reason.
		_, err := rev.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": "x", "content": "x"}})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || we.Code != jsonrpc.CodeInvalidParams || !strings.Contains(we.Message, "Unknown tool: "+name) || !bytes.Contains(we.Data, []byte(`"call_id"`)) {
			t.Fatalf("reviewer's call of %s: %v", name, err)
		}
		recs, _ = e.st.ListAudit(ctx, store.AuditFilter{Agent: "reviewer", Tool: name})
		if len(recs) != 1 || recs[0].Status == audit.StatusSuccess {
			t.Fatalf("reviewer's refused call of %s: %d audit records %+v", name, len(recs), recs)
		}
	}
	if _, err := os.Stat(filepath.Join(e.h.World.Workspace("reviewer"), "x")); err == nil {
		t.Fatal("reviewer's refused write ran")
	}
}

func TestAuth(t *testing.T) {
	e := start(t, server.Options{})
	rev := e.token("reviewer")
	revoked := e.token("reviewer")
	ts, _ := e.st.ListTokens(context.Background())
	if err := e.st.RevokeToken(context.Background(), ts[len(ts)-1].ID); err != nil {
		t.Fatal(err)
	}
	mcpInit := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	cases := []struct {
		name, method, path, token, body string
		status                          int
		kind                            string
	}{
		{"no token, MCP", "POST", "/agents/reviewer/mcp", "", mcpInit, 401, "unauthenticated"},
		{"no token, REST", "GET", "/api/agents/reviewer/tools", "", "", 401, "unauthenticated"},
		{"garbage token", "GET", "/api/agents/reviewer/tools", "armory_nope", "", 401, "unauthenticated"},
		{"revoked token", "GET", "/api/agents/reviewer/tools", revoked, "", 401, "unauthenticated"},
		{"other agent, MCP", "POST", "/agents/architect/mcp", rev, mcpInit, 403, "permission"},
		{"other agent, tools", "GET", "/api/agents/architect/tools", rev, "", 403, "permission"},
		{"other agent, calls", "POST", "/api/agents/architect/calls", rev, `{"tool":"workspace.read"}`, 403, "permission"},
		{"agent token, admin API", "GET", "/api/approvals", rev, "", 403, "permission"},
		// The pipeline decides: syscall.agent.list is not among its tools (an unknown tool).
		{"agent token, agents list", "GET", "/api/agents", rev, "", 404, "not_found"},
		{"agent token, audit", "GET", "/api/audit", rev, "", 403, "permission"},
		{"agent token, another agent's events", "GET", "/api/events?agent=architect", rev, "", 403, "permission"},
		{"admin, missing agent's events", "GET", "/api/events?agent=ghost", e.admin, "", 404, "not_found"},
		{"agent token, metrics", "GET", "/metrics", rev, "", 403, "permission"},
		{"agent token, approve", "POST", "/api/approvals/x/approve", rev, "", 403, "permission"},
		{"admin, missing agent", "GET", "/api/agents/ghost/tools", e.admin, "", 404, "not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body, hdr := e.do(tc.method, tc.path, tc.token, tc.body, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
			if status != tc.status || kindOf(t, body) != tc.kind {
				t.Fatalf("%s %s: %d %s", tc.method, tc.path, status, body)
			}
			if status == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if strings.Contains(body, "armory_") {
				t.Error("an error body echoes a token")
			}
		})
	}
	// A token for one agent learns nothing about which other agents exist.
	for _, p := range []string{"/api/agents/%s/tools", "/api/agents/%s/tools/brief"} {
		s1, b1, _ := e.do("GET", strings.Replace(p, "%s", "architect", 1), rev, "")
		s2, b2, _ := e.do("GET", strings.Replace(p, "%s", "no-such-agent", 1), rev, "")
		if s1 != 403 || s1 != s2 || b1 != b2 {
			t.Errorf("existing vs missing agent differ: %d %q / %d %q", s1, b1, s2, b2)
		}
	}
	_, b1, _ := e.do("POST", "/agents/architect/mcp", rev, mcpInit)
	_, b2, _ := e.do("POST", "/agents/ghost/mcp", rev, mcpInit)
	if b1 != b2 {
		t.Errorf("MCP 403 bodies differ: %q %q", b1, b2)
	}
	// The go-sdk client is refused too.
	if _, err := e.mcpConnect("architect", rev, nil); err == nil {
		t.Error("a reviewer token connected to the architect's MCP endpoint")
	}
	if _, err := e.mcpConnect("reviewer", "", nil); err == nil {
		t.Error("connected without a token")
	}
	// Admin reaches every agent; /healthz needs nothing.
	if s, _, _ := e.do("GET", "/api/agents/architect/tools", e.admin, ""); s != 200 {
		t.Errorf("admin: %d", s)
	}
	if s, b, _ := e.do("GET", "/healthz", "", ""); s != 200 || !strings.Contains(b, "ok") {
		t.Errorf("healthz: %d %s", s, b)
	}
}

func TestHostAndOriginChecks(t *testing.T) {
	e := start(t, server.Options{AllowHosts: []string{"armory.internal"}, AllowOrigins: []string{"https://console.example"}})
	port := e.url[strings.LastIndex(e.url, ":")+1:]
	cases := []struct {
		name   string
		hdr    []string
		status int
	}{
		{"rebinding host", []string{"Host", "evil.example:" + port}, 403},
		{"rebinding host, no port", []string{"Host", "attacker.test"}, 403},
		{"host that ends like localhost", []string{"Host", "localhost.evil.example:" + port}, 403},
		{"localhost", []string{"Host", "localhost:" + port}, 200},
		{"ipv6 loopback", []string{"Host", "[::1]:" + port}, 200},
		{"allowed host", []string{"Host", "armory.internal:8443"}, 200},
		{"foreign origin", []string{"Origin", "http://evil.example"}, 403},
		{"null origin", []string{"Origin", "null"}, 403},
		{"same origin", []string{"Origin", e.url}, 200},
		{"allowed origin", []string{"Origin", "https://console.example"}, 200},
		{"allowed origin, other scheme", []string{"Origin", "http://console.example"}, 403},
	}
	for _, tc := range cases {
		status, body, _ := e.do("GET", "/api/agents", e.admin, "", tc.hdr...)
		if status != tc.status {
			t.Errorf("%s: %d %s", tc.name, status, body)
		}
		if status == 403 && kindOf(t, body) != "permission" {
			t.Errorf("%s: %s", tc.name, body)
		}
	}
	// The MCP endpoint is covered as well.
	status, _, _ := e.do("POST", "/agents/reviewer/mcp", e.admin, `{}`, "Host", "evil.example:"+port)
	if status != 403 {
		t.Errorf("MCP with a rebinding host: %d", status)
	}
}

func TestBodyLimit(t *testing.T) {
	e := start(t, server.Options{MaxBodyBytes: 4096})
	big := `{"tool":"workspace.write","args":{"path":"big","content":"` + strings.Repeat("a", 5000) + `"}}`
	status, body, _ := e.do("POST", "/api/agents/architect/calls", e.admin, big)
	if status != 413 || kindOf(t, body) != "too_large" {
		t.Fatalf("REST over the limit: %d %s", status, body)
	}
	under := `{"tool":"workspace.write","args":{"path":"small","content":"` + strings.Repeat("a", 3000) + `"}}`
	if status, body, _ := e.do("POST", "/api/agents/architect/calls", e.admin, under); status != 200 || !strings.Contains(body, `"status":"success"`) {
		t.Fatalf("REST under the limit: %d %s", status, body)
	}
	status, _, _ = e.do("POST", "/agents/architect/mcp", e.admin, `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`+strings.Repeat("a", 5000)+`"}}`,
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if status != 413 {
		t.Fatalf("MCP over the limit: %d", status)
	}
	// Nothing over the limit reached the pipeline.
	recs, _ := e.st.ListAudit(context.Background(), store.AuditFilter{Tool: "workspace.write"})
	for _, r := range recs {
		if strings.Contains(string(r.Args), `"big"`) {
			t.Fatal("an oversized call was executed")
		}
	}
}

// sse reads events from /api/events in the background.
type sse struct {
	mu     sync.Mutex
	events []pipeline.Event
	cancel func()
	done   chan struct{}
}

func (e *env) events(token string) *sse {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		e.t.Fatalf("events: %d %s", resp.StatusCode, resp.Header)
	}
	s := &sse{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev pipeline.Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					s.mu.Lock()
					s.events = append(s.events, ev)
					s.mu.Unlock()
				}
			}
		}
	}()
	e.t.Cleanup(func() { cancel(); <-s.done })
	return s
}

// waitFor waits (bounded) for an event that matches.
func (s *sse) waitFor(t *testing.T, match func(pipeline.Event) bool) pipeline.Event {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		s.mu.Lock()
		for _, ev := range s.events {
			if match(ev) {
				s.mu.Unlock()
				return ev
			}
		}
		s.mu.Unlock()
	}
	t.Fatal("no such event arrived")
	return pipeline.Event{}
}

func kind(k string) func(pipeline.Event) bool {
	return func(e pipeline.Event) bool { return e.Kind == k }
}

func TestMCPApprovalWhileClientWaits(t *testing.T) {
	e := start(t, server.Options{ApprovalWait: 10 * time.Minute})
	ev := e.events(e.admin)
	ctx := ctx30(t)
	var progress []string
	var mu sync.Mutex
	cs := e.mcp("architect", e.token("architect"), &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, r.Params.Message)
			mu.Unlock()
		},
	})
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.write", Arguments: map[string]any{"path": "x", "content": "x"}}); err != nil || res.IsError {
		t.Fatalf("write: %v %+v", err, res)
	}

	// A human approves through REST while the MCP client waits.
	approved := make(chan string, 1)
	go func() {
		req := ev.waitFor(t, kind(pipeline.EventApprovalRequested))
		status, body, _ := e.do("GET", "/api/approvals", e.admin, "")
		if status != 200 || !strings.Contains(body, req.ApprovalID) {
			t.Errorf("approvals: %d %s", status, body)
		}
		status, body, _ = e.do("POST", "/api/approvals/"+req.ApprovalID+"/approve", e.admin, `{"reason":"ok by me"}`)
		if status != 200 || !strings.Contains(body, `"decided_by":"human"`) {
			t.Errorf("approve: %d %s", status, body)
		}
		approved <- req.ApprovalID
	}()
	params := &mcp.CallToolParams{Name: "workspace.delete", Arguments: map[string]any{"path": "x"}}
	params.SetProgressToken("tok-1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || res.IsError {
		t.Fatalf("approved delete: %v %+v", err, res)
	}
	id := <-approved
	if m, _ := res.Meta[server.MetaOutcome].(map[string]any); m["approval_id"] != id || m["decided_by"] != "human" {
		t.Errorf("outcome meta: %v", res.Meta)
	}
	mu.Lock()
	if len(progress) == 0 || !strings.Contains(progress[0], "waiting for approval "+id) {
		t.Errorf("progress: %q", progress)
	}
	mu.Unlock()
	ev.waitFor(t, func(x pipeline.Event) bool {
		return x.Kind == pipeline.EventApprovalDecided && x.ApprovalID == id && x.Status == "approved"
	})
	ev.waitFor(t, func(x pipeline.Event) bool {
		return x.Kind == pipeline.EventCallFinished && x.Tool == "workspace.delete" && x.Status == "success"
	})
	// Deciding again is a conflict naming who decided; an unknown approval is not found.
	if s, b, _ := e.do("POST", "/api/approvals/"+id+"/deny", e.admin, ""); s != 409 || kindOf(t, b) != "conflict" ||
		!strings.Contains(b, "is already decided (approved by human at ") {
		t.Errorf("second decision: %d %s", s, b)
	}
	// The decision is audited once, naming the decider, the reason and the surface.
	checkDecisionRecord(t, e.st, id, "human", "approved", "ok by me", "rest")
	if s, b, _ := e.do("POST", "/api/approvals/nope/approve", e.admin, ""); s != 404 || kindOf(t, b) != "not_found" {
		t.Errorf("unknown approval: %d %s", s, b)
	}

	// A denied call is an isError result.
	go func() {
		req := ev.waitFor(t, func(x pipeline.Event) bool { return x.Kind == pipeline.EventApprovalRequested && x.ApprovalID != id })
		e.do("POST", "/api/approvals/"+req.ApprovalID+"/deny", e.admin, `{"reason":"keep it"}`)
	}()
	e.do("POST", "/api/agents/architect/calls", e.admin, `{"tool":"workspace.write","args":{"path":"y","content":"y"}}`)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.delete", Arguments: map[string]any{"path": "y"}})
	if err != nil || !res.IsError || !strings.Contains(callText(res), "Denied by human: keep it") {
		t.Fatalf("denied: %v %+v", err, res)
	}
}

func TestMCPCancelledCall(t *testing.T) {
	e := start(t, server.Options{ApprovalWait: 10 * time.Minute})
	ev := e.events(e.admin)
	cs := e.mcp("architect", e.token("architect"), nil)
	ctx, cancel := context.WithCancel(ctx30(t))
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.delete", Arguments: map[string]any{"path": "x"}})
		errc <- err
	}()
	ev.waitFor(t, kind(pipeline.EventApprovalRequested))
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	// The server stopped waiting (long before the 10-minute approval wait)
	// and the call ended pending.
	fin := ev.waitFor(t, kind(pipeline.EventCallFinished))
	if fin.Status != "pending" || fin.Tool != "workspace.delete" {
		t.Fatalf("finished: %+v", fin)
	}
}

func TestREST(t *testing.T) {
	e := start(t, server.Options{})
	rev := e.token("reviewer")

	status, body, _ := e.do("GET", "/api/agents", e.admin, "")
	var agents []server.AgentSummary
	if status != 200 || json.Unmarshal([]byte(body), &agents) != nil || len(agents) != len(e.h.Agents()) {
		t.Fatalf("agents: %d %s", status, body)
	}
	for _, a := range agents {
		if a.Tools != len(regNames(t, e.h, a.ID)) || a.Archetype == "" {
			t.Errorf("agent %+v", a)
		}
	}

	if names := e.restTools("reviewer", rev); !slices.Equal(names, regNames(t, e.h, "reviewer")) {
		t.Errorf("tools %v", names)
	}
	status, body, hdr := e.do("GET", "/api/agents/architect/tools/brief", e.admin, "")
	ag, _ := e.h.Agent("architect")
	if status != 200 || body != registry.Brief(ag.Registry.Specs()) || !strings.HasPrefix(body, "- devtools.repo-git: Manage the git") || strings.Contains(body, "<tools>") || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Errorf("brief: %d %q", status, body)
	}

	call := func(token, agent, req string) (int, map[string]any, string) {
		t.Helper()
		s, b, _ := e.do("POST", "/api/agents/"+agent+"/calls", token, req, "Content-Type", "application/json")
		var m map[string]any
		json.Unmarshal([]byte(b), &m)
		return s, m, b
	}
	for _, tc := range []struct {
		name, req string
		status    int
		outcome   string // status in the outcome, for a call that ran the pipeline
		kind      string // error kind otherwise
	}{
		{"success", `{"tool":"workspace.write","args":{"path":"a","content":"A"},"task":"t-1"}`, 200, "success", ""},
		{"unknown tool is an outcome", `{"tool":"no.such"}`, 404, "error", ""},
		{"bad args is an outcome", `{"tool":"workspace.write","args":{"path":1}}`, 400, "error", ""},
		{"pending", `{"tool":"workspace.delete","args":{"path":"a"}}`, 202, "pending", ""},
		{"bad JSON", `{"tool":`, 400, "", "invalid"},
		{"unknown field", `{"tool":"workspace.read","argz":{}}`, 400, "", "invalid"},
		{"trailing data", `{"tool":"workspace.read"} {}`, 400, "", "invalid"},
		{"no tool", `{}`, 400, "", "invalid"},
		{"bad wait", `{"tool":"workspace.read","wait":"soon"}`, 400, "", "invalid"},
		{"wait over the limit", `{"tool":"workspace.read","wait":"11m"}`, 400, "", "invalid"},
		{"empty body", ``, 400, "", "invalid"},
	} {
		s, m, b := call(e.admin, "architect", tc.req)
		if s != tc.status {
			t.Errorf("%s: %d %s", tc.name, s, b)
			continue
		}
		if tc.outcome != "" {
			if m["status"] != tc.outcome {
				t.Errorf("%s: outcome %v", tc.name, b)
			}
		} else if kindOf(t, b) != tc.kind {
			t.Errorf("%s: %s", tc.name, b)
		}
	}

	// Approve the pending delete, then resume it through REST.
	status, body, _ = e.do("GET", "/api/approvals", e.admin, "")
	var aps []store.Approval
	if status != 200 || json.Unmarshal([]byte(body), &aps) != nil || len(aps) != 1 || aps[0].Tool != "workspace.delete" {
		t.Fatalf("approvals: %d %s", status, body)
	}
	if s, b, _ := e.do("POST", "/api/approvals/"+aps[0].ID+"/approve", e.admin, ""); s != 200 {
		t.Fatalf("approve: %d %s", s, b)
	}
	if s, m, b := call(e.admin, "architect", `{"resume":"`+aps[0].ID+`"}`); s != 200 || m["status"] != "success" || m["decided_by"] != "human" {
		t.Fatalf("resume: %d %s", s, b)
	}
	if s, b, _ := e.do("GET", "/api/approvals?status=bogus", e.admin, ""); s != 400 || kindOf(t, b) != "invalid" {
		t.Errorf("bad status filter: %d %s", s, b)
	}

	// Sessions belong to the agent: a reviewer cannot spend the
	// architect's session caps by naming its session.
	if s, m, b := call(rev, "reviewer", `{"tool":"workspace.read","args":{"path":"nothing"},"session":"architect:default"}`); s != 404 || m["call_id"] == "" {
		t.Fatalf("reviewer call: %d %s", s, b)
	}
	recs, _ := e.st.ListAudit(context.Background(), store.AuditFilter{Agent: "reviewer"})
	if len(recs) == 0 || recs[0].Session != "reviewer:architect:default" {
		t.Fatalf("reviewer session: %+v", recs)
	}
	if s, m, _ := call(rev, "reviewer", `{"tool":"workspace.read","args":{"path":"nothing"},"session":"reviewer:mine"}`); s != 404 || m["call_id"] == "" {
		t.Fatal("own session")
	}
	recs, _ = e.st.ListAudit(context.Background(), store.AuditFilter{Agent: "reviewer", Limit: 1})
	if recs[0].Session != "reviewer:mine" {
		t.Errorf("own prefixed session: %q", recs[0].Session)
	}

	// Audit, with the CLI's filters.
	status, body, _ = e.do("GET", "/api/audit?agent=architect&tool=workspace.write&limit=2", e.admin, "")
	var arecs []map[string]any
	if status != 200 || json.Unmarshal([]byte(body), &arecs) != nil || len(arecs) != 2 {
		t.Fatalf("audit: %d %s", status, body)
	}
	for _, r := range arecs {
		if r["agent"] != "architect" || r["tool"] != "workspace.write" {
			t.Errorf("filtered audit record %v", r)
		}
	}
	if s, b, _ := e.do("GET", "/api/audit?status=pending&since=1h", e.admin, ""); s != 200 || !strings.Contains(b, "workspace.delete") {
		t.Errorf("audit status/since: %d %s", s, b)
	}
	for _, q := range []string{"limit=0", "limit=x", "limit=10001", "since=yesterday"} {
		if s, b, _ := e.do("GET", "/api/audit?"+q, e.admin, ""); s != 400 || kindOf(t, b) != "invalid" {
			t.Errorf("audit %s: %d %s", q, s, b)
		}
	}
	status, body, _ = e.do("GET", "/api/audit/verify", e.admin, "")
	var rep server.VerifyReport
	if status != 200 || json.Unmarshal([]byte(body), &rep) != nil || !rep.OK || rep.Records < 8 {
		t.Fatalf("verify: %d %s", status, body)
	}

	// Metrics: calls by tool and status; made-up tool names share one label.
	status, body, _ = e.do("GET", "/metrics", e.admin, "")
	for _, want := range []string{
		`armory_calls_total{status="success",tool="workspace.write"} 1`,
		`armory_calls_total{status="error",tool="unknown"} 1`,
		`armory_call_duration_seconds_count{tool="workspace.write"}`,
		"armory_pending_approvals 0",
		"armory_limits_reached_total 0",
		"armory_sandbox_warm_ready 0", // the pool is off in this server
		"armory_sandbox_warm_runs_total",
		"armory_sandbox_cold_runs_total",
		`armory_audit_commits_total{durability="durable"}`,
		`armory_audit_commits_total{durability="relaxed"}`,
		`armory_audit_durability_mode{mode="strict"} 1`,
		`armory_audit_durability_mode{mode="batched"} 0`,
		"armory_audit_syncs_total 0",
		"armory_audit_durable_seq ",
	} {
		if status != 200 || !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(body, "no.such") {
		t.Error("a made-up tool name became a label")
	}
	if strings.Contains(body, `armory_audit_commits_total{durability="durable"} 0`+"\n") {
		t.Error("no durable audit commit counted after durable calls")
	}
	if strings.Contains(body, "armory_audit_durable_seq 0\n") {
		t.Error("no durable point after durable calls")
	}

	if s, b, _ := e.do("GET", "/api/nothing", e.admin, ""); s != 404 || kindOf(t, b) != "not_found" {
		t.Errorf("unknown route: %d %s", s, b)
	}
}

func TestGracefulShutdownDrainsCalls(t *testing.T) {
	e := start(t, server.Options{ShutdownTimeout: 500 * time.Millisecond})
	ev := e.events(e.admin)
	type res struct {
		status int
		body   string
	}
	got := make(chan res, 1)
	go func() {
		s, b, _ := e.do("POST", "/api/agents/architect/calls", e.admin, `{"tool":"workspace.delete","args":{"path":"x"},"wait":"10m"}`)
		got <- res{s, b}
	}()
	ev.waitFor(t, kind(pipeline.EventApprovalRequested))
	if err := e.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	// The in-flight call was given its drain time, then cancelled: its
	// client still got a complete answer.
	r := <-got
	if r.status != 202 || !strings.Contains(r.body, `"status":"pending"`) {
		t.Fatalf("in-flight call: %d %s", r.status, r.body)
	}
	if _, err := http.Get(e.url + "/healthz"); err == nil {
		t.Fatal("still serving after shutdown")
	}
}

// skillTool is a tool registered at run time.
type skillTool struct{}

func (skillTool) Spec() armory.Spec {
	return armory.Spec{Name: "skill.echo", Description: "Echo the text back.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)}
}
func (skillTool) Manifest() armory.Manifest {
	return armory.Manifest{Category: armory.CatFileRead, Permission: armory.PermAuto}
}
func (skillTool) Execute(_ context.Context, inv armory.Invocation) armory.Result {
	var a struct{ Text string }
	json.Unmarshal(inv.Args, &a)
	return armory.OK(a.Text)
}

// TestMCPToolsRegisteredAtRunTime: a tool registered in an agent's
// registry after the server started is listed (clients are told the list
// changed) and called through the pipeline; unregistered, it is gone.
func TestMCPToolsRegisteredAtRunTime(t *testing.T) {
	e := start(t, server.Options{})
	ctx := ctx30(t)
	changed := make(chan struct{}, 8)
	cs := e.mcp("architect", e.token("architect"), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	other := e.mcp("reviewer", e.token("reviewer"), nil)
	names := func(cs *mcp.ClientSession) []string { _, n := testenv.MCPTools(t, ctx, cs); return n }
	if slices.Contains(names(cs), "skill.echo") {
		t.Fatal("listed before it was registered")
	}
	ag, _ := e.h.Agent("architect")
	if err := ag.Registry.Register(skillTool{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed")
	}
	if got := names(cs); !slices.Contains(got, "skill.echo") || !slices.IsSorted(got) {
		t.Fatalf("tools/list after Register: %v", got)
	}
	if slices.Contains(names(other), "skill.echo") {
		t.Fatal("another agent lists the tool")
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "skill.echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || callText(res) != "hi" {
		t.Fatalf("call: %v %+v", err, res)
	}
	if recs, err := e.st.ListAudit(ctx, store.AuditFilter{Agent: "architect", Tool: "skill.echo"}); err != nil || len(recs) != 2 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	if err := ag.Registry.Unregister("skill.echo"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed after Unregister")
	}
	if slices.Contains(names(cs), "skill.echo") {
		t.Fatal("still listed after Unregister")
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "skill.echo", Arguments: map[string]any{"text": "hi"}})
	if err == nil && !res.IsError {
		t.Fatal("an unregistered tool still runs")
	}
	// After Close, the server no longer follows the registry.
	e.srv.Close()
	if err := ag.Registry.Register(skillTool{}); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names(cs), "skill.echo") {
		t.Fatal("a closed server still follows the registry")
	}
}

// TestProtocolRevisions: the endpoint speaks the sessionless 2026-07-28 and
// the session-based 2025-11-25 side by side; a sessionless client names
// its caps session with _meta or the X-Armory-Session header.
func TestProtocolRevisions(t *testing.T) {
	e := start(t, server.Options{})
	ctx := ctx30(t)
	tok := e.token("architect")
	connect := func(version, header string) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "armory-test", Version: "1"}, nil)
		hdr := http.Header{}
		if header != "" {
			hdr.Set(server.SessionHeader, header)
		}
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:   e.url + "/agents/architect/mcp",
			HTTPClient: &http.Client{Transport: bearer{token: tok, header: hdr}},
			MaxRetries: -1,
		}, &mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			t.Fatalf("connect %s: %v", version, err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	lastSession := func() string {
		recs, err := e.st.ListAudit(ctx, store.AuditFilter{Agent: "architect", Limit: 1})
		if err != nil || len(recs) == 0 {
			t.Fatalf("audit: %v", err)
		}
		return recs[0].Session
	}
	call := func(cs *mcp.ClientSession, meta mcp.Meta) {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.list", Arguments: map[string]any{"path": "."}, Meta: meta})
		if err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
	}

	legacy := connect("2025-11-25", "")
	if legacy.ID() == "" || legacy.InitializeResult().ProtocolVersion != "2025-11-25" {
		t.Fatalf("2025-11-25: session %q, version %q", legacy.ID(), legacy.InitializeResult().ProtocolVersion)
	}
	call(legacy, nil)
	if got, want := lastSession(), server.ScopeSession("architect", server.SessionRef(legacy.ID())); got != want {
		t.Errorf("2025-11-25 session %q, want the MCP session %q", got, want)
	}

	modern := connect("2026-07-28", "")
	if modern.ID() != "" || modern.InitializeResult().ProtocolVersion != "2026-07-28" {
		t.Fatalf("2026-07-28: session %q, version %q", modern.ID(), modern.InitializeResult().ProtocolVersion)
	}
	named := connect("2026-07-28", "run-8")
	for _, c := range []struct {
		what string
		cs   *mcp.ClientSession
		meta mcp.Meta
		want string
	}{
		{"sessionless without a name", modern, nil, "architect:default"},
		{"sessionless with _meta", modern, mcp.Meta{server.MetaSession: "run-7"}, "architect:run-7"},
		{"sessionless with the header", named, nil, "architect:run-8"},
		// Another agent's session name cannot be borrowed.
		{"a foreign session name", modern, mcp.Meta{server.MetaSession: "reviewer:default"}, "architect:reviewer:default"},
	} {
		call(c.cs, c.meta)
		if got := lastSession(); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
}

// checkDecisionRecord checks that approval id has exactly one decision
// entry in the audit trail, naming the decider, the decision, the reason
// and the surface.
func checkDecisionRecord(t *testing.T, st store.Store, id, by, decision, reason, via string) {
	t.Helper()
	recs, err := st.ListAudit(context.Background(), store.AuditFilter{Tool: "approval.decide", Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var got, refused []*audit.Record
	for _, r := range recs {
		switch {
		case r.ApprovalID != id:
		case r.Status == audit.StatusBlocked:
			refused = append(refused, r)
		default:
			got = append(got, r)
		}
	}
	if len(got) != 1 {
		t.Fatalf("decision entries of %s: %d, want 1", id, len(got))
	}
	// A refused decision (a second one) is audited apart, blocked, naming
	// who tried.
	for _, r := range refused {
		if r.DecidedBy != "" || !strings.Contains(r.Result, "already decided") {
			t.Fatalf("refused decision entry = %+v", r)
		}
	}
	var args map[string]string
	if r := got[0]; json.Unmarshal(r.Args, &args) != nil || r.Agent != by || r.DecidedBy != by || r.Status != audit.StatusSuccess ||
		args["id"] != id || args["decision"] != decision || args["reason"] != reason || args["via"] != via {
		t.Fatalf("decision entry = %+v (args %s)", r, r.Args)
	}
}

// A server needs the engine's pipeline: an engine opened without it is
// refused, not served with a nil pipeline.
func TestNewRefusesAnEngineWithoutPipeline(t *testing.T) {
	eng, err := engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Skip: engine.StoreOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if _, err := server.New(eng, server.Options{}); armory.KindOf(err) != armory.KindInvalid {
		t.Fatalf("New over an engine without pipeline: %v", err)
	}
}

// The event streams open at once are bounded: past MaxEventStreams the
// next is refused with a readable error, and closing one makes room.
func TestEventStreamsBounded(t *testing.T) {
	e := start(t, server.Options{})
	streams := make([]*sse, server.MaxEventStreams)
	for i := range streams {
		streams[i] = e.events(e.admin)
	}
	open := func() (int, string) { return e.openStream("GET", "/api/events", e.admin, "") }
	if status, body := open(); status != 403 || !strings.Contains(body, "too many event streams") || !strings.Contains(body, `"blocked"`) {
		t.Fatalf("stream %d: %d %s", server.MaxEventStreams+1, status, body)
	}
	streams[0].cancel()
	<-streams[0].done
	deadline := time.Now().Add(time.Minute) // a bound, not a timing check
	for {
		if code, _ := open(); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no room after a stream closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// openStream sends a request that may start a stream (bounded by a
// minute) and returns its status and, unless it is 200, the start of its
// body; a stream that opened is closed at once. headers are name, value
// pairs.
func (e *env) openStream(method, path, token, body string, headers ...string) (int, string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound, not a timing check
	defer cancel()
	resp, err := http.DefaultClient.Do(e.request(ctx, method, path, token, body, headers...))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		return 200, ""
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, string(b)
}

// request is a request to the server with a bearer token (when not empty),
// a body (when not empty) and headers given as name, value pairs.
func (e *env) request(ctx context.Context, method, path, token, body string, headers ...string) *http.Request {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}
