package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// agentWorld is a world with an admin (boss), a worker outside the admin
// group, and an archetype no world agent uses (spare).
var agentWorld = map[string]string{
	"world-config.yaml": `name: agents
tool_privileges:
  admin:
    - syscall.agent.create
    - syscall.agent.stop
    - syscall.agent.start
    - syscall.agent.inspect
agents:
  - id: boss
  - id: worker
  - id: worker2
    archetype: worker
`,
	"archetype/boss/config.md":   "## Tool Access\nprivilege_groups: admin\n",
	"archetype/worker/config.md": "## Tool Access\n- think\n",
	"archetype/spare/config.md":  "## Tool Access\nprivilege_groups: admin\n",
	"archetype/broken/config.md": "## Tool Access\nprivilege_groups: nosuchgroup\n",
}

// freshThought is the arguments of a think call never made before (the
// same call again and again would trip the pipeline's loop detection).
func freshThought() string { return fmt.Sprintf(`{"thought":"x %d"}`, time.Now().UnixNano()) }

// refusedStopped checks that o is the gate's refusal of a stopped agent.
func refusedStopped(t *testing.T, o pipeline.Outcome, agent string) {
	t.Helper()
	if o.Status != audit.StatusBlocked || o.Kind != armory.KindBlocked || !strings.Contains(o.Result, "agent "+agent+" is stopped") {
		t.Fatalf("want the stopped-agent refusal, got %s %v: %s", o.Status, o.Kind, o.Result)
	}
	if len(o.Stages) == 0 || o.Stages[len(o.Stages)-1].Name != "gate" || !strings.Contains(strings.Join(o.Reasons, "\n"), "gate: agent "+agent+" is stopped") {
		t.Fatalf("the refusal's stage and reasons: %+v %q", o.Stages, o.Reasons)
	}
}

func TestStoppedAgentRefusedThenStarted(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		dir := writeWorld(t, agentWorld)
		w := open(t, dir, db, services.Options{})
		w.ok("worker", "think", `{"thought":"before"}`, nil)
		o := w.ok("boss", "syscall.agent.stop", `{"agent":"worker"}`, nil)
		if !strings.Contains(o.Result, "Agent worker: stopped.") {
			t.Fatalf("stop: %s", o.Result)
		}
		refusedStopped(t, w.call("worker", "think", `{"thought":"after"}`), "worker")
		// Every tool, the agent tools included: a stopped agent cannot
		// start itself.
		refusedStopped(t, w.call("worker", "syscall.agent.list", `{}`), "worker")
		// Other agents are not affected.
		w.ok("worker2", "think", `{"thought":"still here"}`, nil)

		// The refusal is in the audit trail with its reason.
		recs, err := w.eng.Store().ListAudit(context.Background(), store.AuditFilter{Agent: "worker", Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, r := range recs {
			for _, st := range r.Stages {
				if st.Name == "gate" && st.Decision == "block" && strings.Contains(strings.Join(st.Reasons, " "), "is stopped") && r.Status == audit.StatusBlocked {
					found = true
				}
			}
		}
		if !found {
			t.Fatalf("no gate refusal in the audit trail: %+v", recs)
		}

		// Listing shows it; stopping again changes nothing.
		var list struct {
			Agents []services.AgentInfo `json:"agents"`
		}
		o = w.ok("boss", "syscall.agent.list", `{}`, nil)
		if err := json.Unmarshal([]byte(o.Result), &list); err != nil {
			t.Fatal(err)
		}
		st := map[string]services.AgentInfo{}
		for _, a := range list.Agents {
			st[a.ID] = a
		}
		if st["worker"].Status != store.AgentStopped || st["worker"].UptimeSeconds != 0 || st["boss"].Status != store.AgentRunning || st["worker"].Origin != "world" {
			t.Fatalf("list: %+v", list.Agents)
		}
		if o := w.ok("boss", "syscall.agent.stop", `{"agent":"worker"}`, nil); !strings.Contains(o.Result, "already stopped") {
			t.Fatalf("second stop: %s", o.Result)
		}

		w.ok("boss", "syscall.agent.start", `{"agent":"worker"}`, nil)
		w.ok("worker", "think", `{"thought":"back"}`, nil)
		if o := w.ok("boss", "syscall.agent.start", `{"agent":"worker"}`, nil); !strings.Contains(o.Result, "already running") {
			t.Fatalf("second start: %s", o.Result)
		}
	})
}

