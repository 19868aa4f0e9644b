package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/store"
)

var agentsWorld = map[string]string{
	"world-config.yaml": `name: agents
tool_privileges:
  admin: [syscall.agent.create, syscall.agent.stop, syscall.agent.start, syscall.agent.inspect]
agents:
  - id: boss
  - id: worker
`,
	"archetype/boss/config.md":   "## Tool Access\nprivilege_groups: admin\n",
	"archetype/worker/config.md": "## Tool Access\n- think\n",
}

func mcpCall(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) (string, bool) {
	t.Helper()
	r, err := s.CallTool(ctx30(t), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return callText(r), r.IsError
}

// A stopped agent is refused over MCP and REST with the gate's reason;
// the REST agent routes act as a human with an admin token and as the
// token's agent (access policy, pipeline) with an agent token.
func TestAgentsStopOverMCPAndREST(t *testing.T) {
	e := startServices(t, agentsWorld)
	bossTok, workerTok := e.token("boss"), e.token("worker")
	worker := e.mcp("worker", workerTok, nil)
	if txt, isErr := mcpCall(t, worker, "think", map[string]any{"thought": "one"}); isErr {
		t.Fatalf("think: %s", txt)
	}

	// The worker is outside the admin group: the pipeline refuses the tool
	// it does not have (the ghost world: an unknown tool, 404) and audits
	// the refusal, as on every surface.
	if code, body, _ := e.do("POST", "/api/agents/boss/stop", workerTok, ""); code != http.StatusNotFound || !strings.Contains(body, "Unknown tool: syscall.agent.stop") {
		t.Fatalf("worker stops boss: %d %s", code, body)
	}
	if recs, err := e.st.ListAudit(context.Background(), store.AuditFilter{Tool: "syscall.agent.stop", Agent: "worker", Limit: 5}); err != nil || len(recs) != 1 || recs[0].Status != "error" {
		t.Fatalf("the worker's refused stop in the trail: %v %+v", err, recs)
	}
	// The boss may: its call goes through the pipeline.
	if code, body, _ := e.do("POST", "/api/agents/worker/stop", bossTok, ""); code != http.StatusOK || !strings.Contains(body, `"status":"stopped"`) {
		t.Fatalf("boss stops worker: %d %s", code, body)
	}
	txt, isErr := mcpCall(t, worker, "think", map[string]any{"thought": "two"})
	if !isErr || !strings.Contains(txt, "agent worker is stopped") {
		t.Fatalf("MCP call of a stopped agent: %v %s", isErr, txt)
	}
	code, body, _ := e.do("POST", "/api/agents/worker/calls", workerTok, `{"tool":"think","args":{"thought":"three"}}`)
	if !strings.Contains(body, "agent worker is stopped") || !strings.Contains(body, `"status":"blocked"`) {
		t.Fatalf("REST call of a stopped agent: %d %s", code, body)
	}
	// Its token's agent routes are refused too (the pipeline's gate).
	if code, body, _ := e.do("GET", "/api/agents", workerTok, ""); code != http.StatusForbidden || !strings.Contains(body, "is stopped") {
		t.Fatalf("stopped worker lists agents: %d %s", code, body)
	}
	// The admin (a human) sees the status and starts it again.
	if code, body, _ := e.do("GET", "/api/agents", e.admin, ""); code != http.StatusOK || !strings.Contains(body, `"id":"worker","archetype":"worker","tools":`) || !strings.Contains(body, `"status":"stopped"`) {
		t.Fatalf("admin list: %d %s", code, body)
	}
	if code, body, _ := e.do("POST", "/api/agents/worker/start", e.admin, ""); code != http.StatusOK || !strings.Contains(body, `"status":"running"`) {
		t.Fatalf("admin start: %d %s", code, body)
	}
	if txt, isErr := mcpCall(t, worker, "think", map[string]any{"thought": "four"}); isErr {
		t.Fatalf("think after start: %s", txt)
	}
	if code, body, _ := e.do("POST", "/api/agents/nobody/stop", e.admin, ""); code != http.StatusNotFound {
		t.Fatalf("admin stops an unknown agent: %d %s", code, body)
	}
	// The human's start is in the trail, via rest.
	recs, err := e.st.ListAudit(context.Background(), store.AuditFilter{Tool: "agent.start", Limit: 5})
	if err != nil || len(recs) != 1 || recs[0].DecidedBy != "human" || recs[0].Agent != "worker" || !strings.Contains(string(recs[0].Args), `"via":"rest"`) {
		t.Fatalf("the human's start in the trail: %v %+v", err, recs)
	}
	// The boss's stop is the boss's call, audited as such.
	recs, err = e.st.ListAudit(context.Background(), store.AuditFilter{Tool: "syscall.agent.stop", Agent: "boss", Limit: 5})
	if err != nil || len(recs) == 0 {
		t.Fatalf("the boss's stop in the trail: %v %+v", err, recs)
	}
}

// An agent created at run time is reachable over MCP at once.
func TestCreatedAgentOverMCP(t *testing.T) {
	e := startServices(t, agentsWorld)
	boss := e.mcp("boss", e.token("boss"), nil)
	if txt, isErr := mcpCall(t, boss, "syscall.agent.create", map[string]any{"id": "helper", "archetype": "worker"}); isErr {
		t.Fatalf("create: %s", txt)
	}
	helper := e.mcp("helper", e.token("helper"), nil)
	tools, err := helper.ListTools(ctx30(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !strings.Contains(strings.Join(names, ","), "think") || strings.Contains(strings.Join(names, ","), "syscall.agent.stop") {
		t.Fatalf("helper's tools: %v", names)
	}
	if txt, isErr := mcpCall(t, helper, "think", map[string]any{"thought": "hello"}); isErr {
		t.Fatalf("helper think: %s", txt)
	}
	if _, isErr := mcpCall(t, boss, "syscall.agent.stop", map[string]any{"agent": "helper"}); isErr {
		t.Fatal("boss could not stop helper")
	}
	if txt, isErr := mcpCall(t, helper, "think", map[string]any{"thought": "again"}); !isErr || !strings.Contains(txt, "agent helper is stopped") {
		t.Fatalf("stopped helper over MCP: %s", txt)
	}
}
