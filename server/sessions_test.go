package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
)

// tokenID makes an agent token and returns its secret and id.
func (e *env) tokenID(agent string) (string, string) {
	e.t.Helper()
	secret, tok, err := server.CreateToken(context.Background(), e.st, agent, false, "test")
	if err != nil {
		e.t.Fatal(err)
	}
	return secret, tok.ID
}

// rpc sends one raw MCP request over HTTP: method is the HTTP method, body
// a JSON-RPC message for POST; hdr are further header pairs.
func (e *env) rpc(method, agent, token, version, session, body string, hdr ...string) (int, string, http.Header) {
	e.t.Helper()
	h := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}
	if method == http.MethodGet {
		h = []string{"Accept", "text/event-stream"}
	}
	if version != "" {
		h = append(h, "Mcp-Protocol-Version", version)
	}
	if session != "" {
		h = append(h, "Mcp-Session-Id", session)
	}
	return e.do(method, "/agents/"+agent+"/mcp", token, body, append(h, hdr...)...)
}

func initBody(version string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
}

// rpcErr decodes a JSON-RPC error response.
type rpcErr struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct{ Kind string }
	} `json:"error"`
}

func decodeRPCErr(t *testing.T, body string) rpcErr {
	t.Helper()
	var e rpcErr
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.JSONRPC != "2.0" || e.Error.Code == 0 {
		t.Fatalf("not a JSON-RPC error: %q", body)
	}
	return e
}

// connectAt opens a go-sdk client session on agent with token at revision
// version; hdr are sent with every request, and got receives every
// response's headers.
func connectAt(t *testing.T, url, agent, token, version string, hdr http.Header, got func(http.Header)) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "armory-test", Version: "1"}, nil)
	var rt http.RoundTripper = bearer{token: token, header: hdr}
	if got != nil {
		rt = watchHeaders{rt, got}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   url + "/agents/" + agent + "/mcp",
		HTTPClient: &http.Client{Transport: rt},
		MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect %s as %s: %v", version, agent, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type watchHeaders struct {
	rt  http.RoundTripper
	got func(http.Header)
}

func (w watchHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := w.rt.RoundTrip(r)
	if err == nil {
		w.got(resp.Header)
	}
	return resp, err
}

