package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/armory-dev/armory/internal/testenv"
)

// `armory agents stop` (a human, its own process) stops an agent whose
// next `armory call` (another process) is refused with the reason;
// `armory agents start` lets it call again; list shows the status.
func TestCLIAgentsStopStart(t *testing.T) {
	w := testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml":          "name: agents\ntool_privileges:\n  admin: [syscall.agent.stop, syscall.agent.start, syscall.agent.create]\nagents:\n  - id: boss\n  - id: worker\n",
		"archetype/boss/config.md":   "## Tool Access\nprivilege_groups: admin\n",
		"archetype/worker/config.md": "## Tool Access\n- think\n",
	})
	env := []string{"ARMORY_WORLD=" + w}
	if r := armoryCmd(t, env, "call", "worker", "think", "--args", `{"thought":"one"}`); r.code != 0 {
		t.Fatalf("call: %+v", r)
	}
	if r := armoryCmd(t, env, "agents", "stop", "worker"); r.code != 0 || r.stdout != "agent worker: stopped\n" {
		t.Fatalf("stop: %+v", r)
	}
	r := armoryCmd(t, env, "call", "worker", "think", "--args", `{"thought":"two"}`)
	if o := callJSON(t, r); r.code != exitBlocked || o.Status != "blocked" || !strings.Contains(o.Result, "agent worker is stopped") {
		t.Fatalf("call of a stopped agent: %+v", r)
	}
	r = armoryCmd(t, env, "agents", "list", "--json")
	var list []struct{ ID, Status, Origin string }
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list) != 2 || list[1].ID != "worker" || list[1].Status != "stopped" || list[0].Status != "running" {
		t.Fatalf("list: %v %+v", err, r)
	}
	if r := armoryCmd(t, env, "agents", "list"); !strings.Contains(r.stdout, "worker") || !strings.Contains(r.stdout, "stopped") {
		t.Fatalf("list text: %+v", r)
	}
	// A created agent is restored by the next process.
	if r := armoryCmd(t, env, "call", "boss", "syscall.agent.create", "--args", `{"id":"hand","archetype":"worker"}`); r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	if r := armoryCmd(t, env, "call", "hand", "think", "--args", `{"thought":"new"}`); r.code != 0 {
		t.Fatalf("created agent's call: %+v", r)
	}
	if r := armoryCmd(t, env, "token", "create", "hand"); r.code != 0 || !strings.HasPrefix(r.stdout, "armory_") {
		t.Fatalf("token for a created agent: %+v", r)
	}
	if r := armoryCmd(t, env, "agents", "start", "worker", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"status": "running"`) {
		t.Fatalf("start: %+v", r)
	}
	if r := armoryCmd(t, env, "call", "worker", "think", "--args", `{"thought":"three"}`); r.code != 0 {
		t.Fatalf("call after start: %+v", r)
	}
	if r := armoryCmd(t, env, "agents", "stop", "ghost"); r.code == 0 || !strings.Contains(r.stderr, `unknown agent "ghost"`) {
		t.Fatalf("stop ghost: %+v", r)
	}
	r = armoryCmd(t, env, "audit", "--json", "--limit", "50")
	if !strings.Contains(r.stdout, `"tool": "agent.stop"`) || !strings.Contains(r.stdout, `\"via\":\"cli\"`) && !strings.Contains(r.stdout, `"via": "cli"`) && !strings.Contains(r.stdout, `"via":"cli"`) {
		t.Fatalf("the human's stop is not in the trail: %s", r.stdout)
	}
}
