package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
)

// rpcReply is one JSON-RPC response read from an MCP HTTP answer.
type rpcReply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// rpcReplies reads the JSON-RPC responses of an answer: an application/json
// body (one response or an array) or the data lines of an event stream.
func rpcReplies(t *testing.T, body string, hdr http.Header) []rpcReply {
	t.Helper()
	var datas []string
	switch ct := hdr.Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		for _, line := range strings.Split(body, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && d != "" {
				datas = append(datas, d)
			}
		}
	case strings.HasPrefix(ct, "application/json"):
		if b := strings.TrimSpace(body); strings.HasPrefix(b, "[") {
			var arr []json.RawMessage
			if err := json.Unmarshal([]byte(b), &arr); err != nil {
				t.Fatalf("bad JSON array %q: %v", body, err)
			}
			for _, a := range arr {
				datas = append(datas, string(a))
			}
		} else {
			datas = append(datas, b)
		}
	default:
		if body != "" {
			t.Errorf("answer is %q, not JSON-RPC: %q", ct, body)
			return []rpcReply{{ID: json.RawMessage("plain text")}}
		}
	}
	var out []rpcReply
	for _, d := range datas {
		var probe struct {
			Method *string `json:"method"`
		}
		json.Unmarshal([]byte(d), &probe)
		if probe.Method != nil {
			continue // a notification or a request of the server
		}
		var r rpcReply
		var env struct {
			JSONRPC string `json:"jsonrpc"`
			rpcReply
		}
		if err := json.Unmarshal([]byte(d), &env); err != nil || env.JSONRPC != "2.0" {
			t.Fatalf("not a JSON-RPC response: %q (%v)", d, err)
		}
		r = env.rpcReply
		if (r.Error == nil) == (r.Result == nil) {
			t.Fatalf("a response needs exactly one of result and error: %q", d)
		}
		out = append(out, r)
	}
	return out
}

// mcpPeer speaks raw HTTP to an agent's MCP endpoint in one revision.
type mcpPeer struct {
	e         *env
	tok       string
	version   string
	session   string // Mcp-Session-Id on the stateful revisions
	stateless bool
}

const rpcMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

