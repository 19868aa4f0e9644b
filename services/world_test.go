package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// worldFiles is a world of four agents: ann (groups manager and ops), bob
// (ops), carl and dana (none). Deleting knowledge is the manager group's.
var worldFiles = map[string]string{
	"world-config.yaml": "name: svc\nagents:\n  - {id: ann}\n  - {id: bob}\n  - {id: carl}\n  - {id: dana}\n" +
		"tool_privileges:\n  manager:\n    - syscall.knowledge.delete\n  ops:\n    - syscall.resource.usage\n",
	"archetype/ann/config.md":  "## Tool Access\nprivilege_groups: manager, ops\n",
	"archetype/bob/config.md":  "## Tool Access\nprivilege_groups: ops\n",
	"archetype/carl/config.md": "## Tool Access\n",
	"archetype/dana/config.md": "## Tool Access\n",
}

// taskNotices returns agent's unacked task notices.
func (w *world) taskNotices(agent string) []*store.Message {
	w.t.Helper()
	msgs, _, err := w.eng.Store().ReadInbox(context.Background(), store.InboxQuery{Agent: agent, Unacked: true})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []*store.Message
	for _, m := range msgs {
		if m.Kind == store.KindTask {
			out = append(out, m)
		}
	}
	return out
}

type taskChange struct {
	Task     store.Task `json:"task"`
	Notified []string   `json:"notified"`
}

