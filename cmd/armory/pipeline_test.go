package main

import (
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/internal/testenv"
)

type callOut struct {
	CallID     string   `json:"call_id"`
	Status     string   `json:"status"`
	Result     string   `json:"result"`
	Human      string   `json:"human"`
	Session    string   `json:"session"`
	Reasons    []string `json:"reasons"`
	ApprovalID string   `json:"approval_id"`
	DecidedBy  string   `json:"decided_by"`
}

func callJSON(t *testing.T, r result) callOut {
	t.Helper()
	var o callOut
	if err := json.Unmarshal([]byte(r.stdout), &o); err != nil {
		t.Fatalf("call printed no JSON: %+v", r)
	}
	return o
}

func TestCLICallApproveResumeAudit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is needed by the example toolbox")
	}
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}

	r := armoryCmd(t, env, "call", "architect", "workspace.write", "--args", `{"path":"notes/a.txt","content":"hello\n"}`)
	if o := callJSON(t, r); r.code != 0 || o.Status != "success" || o.CallID == "" || o.Reasons == nil {
		t.Fatalf("write: %+v", r)
	}
	r = armoryCmd(t, env, "call", "architect", "workspace.read", "--args", `{"path":"notes/a.txt"}`)
	if o := callJSON(t, r); r.code != 0 || o.Result != "hello\n" {
		t.Fatalf("read: %+v", r)
	}
	for _, tc := range []struct {
		args []string
		code int
		text string
	}{
		{[]string{"call", "architect", "no.such"}, exitInvalid, "Unknown tool: no.such"},
		{[]string{"call", "scribe", "workspace.write", "--args", `{"path":1}`}, exitInvalid, "Invalid arguments for workspace.write"},
		{[]string{"call", "intern", "workspace.write", "--args", `{"path":"x","content":""}`}, exitInvalid, "Unknown tool: workspace.write"},
		{[]string{"call", "architect", "workspace.write", "--args", `{"path":"x","content":"DROP DATABASE prod"}`}, exitOK, "created x"},
	} {
		r := armoryCmd(t, env, tc.args...)
		if o := callJSON(t, r); r.code != tc.code || !strings.Contains(o.Result, tc.text) {
			t.Errorf("%v: exit %d %+v", tc.args, r.code, o)
		}
	}
	if r := armoryCmd(t, env, "call", "architect"); r.code != exitUsage {
		t.Errorf("usage: %+v", r)
	}
	// Malformed --args is bad input (exit 2), one line naming the problem.
	for _, tc := range []struct{ args, want string }{
		{"{nope", "--args: not valid JSON at byte 2: invalid character 'n'"},
		{`{"path":"a"`, "--args: not valid JSON"},
		{`["a"]`, "--args: want a JSON object such as {\"path\":\"a.txt\"}, got an array"},
	} {
		r := armoryCmd(t, env, "call", "architect", "workspace.read", "--args", tc.args)
		if r.code != exitInvalid || !strings.Contains(r.stderr, tc.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("bad --args %s: %+v", tc.args, r)
		}
	}

	// repo-git is confirm-level: pending (exit 4) with an approval id.
	r = armoryCmd(t, env, "call", "architect", "devtools.repo-git", "--args", `{"command":"init"}`)
	pending := callJSON(t, r)
	if r.code != exitPending || pending.Status != "pending" || pending.ApprovalID == "" || !strings.Contains(pending.Human, "armory call --resume "+pending.ApprovalID) {
		t.Fatalf("pending: %+v", r)
	}
	r = armoryCmd(t, env, "approvals", "list", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, pending.ApprovalID) {
		t.Fatalf("approvals list: %+v", r)
	}
	r = armoryCmd(t, env, "approvals", "show", pending.ApprovalID)
	if r.code != 0 || !strings.Contains(r.stdout, `"level": "confirm"`) {
		t.Fatalf("approvals show: %+v", r)
	}
	if r = armoryCmd(t, env, "approvals", "approve", pending.ApprovalID, "--reason", "fine"); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	if r = armoryCmd(t, env, "approvals", "deny", pending.ApprovalID); r.code != exitInvalid || !strings.Contains(r.stderr, "is already decided (approved by human at ") {
		t.Fatalf("a second decision is a conflict: %+v", r)
	}
	// The decision is audited once, naming the decider, the reason and the surface.
	r = armoryCmd(t, env, "audit", "--tool", "approval.decide", "--json")
	var decisions []audit.Record
	if err := json.Unmarshal([]byte(r.stdout), &decisions); err != nil || r.code != 0 {
		t.Fatalf("audit: %v %+v", err, r)
	}
	var mine, refused []audit.Record
	for _, d := range decisions {
		switch {
		case d.ApprovalID != pending.ApprovalID:
		case d.Status == audit.StatusBlocked:
			refused = append(refused, d) // the second decision, refused
		default:
			mine = append(mine, d)
		}
	}
	if len(refused) != 1 || refused[0].Agent != "human" || !strings.Contains(refused[0].Result, "already decided") {
		t.Fatalf("refused decision entries: %+v", refused)
	}
	var dargs map[string]string
	if len(mine) != 1 || json.Unmarshal(mine[0].Args, &dargs) != nil || mine[0].Agent != "human" || mine[0].DecidedBy != "human" ||
		dargs["decision"] != "approved" || dargs["reason"] != "fine" || dargs["via"] != "cli" || dargs["id"] != pending.ApprovalID {
		t.Fatalf("decision entries: %+v", mine)
	}
	r = armoryCmd(t, env, "call", "--resume", pending.ApprovalID)
	first := callJSON(t, r)
	if r.code != 0 || first.Status != "success" || first.DecidedBy != "human" {
		t.Fatalf("resume: %+v", r)
	}
	r = armoryCmd(t, env, "call", "--resume", pending.ApprovalID)
	if again := callJSON(t, r); r.code != 0 || again.Result != first.Result || !strings.Contains(strings.Join(again.Reasons, " "), "already ran") {
		t.Fatalf("second resume: %+v", r)
	}
	r = armoryCmd(t, env, "call", "architect", "devtools.repo-git", "--args", `{"command":"status"}`, "--resume", pending.ApprovalID)
	if r.code != exitInvalid {
		t.Fatalf("resume with other args: %+v", r)
	}

	// Approval while the caller waits: a second process approves.
	cmd := exec.Command(binary, "call", "architect", "workspace.delete", "--args", `{"path":"x"}`, "--wait", "60s")
	cmd.Env = append(cmd.Environ(), env...)
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == "" && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		var list []struct{ ID, Tool string }
		json.Unmarshal([]byte(armoryCmd(t, env, "approvals", "list", "--json").stdout), &list)
		for _, a := range list {
			if a.Tool == "workspace.delete" {
				id = a.ID
			}
		}
	}
	if id == "" {
		t.Fatal("no approval request appeared")
	}
	if r := armoryCmd(t, env, "approvals", "deny", id, "--reason", "keep it"); r.code != 0 {
		t.Fatal(r)
	}
	err := cmd.Wait()
	var denied callOut
	json.Unmarshal([]byte(out.String()), &denied)
	if ee, _ := err.(*exec.ExitError); ee == nil || ee.ExitCode() != exitBlocked || denied.Status != "denied" || !strings.Contains(denied.Result, "Denied by human: keep it") {
		t.Fatalf("denied while waiting: %v %s", err, out.String())
	}

	// Audit: filters, JSON, verify; then tamper with the database.
	r = armoryCmd(t, env, "audit", "--agent", "architect", "--tool", "devtools.repo-git", "--json")
	var recs []struct {
		Seq           int64
		Status, Phase string
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &recs) != nil || len(recs) < 3 {
		t.Fatalf("audit: %+v", r)
	}
	if r = armoryCmd(t, env, "audit", "--status", "denied"); r.code != 0 || !strings.Contains(r.stdout, "workspace.delete") {
		t.Fatalf("audit --status: %+v", r)
	}
	if r = armoryCmd(t, env, "audit", "verify"); r.code != 0 || !strings.Contains(r.stdout, "store: chain verified") || !strings.Contains(r.stdout, "jsonl: chain verified") {
		t.Fatalf("verify: %+v", r)
	}
	db, err := sql.Open("sqlite", filepath.Join(w, ".armory", "armory.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE audit_records SET result = 'nothing to see' WHERE seq = 3`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if r = armoryCmd(t, env, "audit", "verify"); r.code != 1 || !strings.Contains(r.stderr, "seq 3") {
		t.Fatalf("tampered verify: %+v", r)
	}
}