func newPeer(t *testing.T, e *env, tok, version string) *mcpPeer {
	p := &mcpPeer{e: e, tok: tok, version: version, stateless: version >= "2026-07-28"}
	if p.stateless {
		return p
	}
	status, body, hdr := p.post("initialize", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if status != 200 || hdr.Get("Mcp-Session-Id") == "" {
		t.Fatalf("initialize %s: %d %q", version, status, body)
	}
	p.session = hdr.Get("Mcp-Session-Id")
	if status, body, _ := p.post("notifications/initialized", `{"jsonrpc":"2.0","method":"notifications/initialized"}`); status != 202 {
		t.Fatalf("initialized %s: %d %q", version, status, body)
	}
	return p
}

// params is the params object of a plain request in the peer's revision,
// with the members given.
func (p *mcpPeer) params(members string) string {
	var parts []string
	if members != "" {
		parts = append(parts, members)
	}
	if p.stateless {
		parts = append(parts, rpcMeta)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func (p *mcpPeer) post(method, body string, hdr ...string) (int, string, http.Header) {
	h := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", p.version}
	if p.session != "" {
		h = append(h, "Mcp-Session-Id", p.session)
	}
	if p.stateless {
		h = append(h, "Mcp-Method", method)
	}
	return p.e.do("POST", "/agents/architect/mcp", p.tok, body, append(h, hdr...)...)
}

// TestJSONRPCStrict sends malformed and edge-case JSON-RPC to a real
// server on every MCP revision it serves and checks each answer: the HTTP
// status, a JSON-RPC response (never plain text), the error code and the
// id exactly as sent.
func TestJSONRPCStrict(t *testing.T) {
	e := start(t, server.Options{})
	tok := e.token("architect")
	const (
		result = 1 // a result is expected
		null   = "null"
	)
	type rpcCase struct {
		name   string
		method string // for the Mcp-Method header of the sessionless revision
		body   func(p *mcpPeer) string
		status int   // 0: 200 on the stateful revisions, as given by statusNew on 2026-07-28
		code   int64 // 0: a result
		id     string
		// on 2026-07-28, when it differs
		statusNew int
		codeNew   int64
	}
	call := func(id, method, members string) func(p *mcpPeer) string {
		return func(p *mcpPeer) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"method":"` + method + `","params":` + p.params(members) + `}`
		}
	}
	raw := func(s string) func(p *mcpPeer) string { return func(*mcpPeer) string { return s } }
	exact := func(id string) rpcCase {
		return rpcCase{name: "id " + id, method: "prompts/list", body: call(id, "prompts/list", ""), status: 200, id: id}
	}
	cases := []rpcCase{
		exact(`9223372036854775807`),
		exact(`-9223372036854775808`),
		exact(`9007199254740993`),
		exact(`9007199254740992`),
		exact(`1.5`),
		exact(`1.0`),
		exact(`-0`),
		exact(`1e3`),
		exact(`12345678901234567890123`),
		exact(`"\u0041b"`),
		exact(`"é"`),
		exact(`"armory-id:MQ"`),
		exact(`""`),
		{name: "params before a tokenised id, with a tokenised progress token", method: "prompts/list", body: func(p *mcpPeer) string {
			meta := `"progressToken":1.5`
			if p.stateless {
				meta += `,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
			}
			return `{"params":{"_meta":{` + meta + `}},"jsonrpc":"2.0","method":"prompts/list","id":2.5}`
		}, status: 200, id: `2.5`},
		{name: "trailing garbage", method: "prompts/list", body: func(p *mcpPeer) string { return call(`1`, "prompts/list", "")(p) + "xyz" },
			status: 400, code: -32700, id: null},
		{name: "two messages", method: "prompts/list", body: func(p *mcpPeer) string { return call(`1`, "prompts/list", "")(p) + call(`2`, "prompts/list", "")(p) },
			status: 400, code: -32700, id: null},
		{name: "empty body", body: raw(""), status: 400, code: -32700, id: null},
		{name: "white space only", body: raw(" \n"), status: 400, code: -32700, id: null},
		{name: "not JSON", body: raw(`{"jsonrpc":"2.0",`), status: 400, code: -32700, id: null},
		{name: "a number", body: raw(`5`), status: 400, code: -32600, id: null},
		{name: "a string", body: raw(`"ping"`), status: 400, code: -32600, id: null},
		{name: "null", body: raw(`null`), status: 400, code: -32600, id: null},
		{name: "jsonrpc 1.0", method: "prompts/list", body: raw(`{"jsonrpc":"1.0","id":7,"method":"prompts/list"}`), status: 400, code: -32600, id: `7`},
		{name: "jsonrpc missing", method: "prompts/list", body: raw(`{"id":7,"method":"prompts/list"}`), status: 400, code: -32600, id: `7`},
		{name: "jsonrpc a number", method: "prompts/list", body: raw(`{"jsonrpc":2.0,"id":7,"method":"prompts/list"}`), status: 400, code: -32600, id: `7`},
		{name: "id an object", method: "prompts/list", body: call(`{"a":1}`, "prompts/list", ""), status: 400, code: -32600, id: null},
		{name: "id a bool", method: "prompts/list", body: call(`true`, "prompts/list", ""), status: 400, code: -32600, id: null},
		{name: "id an array", method: "prompts/list", body: call(`[1]`, "prompts/list", ""), status: 400, code: -32600, id: null},
		{name: "request with id null", method: "prompts/list", body: call(`null`, "prompts/list", ""), status: 400, code: -32600, id: null},
		{name: "notification with id null", method: "notifications/initialized",
			body: raw(`{"jsonrpc":"2.0","method":"notifications/initialized","id":null}`), status: 400, code: -32600, id: null},
		{name: "neither method nor result", body: raw(`{"jsonrpc":"2.0","id":2}`), status: 400, code: -32600, id: `2`},
		{name: "only jsonrpc", body: raw(`{"jsonrpc":"2.0"}`), status: 400, code: -32600, id: null},
		{name: "result and error", body: raw(`{"jsonrpc":"2.0","id":2,"result":{},"error":{"code":1,"message":"x"}}`), status: 400, code: -32600, id: `2`},
		{name: "method and result", method: "prompts/list", body: raw(`{"jsonrpc":"2.0","id":2,"method":"prompts/list","result":{}}`), status: 400, code: -32600, id: `2`},
		{name: "method not a string", body: raw(`{"jsonrpc":"2.0","id":2,"method":5}`), status: 400, code: -32600, id: `2`},
		{name: "params a string", method: "prompts/list", body: raw(`{"jsonrpc":"2.0","id":2,"method":"prompts/list","params":"x"}`), status: 400, code: -32600, id: `2`},
		{name: "params null", method: "prompts/list", body: raw(`{"jsonrpc":"2.0","id":2,"method":"prompts/list","params":null}`), status: 400, code: -32600, id: `2`},
		{name: "member twice", method: "prompts/list", body: raw(`{"jsonrpc":"2.0","id":2,"method":"prompts/list","method":"tools/list"}`), status: 400, code: -32600, id: `2`},
		{name: "member in another case", method: "prompts/list", body: raw(`{"jsonrpc":"2.0","id":2,"method":"prompts/list","Method":"tools/list"}`), status: 400, code: -32600, id: `2`},
		{name: "unknown method", method: "no/such", body: call(`3`, "no/such", ""), status: 200, code: -32601, id: `3`, statusNew: 404},
		{name: "unknown method, id 1.5", method: "no/such", body: call(`1.5`, "no/such", ""), status: 200, code: -32601, id: `1.5`, statusNew: 404},
		{name: "unknown notification", method: "notifications/no-such", body: raw(`{"jsonrpc":"2.0","method":"notifications/no-such"}`), status: 400, code: -32601, id: null},
		{name: "notification method with an id", method: "notifications/initialized", body: raw(`{"jsonrpc":"2.0","id":8,"method":"notifications/initialized"}`),
			status: 400, code: -32600, id: `8`},
		{name: "params missing", method: "tools/call", body: raw(`{"jsonrpc":"2.0","id":9,"method":"tools/call"}`), status: 200, code: -32602, id: `9`,
			statusNew: 400},
		{name: "unknown log level", method: "logging/setLevel", body: call(`4`, "logging/setLevel", `"level":"loud"`), status: 200, code: -32602, id: `4`,
			statusNew: 404, codeNew: -32601}, // logging/setLevel is gone in 2026-07-28
		{name: "log level missing", method: "logging/setLevel", body: call(`4`, "logging/setLevel", ""), status: 200, code: -32602, id: `4`,
			statusNew: 404, codeNew: -32601},
		{name: "known log level", method: "logging/setLevel", body: call(`"lv"`, "logging/setLevel", `"level":"warning"`), status: 200, id: `"lv"`,
			statusNew: 404, codeNew: -32601},
		{name: "unknown log level in _meta (2026-07-28)", method: "prompts/list", body: func(p *mcpPeer) string {
			if !p.stateless {
				return call(`5`, "prompts/list", "")(p)
			}
			return `{"jsonrpc":"2.0","id":5,"method":"prompts/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}}`
		}, status: 200, id: `5`, statusNew: 400, codeNew: -32602},
		{name: "known log level in _meta (2026-07-28)", method: "prompts/list", body: func(p *mcpPeer) string {
			if !p.stateless {
				return call(`5`, "prompts/list", "")(p)
			}
			return `{"jsonrpc":"2.0","id":5,"method":"prompts/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"error"}}}`
		}, status: 200, id: `5`},
		{name: "error response without id", body: raw(`{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}`), status: 202},
		{name: "empty batch", body: raw(`[]`), status: 400, code: -32600, id: null},
	}
	for _, version := range []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			p := newPeer(t, e, tok, version)
			for _, c := range cases {
				status, code := c.status, c.code
				if p.stateless && c.statusNew != 0 {
					status = c.statusNew
				}
				if p.stateless && c.codeNew != 0 {
					code = c.codeNew
				}
				body := c.body(p)
				gotStatus, gotBody, hdr := p.post(c.method, body)
				if gotStatus != status {
					t.Errorf("%s: %s: status %d, want %d (%q)", c.name, body, gotStatus, status, gotBody)
					continue
				}
				replies := rpcReplies(t, gotBody, hdr)
				if status == 202 {
					if len(replies) != 0 {
						t.Errorf("%s: answered %q", c.name, gotBody)
					}
					continue
				}
				if len(replies) != 1 {
					t.Errorf("%s: %s: %d responses, want 1: %q", c.name, body, len(replies), gotBody)
					continue
				}
				r := replies[0]
				if string(r.ID) != c.id {
					t.Errorf("%s: id %s, want %s (%q)", c.name, r.ID, c.id, gotBody)
				}
				switch {
				case code == 0 && r.Error != nil:
					t.Errorf("%s: error %+v, want a result", c.name, *r.Error)
				case code != 0 && (r.Error == nil || r.Error.Code != code):
					t.Errorf("%s: %s: got %q, want error %d", c.name, body, gotBody, code)
				}
			}
		})
	}
}