// Two engines on one database, as two processes: a stop in one is
// honoured by the other within its StatusTTL (its snapshot was read
// before the stop), and at the first call of an engine opened after it.
func TestStopAcrossEngines(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		dir := writeWorld(t, agentWorld)
		a := open(t, dir, db, services.Options{})
		b := open(t, dir, db, services.Options{StatusTTL: 200 * time.Millisecond})
		b.ok("worker", "think", `{"thought":"b reads the status"}`, nil)

		a.ok("boss", "syscall.agent.stop", `{"agent":"worker"}`, nil)
		start := time.Now()
		eventually(t, func() bool { return b.call("worker", "think", freshThought()).Status == audit.StatusBlocked })
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the stop took %s to reach the other engine (TTL 200ms)", d)
		}
		refusedStopped(t, b.call("worker", "think", freshThought()), "worker")
		d := open(t, dir, db, services.Options{})
		refusedStopped(t, d.call("worker", "think", freshThought()), "worker")

		// Started in b: a sees it within its TTL (default 1s).
		b.ok("boss", "syscall.agent.start", `{"agent":"worker"}`, nil)
		b.ok("worker", "think", `{"thought":"b: back"}`, nil)
		eventually(t, func() bool { return a.call("worker", "think", freshThought()).Status == audit.StatusSuccess })
	})
}

