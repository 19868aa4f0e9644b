package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
)

// postgresSchema returns a DSN on a fresh Postgres schema, dropped when t ends.
func postgresSchema(t *testing.T) string { return testenv.PostgresSchema(t) }

// replica is one armory server over a shared Postgres store.
type replica struct {
	url  string
	st   store.Store
	stop func()
}

func startReplica(t *testing.T, worldDir, dsn string) *replica {
	t.Helper()
	e := serve(t, engine.Options{World: worldDir, DB: dsn}, server.Options{})
	stop := func() { e.stop(); e.eng.Close() }
	return &replica{url: e.url, st: e.st, stop: stop}
}

// TestMCPSessionContinuesOnAnotherReplica: two servers share one Postgres
// database. A client's session on the first reaches part of its session
// cap; the first server dies; its session id is unknown to the second, so
// the client initializes again there, naming its caps session (the
// X-Armory-Session every response of its old session carried): its calls
// count against the same caps, and the cap holds across the two servers.
// A client that does not name it starts fresh caps.
func TestMCPSessionContinuesOnAnotherReplica(t *testing.T) {
	dsn := postgresSchema(t)
	dir := testenv.ExampleWorld(t, "limits:\n  tool_invocations: 3")
	a := startReplica(t, dir, dsn)
	bb := startReplica(t, dir, dsn)
	tok, _, err := server.CreateToken(context.Background(), a.st, "architect", false, "test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctx30(t)
	call := func(cs *mcp.ClientSession) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.list", Arguments: map[string]any{"path": "."}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	var caps string
	onA := connectAt(t, a.url, "architect", tok, "2025-11-25", nil, func(h http.Header) {
		if n := h.Get(server.SessionHeader); n != "" {
			caps = n
		}
	})
	for i := range 2 {
		if res := call(onA); res.IsError {
			t.Fatalf("call %d on the first replica: %s", i+1, callText(res))
		}
	}
	if !strings.HasPrefix(caps, "architect:mcp-") {
		t.Fatalf("caps session %q", caps)
	}
	oldID := onA.ID()
	a.stop()

	// The second replica does not know the first one's session.
	e := &env{t: t, url: bb.url}
	if st, body, _ := e.rpc("POST", "architect", tok, "2025-11-25", oldID, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); st != http.StatusNotFound || decodeRPCErr(t, body).Error.Code != -32001 {
		t.Fatalf("the dead replica's session on the other: %d %s", st, body)
	}
	var capsB string
	onB := connectAt(t, bb.url, "architect", tok, "2025-11-25", http.Header{server.SessionHeader: {caps}}, func(h http.Header) {
		if n := h.Get(server.SessionHeader); n != "" {
			capsB = n
		}
	})
	if capsB != caps {
		t.Fatalf("the new session's caps session is %q, want %q", capsB, caps)
	}
	if res := call(onB); res.IsError {
		t.Fatalf("call 3, on the second replica: %s", callText(res))
	}
	res := call(onB)
	if !res.IsError || !strings.Contains(callText(res), "Safety limit reached: tool_invocations (3/3)") {
		t.Fatalf("call 4 went past the cap of 3: %s", callText(res))
	}
	// Without the name, a new session has caps of its own.
	fresh := connectAt(t, bb.url, "architect", tok, "2025-11-25", nil, nil)
	if res := call(fresh); res.IsError {
		t.Fatalf("a fresh session: %s", callText(res))
	}
}

// TestRevokedTokenSessionOnAnotherReplica: two servers share one Postgres
// database. A token opens an MCP session on the first; the token is
// revoked through the second. The session is still open on the first, but
// every request of it (a call, the event stream, DELETE) is refused there
// at once with 401, and nothing runs.
func TestRevokedTokenSessionOnAnotherReplica(t *testing.T) {
	dsn := postgresSchema(t)
	dir := testenv.ExampleWorld(t)
	a := startReplica(t, dir, dsn)
	b := startReplica(t, dir, dsn)
	ctx := ctx30(t)
	secret, tok, err := server.CreateToken(ctx, a.st, "architect", false, "test")
	if err != nil {
		t.Fatal(err)
	}
	const version = "2025-11-25"
	ea := &env{t: t, url: a.url}
	session := ea.openRawSession("architect", secret, version)
	if err := b.st.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"POST", "GET", "DELETE"} {
		body := ""
		if m == "POST" {
			body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workspace.write","arguments":{"path":"after-revoke.txt","content":"x"}}}`
		}
		if st, got, _ := ea.rpc(m, "architect", secret, version, session, body); st != http.StatusUnauthorized {
			t.Errorf("%s on the first replica after revocation on the second: %d %.200s", m, st, got)
		}
	}
	if recs, err := b.st.ListAudit(ctx, store.AuditFilter{Agent: "architect", Tool: "workspace.write"}); err != nil || len(recs) != 0 {
		t.Errorf("a revoked token's call ran: %d records, %v", len(recs), err)
	}
}
