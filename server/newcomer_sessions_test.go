package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
)

type restOutcome struct {
	Status, Result, Human, Session string
	CallID                         string `json:"call_id"`
	ApprovalID                     string `json:"approval_id"`
}

func (e *env) call(t *testing.T, token, agent, body string) restOutcome {
	t.Helper()
	code, out, _ := e.do("POST", "/api/agents/"+agent+"/calls", token, body)
	var o restOutcome
	if json.Unmarshal([]byte(out), &o) != nil || o.Status == "" {
		t.Fatalf("call: %d %s", code, out)
	}
	// The status follows the outcome (docs/mcp.md, REST calls).
	want := map[string]int{"success": 200, "pending": 202, "blocked": 403, "denied": 403}[o.Status]
	if want != 0 && code != want {
		t.Fatalf("call: %s outcome answered %d, want %d: %s", o.Status, code, want, out)
	}
	return o
}

// Loop detection through two `armory serve` replicas on one Postgres: five
// identical calls of one session, at once, alternating between the replicas:
// four run, the fifth is refused; the refusal's advice (a "justification")
// works in the arguments and in the REST field, and is audited.
func TestReplicasRepetitionPostgres(t *testing.T) {
	dsn := postgresSchema(t)
	dir := testenv.ExampleWorld(t)
	ctx := context.Background()
	var reps []*env
	for range 2 {
		reps = append(reps, serve(t, engine.Options{World: dir, DB: dsn}, server.Options{}))
	}
	token, _, err := server.CreateToken(ctx, reps[0].st, "scribe", false, "test")
	if err != nil {
		t.Fatal(err)
	}
	if o := reps[1].call(t, token, "scribe", `{"tool":"workspace.write","args":{"path":"r.txt","content":"r"},"session":"s"}`); o.Status != "success" {
		t.Fatalf("write: %+v", o)
	}
	out := testenv.Parallel(5, func(i int) restOutcome {
		return reps[i%2].call(t, token, "scribe", `{"tool":"workspace.read","args":{"path":"r.txt"},"session":"s"}`)
	})
	ok, loops := 0, 0
	for _, o := range out {
		switch {
		case o.Status == "success":
			ok++
		case o.Status == "blocked" && strings.Contains(o.Result, "Loop detected") && strings.Contains(o.Result, `"justification"`):
			loops++
		default:
			t.Errorf("unexpected %+v", o)
		}
	}
	if ok != 4 || loops != 1 {
		t.Fatalf("%d ran, %d refused as a loop across replicas; want 4 and 1", ok, loops)
	}
	o := reps[0].call(t, token, "scribe", `{"tool":"workspace.read","args":{"path":"r.txt","justification":"checking a file another agent writes"},"session":"s"}`)
	o2 := reps[1].call(t, token, "scribe", `{"tool":"workspace.read","args":{"path":"r.txt"},"session":"s","justification":"still checking"}`)
	if o.Status != "success" || o2.Status != "success" {
		t.Fatalf("justified: %+v %+v", o, o2)
	}
	recs, err := reps[1].st.ListAudit(ctx, store.AuditFilter{CallID: o.CallID, Oldest: true})
	if err != nil || len(recs) != 2 || recs[1].Justification != "checking a file another agent writes" || strings.Contains(string(recs[1].Args), "justification") {
		t.Fatalf("audit: %v %+v", err, recs)
	}
}