// TestMCPSessionBoundToOwner: a session opened by one agent's token answers
// nobody else. Another agent (its own token, its own URL) and another token
// of the same agent send the session's id with every method and verb, on
// every revision served: each request is answered as an unknown session,
// nothing runs, the owner's session still works, each attempt is audited
// as a probe naming the prober, and the session id is written neither to
// the audit trail nor to the log.
func TestMCPSessionBoundToOwner(t *testing.T) {
	logs := &testenv.LockedBuffer{}
	e := start(t, server.Options{Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	ctx := ctx30(t)
	owner := e.token("architect")
	reviewer, reviewerID := e.tokenID("reviewer")
	other, otherID := e.tokenID("architect")
	ws := filepath.Join(e.h.World.WorkspaceRoot, "architect")

	type thief struct{ agent, token, id string }
	thieves := []thief{{"reviewer", reviewer, reviewerID}, {"architect", other, otherID}}
	var sessions []string
	var opened []struct {
		v, sid string
		cs     *mcp.ClientSession
	}
	probes := 0
	for _, v := range mcp.SupportedProtocolVersions() {
		// The session is opened on the revision under test, or, for a
		// sessionless revision, on the newest one with sessions.
		openAt := v
		if v >= "2026-07-28" {
			openAt = "2025-11-25"
		}
		var capsName string
		cs := connectAt(t, e.url, "architect", owner, openAt, nil, func(h http.Header) {
			if n := h.Get(server.SessionHeader); n != "" {
				capsName = n
			}
		})
		sid := cs.ID()
		if sid == "" {
			t.Fatalf("%s: no session id", openAt)
		}
		sessions = append(sessions, sid)
		opened = append(opened, struct {
			v, sid string
			cs     *mcp.ClientSession
		}{v, sid, cs})
		if want := server.ScopeSession("architect", server.SessionRef(sid)); capsName != want {
			t.Errorf("%s: X-Armory-Session %q, want %q", v, capsName, want)
		}
		// The raw requests are well formed: the owner gets answers.
		if st, body, _ := e.rpc("POST", "architect", owner, openAt, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`); st != 200 || !strings.Contains(body, "workspace.write") {
			t.Fatalf("%s: the owner's raw tools/list: %d %s", v, st, body)
		}
		for _, th := range thieves {
			file := fmt.Sprintf("stolen-%s-%s.txt", v, th.agent)
			call := fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"workspace.write","arguments":{"path":%q,"content":"pwned"}}}`, file)
			attempts := []struct{ method, body string }{
				{"POST", initBody(v)},
				{"POST", `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`},
				{"POST", call},
				{"GET", ""},
				{"DELETE", ""},
			}
			for _, a := range attempts {
				st, body, _ := e.rpc(a.method, th.agent, th.token, v, sid, a.body)
				what := fmt.Sprintf("%s: %s token %s %s %.40s", v, th.agent, th.id, a.method, a.body)
				if st != http.StatusNotFound {
					t.Errorf("%s: status %d, want 404 (%s)", what, st, body)
					continue
				}
				re := decodeRPCErr(t, body)
				if re.Error.Code != -32001 || re.Error.Data.Kind != "not_found" || !strings.Contains(re.Error.Message, "unknown MCP session") {
					t.Errorf("%s: error %+v", what, re.Error)
				}
				if string(re.ID) != "null" {
					t.Errorf("%s: the error carries id %s, want null (an unknown session is not about one request)", what, re.ID)
				}
				probes++
			}
			if _, err := os.Stat(filepath.Join(ws, file)); err == nil {
				t.Errorf("%s: the stolen session wrote %s into architect's workspace", v, file)
			}
		}
		// The owner's session survived every attempt (DELETE included).
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.write", Arguments: map[string]any{"path": "own-" + v + ".txt", "content": "mine"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: the owner's call after the attempts: %v %+v", v, err, res)
		}
		if _, err := os.Stat(filepath.Join(ws, "own-"+v+".txt")); err != nil {
			t.Errorf("%s: the owner's write: %v", v, err)
		}
	}

	// Each attempt is one probe record naming the prober's agent and token.
	recs, err := e.st.ListAudit(ctx, store.AuditFilter{Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		if r.Tool != "mcp.session" {
			continue
		}
		if r.Status != "blocked" || len(r.Stages) != 1 || r.Stages[0].Name != "session" {
			t.Errorf("probe record %+v", r)
		}
		for _, th := range thieves {
			if r.Agent == th.agent && strings.Contains(strings.Join(r.Stages[0].Reasons, " "), "token "+th.id+" on agent "+th.agent) {
				seen[th.id]++
			}
		}
	}
	if seen[reviewerID]+seen[otherID] != probes || seen[reviewerID] == 0 || seen[otherID] == 0 {
		t.Errorf("probe records by token %v, want %d in all", seen, probes)
	}
	// A real go-sdk client whose requests carry the stolen id in place of
	// its own gets nowhere either.
	for _, o := range opened {
		for _, th := range thieves {
			file := fmt.Sprintf("sdk-stolen-%s-%s.txt", o.v, th.agent)
			c := mcp.NewClient(&mcp.Implementation{Name: "thief", Version: "1"}, nil)
			cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
				Endpoint:   e.url + "/agents/" + th.agent + "/mcp",
				HTTPClient: &http.Client{Transport: stealSession{bearer{token: th.token}, o.sid}},
				MaxRetries: -1,
			}, &mcp.ClientSessionOptions{ProtocolVersion: o.v})
			if err == nil {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.write", Arguments: map[string]any{"path": file, "content": "pwned"}})
				if err == nil && !res.IsError {
					t.Errorf("%s: %s's go-sdk client called through the stolen session", o.v, th.agent)
				}
				cs.Close()
			}
			if _, err := os.Stat(filepath.Join(ws, file)); err == nil {
				t.Errorf("%s: a go-sdk client with the stolen session wrote %s into architect's workspace", o.v, file)
			}
		}
		if _, err := o.cs.ListTools(ctx, nil); err != nil {
			t.Errorf("%s: the owner's session after the go-sdk thieves: %v", o.v, err)
		}
	}
	if recs, err = e.st.ListAudit(ctx, store.AuditFilter{Limit: store.MaxLimit}); err != nil {
		t.Fatal(err)
	}

	// No session id in clear in the audit trail or the log.
	trail, _ := json.Marshal(recs)
	for _, sid := range sessions {
		if bytes.Contains(trail, []byte(sid)) {
			t.Errorf("the audit trail holds session id %s in clear", sid)
		}
		if strings.Contains(logs.String(), sid) {
			t.Errorf("the log holds session id %s in clear", sid)
		}
	}
	if !strings.Contains(logs.String(), "mcp-") {
		t.Errorf("the log names no session by its ref:\n%s", logs.String())
	}
}