func TestCLISession(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	armoryCmd(t, env, "call", "intern", "workspace.list", "--session", "s1")
	r := armoryCmd(t, env, "session", "show", "intern:s1")
	var s struct {
		Counters map[string]int64
		Limits   map[string]int64
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil || s.Counters["tool_invocations"] != 1 || s.Limits["tool_invocations"] != 400 {
		t.Fatalf("show: %+v", r)
	}
	if r = armoryCmd(t, env, "session", "extend", "intern:s1", "tool_invocations", "900"); r.code != 0 {
		t.Fatalf("extend: %+v", r)
	}
	if r = armoryCmd(t, env, "session", "extend", "intern:s1", "tool_invocations", "99999"); r.code != exitUsage {
		t.Fatalf("extend past the maximum: %+v", r)
	}
	if r = armoryCmd(t, env, "session", "extend", "intern:s1", "session_runtime", "45m"); r.code != 0 {
		t.Fatalf("extend runtime: %+v", r)
	}
	r = armoryCmd(t, env, "session", "show", "intern:s1")
	json.Unmarshal([]byte(r.stdout), &s)
	if s.Limits["tool_invocations"] != 900 || s.Limits["session_runtime"] != 2700 {
		t.Fatalf("limits after extend: %+v", s.Limits)
	}
	if r = armoryCmd(t, env, "session", "reset", "intern:s1"); r.code != 0 {
		t.Fatal(r)
	}
	r = armoryCmd(t, env, "session", "show", "intern:s1")
	s.Counters = nil
	json.Unmarshal([]byte(r.stdout), &s)
	if s.Counters["tool_invocations"] != 0 {
		t.Fatalf("after reset: %+v", r)
	}
	// Each change a human made is in the trail, naming the human, the
	// session and what changed; the refused one changed nothing.
	for tool, want := range map[string][]string{
		"session.extend": {`"to":900`, `"to":2700`},
		"session.reset":  {`"via":"cli"`},
	} {
		r = armoryCmd(t, env, "audit", "--tool", tool, "--json")
		var recs []audit.Record
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &recs) != nil || len(recs) != len(want) {
			t.Fatalf("audit of %s: %+v", tool, r)
		}
		for i, rec := range recs {
			if rec.Agent != "human" || rec.DecidedBy != "human" || rec.Session != "intern:s1" || !strings.Contains(strings.Join(strings.Fields(string(rec.Args)), ""), want[len(want)-1-i]) {
				t.Errorf("%s record %d: %+v", tool, i, rec)
			}
		}
	}
}

