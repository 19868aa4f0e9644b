package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/armory-dev/armory/store"
)

// The world of the services routes' tests: lead is a manager (creates
// tasks, writes and deletes knowledge), worker is not.
var humansWorld = map[string]string{
	"world-config.yaml": `name: humans
tool_privileges:
  manager: [syscall.task.create, syscall.knowledge.write, syscall.knowledge.delete]
agents:
  - id: lead
  - id: worker
`,
	"archetype/lead/config.md":   "## Tool Access\nprivilege_groups: manager\n",
	"archetype/worker/config.md": "## Tool Access\n- think\n",
}

// expect sends a request and fails unless the status is code and the body
// holds every one of want; it returns the body.
func (e *env) expect(method, path, token, body string, code int, want ...string) string {
	e.t.Helper()
	got, b, _ := e.do(method, path, token, body)
	if got != code {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, got, code, b)
	}
	for _, w := range want {
		if !strings.Contains(b, w) {
			e.t.Fatalf("%s %s: body lacks %q: %s", method, path, w, b)
		}
	}
	return b
}

// humanRecord checks that the trail holds a record of tool decided by the
// human via rest, and returns its args.
func (e *env) humanRecord(tool string) string {
	e.t.Helper()
	recs, err := e.st.ListAudit(context.Background(), store.AuditFilter{Tool: tool, Limit: 10})
	if err != nil || len(recs) == 0 {
		e.t.Fatalf("no %s record in the trail: %v", tool, err)
	}
	r := recs[0] // the newest
	if r.DecidedBy != "human" {
		e.t.Fatalf("%s record not the human's: %+v", tool, r)
	}
	return string(r.Args)
}

func decodeInto(t *testing.T, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}

type itemsPage struct {
	Items      []map[string]any `json:"items"`
	NextCursor string           `json:"next_cursor"`
}

func TestHumansInboxREST(t *testing.T) {
	e := startServices(t, humansWorld)
	workerTok := e.token("worker")

	e.expect("POST", "/api/agents/worker/inbox", "", `{"message":"hi"}`, http.StatusUnauthorized)
	e.expect("POST", "/api/agents/worker/inbox", workerTok, `{"message":"hi"}`, http.StatusForbidden, "admin token")
	e.expect("POST", "/api/agents/worker/inbox", e.admin, `{"message":"hi","from":"lead"}`, http.StatusBadRequest, `unknown field \"from\"`)
	e.expect("POST", "/api/agents/worker/inbox", e.admin, `{}`, http.StatusBadRequest, `\"message\" is required`)
	e.expect("POST", "/api/agents/worker/inbox", e.admin, `{"message":"   "}`, http.StatusBadRequest, "empty")
	e.expect("POST", "/api/agents/ghost/inbox", e.admin, `{"message":"hi"}`, http.StatusNotFound, "ghost")
	for _, m := range []string{"one", "two", "three"} {
		e.expect("POST", "/api/agents/worker/inbox", e.admin, `{"message":"`+m+`"}`, http.StatusOK, `"from":"human"`, `"to":"worker"`)
	}
	args := e.humanRecord("inbox.post")
	if !strings.Contains(args, `"via":"rest"`) || !strings.Contains(args, `"to":"worker"`) {
		t.Fatalf("inbox.post args: %s", args)
	}

	// The human reads pages, acknowledging nothing.
	var p itemsPage
	decodeInto(t, e.expect("GET", "/api/agents/worker/inbox?limit=2", e.admin, "", http.StatusOK), &p)
	if len(p.Items) != 2 || p.Items[0]["body"] != "one" || p.NextCursor == "" {
		t.Fatalf("first page: %+v", p)
	}
	var p2 itemsPage
	decodeInto(t, e.expect("GET", "/api/agents/worker/inbox?limit=2&cursor="+p.NextCursor, e.admin, "", http.StatusOK), &p2)
	if len(p2.Items) != 1 || p2.Items[0]["body"] != "three" || p2.NextCursor != "" {
		t.Fatalf("second page: %+v", p2)
	}
	e.expect("GET", "/api/agents/worker/inbox?limit=0", e.admin, "", http.StatusBadRequest, "limit", "1..1000")
	e.expect("GET", "/api/agents/worker/inbox?cursor=junk", e.admin, "", http.StatusBadRequest)
	e.expect("GET", "/api/agents/worker/inbox?unacked=maybe", e.admin, "", http.StatusBadRequest, "unacked")
	e.expect("GET", "/api/agents/ghost/inbox", e.admin, "", http.StatusNotFound)
	e.expect("GET", "/api/agents/human/inbox", e.admin, "", http.StatusOK, `"items":[]`)

	// An agent token reads its own inbox as the agent (syscall.inbox, which
	// acknowledges), and no other.
	e.expect("GET", "/api/agents/worker/inbox?unacked=1", workerTok, "", http.StatusOK, `"acked":3`, `"body":"one"`)
	e.expect("GET", "/api/agents/worker/inbox?unacked=1", e.admin, "", http.StatusOK, `"items":[]`)
	e.expect("GET", "/api/agents/lead/inbox", workerTok, "", http.StatusForbidden, "does not reach that agent")
}