func TestTasks(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		f := open(t, writeWorld(t, worldFiles), db, services.Options{})
		var events []pipeline.Event
		var mu sync.Mutex
		f.eng.Subscribe(func(e pipeline.Event) {
			if e.Kind == services.TaskEventKind {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			}
		})

		// ann creates a task for bob: bob's inbox gets a notice, an event is raised.
		var c taskChange
		f.ok("ann", "syscall.task.create", map[string]any{"title": "write the report", "description": "by friday", "assignee": "bob"}, &c)
		id := c.Task.ID
		if c.Task.Creator != "ann" || c.Task.Assignee != "bob" || c.Task.Status != store.TaskOpen || strings.Join(c.Notified, ",") != "bob" {
			t.Fatalf("created %+v", c)
		}
		if n := f.taskNotices("bob"); len(n) != 1 || n[0].From != "ann" || !strings.Contains(n[0].Body, id) || !strings.Contains(n[0].Body, "by friday") {
			t.Fatalf("bob's notices: %+v", n)
		}
		f.refused("ann", "syscall.task.create", map[string]any{"title": "x", "assignee": "nobody"}, armory.KindNotFound, `no agent "nobody"`)

		// A task for oneself by default; no notice to oneself.
		var own taskChange
		f.ok("carl", "syscall.task.create", map[string]any{"title": "tidy up"}, &own)
		if own.Task.Assignee != "carl" || len(own.Notified) != 0 || len(f.taskNotices("carl")) != 0 {
			t.Fatalf("own task %+v, carl's inbox %d", own, len(f.taskNotices("carl")))
		}

		// Neither creator nor assignee: refused, nothing changes.
		f.refused("carl", "syscall.task.update", map[string]any{"id": id, "status": "done"}, armory.KindPermission, "only its creator or its assignee")
		// The caller is never an argument.
		f.refused("carl", "syscall.task.update", map[string]any{"id": id, "status": "done", "agent": "bob"}, armory.KindInvalid, "agent")

		// bob rejects: a reason is required; then the task goes back to ann with a notice.
		f.refused("bob", "syscall.task.update", map[string]any{"id": id, "status": "rejected"}, armory.KindInvalid, "needs a reason")
		f.ok("bob", "syscall.task.update", map[string]any{"id": id, "status": "rejected", "reason": "I have no data access"}, &c)
		if c.Task.Status != store.TaskRejected || c.Task.Assignee != "ann" || c.Task.Reason != "I have no data access" || strings.Join(c.Notified, ",") != "ann" {
			t.Fatalf("rejected %+v", c)
		}
		if n := f.taskNotices("ann"); len(n) != 1 || !strings.Contains(n[0].Subject, "rejected by bob") || !strings.Contains(n[0].Body, "I have no data access") {
			t.Fatalf("ann's notices: %+v", n)
		}

		// ann delegates it to dana: dana and bob (from whom it was taken: not any more) …
		f.ok("ann", "syscall.task.update", map[string]any{"id": id, "assignee": "dana", "note": "dana has access"}, &c)
		if c.Task.Assignee != "dana" || c.Task.Status != store.TaskOpen || strings.Join(c.Notified, ",") != "dana" {
			t.Fatalf("delegated %+v", c)
		}
		if n := f.taskNotices("dana"); len(n) != 1 || !strings.Contains(n[0].Body, "dana has access") {
			t.Fatalf("dana's notices %+v", n)
		}
		// … bob, no longer assignee, may not touch it.
		f.refused("bob", "syscall.task.update", map[string]any{"id": id, "status": "in_progress"}, armory.KindPermission)
		f.ok("dana", "syscall.task.update", map[string]any{"id": id, "status": "done"}, &c)
		if c.Task.Status != store.TaskDone || strings.Join(c.Notified, ",") != "ann" || c.Task.Version != 4 {
			t.Fatalf("done %+v", c)
		}

		// get and list.
		var got store.Task
		f.ok("carl", "syscall.task.get", map[string]any{"id": id}, &got)
		if got.Status != store.TaskDone || got.Assignee != "dana" {
			t.Fatalf("get %+v", got)
		}
		f.refused("carl", "syscall.task.get", map[string]any{"id": "nope"}, armory.KindNotFound, "no task")
		var page struct {
			Items []store.Task `json:"items"`
			Next  string       `json:"next_cursor"`
		}
		f.ok("carl", "syscall.task.list", map[string]any{"assignee": "me"}, &page)
		if len(page.Items) != 1 || page.Items[0].ID != own.Task.ID {
			t.Fatalf("carl's tasks %+v", page)
		}
		page.Items = nil
		f.ok("carl", "syscall.task.list", map[string]any{"status": "done"}, &page)
		if len(page.Items) != 1 || page.Items[0].ID != id {
			t.Fatalf("done tasks %+v", page)
		}
		page.Items = nil
		f.ok("carl", "syscall.task.list", map[string]any{"limit": 1}, &page)
		if len(page.Items) != 1 || page.Next == "" {
			t.Fatalf("first page %+v", page)
		}
		cursor := page.Next
		page.Items, page.Next = nil, ""
		f.ok("carl", "syscall.task.list", map[string]any{"limit": 1, "cursor": cursor}, &page)
		if len(page.Items) != 1 || page.Items[0].ID != own.Task.ID {
			t.Fatalf("second page %+v", page)
		}

		// A person reassigns and reopens through the human API: audited, decided_by human.
		ch, err := f.mod.UpdateTask(context.Background(), f.eng.Pipeline(), "cli", services.TaskUpdate{ID: id, Status: store.TaskOpen, Assignee: "bob", Reason: "bob has access now"})
		if err != nil || ch.Task.Assignee != "bob" || ch.Task.Status != store.TaskOpen {
			t.Fatalf("human update %+v: %v", ch, err)
		}
		recs, err := f.eng.Store().ListAudit(context.Background(), store.AuditFilter{Tool: "task.update"})
		if err != nil || len(recs) != 1 || recs[0].DecidedBy != pipeline.Human || !strings.Contains(recs[0].Result, "via cli") {
			t.Fatalf("audit %+v: %v", recs, err)
		}

		mu.Lock()
		defer mu.Unlock()
		if len(events) < 6 || events[0].Ref == "" {
			t.Fatalf("task events: %+v", events)
		}
	})
}

