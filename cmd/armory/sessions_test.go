package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/internal/testenv"
)

// Loop detection is exact across processes: five identical `armory call`s,
// each its own process, all at once: four run, the fifth is refused. The
// refusal's advice works through the arguments alone: the same call with a
// "justification" argument runs, and the trail records why.
func TestCLIRepetitionAcrossProcesses(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	if r := armoryCmd(t, env, "call", "scribe", "workspace.write", "--args", `{"path":"n.txt","content":"x"}`); r.code != 0 {
		t.Fatalf("write: %+v", r)
	}
	args := `{"path":"n.txt"}`
	out := testenv.Parallel(5, func(int) callOut {
		return callJSON(t, armoryCmd(t, env, "call", "scribe", "workspace.read", "--args", args))
	})
	ok, loops := 0, 0
	for _, o := range out {
		switch {
		case o.Status == "success":
			ok++
		case o.Status == "blocked" && strings.Contains(o.Result, "Loop detected: workspace.read called 5 times in a row"):
			loops++
			if !strings.Contains(o.Result, `"justification" argument`) {
				t.Errorf("the refusal does not say how to continue: %s", o.Result)
			}
		default:
			t.Errorf("unexpected outcome %+v", o)
		}
	}
	if ok != 4 || loops != 1 {
		t.Fatalf("%d ran, %d refused as a loop; want 4 and 1", ok, loops)
	}
	r := armoryCmd(t, env, "call", "scribe", "workspace.read", "--args", `{"path":"n.txt","justification":"the file is rewritten by a build"}`)
	o := callJSON(t, r)
	if r.code != 0 || o.Result != "x" {
		t.Fatalf("justified: %+v", r)
	}
	r = armoryCmd(t, env, "audit", "--json", "--limit", "1")
	var recs []audit.Record
	if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 1 || recs[0].ID != o.CallID ||
		recs[0].Justification != "the file is rewritten by a build" || strings.Contains(string(recs[0].Args), "justification") {
		t.Fatalf("audit: %+v", r)
	}
	if r := armoryCmd(t, env, "audit", "--limit", "1"); !strings.Contains(r.stdout, "[justified: the file is rewritten by a build]") {
		t.Fatalf("audit text: %+v", r)
	}
}