func TestHumansTasksREST(t *testing.T) {
	e := startServices(t, humansWorld)
	workerTok, leadTok := e.token("worker"), e.token("lead")

	e.expect("GET", "/api/tasks", "", "", http.StatusUnauthorized)
	e.expect("POST", "/api/tasks", e.admin, `{"title":"no one"}`, http.StatusBadRequest, "needs an assignee")
	e.expect("POST", "/api/tasks", e.admin, `{"assignee":"worker"}`, http.StatusBadRequest, `\"title\" is required`)
	e.expect("POST", "/api/tasks", e.admin, `{"title":"x","assignee":"worker","priority":1}`, http.StatusBadRequest, "unknown field")
	e.expect("POST", "/api/tasks", e.admin, `{"title":"x","assignee":"ghost"}`, http.StatusNotFound)
	var ch struct {
		Task     store.Task `json:"task"`
		Notified []string   `json:"notified"`
	}
	decodeInto(t, e.expect("POST", "/api/tasks", e.admin, `{"title":"ship it","description":"v1","assignee":"worker"}`, http.StatusOK, `"creator":"human"`), &ch)
	id := ch.Task.ID
	if id == "" || ch.Task.Assignee != "worker" {
		t.Fatalf("created: %+v", ch)
	}
	if args := e.humanRecord("task.create"); !strings.Contains(args, `"via":"rest"`) {
		t.Fatalf("task.create args: %s", args)
	}
	// An agent outside the manager group may not create; lead may.
	e.expect("POST", "/api/tasks", workerTok, `{"title":"mine"}`, http.StatusNotFound, "Unknown tool: syscall.task.create")
	e.expect("POST", "/api/tasks", leadTok, `{"title":"review","assignee":"worker"}`, http.StatusOK, `"creator":"lead"`)

	var p itemsPage
	decodeInto(t, e.expect("GET", "/api/tasks?assignee=worker&limit=1", e.admin, "", http.StatusOK), &p)
	if len(p.Items) != 1 || p.Items[0]["id"] != id || p.NextCursor == "" {
		t.Fatalf("list: %+v", p)
	}
	e.expect("GET", "/api/tasks?assignee=worker&limit=1&cursor="+p.NextCursor, e.admin, "", http.StatusOK, `"creator":"lead"`)
	e.expect("GET", "/api/tasks?status=bogus", e.admin, "", http.StatusBadRequest, "unknown status")
	e.expect("GET", "/api/tasks?colour=red", e.admin, "", http.StatusBadRequest, "unknown query parameter")
	e.expect("GET", "/api/tasks/"+id, e.admin, "", http.StatusOK, `"title":"ship it"`)
	e.expect("GET", "/api/tasks/nope", e.admin, "", http.StatusNotFound)
	e.expect("GET", "/api/tasks/"+id, workerTok, "", http.StatusOK, `"title":"ship it"`)

	e.expect("PATCH", "/api/tasks/"+id, e.admin, `{}`, http.StatusBadRequest, "nothing to change")
	e.expect("PATCH", "/api/tasks/"+id, e.admin, `{"status":"in_progress","note":"go"}`, http.StatusOK, `"status":"in_progress"`)
	if args := e.humanRecord("task.update"); !strings.Contains(args, `"via":"rest"`) {
		t.Fatalf("task.update args: %s", args)
	}
	// The assignee finishes it through the pipeline, as itself.
	e.expect("PATCH", "/api/tasks/"+id, workerTok, `{"status":"done"}`, http.StatusOK, `"status":"done"`)
	recs, err := e.st.ListAudit(context.Background(), store.AuditFilter{Tool: "syscall.task.update", Agent: "worker", Limit: 5})
	if err != nil || len(recs) == 0 || recs[0].Status != "success" {
		t.Fatalf("worker's update in the trail: %v %+v", err, recs)
	}
	e.expect("PATCH", "/api/tasks/nope", e.admin, `{"status":"done"}`, http.StatusNotFound)
	// A stopped agent's token is refused on these routes too (the gate).
	e.expect("POST", "/api/agents/worker/stop", e.admin, "", http.StatusOK)
	e.expect("GET", "/api/tasks", workerTok, "", http.StatusForbidden, "agent worker is stopped")
	e.expect("GET", "/api/tasks", e.admin, "", http.StatusOK)
}

