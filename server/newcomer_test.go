package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
)

// One view of an agent's tools: the tools the pipeline adds
// (approval.list, approval.decide) are in REST tools, REST brief, the long
// REST list and MCP tools/list alike, and only for approval agents.
func TestToolsOneViewREST_MCP(t *testing.T) {
	e := start(t, server.Options{})
	want := []string{"approval.decide", "approval.list", "workspace.list", "workspace.read", "workspace.search"}

	tok := e.token("warden")
	if names := e.restTools("warden", tok); !slices.Equal(names, want) {
		t.Errorf("REST tools = %v, want %v", names, want)
	}

	status, body, hdr := e.do("GET", "/api/agents/warden/tools/brief", tok, "")
	lines := strings.Split(strings.TrimSuffix(body, "\n"), "\n")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") || len(lines) != len(want) {
		t.Fatalf("brief: %d %q", status, body)
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, "- "+want[i]+": ") {
			t.Errorf("brief line %d = %q, want - %s: …", i, l, want[i])
		}
	}

	status, body, _ = e.do("GET", "/api/agents/warden/tools?long=1", tok, "")
	var long []roster.ToolInfo
	if status != 200 || json.Unmarshal([]byte(body), &long) != nil || len(long) != len(want) {
		t.Fatalf("long: %d %s", status, body)
	}
	if d := long[0]; d.Name != "approval.decide" || d.Source != roster.SourcePipeline || d.Danger.String() != "cautious" || d.Permission.String() != "auto" || len(d.Capabilities) != 1 {
		t.Errorf("long approval.decide = %+v", d)
	}
	if d := long[3]; d.Name != "workspace.read" || d.Source != roster.SourceBuiltin || d.Danger.String() != "cautious" {
		t.Errorf("long workspace.read = %+v", d)
	}
	if status, _, _ := e.do("GET", "/api/agents/warden/tools?long=yes", tok, ""); status != 400 {
		t.Errorf("long=yes: %d", status)
	}
	// The reviewer's toolbox tool, and its level for that agent.
	status, body, _ = e.do("GET", "/api/agents/architect/tools?long=true", e.admin, "")
	long = nil
	if status != 200 || json.Unmarshal([]byte(body), &long) != nil {
		t.Fatalf("architect long: %d %s", status, body)
	}
	got := map[string]roster.ToolInfo{}
	for _, x := range long {
		got[x.Name] = x
	}
	if x := got["devtools.repo-git"]; x.Source != "toolbox devtools" || x.Permission.String() != "confirm" || x.Danger.String() != "dangerous" {
		t.Errorf("architect devtools.repo-git = %+v", x)
	}
	if x := got["tool.python"]; x.Permission.String() != "always_confirm" {
		t.Errorf("architect tool.python (config.md: always_confirm) = %+v", x)
	}
	if _, ok := got["approval.list"]; ok {
		t.Errorf("architect is no approval agent but sees approval.list")
	}

	cs := e.mcp("warden", tok, nil)
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var mcpNames []string
	for _, x := range res.Tools {
		mcpNames = append(mcpNames, x.Name)
	}
	if !slices.Equal(mcpNames, want) {
		t.Errorf("MCP tools/list = %v, want %v", mcpNames, want)
	}
}