// TestJSONRPCBatches: batches are served on the revisions before
// 2025-06-18, ids kept exactly (1 and 1.5 are two requests), and refused
// with a JSON-RPC error on the later ones.
func TestJSONRPCBatches(t *testing.T) {
	e := start(t, server.Options{})
	tok := e.token("architect")
	batch := `[{"jsonrpc":"2.0","id":1,"method":"prompts/list"},{"jsonrpc":"2.0","id":1.5,"method":"prompts/list"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}}]`
	for _, version := range []string{"2025-03-26", "2025-06-18", "2025-11-25"} {
		p := newPeer(t, e, tok, version)
		status, body, hdr := p.post("", batch)
		replies := rpcReplies(t, body, hdr)
		if version >= "2025-06-18" {
			if status != 400 || len(replies) != 1 || replies[0].Error == nil || replies[0].Error.Code != -32600 || string(replies[0].ID) != "null" {
				t.Errorf("%s: batch answered %d %q", version, status, body)
			}
			continue
		}
		var ids []string
		for _, r := range replies {
			if r.Error != nil {
				t.Errorf("%s: error %+v", version, *r.Error)
			}
			ids = append(ids, string(r.ID))
		}
		if status != 200 || strings.Join(ids, " ") != "1 1.5" && strings.Join(ids, " ") != "1.5 1" {
			t.Errorf("%s: batch answered %d with ids %v: %q", version, status, ids, body)
		}
		// A bad element refuses the batch, with the element's id.
		status, body, hdr = p.post("", `[{"jsonrpc":"2.0","id":1,"method":"prompts/list"},{"jsonrpc":"2.0","id":9,"params":{}}]`)
		if r := rpcReplies(t, body, hdr); status != 400 || len(r) != 1 || r[0].Error == nil || r[0].Error.Code != -32600 || string(r[0].ID) != "9" {
			t.Errorf("%s: bad batch answered %d %q", version, status, body)
		}
	}
}

