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
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
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

// backends are the stores every agents test runs on: a SQLite file in the
// test's folder and a Postgres schema of its own (skipped without
// ARMORY_TEST_POSTGRES, failing under CI=true).
func agentBackends(t *testing.T, f func(t *testing.T, dir, db string)) {
	t.Run("sqlite", func(t *testing.T) {
		dir := testenv.WriteTree(t, t.TempDir(), agentWorld)
		f(t, dir, filepath.Join(dir, "agents.db"))
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := testenv.PostgresSchema(t)
		dir := testenv.WriteTree(t, t.TempDir(), agentWorld)
		f(t, dir, dsn)
	})
}

type agentsWorld struct {
	t   *testing.T
	e   *engine.Engine
	mod *services.Module
}

func openAgents(t *testing.T, dir, db string, o services.Options) *agentsWorld {
	t.Helper()
	mod := services.New(o)
	e, err := engine.Open(context.Background(), engine.Options{World: dir, DB: db, Modules: []engine.Module{mod}, Skip: engine.Trail})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &agentsWorld{t: t, e: e, mod: mod}
}

func (w *agentsWorld) call(agent, tool, args string) pipeline.Outcome {
	w.t.Helper()
	if args == `{"thought":"x"}` { // a fresh thought each time: no loop detection
		args = fmt.Sprintf(`{"thought":"x %d"}`, time.Now().UnixNano())
	}
	return w.e.Pipeline().Execute(context.Background(), pipeline.Call{Agent: agent, Tool: tool, Args: json.RawMessage(args)})
}

func (w *agentsWorld) ok(agent, tool, args string) pipeline.Outcome {
	w.t.Helper()
	o := w.call(agent, tool, args)
	if o.Status != audit.StatusSuccess {
		w.t.Fatalf("%s %s %s: %s: %s", agent, tool, args, o.Status, o.Result)
	}
	return o
}

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
	agentBackends(t, func(t *testing.T, dir, db string) {
		w := openAgents(t, dir, db, services.Options{})
		w.ok("worker", "think", `{"thought":"before"}`)
		o := w.ok("boss", "syscall.agent.stop", `{"agent":"worker"}`)
		if !strings.Contains(o.Result, "Agent worker: stopped.") {
			t.Fatalf("stop: %s", o.Result)
		}
		refusedStopped(t, w.call("worker", "think", `{"thought":"after"}`), "worker")
		// Every tool, the agent tools included: a stopped agent cannot
		// start itself.
		refusedStopped(t, w.call("worker", "syscall.agent.list", `{}`), "worker")
		// Other agents are not affected.
		w.ok("worker2", "think", `{"thought":"still here"}`)

		// The refusal is in the audit trail with its reason.
		recs, err := w.e.Store().ListAudit(context.Background(), store.AuditFilter{Agent: "worker", Limit: 10})
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
		o = w.ok("boss", "syscall.agent.list", `{}`)
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
		if o := w.ok("boss", "syscall.agent.stop", `{"agent":"worker"}`); !strings.Contains(o.Result, "already stopped") {
			t.Fatalf("second stop: %s", o.Result)
		}

		w.ok("boss", "syscall.agent.start", `{"agent":"worker"}`)
		w.ok("worker", "think", `{"thought":"back"}`)
		if o := w.ok("boss", "syscall.agent.start", `{"agent":"worker"}`); !strings.Contains(o.Result, "already running") {
			t.Fatalf("second start: %s", o.Result)
		}
	})
}