// REST and MCP calls naming a tool by its provider name run the tool.
func TestProviderNameRESTAndMCP(t *testing.T) {
	e := start(t, server.Options{})
	tok := e.token("architect")
	// workspace__write is the OpenAI/Anthropic name of workspace.write.
	status, body, _ := e.do("POST", "/api/agents/architect/calls", tok, `{"tool":"workspace__write","args":{"path":"p.txt","content":"hi"}}`)
	var o pipeline.Outcome
	if status != 200 || json.Unmarshal([]byte(body), &o) != nil || o.Status != "success" || !slices.Contains(o.Reasons, `lookup: "workspace__write" is the provider name of workspace.write`) {
		t.Fatalf("REST call by provider name: %d %s", status, body)
	}
	cs := e.mcp("architect", tok, nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "workspace__read", Arguments: map[string]any{"path": "p.txt"}})
	if err != nil || res.IsError || len(res.Content) == 0 || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "hi") {
		t.Fatalf("MCP call by provider name: %v %+v", err, res)
	}
	// Not a way around access: a tool the agent does not see stays unknown.
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "tool__browser", Arguments: map[string]any{}})
	if err == nil && !res.IsError {
		t.Fatalf("tool__browser (not architect's) ran: %+v", res)
	}
	recs, err := e.st.ListAudit(context.Background(), store.AuditFilter{Agent: "architect"})
	if err != nil {
		t.Fatal(err)
	}
	probes := 0
	for _, r := range recs {
		switch {
		case r.Tool == "tool__browser" && r.Status != audit.StatusSuccess:
			probes++ // the refused probe, recorded under the name asked for
		case strings.Contains(r.Tool, "__"):
			t.Errorf("audit record names %q, not the tool", r.Tool)
		}
	}
	if probes != 1 {
		t.Errorf("the refused call of tool__browser left %d audit records, want 1", probes)
	}
}

// A REST call's outcome carries the same reasons as the audit record: the
// permission stage names the config.md line of the rule that decided.
func TestRESTOutcomeReasonsNameRuleSource(t *testing.T) {
	e := start(t, server.Options{})
	tok := e.token("architect")
	status, body, _ := e.do("POST", "/api/agents/architect/calls", tok, `{"tool":"workspace.delete","args":{"path":"a"}}`, "Content-Type", "application/json")
	var o struct {
		Status  string   `json:"status"`
		Reasons []string `json:"reasons"`
		Result  string   `json:"result"`
	}
	// A pending call is a 2xx (202 where the surface says "accepted").
	if status/100 != 2 || json.Unmarshal([]byte(body), &o) != nil {
		t.Fatalf("call: %d %s", status, body)
	}
	want := `permission: confirm by profile trusted (archetype/architect/config.md:15 "profile: trusted") for file_delete tools`
	if o.Status != "pending" || !strings.Contains(strings.Join(o.Reasons, "\n"), want) {
		t.Fatalf("outcome lacks %q: %s", want, body)
	}
}

// GET /api/audit/verify says what the JSONL trail holds in full words
// ("a copy of the store's records 1..N", or none yet), and a request
// without a token is told the whole command that makes one.
func TestRESTVerifyAndTokenHintTexts(t *testing.T) {
	e := start(t, server.Options{})
	if e.eng.Trail() == nil {
		t.Fatal("the server's engine keeps no JSONL trail")
	}
	verify := func() server.VerifyReport {
		t.Helper()
		status, body, _ := e.do("GET", "/api/audit/verify", e.admin, "")
		var rep server.VerifyReport
		if status != 200 || json.Unmarshal([]byte(body), &rep) != nil || !rep.OK {
			t.Fatalf("verify: %d %s", status, body)
		}
		return rep
	}
	if rep := verify(); rep.Records != 0 || rep.JSONL != "chain verified, no records yet" {
		t.Errorf("verify of an empty trail: %+v", rep)
	}
	status, body, _ := e.do("POST", "/api/agents/reviewer/calls", e.token("reviewer"), `{"tool":"workspace.list","args":{}}`)
	if status != 403 && status != 200 && status != 404 {
		t.Fatalf("call: %d %s", status, body)
	}
	head, err := e.st.AuditHead(context.Background())
	if err != nil || head.Seq == 0 {
		t.Fatalf("audit head: %+v %v", head, err)
	}
	if err := e.eng.Trail().WaitWritten(context.Background(), head.Seq); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("chain verified, a copy of the store's records 1..%d", head.Seq)
	if rep := verify(); rep.JSONL != want || rep.JSONLBehind != 0 {
		t.Errorf("verify = %+v, want jsonl %q", rep, want)
	}

	status, body, _ = e.do("GET", "/api/agents/reviewer/tools", "", "")
	if status != 401 || !strings.Contains(body, "armory token create AGENT") {
		t.Errorf("no token: %d %s", status, body)
	}
}