// stealSession replaces the session id of every request that carries one
// (and, on the sessionless revision, adds it) with a stolen one.
type stealSession struct {
	rt  http.RoundTripper
	sid string
}

func (s stealSession) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if r.Header.Get("Mcp-Session-Id") != "" || r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
		r.Header.Set("Mcp-Session-Id", s.sid)
	}
	return s.rt.RoundTrip(r)
}

// TestMCPSessionlessRequestsStillWork: on the sessionless revision a
// request names no session and needs none; the session layer lets it
// through for every agent.
func TestMCPSessionlessRequestsStillWork(t *testing.T) {
	e := start(t, server.Options{})
	ctx := ctx30(t)
	for _, agent := range []string{"architect", "reviewer"} {
		cs := connectAt(t, e.url, agent, e.token(agent), "2026-07-28", nil, nil)
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatalf("%s: %v", agent, err)
		}
	}
}

// metricValue reads one sample of the server's /metrics.
// TestMCPSessionLimits: a flood of initializes from one token is held at
// the per-token limit, every token together at the total limit; the excess
// gets a clear JSON-RPC error; the counts show in the metrics; a closed
// session frees its place; memory (goroutines) stays bounded.
func TestMCPSessionLimits(t *testing.T) {
	e := start(t, server.Options{MCPSessionsPerToken: 3, MCPSessions: 5, MCPSessionTimeout: time.Hour})
	const v = "2025-11-25"
	a1 := e.token("architect")
	a2 := e.token("architect")
	rv := e.token("reviewer")

	flood := func(token, agent string, n int) (ids []string, refused []string) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, body, h := e.rpc("POST", agent, token, v, "", initBody(v))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case st == 200 && h.Get("Mcp-Session-Id") != "":
					ids = append(ids, h.Get("Mcp-Session-Id"))
				case st == http.StatusForbidden:
					re := decodeRPCErr(t, body)
					if re.Error.Code != -32002 || re.Error.Data.Kind != "blocked" || string(re.ID) != "1" {
						t.Errorf("refusal %+v", re)
					}
					refused = append(refused, re.Error.Message)
				default:
					t.Errorf("initialize: %d %s", st, body)
				}
			}()
		}
		wg.Wait()
		return ids, refused
	}

	goroutines := runtime.NumGoroutine()
	ids, refused := flood(a1, "architect", 300)
	if len(ids) != 3 || len(refused) != 297 {
		t.Fatalf("300 initializes from one token: %d sessions, %d refused; want 3 and 297", len(ids), len(refused))
	}
	if !strings.Contains(refused[0], "the limit per token is 3") {
		t.Errorf("refusal message %q", refused[0])
	}
	if got := e.metric("armory_mcp_sessions"); got != "3" {
		t.Errorf("armory_mcp_sessions %q, want 3", got)
	}
	if got := e.metric(`armory_mcp_sessions_refused_total{limit="per_token"}`); got != "297" {
		t.Errorf("refused per token %q, want 297", got)
	}
	// 297 refused initializes left nothing behind: no session, no
	// goroutine per attempt (once the flood's connections have closed).
	http.DefaultClient.CloseIdleConnections()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		grown := runtime.NumGoroutine() - goroutines
		if grown <= 60 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines grew by %d after a flood held at 3 sessions", grown)
		}
	}

	// The other tokens fill the server to its total of 5.
	if got, _ := flood(rv, "reviewer", 2); len(got) != 2 {
		t.Fatalf("reviewer's sessions: %d", len(got))
	}
	got, refused := flood(a2, "architect", 4)
	if len(got) != 0 || len(refused) != 4 || !strings.Contains(refused[0], "its limit is 5") {
		t.Fatalf("past the total: %d sessions, refusals %q", len(got), refused)
	}
	if got := e.metric("armory_mcp_sessions"); got != "5" {
		t.Errorf("armory_mcp_sessions %q, want 5", got)
	}
	if got := e.metric(`armory_mcp_sessions_limit{limit="total"}`); got != "5" {
		t.Errorf("limit metric %q", got)
	}
	// A caps session name over the limit is refused before it counts.
	if st, body, _ := e.rpc("POST", "architect", a2, v, "", initBody(v), server.SessionHeader, strings.Repeat("n", 300)); st != 400 || decodeRPCErr(t, body).Error.Code != -32600 {
		t.Errorf("a long X-Armory-Session: %d %s", st, body)
	}
	// Sessionless requests open no session and are not limited.
	if _, err := connectAt(t, e.url, "architect", a2, "2026-07-28", nil, nil).ListTools(ctx30(t), nil); err != nil {
		t.Errorf("a sessionless client at the limit: %v", err)
	}

	// Closing a session frees its place.
	if st, body, _ := e.rpc("DELETE", "architect", a1, v, ids[0], ""); st != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", st, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, _ := flood(a2, "architect", 1)
		if len(got) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed session never freed its place")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st, _, _ := e.rpc("POST", "architect", a1, v, ids[0], `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); st != http.StatusNotFound {
		t.Errorf("the closed session still answers: %d", st)
	}
}