func TestHumansKnowledgeAndStateREST(t *testing.T) {
	e := startServices(t, humansWorld)
	workerTok := e.token("worker")

	// Knowledge: keys with slashes are paths.
	e.expect("PUT", "/api/knowledge/howto/deploy", "", `{"body":"b"}`, http.StatusUnauthorized)
	e.expect("PUT", "/api/knowledge/howto/deploy", e.admin, `{"title":"Deploy"}`, http.StatusBadRequest, `\"body\" is required`)
	e.expect("PUT", "/api/knowledge/howto/deploy", e.admin, `{"body":"make ship","title":"Deploy"}`, http.StatusOK, `"version":1`, `"key":"howto/deploy"`)
	if args := e.humanRecord("knowledge.write"); !strings.Contains(args, `"via":"rest"`) {
		t.Fatalf("knowledge.write args: %s", args)
	}
	e.expect("PUT", "/api/knowledge/howto/deploy", e.admin, `{"body":"x","expect_version":5}`, http.StatusConflict)
	e.expect("GET", "/api/knowledge/howto/deploy", e.admin, "", http.StatusOK, `"body":"make ship"`)
	e.expect("GET", "/api/knowledge/howto/nothing", e.admin, "", http.StatusNotFound)
	e.expect("GET", "/api/knowledge?prefix=howto/", e.admin, "", http.StatusOK, `"key":"howto/deploy"`, `"items":[`)
	e.expect("GET", "/api/knowledge/howto/deploy", workerTok, "", http.StatusOK, `"body":"make ship"`)
	e.expect("PUT", "/api/knowledge/howto/deploy", workerTok, `{"body":"mine"}`, http.StatusNotFound, "Unknown tool: syscall.knowledge.write")
	e.expect("DELETE", "/api/knowledge/howto/deploy", workerTok, "", http.StatusNotFound, "Unknown tool: syscall.knowledge.delete")
	e.expect("DELETE", "/api/knowledge/howto/deploy?expect_version=9", e.admin, "", http.StatusConflict)
	e.expect("DELETE", "/api/knowledge/howto/deploy?expect_version=x", e.admin, "", http.StatusBadRequest, "expect_version")
	e.expect("DELETE", "/api/knowledge/howto/deploy?expect_version=1", e.admin, "", http.StatusOK, `"deleted":"howto/deploy"`)
	if args := e.humanRecord("knowledge.delete"); !strings.Contains(args, `"via":"rest"`) {
		t.Fatalf("knowledge.delete args: %s", args)
	}
	e.expect("GET", "/api/knowledge/howto/deploy", e.admin, "", http.StatusNotFound)
	e.expect("DELETE", "/api/knowledge/howto/deploy", e.admin, "", http.StatusNotFound)

	// State: compare-and-set, 409 on a stale version.
	e.expect("PUT", "/api/state/counter", e.admin, `{}`, http.StatusBadRequest, `\"value\" is required`)
	e.expect("PUT", "/api/state/counter", e.admin, `{"value":"1","expect_version":0}`, http.StatusOK, `"version":1`)
	e.expect("PUT", "/api/state/counter", e.admin, `{"value":"2","expect_version":0}`, http.StatusConflict, "already exists, at version 1")
	e.expect("PUT", "/api/state/counter", e.admin, `{"value":"2","expect_version":1}`, http.StatusOK, `"version":2`)
	if args := e.humanRecord("state.write"); !strings.Contains(args, `"via":"rest"`) || !strings.Contains(args, `"expect_version":1`) {
		t.Fatalf("state.write args: %s", args)
	}
	e.expect("GET", "/api/state/counter", e.admin, "", http.StatusOK, `"value":"2"`, `"version":2`)
	e.expect("GET", "/api/state/nothing", e.admin, "", http.StatusNotFound)
	e.expect("PUT", "/api/state/flags/a", e.admin, `{"value":""}`, http.StatusOK)
	var p itemsPage
	decodeInto(t, e.expect("GET", "/api/state?prefix=flags/", e.admin, "", http.StatusOK), &p)
	if len(p.Items) != 1 || p.Items[0]["key"] != "flags/a" {
		t.Fatalf("state list: %+v", p)
	}
	// An agent writes as itself through the pipeline: the same 409.
	e.expect("PUT", "/api/state/counter", workerTok, `{"value":"3","expect_version":1}`, http.StatusConflict, "is at version 2, not 1")
	e.expect("PUT", "/api/state/counter", workerTok, `{"value":"3","expect_version":2}`, http.StatusOK, `"version":3`)
	e.expect("GET", "/api/state/counter", workerTok, "", http.StatusOK, `"value":"3"`)
	// Bounded bodies.
	e.expect("PUT", "/api/state/big", e.admin, `{"value":"`+strings.Repeat("x", 2<<20)+`"}`, http.StatusRequestEntityTooLarge)
	e.expect("PATCH", "/api/state/counter", e.admin, `{}`, http.StatusNotFound, "this path takes GET, PUT")
}

