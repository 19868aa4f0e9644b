package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
)

// raw sends one request with exactly this request target (no client-side
// cleaning or escaping) and returns the response with its body.
func (e *env) raw(method, target, token string) (int, string, http.Header) {
	e.t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", method, target, strings.TrimPrefix(e.url, "http://"))
	if token != "" {
		req += "Authorization: Bearer " + token + "\r\n"
	}
	if method == "POST" {
		req += "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
	} else {
		req += "\r\n"
	}
	if _, err := io.WriteString(conn, req); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// Every malformed query, path or escape is a JSON 400 (or the 401/403 of
// the token), never a redirect and never a wider answer: no record of
// another agent comes back.
func TestRESTRefusesWhatItCannotParse(t *testing.T) {
	e := start(t, server.Options{})
	ctx := ctx30(t)
	arch, rev := e.token("architect"), e.token("reviewer")
	// One call each by two agents; the reviewer's call id must never show up
	// in an answer about the architect.
	secret := ""
	for _, agent := range []string{"architect", "reviewer"} {
		o := e.srv.Pipeline().Execute(ctx, pipeline.Call{Agent: agent, Tool: "workspace.list", Args: json.RawMessage(`{}`)})
		if o.CallID == "" || agent == "architect" && o.Status != audit.StatusSuccess {
			t.Fatalf("%s: %+v", agent, o)
		}
		if agent == "reviewer" {
			secret = o.CallID
		}
	}
	before, err := e.st.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// The well-formed filter answers only the architect's records.
	status, body, _ := e.raw("GET", "/api/audit?agent=architect&limit=10&since=1h&status=success&tool=workspace.list&session=architect:default", e.admin)
	var recs []audit.Record
	if status != 200 || json.Unmarshal([]byte(body), &recs) != nil || len(recs) != 1 || recs[0].Agent != "architect" {
		t.Fatalf("well-formed filter: %d %s", status, body)
	}

	for _, tc := range []struct {
		method, target, token string
		status                int
		want                  string // in the error message
	}{
		// malformed queries
		{"GET", "/api/audit?agent=%zz", "admin", 400, "malformed query"},
		{"GET", "/api/audit?agent=architect&x=%zz", "admin", 400, "malformed query"},
		{"GET", "/api/audit?%zz=architect", "admin", 400, "malformed query"},
		{"GET", "/api/audit?agent=architect;tool=x", "admin", 400, "malformed query"},
		{"GET", "/api/audit?agent=architect&agent=reviewer", "admin", 400, `"agent" is repeated`},
		{"GET", "/api/audit?agent=architect&agent=architect", "admin", 400, `"agent" is repeated`},
		{"GET", "/api/audit?agent=", "admin", 400, `"agent" is empty`},
		{"GET", "/api/audit?agent", "admin", 400, `"agent" is empty`},
		{"GET", "/api/audit?agent=architect%00", "admin", 400, `"agent" contains a control character`},
		{"GET", "/api/audit?Agent=architect", "admin", 400, `unknown query parameter "Agent"`},
		{"GET", "/api/audit?agent=architect&call=x", "admin", 400, `unknown query parameter "call"`},
		{"GET", "/api/audit?=architect", "admin", 400, `unknown query parameter ""`},
		{"GET", "/api/audit?limit=-1", "admin", 400, `"limit"`},
		{"GET", "/api/audit?limit=0", "admin", 400, `"limit"`},
		{"GET", "/api/audit?limit=10001", "admin", 400, `"limit"`},
		{"GET", "/api/audit?limit=1e3", "admin", 400, `"limit"`},
		{"GET", "/api/audit?limit=%2B5", "admin", 400, `"limit"`},
		{"GET", "/api/audit?since=garbage", "admin", 400, `"since"`},
		{"GET", "/api/audit?since=-1h", "admin", 400, `"since"`},
		{"GET", "/api/audit?status=unknownvalue", "admin", 400, `"status"`},
		{"GET", "/api/approvals?status=unknownvalue", "admin", 400, `"status"`},
		{"GET", "/api/approvals?status=pending&status=denied", "admin", 400, `"status" is repeated`},
		{"GET", "/api/approvals?agent=%zz", "admin", 400, "malformed query"},
		{"GET", "/api/approvals?limit=5", "admin", 400, `unknown query parameter "limit"`},
		{"GET", "/api/agents?x=1", "admin", 400, `unknown query parameter "x" (this endpoint takes none)`},
		{"GET", "/api/agents/architect/tools?agent=reviewer", "architect", 400, `unknown query parameter "agent"`},
		{"GET", "/api/agents/architect/tools/brief?x", "architect", 400, `unknown query parameter "x"`},
		{"POST", "/api/agents/architect/calls?tool=workspace.list", "architect", 400, `unknown query parameter "tool"`},
		{"POST", "/api/approvals/x/approve?reason=ok", "admin", 400, `unknown query parameter "reason"`},
		{"GET", "/api/audit/verify?x=1", "admin", 400, `unknown query parameter "x"`},
		{"GET", "/api/events?x=1", "admin", 400, `unknown query parameter "x"`},
		{"GET", "/healthz?x=1", "", 400, `unknown query parameter "x"`},
		// the token is checked before the query
		{"GET", "/api/audit?agent=%zz", "", 401, "bearer token"},
		{"GET", "/api/audit?agent=%zz", "reviewer", 403, "admin"},
		// path tricks: the router would redirect (with an HTML body) or read
		// another route; each is refused as it is
		{"GET", "//api/audit", "admin", 400, "malformed path"},
		{"GET", "/api//audit", "admin", 400, "malformed path"},
		{"GET", "/api/audit/", "admin", 400, "malformed path"},
		{"GET", "/api/../api/audit", "admin", 400, "malformed path"},
		{"GET", "/api/./audit", "admin", 400, "malformed path"},
		{"GET", "/api/%2e%2e/api/audit", "admin", 400, "malformed path"},
		{"GET", "/api/agents/%2e%2e/tools", "admin", 400, "malformed path"},
		{"GET", "/api/agents/%2E/tools", "admin", 400, "malformed path"},
		{"GET", "/api/agents/a%2Fb/tools", "admin", 400, "malformed path"},
		{"GET", "/api/agents/reviewer%2F..%2Farchitect/tools", "reviewer", 400, "malformed path"},
		{"GET", "/api/agents/reviewer/../architect/tools", "reviewer", 400, "malformed path"},
		{"GET", "/api/agents/architect%00/tools", "admin", 400, "malformed path"},
		{"GET", "/api/agents/architect%0a/tools", "admin", 400, "malformed path"},
		{"GET", "/api/agents/architect%5C..%5Creviewer/tools", "reviewer", 400, "malformed path"},
		{"GET", "/api/agents/%ff/tools", "admin", 400, "malformed path"},
		{"GET", "/agents/architect/../reviewer/mcp", "architect", 400, "malformed path"},
		{"POST", "/api/agents/architect/./calls", "architect", 400, "malformed path"},
		{"GET", "/api/audit/..", "admin", 400, "malformed path"},
		{"GET", "/api/audit/.", "admin", 400, "malformed path"},
		// unknown routes and methods are JSON too
		{"GET", "/api/nope", "admin", 404, "no such endpoint"},
		{"DELETE", "/api/audit", "admin", 404, "no such endpoint: DELETE /api/audit (this path takes GET)"},
		{"GET", "/api/agents/architect/calls", "admin", 404, "(this path takes POST)"},
		{"GET", "/api/agents/nobody/tools", "admin", 404, "unknown agent"},
	} {
		token := map[string]string{"admin": e.admin, "architect": arch, "reviewer": rev}[tc.token]
		status, body, hdr := e.raw(tc.method, tc.target, token)
		name := tc.method + " " + tc.target
		if status != tc.status {
			t.Errorf("%s: status %d, want %d: %.200s", name, status, tc.status, body)
			continue
		}
		if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			t.Errorf("%s: Content-Type %q: %s", name, ct, body)
		}
		var eb errBody
		if err := json.Unmarshal([]byte(body), &eb); err != nil || eb.Error.Kind == "" || !strings.Contains(eb.Error.Message, tc.want) {
			t.Errorf("%s: body %s, want an error containing %q", name, body, tc.want)
		}
		if strings.Contains(body, secret) {
			t.Errorf("%s: another agent's record leaked: %s", name, body)
		}
	}

	// A request line net/http itself cannot parse never reaches Armory: it
	// is a 400 from net/http, and nothing else.
	for _, target := range []string{"/api/audit%zz", "/api/agents/%zz/tools"} {
		if status, body, _ := e.raw("GET", target, e.admin); status != 400 || strings.Contains(body, secret) {
			t.Errorf("GET %s: %d %s", target, status, body)
		}
	}
	// Nothing above reached the pipeline or wrote a record.
	all, err := e.st.ListAudit(ctx, store.AuditFilter{})
	if err != nil || len(all) != len(before) {
		t.Fatalf("audit after the malformed requests: %d records, %v", len(all), err)
	}
}