// TestJSONRPCSessions: requests naming an unknown session, or none on a
// revision with sessions, get a JSON-RPC error with a real code; the
// go-sdk client still learns that its session is gone.
func TestJSONRPCSessions(t *testing.T) {
	e := start(t, server.Options{})
	tok := e.token("architect")
	post := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream", "Mcp-Protocol-Version", "2025-11-25"}
	check := func(what string, status int, body string, hdr http.Header, wantStatus int, wantCode int64) {
		t.Helper()
		r := rpcReplies(t, body, hdr)
		if status != wantStatus || len(r) != 1 || r[0].Error == nil || r[0].Error.Code != wantCode || string(r[0].ID) != "null" {
			t.Errorf("%s: %d %q, want %d with error %d", what, status, body, wantStatus, wantCode)
		}
	}
	// The go-sdk client: a deleted session is ErrSessionMissing on the
	// next call, as the spec's 404 asks (the error has no id).
	c := mcp.NewClient(&mcp.Implementation{Name: "armory-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx30(t), &mcp.StreamableClientTransport{
		Endpoint:   e.url + "/agents/architect/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: tok}},
		MaxRetries: -1,
		// Without the GET stream, whose end would tell first.
		DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if s, b, _ := e.do("DELETE", "/agents/architect/mcp", tok, "", "Mcp-Session-Id", cs.ID()); s != 204 {
		t.Fatalf("DELETE: %d %q", s, b)
	}
	_, err = cs.ListTools(ctx30(t), nil)
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Errorf("call on a deleted session: %v, want ErrSessionMissing", err)
	}
	ping := `{"jsonrpc":"2.0","id":6,"method":"ping"}`
	s, b, h := e.do("POST", "/agents/architect/mcp", tok, ping, append(post, "Mcp-Session-Id", "no-such-session")...)
	check("POST, unknown session", s, b, h, 404, server.CodeSessionNotFound)
	s, b, h = e.do("GET", "/agents/architect/mcp", tok, "", "Accept", "text/event-stream", "Mcp-Session-Id", "no-such-session")
	check("GET, unknown session", s, b, h, 404, server.CodeSessionNotFound)
	s, b, h = e.do("DELETE", "/agents/architect/mcp", tok, "", "Mcp-Session-Id", "no-such-session")
	check("DELETE, unknown session", s, b, h, 404, server.CodeSessionNotFound)
	for _, body := range []string{ping, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`} {
		s, b, h = e.do("POST", "/agents/architect/mcp", tok, body, post...)
		check("POST without a session: "+body, s, b, h, 400, server.CodeTransport)
	}
	s, b, h = e.do("GET", "/agents/architect/mcp", tok, "", "Accept", "text/event-stream")
	check("GET without a session", s, b, h, 400, server.CodeTransport)
	s, b, h = e.do("PUT", "/agents/architect/mcp", tok, "{}", "Content-Type", "application/json")
	check("PUT", s, b, h, 405, server.CodeTransport)
	s, b, h = e.do("POST", "/agents/architect/mcp", tok, ping, "Content-Type", "text/plain", "Accept", "application/json, text/event-stream")
	check("text/plain body", s, b, h, 415, server.CodeTransport)
	small := start(t, server.Options{MaxBodyBytes: 4096})
	s, b, h = small.do("POST", "/agents/architect/mcp", small.token("architect"),
		`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`+strings.Repeat("a", 5000)+`"}}`, post...)
	check("over the body limit", s, b, h, 413, server.CodeTransport)

}

// TestJSONRPCPendingIDs: a request with id 1.5 sent while a request with
// id 1 of the same session is still running is a request of its own.
func TestJSONRPCPendingIDs(t *testing.T) {
	e := start(t, server.Options{ApprovalWait: 10 * time.Minute})
	ev := e.events(e.admin)
	tok := e.token("architect")
	p := newPeer(t, e, tok, "2025-11-25")
	type answer struct {
		status int
		body   string
		hdr    http.Header
	}
	first := make(chan answer, 1)
	go func() {
		// workspace.delete waits for a human's approval.
		s, b, h := p.post("tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workspace.delete","arguments":{"path":"x"}}}`)
		first <- answer{s, b, h}
	}()
	req := ev.waitFor(t, kind(pipeline.EventApprovalRequested))
	s, b, h := p.post("prompts/list", `{"jsonrpc":"2.0","id":1.5,"method":"prompts/list"}`)
	if r := rpcReplies(t, b, h); s != 200 || len(r) != 1 || r[0].Error != nil || string(r[0].ID) != "1.5" {
		t.Errorf("id 1.5 while 1 is pending: %d %q", s, b)
	}
	if s, b, _ := e.do("POST", "/api/approvals/"+req.ApprovalID+"/deny", e.admin, `{"reason":"no"}`); s != 200 {
		t.Fatalf("deny: %d %s", s, b)
	}
	a := <-first
	if r := rpcReplies(t, a.body, a.hdr); a.status != 200 || len(r) != 1 || string(r[0].ID) != "1" || !bytes.Contains(r[0].Result, []byte(`"isError":true`)) {
		t.Errorf("id 1: %d %q", a.status, a.body)
	}

	ev.waitFor(t, func(x pipeline.Event) bool { return x.Kind == pipeline.EventCallFinished && x.Status == "denied" })

	// A request with id 1.5 (another path: calling again with the denied
	// call's arguments would answer with that denial) is cancelled by
	// notifications/cancelled naming 1.5, while its answer streams progress notifications with the
	// progress token exactly as sent.
	ctx, cancel := context.WithCancel(ctx30(t))
	defer cancel()
	streamed := make(chan string, 1)
	go func() {
		hr, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/agents/architect/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"workspace.delete","arguments":{"path":"y"},"_meta":{"progressToken":9007199254740993}}}`))
		for k, v := range map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": p.version, "Mcp-Session-Id": p.session} {
			hr.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			streamed <- err.Error()
			return
		}
		defer resp.Body.Close()
		rd := bufio.NewReader(resp.Body)
		line, err := rd.ReadString('\n')
		for err == nil && !strings.HasPrefix(line, "data: ") {
			line, err = rd.ReadString('\n')
		}
		streamed <- line
	}()
	ev.waitFor(t, func(x pipeline.Event) bool {
		return x.Kind == pipeline.EventApprovalRequested && x.ApprovalID != req.ApprovalID
	})
	if line := <-streamed; !strings.Contains(line, `"method":"notifications/progress"`) || !strings.Contains(line, `"progressToken":9007199254740993`) {
		t.Errorf("the first event of the stream: %q", line)
	}
	if s, b, _ := p.post("notifications/cancelled", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1.5,"reason":"enough"}}`); s != 202 {
		t.Errorf("cancel: %d %q", s, b)
	}
	// The server stopped waiting (long before the 10-minute approval
	// wait): the call ended pending.
	ev.waitFor(t, func(x pipeline.Event) bool { return x.Kind == pipeline.EventCallFinished && x.Status == "pending" })
}