// An unnamed session ends by idling (here after 2s, set in world-config.yaml)
// and the next call opens a new one; `session show AGENT:default` shows the
// current one with the agent's own limits (its ## Limits), start, last
// activity and state, and lists the earlier generation as idle-closed; a
// cap refusal tells the human what to do.
func TestCLIUnnamedSessionIdleAndShow(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	cfg := filepath.Join(w, "world-config.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "session_idle_timeout: 10m\n") {
		t.Fatal("the example world no longer sets session_idle_timeout")
	}
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(b), "session_idle_timeout: 10m\n", "session_idle_timeout: 2s\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(w, "archetype", "scribe", "config.md")
	b, _ = os.ReadFile(md)
	if err := os.WriteFile(md, append(b, "\n## Limits\ntool_invocations: 3\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := armoryCmd(t, env, "call", "scribe", "workspace.write", "--session", "setup", "--args", `{"path":"n.txt","content":"x"}`); r.code != 0 {
		t.Fatalf("write: %+v", r)
	}
	before := time.Now()
	r := armoryCmd(t, env, "call", "scribe", "workspace.read", "--args", `{"path":"n.txt"}`)
	if o := callJSON(t, r); r.code != 0 || o.Session != "scribe:default" {
		t.Fatalf("first call: %+v", r)
	}
	time.Sleep(2100 * time.Millisecond) // longer than the idle timeout: the outcome is certain
	r = armoryCmd(t, env, "call", "scribe", "workspace.read", "--args", `{"path":"n.txt"}`)
	if o := callJSON(t, r); r.code != 0 || o.Session != "scribe:default#2" {
		t.Fatalf("after idling: %+v", r)
	}
	var show struct {
		Session, Agent, State, Requested string
		IdleTimeout                      string `json:"idle_timeout"`
		Started                          *time.Time
		LastActivity                     *time.Time `json:"last_activity"`
		Counters, Limits                 map[string]int64
		Generations                      []struct {
			Session, State string
			Started        *time.Time
		}
	}
	r = armoryCmd(t, env, "session", "show", "scribe:default")
	if err := json.Unmarshal([]byte(r.stdout), &show); r.code != 0 || err != nil {
		t.Fatalf("show: %+v %v", r, err)
	}
	if show.Session != "scribe:default#2" || show.Requested != "scribe:default" || show.Agent != "scribe" ||
		show.Limits["tool_invocations"] != 3 || show.Counters["tool_invocations"] != 1 || show.IdleTimeout != "2s" ||
		show.Started == nil || show.Started.Before(before) || show.LastActivity == nil || show.LastActivity.Before(*show.Started) {
		t.Fatalf("show: %s", r.stdout)
	}
	if _, has := show.Limits["session_runtime"]; has {
		t.Fatalf("an unnamed session shows a runtime cap: %s", r.stdout)
	}
	if len(show.Generations) != 2 || show.Generations[1].Session != "scribe:default" || show.Generations[1].State != "idle-closed" {
		t.Fatalf("generations: %s", r.stdout)
	}
	// The first generation stays queryable, with its own counters.
	r = armoryCmd(t, env, "session", "show", "scribe:default#1")
	show.Counters = nil
	if json.Unmarshal([]byte(r.stdout), &show) != nil || show.Session != "scribe:default" || show.State != "idle-closed" || show.Counters["tool_invocations"] != 1 {
		t.Fatalf("first generation: %s", r.stdout)
	}
	// A named session: the agent's limits, its runtime cap, state open.
	armoryCmd(t, env, "call", "scribe", "workspace.read", "--session", "scribe:work", "--args", `{"path":"n.txt"}`)
	r = armoryCmd(t, env, "session", "show", "scribe:work")
	show.Limits = nil
	if json.Unmarshal([]byte(r.stdout), &show) != nil || show.State != "open" || show.Limits["tool_invocations"] != 3 || show.Limits["session_runtime"] != 600 {
		t.Fatalf("named session: %s", r.stdout)
	}
	for i := range 3 {
		r = armoryCmd(t, env, "call", "scribe", "workspace.read", "--session", "scribe:work", "--args", `{"path":"`+strings.Repeat("./", i+1)+`n.txt"}`)
	}
	o := callJSON(t, r)
	if o.Status != "blocked" || !strings.Contains(o.Result, "Safety limit reached: tool_invocations (3/3)") ||
		!strings.Contains(o.Human, "armory session extend scribe:work tool_invocations N") || !strings.Contains(o.Human, "armory session reset scribe:work") {
		t.Fatalf("cap refusal: %+v", r)
	}
	if r = armoryCmd(t, env, "session", "reset", "scribe:work"); r.code != 0 {
		t.Fatal(r)
	}
	r = armoryCmd(t, env, "session", "show", "scribe:work")
	if json.Unmarshal([]byte(r.stdout), &show) != nil || show.State != "reset" {
		t.Fatalf("after reset: %s", r.stdout)
	}
}

// Diff review at the CLI: an edit waiting for approval (workspace.edit is
// confirm-level in the example world) is shown as a unified diff against
// the file; after approval the resumed call makes exactly that change.
func TestCLIApprovalShowsDiff(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	if r := armoryCmd(t, env, "call", "scribe", "workspace.write", "--args", `{"path":"todo.md","content":"one\ntwo\nthree\n"}`); r.code != 0 {
		t.Fatalf("write: %+v", r)
	}
	r := armoryCmd(t, env, "call", "scribe", "workspace.edit", "--args", `{"path":"todo.md","old_string":"two","new_string":"2"}`)
	o := callJSON(t, r)
	if o.Status != "pending" || o.ApprovalID == "" {
		t.Fatalf("edit: %+v", r)
	}
	want := "--- a/todo.md\n+++ b/todo.md\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
	if r := armoryCmd(t, env, "approvals", "show", o.ApprovalID, "--diff"); r.code != 0 || r.stdout != want {
		t.Fatalf("show --diff: %+v\nwant:\n%s", r, want)
	}
	r = armoryCmd(t, env, "approvals", "show", o.ApprovalID)
	var v struct{ Diff string }
	if json.Unmarshal([]byte(r.stdout), &v) != nil || v.Diff != want {
		t.Fatalf("show: %+v", r)
	}
	armoryCmd(t, env, "approvals", "approve", o.ApprovalID)
	if r := armoryCmd(t, env, "call", "--resume", o.ApprovalID); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(w, "workspaces", "scribe", "todo.md")); string(b) != "one\n2\nthree\n" {
		t.Fatalf("file after the approved edit: %q", b)
	}
}