// Over MCP a model sees only schemas and results: every tool's input schema
// offers "justification"; a loop refusal names it and a call with it runs
// (audited); a call waiting for approval says what the model can do and no
// command; calling again continues the same request, and runs once a human
// approves. The human's instructions stay out of what the model gets.
func TestMCPModelCanContinue(t *testing.T) {
	e := start(t, server.Options{ApprovalWait: time.Millisecond}) // a client that does not wait long
	ctx := ctx30(t)
	cs := e.mcp("architect", e.token("architect"), nil)
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools.Tools {
		b, _ := json.Marshal(tl.InputSchema)
		var sch struct {
			Properties map[string]struct{ Type string } `json:"properties"`
		}
		if json.Unmarshal(b, &sch) != nil || sch.Properties["justification"].Type != "string" {
			t.Errorf("%s: no justification in the input schema: %s", tl.Name, b)
		}
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := call("workspace.write", map[string]any{"path": "m.txt", "content": "m"}); r.IsError {
		t.Fatal(callText(r))
	}
	var r *mcp.CallToolResult
	for range 5 {
		r = call("workspace.read", map[string]any{"path": "m.txt"})
	}
	if !r.IsError || !strings.Contains(callText(r), "Loop detected") || !strings.Contains(callText(r), `"justification" argument`) {
		t.Fatalf("fifth identical call: %s", callText(r))
	}
	r = call("workspace.read", map[string]any{"path": "m.txt", "justification": "the file changes under me"})
	if r.IsError || callText(r) != "m" {
		t.Fatalf("justified: %s", callText(r))
	}
	recs, _ := e.st.ListAudit(ctx, store.AuditFilter{Agent: "architect", Tool: "workspace.read", Limit: 1})
	if len(recs) != 1 || recs[0].Justification != "the file changes under me" || recs[0].Status != audit.StatusSuccess {
		t.Fatalf("audit: %+v", recs)
	}

	// devtools.repo-git is confirm-level for architect.
	args := map[string]any{"command": "init"}
	r = call("devtools.repo-git", args)
	text := callText(r)
	b, _ := json.Marshal(r.StructuredContent)
	var sc struct {
		Status     string
		ApprovalID string `json:"approval_id"`
		Human      string
	}
	json.Unmarshal(b, &sc)
	if sc.Status != "pending" || sc.ApprovalID == "" || strings.Contains(text, "armory ") || strings.Contains(string(b), "armory ") ||
		!strings.Contains(text, "call this tool again with the same arguments") || !strings.Contains(text, "work on something else") {
		t.Fatalf("pending over MCP: %s\n%s", text, b)
	}
	r = call("devtools.repo-git", args)
	b, _ = json.Marshal(r.StructuredContent)
	var again struct {
		Status     string
		ApprovalID string `json:"approval_id"`
	}
	json.Unmarshal(b, &again)
	if again.Status != "pending" || again.ApprovalID != sc.ApprovalID {
		t.Fatalf("calling again opened another request: %s", b)
	}
	if as, _ := e.st.ListApprovals(ctx, store.ApprovalFilter{Agent: "architect"}); len(as) != 1 {
		t.Fatalf("%d approval requests, want 1", len(as))
	}
	if code, body, _ := e.do("POST", "/api/approvals/"+sc.ApprovalID+"/approve", e.admin, ""); code != 200 {
		t.Fatalf("approve: %d %s", code, body)
	}
	r = call("devtools.repo-git", args)
	if r.IsError {
		t.Fatalf("after approval: %s", callText(r))
	}
	if a, _ := e.st.GetApproval(ctx, sc.ApprovalID); len(a.Result) == 0 {
		t.Fatal("the approved call did not run under its approval")
	}
}

// An edit waiting for approval shows the change as a unified diff against
// the file (REST approvals list); REST calls show the human what to do.
func TestRESTApprovalDiff(t *testing.T) {
	e := start(t, server.Options{}) // the example world: workspace.edit is at level confirm for agents without a profile
	tok := e.token("scribe")
	if o := e.call(t, tok, "scribe", `{"tool":"workspace.write","args":{"path":"d.txt","content":"one\ntwo\nthree\n"}}`); o.Status != "success" {
		t.Fatalf("write: %+v", o)
	}
	o := e.call(t, tok, "scribe", `{"tool":"workspace.edit","args":{"path":"d.txt","old_string":"two","new_string":"TWO"}}`)
	if o.Status != "pending" || !strings.Contains(o.Human, "armory approvals approve|deny "+o.ApprovalID) {
		t.Fatalf("edit: %+v", o)
	}
	code, body, _ := e.do("GET", "/api/approvals", e.admin, "")
	var as []struct {
		ID   string
		Diff string
	}
	if code != 200 || json.Unmarshal([]byte(body), &as) != nil || len(as) != 1 || as[0].ID != o.ApprovalID {
		t.Fatalf("approvals: %d %s", code, body)
	}
	want := "--- a/d.txt\n+++ b/d.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
	if as[0].Diff != want {
		t.Fatalf("diff:\n%s\nwant:\n%s", as[0].Diff, want)
	}
}