func TestKnowledge(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		f := open(t, writeWorld(t, worldFiles), db, services.Options{})
		type written struct {
			Version int64    `json:"version"`
			Read    []string `json:"read"`
			Write   []string `json:"write"`
		}
		var w written
		// A new entry: readable by everyone, writable by its author.
		f.ok("carl", "syscall.knowledge.write", map[string]any{"key": "howto/deploy", "title": "Deploy", "body": "make release"}, &w)
		if w.Version != 1 || strings.Join(w.Read, ",") != "*" || strings.Join(w.Write, ",") != "agent:carl" {
			t.Fatalf("written %+v", w)
		}
		var e store.KnowledgeEntry
		f.ok("dana", "syscall.knowledge.read", map[string]any{"key": "howto/deploy"}, &e)
		if e.Body != "make release" || e.Author != "carl" {
			t.Fatalf("read %+v", e)
		}
		// dana may not write it: the refusal says who may.
		f.refused("dana", "syscall.knowledge.write", map[string]any{"key": "howto/deploy", "body": "rm -rf"}, armory.KindPermission,
			"dana (no privilege group) is not in the write list", "who may write it: agent carl")
		// carl opens it to the ops group and restricts reading to ops.
		f.ok("carl", "syscall.knowledge.write", map[string]any{"key": "howto/deploy", "body": "make release v2", "read": []string{"group:ops", "agent:carl"}, "write": []string{"group:ops", "agent:carl"}}, &w)
		if w.Version != 2 {
			t.Fatalf("version %d", w.Version)
		}
		f.refused("dana", "syscall.knowledge.read", map[string]any{"key": "howto/deploy"}, armory.KindPermission,
			"read refused", "who may read it: members of group ops, agent carl")
		f.ok("bob", "syscall.knowledge.write", map[string]any{"key": "howto/deploy", "body": "make release v3", "expect_version": 2}, &w)
		f.refused("bob", "syscall.knowledge.write", map[string]any{"key": "howto/deploy", "body": "stale", "expect_version": 2}, armory.KindConflict, "is at version 3")
		f.refused("carl", "syscall.knowledge.write", map[string]any{"key": "x", "body": "b", "read": []string{"everyone"}}, armory.KindInvalid, `want "*"`)

		// list shows only what the caller may read.
		f.ok("dana", "syscall.knowledge.write", map[string]any{"key": "notes/dana", "body": "mine", "read": []string{"agent:dana"}}, nil)
		var page struct {
			Items []services.KnowledgeSummary `json:"items"`
		}
		f.ok("dana", "syscall.knowledge.list", map[string]any{}, &page)
		if len(page.Items) != 1 || page.Items[0].Key != "notes/dana" || !page.Items[0].CanWrite {
			t.Fatalf("dana's list %+v", page)
		}
		page.Items = nil
		f.ok("bob", "syscall.knowledge.list", map[string]any{"prefix": "howto/"}, &page)
		if len(page.Items) != 1 || !page.Items[0].CanWrite || page.Items[0].Version != 3 {
			t.Fatalf("bob's list %+v", page)
		}

		// Deleting: the tool is the manager group's (pipeline), and the entry needs write permission.
		if o := f.callIn("bob", "", "syscall.knowledge.delete", map[string]any{"key": "notes/dana"}); o.Status == audit.StatusSuccess {
			t.Fatalf("bob (not manager) deleted: %s", o.Result)
		}
		f.refused("ann", "syscall.knowledge.delete", map[string]any{"key": "notes/dana"}, armory.KindPermission, "who may write it: agent dana")
		f.ok("ann", "syscall.knowledge.delete", map[string]any{"key": "howto/deploy"}, nil) // ann is in ops
		f.refused("ann", "syscall.knowledge.read", map[string]any{"key": "howto/deploy"}, armory.KindNotFound)

		// A person is not bound by the lists; the change is audited.
		if err := f.mod.DeleteKnowledge(context.Background(), f.eng.Pipeline(), "rest", "notes/dana", nil); err != nil {
			t.Fatal(err)
		}
		if _, err := f.mod.PutKnowledge(context.Background(), f.eng.Pipeline(), "rest", services.KnowledgeWrite{Key: "rules", Body: "be kind", Read: []string{"*"}}); err != nil {
			t.Fatal(err)
		}
		f.refused("ann", "syscall.knowledge.write", map[string]any{"key": "rules", "body": "be quick"}, armory.KindPermission, "write list is empty")
		for _, tool := range []string{"knowledge.delete", "knowledge.write"} {
			recs, _ := f.eng.Store().ListAudit(context.Background(), store.AuditFilter{Tool: tool})
			if len(recs) != 1 || recs[0].DecidedBy != pipeline.Human {
				t.Fatalf("%s audit records: %+v", tool, recs)
			}
		}
	})
}