// --session names a session of the calling agent, as over MCP and REST:
// two agents that pick the same name keep separate counters, and the
// audit trail records AGENT:NAME.
func TestCLISessionScopedToAgent(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	for _, c := range []struct {
		agent string
		calls int
	}{{"intern", 2}, {"architect", 1}} {
		for range c.calls {
			if r := armoryCmd(t, env, "call", c.agent, "workspace.list", "--session", "shared"); r.code != 0 {
				t.Fatalf("%s call: %+v", c.agent, r)
			}
		}
	}
	counters := func(session string) int64 {
		t.Helper()
		r := armoryCmd(t, env, "session", "show", session)
		var s struct{ Counters map[string]int64 }
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &s) != nil {
			t.Fatalf("show %s: %+v", session, r)
		}
		return s.Counters["tool_invocations"]
	}
	if got := counters("intern:shared"); got != 2 {
		t.Errorf("intern:shared counted %d calls, want 2", got)
	}
	if got := counters("architect:shared"); got != 1 {
		t.Errorf("architect:shared counted %d calls, want 1", got)
	}
	// The bare name holds nothing (both agents' calls in one session would
	// show there), so it is no session at all.
	if r := armoryCmd(t, env, "session", "show", "shared"); r.code != exitInvalid || !strings.Contains(r.stderr, `no session "shared"`) {
		t.Errorf("the bare name shared: %+v", r)
	}
	// A name already scoped to the agent is kept as it is.
	if r := armoryCmd(t, env, "call", "intern", "workspace.list", "--session", "intern:shared"); r.code != 0 {
		t.Fatal(r)
	}
	if got := counters("intern:shared"); got != 3 {
		t.Errorf("intern:shared counted %d calls, want 3", got)
	}
	r := armoryCmd(t, env, "audit", "--json", "--limit", "100")
	var recs []struct{ Agent, Session string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &recs) != nil || len(recs) == 0 {
		t.Fatalf("audit: %+v", r)
	}
	for _, rec := range recs {
		if rec.Session != rec.Agent+":shared" {
			t.Errorf("%s's call recorded in session %q, want %q", rec.Agent, rec.Session, rec.Agent+":shared")
		}
	}
}