// Two engines on one database, as two processes: a stop in one is
// honoured by the other within its StatusTTL (its snapshot was read
// before the stop), and at the first call of an engine opened after it.
func TestStopAcrossEngines(t *testing.T) {
	agentBackends(t, func(t *testing.T, dir, db string) {
		a := openAgents(t, dir, db, services.Options{})
		b := openAgents(t, dir, db, services.Options{StatusTTL: 200 * time.Millisecond})
		b.ok("worker", "think", `{"thought":"b reads the status"}`)

		a.ok("boss", "syscall.agent.stop", `{"agent":"worker"}`)
		start := time.Now()
		eventually(t, func() bool { return b.call("worker", "think", `{"thought":"x"}`).Status == audit.StatusBlocked })
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("the stop took %s to reach the other engine (TTL 200ms)", d)
		}
		refusedStopped(t, b.call("worker", "think", `{"thought":"x"}`), "worker")
		d := openAgents(t, dir, db, services.Options{})
		refusedStopped(t, d.call("worker", "think", `{"thought":"x"}`), "worker")

		// Started in b: a sees it within its TTL (default 1s).
		b.ok("boss", "syscall.agent.start", `{"agent":"worker"}`)
		b.ok("worker", "think", `{"thought":"b: back"}`)
		eventually(t, func() bool { return a.call("worker", "think", `{"thought":"x"}`).Status == audit.StatusSuccess })
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
	agentBackends(t, func(t *testing.T, dir, db string) {
		w := openAgents(t, dir, db, services.Options{})
		o := w.ok("boss", "syscall.agent.create", `{"id":"helper","archetype":"spare"}`)
		if !strings.Contains(o.Result, `"origin": "created"`) || !strings.Contains(o.Result, `"created_by": "boss"`) {
			t.Fatalf("create: %s", o.Result)
		}
		// Hosted live, with the archetype's access policy: spare is in the
		// admin group, so it sees (and may call) the agent tools.
		w.ok("helper", "syscall.agent.list", `{}`)
		w.ok("helper", "syscall.agent.stop", `{"agent":"worker"}`)
		w.ok("boss", "syscall.agent.start", `{"agent":"worker"}`)
		// A created agent of the worker archetype gets the worker's tools.
		w.ok("boss", "syscall.agent.create", `{"id":"hand","archetype":"worker"}`)
		w.ok("hand", "think", `{"thought":"hi"}`)
		if o := w.call("hand", "syscall.agent.stop", `{"agent":"boss"}`); o.Status == audit.StatusSuccess {
			t.Fatalf("hand stopped boss: %s", o.Result)
		}

		// Persisted: another engine on the database hosts them at open,
		// stop and start included.
		w.ok("boss", "syscall.agent.stop", `{"agent":"hand"}`)
		w2 := openAgents(t, dir, db, services.Options{})
		w2.ok("helper", "think", `{"thought":"restored"}`)
		refusedStopped(t, w2.call("hand", "think", `{"thought":"x"}`), "hand")
		ag, err := w2.e.Roster().Agent("helper")
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
		rows, _, err := w.e.Store().ListAgents(context.Background(), store.Page{})
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
			if _, err := w.e.Roster().Agent(id); err == nil {
				t.Errorf("%s hosted after a failed create", id)
			}
		}
	})
}

// An agent created in one engine is hosted by another engine on the same
// database without reopening it: the gate's next read of the status (its
// StatusTTL) hosts it.
func TestCreatedAgentReachesPeer(t *testing.T) {
	dir := testenv.WriteTree(t, t.TempDir(), agentWorld)
	db := filepath.Join(dir, "agents.db")
	a := openAgents(t, dir, db, services.Options{})
	b := openAgents(t, dir, db, services.Options{StatusTTL: 100 * time.Millisecond})
	b.ok("worker", "think", `{"thought":"b reads the status"}`)
	a.ok("boss", "syscall.agent.create", `{"id":"newbie","archetype":"worker"}`)
	// Any call of b reads the status again once its TTL has passed.
	eventually(t, func() bool {
		b.call("worker", "think", `{"thought":"x"}`)
		return b.call("newbie", "think", `{"thought":"x"}`).Status == audit.StatusSuccess
	})
}