// TestMCPSessionIdleExpiry: with a short idle timeout, sessions nobody uses
// close and free their places; their ids are then unknown.
func TestMCPSessionIdleExpiry(t *testing.T) {
	e := start(t, server.Options{MCPSessionsPerToken: 2, MCPSessionTimeout: 200 * time.Millisecond})
	const v = "2025-06-18"
	tok := e.token("architect")
	var ids []string
	for range 2 {
		st, body, h := e.rpc("POST", "architect", tok, v, "", initBody(v))
		if st != 200 {
			t.Fatalf("initialize: %d %s", st, body)
		}
		ids = append(ids, h.Get("Mcp-Session-Id"))
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.metric("armory_mcp_sessions") != "0" {
		if time.Now().After(deadline) {
			t.Fatalf("idle sessions never expired: %s open", e.metric("armory_mcp_sessions"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range ids {
		st, body, _ := e.rpc("POST", "architect", tok, v, id, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		if st != http.StatusNotFound || decodeRPCErr(t, body).Error.Code != -32001 {
			t.Errorf("an expired session: %d %s", st, body)
		}
	}
	if st, body, _ := e.rpc("POST", "architect", tok, v, "", initBody(v)); st != 200 {
		t.Errorf("initialize after expiry: %d %s", st, body)
	}
}