func TestMemory(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		f := open(t, writeWorld(t, worldFiles), db, services.Options{})
		f.ok("ann", "syscall.memory.write", map[string]any{"key": "deploy", "value": "release with make release; tag first"}, nil)
		f.ok("ann", "syscall.memory.write", map[string]any{"key": "deploy", "value": "; then push the tag", "append": true}, nil)
		f.ok("ann", "syscall.memory.write", map[string]any{"key": "lunch", "value": "bob likes noodles"}, nil)
		f.ok("ann", "syscall.memory.write", map[string]any{"key": "big", "value": strings.Repeat("tag filler ", 1000)}, nil)
		var e store.MemoryEntry
		f.ok("ann", "syscall.memory.read", map[string]any{"key": "deploy"}, &e)
		if e.Value != "release with make release; tag first; then push the tag" {
			t.Fatalf("read %q", e.Value)
		}
		var keys struct {
			Items []services.MemoryKey `json:"items"`
		}
		f.ok("ann", "syscall.memory.read", map[string]any{}, &keys)
		if len(keys.Items) != 3 || keys.Items[0].Key != "big" {
			t.Fatalf("keys %+v", keys)
		}

		// An agent's memory is its own: bob sees none of ann's, and cannot name her.
		f.refused("bob", "syscall.memory.read", map[string]any{"key": "deploy"}, armory.KindNotFound, "your memory has no key")
		f.refused("bob", "syscall.memory.write", map[string]any{"key": "deploy", "value": "x", "agent": "ann"}, armory.KindInvalid, "agent")
		f.refused("bob", "syscall.memory.read", map[string]any{"key": "deploy", "agent": "ann"}, armory.KindInvalid, "agent")
		f.ok("bob", "syscall.memory.write", map[string]any{"key": "deploy", "value": "bob's"}, nil)
		f.ok("ann", "syscall.memory.read", map[string]any{"key": "deploy"}, &e)
		if !strings.HasPrefix(e.Value, "release") {
			t.Fatalf("bob's write reached ann's memory: %q", e.Value)
		}

		// recall: ranked, within the budget.
		var r services.Recall
		f.ok("ann", "syscall.memory.recall", map[string]any{"query": "how to push the release tag"}, &r)
		if r.Matched != 2 || len(r.Hits) != 2 || r.Hits[0].Key != "deploy" || r.Used > services.DefaultRecallBudget || !r.Hits[1].Truncated {
			t.Fatalf("recall %+v", r)
		}
		f.ok("ann", "syscall.memory.recall", map[string]any{"query": "noodles", "budget_bytes": 64}, &r)
		if len(r.Hits) != 1 || r.Hits[0].Key != "lunch" || r.Used > 64 {
			t.Fatalf("recall noodles %+v", r)
		}
		f.refused("ann", "syscall.memory.recall", map[string]any{"query": "x", "budget_bytes": 1 << 20}, armory.KindInvalid)
		f.refused("ann", "syscall.memory.recall", map[string]any{"query": "?!"}, armory.KindInvalid, "no keyword")

		// Inspect reads another's memory read-only, through the module.
		entries, next, err := f.mod.ReadAgentMemory(context.Background(), "ann", store.Page{Limit: 2})
		if err != nil || len(entries) != 2 || next == "" {
			t.Fatalf("ReadAgentMemory: %d entries, next %q, %v", len(entries), next, err)
		}
		// Bounds: a value over 64 KiB is refused, nothing written.
		f.refused("ann", "syscall.memory.write", map[string]any{"key": "huge", "value": strings.Repeat("x", store.MaxBody+1)}, armory.KindInvalid)
		f.refused("ann", "syscall.memory.read", map[string]any{"key": "huge"}, armory.KindNotFound)
	})
}