func eventually(t *testing.T, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCreateAgent(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		dir := writeWorld(t, agentWorld)
		w := open(t, dir, db, services.Options{})
		o := w.ok("boss", "syscall.agent.create", `{"id":"helper","archetype":"spare"}`, nil)
		if !strings.Contains(o.Result, `"origin": "created"`) || !strings.Contains(o.Result, `"created_by": "boss"`) {
			t.Fatalf("create: %s", o.Result)
		}
		// Hosted live, with the archetype's access policy: spare is in the
		// admin group, so it sees (and may call) the agent tools.
		w.ok("helper", "syscall.agent.list", `{}`, nil)
		w.ok("helper", "syscall.agent.stop", `{"agent":"worker"}`, nil)
		w.ok("boss", "syscall.agent.start", `{"agent":"worker"}`, nil)
		// A created agent of the worker archetype gets the worker's tools.
		w.ok("boss", "syscall.agent.create", `{"id":"hand","archetype":"worker"}`, nil)
		w.ok("hand", "think", `{"thought":"hi"}`, nil)
		if o := w.call("hand", "syscall.agent.stop", `{"agent":"boss"}`); o.Status == audit.StatusSuccess {
			t.Fatalf("hand stopped boss: %s", o.Result)
		}

		// Persisted: another engine on the database hosts them at open,
		// stop and start included.
		w.ok("boss", "syscall.agent.stop", `{"agent":"hand"}`, nil)
		w2 := open(t, dir, db, services.Options{})
		w2.ok("helper", "think", `{"thought":"restored"}`, nil)
		refusedStopped(t, w2.call("hand", "think", freshThought()), "hand")
		ag, err := w2.eng.Roster().Agent("helper")
		if err != nil || !ag.Registry.Has("syscall.agent.stop") || ag.Def.Archetype != "spare" {
			t.Fatalf("restored helper: %v %+v", err, ag)
		}

		// Refused creations: readable errors, nothing written.
		for _, tc := range []struct{ args, want string }{
			{`{"id":"x1","archetype":"nosuch"}`, `unknown archetype "nosuch"`},
			{`{"id":"helper","archetype":"spare"}`, `agent "helper" exists already`},
			{`{"id":"worker","archetype":"spare"}`, `agent "worker" exists already`},
			{`{"id":"Bad Id","archetype":"spare"}`, `agent id "Bad Id" is not valid`},
			{`{"id":"x2","archetype":"../boss"}`, `archetype "../boss" is not a valid folder name`},
			{`{"id":"x3","archetype":"broken"}`, `unknown privilege group "nosuchgroup"`},
		} {
			o := w.call("boss", "syscall.agent.create", tc.args)
			if o.Status == audit.StatusSuccess || !strings.Contains(o.Result, tc.want) {
				t.Errorf("create %s: want an error with %q, got %s: %s", tc.args, tc.want, o.Status, o.Result)
			}
		}
		rows, _, err := w.eng.Store().ListAgents(context.Background(), store.Page{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		if got := strings.Join(ids, ","); got != "hand,helper,worker" {
			t.Fatalf("stored agents: %s (want hand, helper and worker's status row)", got)
		}
		for _, id := range []string{"x1", "x2", "x3"} {
			if _, err := w.eng.Roster().Agent(id); err == nil {
				t.Errorf("%s hosted after a failed create", id)
			}
		}
	})
}

// An agent created in one engine is hosted by another engine on the same
// database without reopening it: the gate's next read of the status (its
// StatusTTL) hosts it.
func TestCreatedAgentReachesPeer(t *testing.T) {
	dir := writeWorld(t, agentWorld)
	db := filepath.Join(dir, "agents.db")
	a := open(t, dir, db, services.Options{})
	b := open(t, dir, db, services.Options{StatusTTL: 100 * time.Millisecond})
	b.ok("worker", "think", `{"thought":"b reads the status"}`, nil)
	a.ok("boss", "syscall.agent.create", `{"id":"newbie","archetype":"worker"}`, nil)
	// Any call of b reads the status again once its TTL has passed.
	eventually(t, func() bool {
		b.call("worker", "think", freshThought())
		return b.call("newbie", "think", freshThought()).Status == audit.StatusSuccess
	})
}

func TestAgentPrivileges(t *testing.T) {
	dir := writeWorld(t, agentWorld)
	w := open(t, dir, "", services.Options{})
	// The worker is outside the admin group: the access policy leaves the
	// control tools out of its registry and the pipeline refuses them at
	// lookup.
	for _, tool := range []string{"syscall.agent.stop", "syscall.agent.start", "syscall.agent.create", "syscall.agent.inspect"} {
		o := w.call("worker", tool, `{"agent":"boss"}`)
		if o.Status != audit.StatusError || o.Kind != armory.KindNotFound || !strings.Contains(o.Result, "Unknown tool") {
			t.Errorf("worker %s: %s %v %s", tool, o.Status, o.Kind, o.Result)
		}
	}
	w.ok("boss", "think", `{"thought":"not stopped"}`, nil)
	// list and reflect are public.
	w.ok("worker", "syscall.agent.list", `{}`, nil)
	o := w.ok("worker", "syscall.reflect", `{}`, nil)
	if !strings.Contains(o.Result, `"token_usage": "unknown`) || !strings.Contains(o.Result, `"name": "agents"`) {
		t.Fatalf("reflect: %s", o.Result)
	}

	// No agent stops itself: nothing it could call would start it again.
	o = w.call("boss", "syscall.agent.stop", `{"agent":"boss"}`)
	if o.Status != audit.StatusError || o.Kind != armory.KindPermission || !strings.Contains(o.Result, "cannot stop yourself") {
		t.Fatalf("self stop: %s %v %s", o.Status, o.Kind, o.Result)
	}
	// An admin stopped by another admin cannot start itself; a human can.
	w.ok("boss", "syscall.agent.create", `{"id":"boss2","archetype":"boss"}`, nil)
	w.ok("boss2", "syscall.agent.stop", `{"agent":"boss"}`, nil)
	refusedStopped(t, w.call("boss", "syscall.agent.start", `{"agent":"boss"}`), "boss")
	info, err := w.mod.StartAgent(context.Background(), w.eng.Pipeline(), "boss", "test")
	if err != nil || info.Status != store.AgentRunning {
		t.Fatalf("human start: %v %+v", err, info)
	}
	w.ok("boss", "think", `{"thought":"started by a human"}`, nil)
	recs, err := w.eng.Store().ListAudit(context.Background(), store.AuditFilter{Tool: "agent.start", Limit: 5})
	if err != nil || len(recs) != 1 || recs[0].DecidedBy != pipeline.Human || recs[0].Agent != "boss" {
		t.Fatalf("the human's start in the trail: %v %+v", err, recs)
	}
	// Unknown agents.
	if o := w.call("boss", "syscall.agent.stop", `{"agent":"ghost"}`); o.Kind != armory.KindNotFound || !strings.Contains(o.Result, `unknown agent "ghost"`) {
		t.Fatalf("stop ghost: %v %s", o.Kind, o.Result)
	}
	if _, err := w.mod.StopAgent(context.Background(), w.eng.Pipeline(), "ghost", "test"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("human stop ghost: %v", err)
	}
}

func TestInspectMemory(t *testing.T) {
	dir := writeWorld(t, agentWorld)
	w := open(t, dir, "", services.Options{})
	st := w.eng.Store()
	ctx := context.Background()
	if _, err := st.WriteMemory(ctx, "worker", "plan", "finish the report"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteMemory(ctx, "worker", "long", strings.Repeat("x", 5000)); err != nil {
		t.Fatal(err)
	}
	o := w.ok("boss", "syscall.agent.inspect", `{"agent":"worker"}`, nil)
	if !strings.Contains(o.Result, "finish the report") || strings.Contains(o.Result, strings.Repeat("x", 4000)) {
		t.Fatalf("inspect: %s", o.Result)
	}
	o = w.ok("boss", "syscall.agent.inspect", `{"agent":"worker","key":"long"}`, nil)
	if !strings.Contains(o.Result, strings.Repeat("x", 5000)) {
		t.Fatal("inspect key: the whole value is missing")
	}
	if o := w.call("boss", "syscall.agent.inspect", `{"agent":"worker","key":"nope"}`); o.Kind != armory.KindNotFound {
		t.Fatalf("missing key: %v %s", o.Kind, o.Result)
	}
	// Read-only: the memory is unchanged.
	if e, err := st.ReadMemory(ctx, "worker", "plan"); err != nil || e.Value != "finish the report" {
		t.Fatalf("memory after inspect: %v %+v", err, e)
	}
}

// A world that leaves the control tools public (in no privilege group)
// does not hand them to every agent: the tools refuse.
func TestControlToolsMustBeGranted(t *testing.T) {
	dir := writeWorld(t, map[string]string{
		"world-config.yaml":     "name: open\nagents:\n  - id: a\n  - id: b\n",
		"archetype/a/config.md": "## Tool Access\n- think\n",
		"archetype/b/config.md": "## Tool Access\n- think\n",
	})
	w := open(t, dir, "", services.Options{})
	for _, tc := range [][2]string{{"syscall.agent.stop", `{"agent":"b"}`}, {"syscall.agent.start", `{"agent":"b"}`},
		{"syscall.agent.create", `{"id":"c","archetype":"a"}`}, {"syscall.agent.inspect", `{"agent":"b"}`}} {
		o := w.call("a", tc[0], tc[1])
		if o.Kind != armory.KindPermission || !strings.Contains(o.Result, "in no privilege group") {
			t.Errorf("%s in an open world: %s %v %s", tc[0], o.Status, o.Kind, o.Result)
		}
	}
	w.ok("b", "think", `{"thought":"not stopped"}`, nil)
	w.ok("a", "syscall.agent.list", `{}`, nil)
}