// The example world's showcase: a trusted agent's safe command runs, a
// catastrophic one is blocked, a veto pattern stops a call, and tool.python
// goes to the approval agent, whose decision lets the call run once.
func TestCLIExampleGovernance(t *testing.T) {
	testenvBwrap(t)
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	r := armoryCmd(t, env, "call", "architect", "tool.cli", "--args", `{"command":"echo hello from the sandbox"}`)
	if o := callJSON(t, r); r.code != 0 || o.Result != "hello from the sandbox\n" {
		t.Fatalf("safe command: %+v", r)
	}
	r = armoryCmd(t, env, "call", "architect", "tool.cli", "--args", `{"command":"rm -rf ~"}`)
	if o := callJSON(t, r); r.code != exitBlocked || !strings.HasPrefix(o.Result, "Blocked catastrophic command: rm -rf ~") {
		t.Fatalf("catastrophic: %+v", r)
	}
	r = armoryCmd(t, env, "call", "architect", "tool.fetch", "--args", `{"url":"http://production-db.example/"}`)
	if o := callJSON(t, r); r.code != exitBlocked || !strings.Contains(o.Result, "VETOED by pattern 'no-production'") {
		t.Fatalf("veto: %+v", r)
	}
	r = armoryCmd(t, env, "call", "architect", "tool.python", "--args", `{"code":"print(6*7)"}`)
	p := callJSON(t, r)
	if r.code != exitPending || !strings.Contains(p.Result, "approval agent warden") {
		t.Fatalf("python: %+v", r)
	}
	r = armoryCmd(t, env, "call", "warden", "approval.list")
	if r.code != 0 || !strings.Contains(r.stdout, p.ApprovalID) {
		t.Fatalf("approval.list: %+v", r)
	}
	r = armoryCmd(t, env, "call", "warden", "approval.decide", "--args", `{"id":"`+p.ApprovalID+`","decision":"approve","reason":"harmless arithmetic"}`)
	if r.code != 0 {
		t.Fatalf("approval.decide: %+v", r)
	}
	r = armoryCmd(t, env, "call", "--resume", p.ApprovalID)
	if o := callJSON(t, r); r.code != 0 || o.Result != "42\n" || o.DecidedBy != "warden" {
		t.Fatalf("resume: %+v", r)
	}
}

// Routing prefixes: a granted root is reachable, an ungranted one is not.
func TestCLIRoots(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	r := armoryCmd(t, env, "call", "scribe", "workspace.read", "--args", `{"path":"@project:site/README.md"}`)
	if o := callJSON(t, r); r.code != 0 || !strings.HasPrefix(o.Result, "# The team site") {
		t.Fatalf("granted root: %+v", r)
	}
	r = armoryCmd(t, env, "call", "intern", "workspace.read", "--args", `{"path":"@project:site/README.md"}`)
	if o := callJSON(t, r); r.code == 0 || !strings.Contains(o.Result, "project:site") {
		t.Fatalf("ungranted root: %+v", r)
	}
}

// A world toolbox tool runs a program, which Armory cannot hold to the
// manifest its toolbox.yaml declares: even declared read-only (danger safe,
// read_fs only, file_read) it is admitted before it runs, so a call that
// loop detection or a cap refuses does not run the program.
func TestCLIToolboxToolRefusedDoesNotRun(t *testing.T) {
	testenvBwrap(t)
	w := initWorld(t)
	appendFile(t, filepath.Join(w, "toolbox/devtools/toolbox.yaml"), "  - name: mark\n    description: appends a line to ran.log\n"+
		"    binary: bin/mark\n    danger: safe\n    capabilities: [read_fs]\n    category: file_read\n    permission: auto\n")
	if err := testenv.WriteFiles(w, map[string]string{"toolbox/devtools/bin/mark": "#!/bin/sh\necho ran >> ran.log\necho ok\n"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(w, "toolbox/devtools/bin/mark"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(w, "archetype/architect/config.md")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "- word-count\n", "- word-count\n- mark\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"ARMORY_WORLD=" + w}
	ran := func() int {
		logs, _ := filepath.Glob(filepath.Join(w, "*", "architect", "ran.log"))
		if len(logs) != 1 {
			return 0
		}
		b, _ := os.ReadFile(logs[0])
		return strings.Count(string(b), "ran\n")
	}
	for i := 1; i <= 6; i++ {
		r := armoryCmd(t, env, "call", "architect", "devtools.mark")
		o := callJSON(t, r)
		switch {
		case i < 5 && (r.code != 0 || o.Status != "success"):
			t.Fatalf("call %d: %+v", i, r)
		case i >= 5 && o.Status != "blocked":
			t.Fatalf("call %d past loop detection: %+v", i, r)
		}
	}
	if n := ran(); n != 4 {
		t.Fatalf("the program ran %d times for 4 admitted calls", n)
	}
}