func TestState(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		f := open(t, writeWorld(t, worldFiles), db, services.Options{})
		var w services.StateWritten
		f.ok("ann", "syscall.state.write", map[string]any{"key": "phase", "value": "plan", "expect_version": 0}, &w)
		if w.Version != 1 {
			t.Fatalf("version %d", w.Version)
		}
		f.refused("bob", "syscall.state.write", map[string]any{"key": "phase", "value": "build", "expect_version": 0}, armory.KindConflict, "already exists, at version 1")
		f.ok("bob", "syscall.state.write", map[string]any{"key": "phase", "value": "build", "expect_version": 1}, &w)
		f.refused("ann", "syscall.state.write", map[string]any{"key": "phase", "value": "ship", "expect_version": 1}, armory.KindConflict, "is at version 2, not 1", "expect_version 2")
		f.refused("ann", "syscall.state.write", map[string]any{"key": "ghost", "value": "x", "expect_version": 4}, armory.KindConflict, "does not exist")
		f.ok("ann", "syscall.state.write", map[string]any{"key": "phase/detail", "value": "unconditional"}, &w)
		var e store.StateEntry
		f.ok("carl", "syscall.state.read", map[string]any{"key": "phase"}, &e)
		if e.Value != "build" || e.Version != 2 {
			t.Fatalf("read %+v", e)
		}
		var page struct {
			Items []store.StateEntry `json:"items"`
			Next  string             `json:"next_cursor"`
		}
		f.ok("carl", "syscall.state.read", map[string]any{"prefix": "phase", "limit": 1}, &page)
		if len(page.Items) != 1 || page.Next == "" {
			t.Fatalf("page %+v", page)
		}
		f.refused("carl", "syscall.state.read", map[string]any{"key": "nope"}, armory.KindNotFound, "does not exist")
		f.refused("carl", "syscall.state.write", map[string]any{"key": strings.Repeat("k", store.MaxKey+1), "value": "v"}, armory.KindInvalid, "limit is 256")
		if _, err := f.mod.WriteState(context.Background(), f.eng.Pipeline(), "cli", services.StateWrite{Key: "phase", Value: "halt"}); err != nil {
			t.Fatal(err)
		}
		f.ok("carl", "syscall.state.read", map[string]any{"key": "phase"}, &e)
		if e.Value != "halt" || e.Version != 3 {
			t.Fatalf("after the human write %+v", e)
		}
	})
}

// casIncrement adds one to counter key through syscall.state.write with
// expect_version, reading and retrying on conflict; it returns the number
// of conflicts it met.
func casIncrement(t testing.TB, f *world, agent, session, key string) int {
	conflicts := 0
	for {
		o := f.callIn(agent, session, "syscall.state.read", map[string]any{"key": key})
		var e store.StateEntry
		if o.Status != audit.StatusSuccess || json.Unmarshal([]byte(o.Result), &e) != nil {
			t.Errorf("read: %s %s", o.Status, o.Result)
			return conflicts
		}
		var n int
		fmt.Sscan(e.Value, &n)
		o = f.callIn(agent, session, "syscall.state.write", map[string]any{"key": key, "value": fmt.Sprint(n + 1), "expect_version": e.Version})
		switch {
		case o.Status == audit.StatusSuccess:
			return conflicts
		case o.Kind == armory.KindConflict:
			conflicts++
		default:
			t.Errorf("write: %s (%v) %s", o.Status, o.Kind, o.Result)
			return conflicts
		}
	}
}

// 100 concurrent compare-and-set writers (through the pipeline, each in a
// session of its own), half on a second engine on the same database, lose
// no update.
func TestStateCASWriters(t *testing.T) {
	backends(t, func(t *testing.T, db string) {
		dir := writeWorld(t, worldFiles)
		f1 := open(t, dir, db, services.Options{})
		f2 := open(t, dir, db, services.Options{})
		var w services.StateWritten
		f1.ok("ann", "syscall.state.write", map[string]any{"key": "counter", "value": "0", "expect_version": 0}, &w)
		const writers = 100
		agents := []string{"ann", "bob", "carl", "dana"}
		var wg sync.WaitGroup
		var mu sync.Mutex
		conflicts := 0
		for i := range writers {
			f := f1
			if i%2 == 1 {
				f = f2
			}
			wg.Go(func() {
				c := casIncrement(t, f, agents[i%len(agents)], fmt.Sprintf("cas-%d", i), "counter")
				mu.Lock()
				conflicts += c
				mu.Unlock()
			})
		}
		wg.Wait()
		var e store.StateEntry
		f2.ok("bob", "syscall.state.read", map[string]any{"key": "counter"}, &e)
		if e.Value != fmt.Sprint(writers) || e.Version != writers+1 {
			t.Fatalf("counter = %s at version %d, want %d at %d (conflicts retried: %d)", e.Value, e.Version, writers, writers+1, conflicts)
		}
		t.Logf("%d writers, %d conflicts retried", writers, conflicts)
	})
}