func TestAgentPrivileges(t *testing.T) {
	dir := testenv.WriteTree(t, t.TempDir(), agentWorld)
	w := openAgents(t, dir, filepath.Join(dir, "agents.db"), services.Options{})
	// The worker is outside the admin group: the access policy leaves the
	// control tools out of its registry and the pipeline refuses them at
	// lookup.
	for _, tool := range []string{"syscall.agent.stop", "syscall.agent.start", "syscall.agent.create", "syscall.agent.inspect"} {
		o := w.call("worker", tool, `{"agent":"boss"}`)
		if o.Status != audit.StatusError || o.Kind != armory.KindNotFound || !strings.Contains(o.Result, "Unknown tool") {
			t.Errorf("worker %s: %s %v %s", tool, o.Status, o.Kind, o.Result)
		}
	}
	w.ok("boss", "think", `{"thought":"not stopped"}`)
	// list and reflect are public.
	w.ok("worker", "syscall.agent.list", `{}`)
	o := w.ok("worker", "syscall.reflect", `{}`)
	if !strings.Contains(o.Result, `"token_usage": "unknown`) || !strings.Contains(o.Result, `"name": "agents"`) {
		t.Fatalf("reflect: %s", o.Result)
	}

	// No agent stops itself: nothing it could call would start it again.
	o = w.call("boss", "syscall.agent.stop", `{"agent":"boss"}`)
	if o.Status != audit.StatusError || o.Kind != armory.KindPermission || !strings.Contains(o.Result, "cannot stop yourself") {
		t.Fatalf("self stop: %s %v %s", o.Status, o.Kind, o.Result)
	}
	// An admin stopped by another admin cannot start itself; a human can.
	w.ok("boss", "syscall.agent.create", `{"id":"boss2","archetype":"boss"}`)
	w.ok("boss2", "syscall.agent.stop", `{"agent":"boss"}`)
	refusedStopped(t, w.call("boss", "syscall.agent.start", `{"agent":"boss"}`), "boss")
	info, err := w.mod.StartAgent(context.Background(), w.e.Pipeline(), "boss", "test")
	if err != nil || info.Status != store.AgentRunning {
		t.Fatalf("human start: %v %+v", err, info)
	}
	w.ok("boss", "think", `{"thought":"started by a human"}`)
	recs, err := w.e.Store().ListAudit(context.Background(), store.AuditFilter{Tool: "agent.start", Limit: 5})
	if err != nil || len(recs) != 1 || recs[0].DecidedBy != pipeline.Human || recs[0].Agent != "boss" {
		t.Fatalf("the human's start in the trail: %v %+v", err, recs)
	}
	// Unknown agents.
	if o := w.call("boss", "syscall.agent.stop", `{"agent":"ghost"}`); o.Kind != armory.KindNotFound || !strings.Contains(o.Result, `unknown agent "ghost"`) {
		t.Fatalf("stop ghost: %v %s", o.Kind, o.Result)
	}
	if _, err := w.mod.StopAgent(context.Background(), w.e.Pipeline(), "ghost", "test"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("human stop ghost: %v", err)
	}
}

func TestInspectMemory(t *testing.T) {
	dir := testenv.WriteTree(t, t.TempDir(), agentWorld)
	w := openAgents(t, dir, filepath.Join(dir, "agents.db"), services.Options{})
	st := w.e.Store()
	ctx := context.Background()
	if _, err := st.WriteMemory(ctx, "worker", "plan", "finish the report"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteMemory(ctx, "worker", "long", strings.Repeat("x", 5000)); err != nil {
		t.Fatal(err)
	}
	o := w.ok("boss", "syscall.agent.inspect", `{"agent":"worker"}`)
	if !strings.Contains(o.Result, "finish the report") || strings.Contains(o.Result, strings.Repeat("x", 4000)) {
		t.Fatalf("inspect: %s", o.Result)
	}
	o = w.ok("boss", "syscall.agent.inspect", `{"agent":"worker","key":"long"}`)
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
	dir := testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml":     "name: open\nagents:\n  - id: a\n  - id: b\n",
		"archetype/a/config.md": "## Tool Access\n- think\n",
		"archetype/b/config.md": "## Tool Access\n- think\n",
	})
	w := openAgents(t, dir, filepath.Join(dir, "agents.db"), services.Options{})
	for _, tc := range [][2]string{{"syscall.agent.stop", `{"agent":"b"}`}, {"syscall.agent.start", `{"agent":"b"}`},
		{"syscall.agent.create", `{"id":"c","archetype":"a"}`}, {"syscall.agent.inspect", `{"agent":"b"}`}} {
		o := w.call("a", tc[0], tc[1])
		if o.Kind != armory.KindPermission || !strings.Contains(o.Result, "in no privilege group") {
			t.Errorf("%s in an open world: %s %v %s", tc[0], o.Status, o.Kind, o.Result)
		}
	}
	w.ok("b", "think", `{"thought":"not stopped"}`)
	w.ok("a", "syscall.agent.list", `{}`)
}