func TestHumansChatsAndTimersREST(t *testing.T) {
	e := startServices(t, humansWorld)
	workerTok, leadTok := e.token("worker"), e.token("lead")
	var created struct {
		Value struct {
			ID string `json:"id"`
		} `json:"value"`
	}
	decodeInto(t, e.expect("POST", "/api/agents/lead/calls", leadTok, `{"tool":"syscall.chat.create","args":{"name":"crew","members":["worker"]}}`, http.StatusOK), &created)
	chat := created.Value.ID
	if chat == "" {
		t.Fatal("no chat id")
	}
	e.expect("GET", "/api/chats", e.admin, "", http.StatusOK, `"name":"crew"`)
	e.expect("GET", "/api/chats?member=worker", e.admin, "", http.StatusOK, `"name":"crew"`)
	e.expect("GET", "/api/chats/"+chat, e.admin, "", http.StatusOK, `"members":["lead","worker"]`)
	e.expect("GET", "/api/chats/nope", e.admin, "", http.StatusNotFound)
	e.expect("GET", "/api/chats/"+chat, workerTok, "", http.StatusForbidden, "admin token")
	e.expect("POST", "/api/chats/"+chat+"/messages", e.admin, `{"message":"standup at 10"}`, http.StatusOK, `"from":"human"`)
	if args := e.humanRecord("chat.post"); !strings.Contains(args, `"via":"rest"`) {
		t.Fatalf("chat.post args: %s", args)
	}
	e.expect("POST", "/api/chats/nope/messages", e.admin, `{"message":"x"}`, http.StatusNotFound)
	e.expect("POST", "/api/chats/"+chat+"/messages", workerTok, `{"message":"ok"}`, http.StatusOK, `"delivered":`)
	e.expect("GET", "/api/chats/"+chat+"/history", e.admin, "", http.StatusOK, `"body":"standup at 10"`, `"body":"ok"`)
	e.expect("GET", "/api/chats/"+chat+"/history", workerTok, "", http.StatusOK, `"body":"standup at 10"`)
	e.expect("GET", "/api/chats", workerTok, "", http.StatusOK, `"chats":[`, `"name":"crew"`)
	e.expect("GET", "/api/chats?member=lead", workerTok, "", http.StatusForbidden)

	// Timers: the human sees and deletes every agent's; an agent lists its own.
	e.expect("POST", "/api/agents/lead/calls", leadTok, `{"tool":"util.timer","args":{"name":"nag","after":"1h"}}`, http.StatusOK)
	var p itemsPage
	decodeInto(t, e.expect("GET", "/api/timers", e.admin, "", http.StatusOK), &p)
	if len(p.Items) != 1 || p.Items[0]["owner"] != "lead" {
		t.Fatalf("timers: %+v", p)
	}
	id, _ := p.Items[0]["id"].(string)
	e.expect("GET", "/api/timers", leadTok, "", http.StatusOK, `"nag"`)
	e.expect("GET", "/api/timers?agent=lead", workerTok, "", http.StatusForbidden)
	e.expect("DELETE", "/api/timers/"+id, leadTok, "", http.StatusForbidden, "admin token")
	e.expect("DELETE", "/api/timers/"+id, e.admin, "", http.StatusOK, `"name":"nag"`)
	e.humanRecord("timers.delete")
	e.expect("DELETE", "/api/timers/"+id, e.admin, "", http.StatusNotFound, "no timer")
}
