package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// inTrail fails unless the audit trail holds a human's record of tool,
// via cli.
func inTrail(t *testing.T, w, tool string) {
	t.Helper()
	r := armoryCmd(t, nil, "--world", w, "audit", "--json", "--tool", tool)
	if r.code != 0 || !strings.Contains(r.stdout, `"decided_by": "human"`) || !strings.Contains(r.stdout, `"via": "cli"`) {
		t.Fatalf("no human %s via cli in the trail: %+v", tool, r)
	}
}

type listOut struct {
	Items      []map[string]any `json:"items"`
	NextCursor string           `json:"next_cursor"`
}

func listJSON(t *testing.T, r result) listOut {
	t.Helper()
	var l listOut
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &l) != nil {
		t.Fatalf("not a list: %+v", r)
	}
	return l
}

// armory inbox post puts the human's message in an agent's inbox (audited),
// armory inbox read pages through it without acknowledging; the agent then
// reads it with syscall.inbox.
func TestCLIInbox(t *testing.T) {
	w := initWorld(t)
	for _, m := range []string{"one", "two", "three"} {
		if r := armoryCmd(t, nil, "--world", w, "inbox", "post", "architect", m); r.code != 0 || !strings.Contains(r.stdout, "posted to architect") {
			t.Fatalf("post: %+v", r)
		}
	}
	inTrail(t, w, "inbox.post")
	l := listJSON(t, armoryCmd(t, nil, "--world", w, "inbox", "read", "architect", "--limit", "2", "--json"))
	if len(l.Items) != 2 || l.Items[0]["body"] != "one" || l.Items[0]["from"] != "human" || l.NextCursor == "" {
		t.Fatalf("first page: %+v", l)
	}
	r := armoryCmd(t, nil, "--world", w, "inbox", "read", "architect", "--limit", "2", "--cursor", l.NextCursor)
	if r.code != 0 || !strings.Contains(r.stdout, "three") || strings.Contains(r.stdout, "one") || r.stderr != "" {
		t.Fatalf("second page: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "inbox", "read", "architect", "--limit", "1")
	if !strings.Contains(r.stderr, "more: --cursor ") {
		t.Fatalf("no next cursor said: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "call", "architect", "syscall.inbox", "--args", `{"unacked_only":true}`)
	if o := callJSON(t, r); r.code != 0 || !strings.Contains(o.Result, `"acked": 3`) {
		t.Fatalf("the agent's read: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "inbox", "post", "ghost", "hi"); r.code != exitInvalid || !strings.Contains(r.stderr, "ghost") {
		t.Fatalf("post to ghost: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "inbox", "post", "architect", "  "); r.code != exitInvalid || !strings.Contains(r.stderr, "empty") {
		t.Fatalf("empty post: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "inbox", "read", "architect", "--limit", "5000"); r.code != exitUsage {
		t.Fatalf("bad limit: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "inbox", "read", "human", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"items": []`) {
		t.Fatalf("human's inbox: %+v", r)
	}
}

// armory chat list|show|history|post over a chat an agent created.
func TestCLIChat(t *testing.T) {
	w := initWorld(t)
	r := armoryCmd(t, nil, "--world", w, "call", "architect", "syscall.chat.create", "--args", `{"name":"crew","members":["scribe"]}`)
	if r.code != 0 {
		t.Fatalf("create: %+v", r)
	}
	l := listJSON(t, armoryCmd(t, nil, "--world", w, "chat", "list", "--json", "--member", "scribe"))
	if len(l.Items) != 1 || l.Items[0]["name"] != "crew" {
		t.Fatalf("list: %+v", l)
	}
	id := l.Items[0]["id"].(string)
	if r := armoryCmd(t, nil, "--world", w, "chat", "show", id); r.code != 0 || !strings.Contains(r.stdout, "members: architect, scribe") {
		t.Fatalf("show: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "chat", "post", id, "standup at 10"); r.code != 0 || !strings.Contains(r.stdout, "posted to chat "+id) {
		t.Fatalf("post: %+v", r)
	}
	inTrail(t, w, "chat.post")
	if r := armoryCmd(t, nil, "--world", w, "chat", "history", id); r.code != 0 || !strings.Contains(r.stdout, "human: standup at 10") {
		t.Fatalf("history: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "inbox", "read", "scribe"); !strings.Contains(r.stdout, "standup at 10") {
		t.Fatalf("not delivered to the member: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "chat", "show", "nope"); r.code != exitInvalid {
		t.Fatalf("show unknown: %+v", r)
	}
}

// armory tasks create|list|show|update, audited; a rejection needs a reason.
func TestCLITasks(t *testing.T) {
	w := initWorld(t)
	r := armoryCmd(t, nil, "--world", w, "tasks", "create", "Ship v1", "--assignee", "scribe", "--description", "soon", "--json")
	var ch struct {
		Task     struct{ ID, Status, Creator, Assignee string }
		Notified []string
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ch) != nil || ch.Task.Creator != "human" || ch.Task.Status != "open" {
		t.Fatalf("create: %+v", r)
	}
	inTrail(t, w, "task.create")
	if r := armoryCmd(t, nil, "--world", w, "tasks", "create", "nobody's"); r.code != exitUsage || !strings.Contains(r.stderr, "--assignee") {
		t.Fatalf("create without assignee: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "tasks", "list", "--assignee", "scribe"); r.code != 0 || !strings.Contains(r.stdout, "Ship v1") {
		t.Fatalf("list: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "tasks", "list", "--status", "bogus"); r.code != exitInvalid || !strings.Contains(r.stderr, "unknown status") {
		t.Fatalf("list bad status: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "tasks", "update", ch.Task.ID, "--status", "done"); r.code != 0 || !strings.Contains(r.stdout, ": done") {
		t.Fatalf("update: %+v", r)
	}
	inTrail(t, w, "task.update")
	if r := armoryCmd(t, nil, "--world", w, "tasks", "show", ch.Task.ID); r.code != 0 || !strings.Contains(r.stdout, "status: done") || !strings.Contains(r.stdout, "soon") {
		t.Fatalf("show: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "tasks", "show", "nope"); r.code != exitInvalid {
		t.Fatalf("show unknown: %+v", r)
	}
}

// armory knowledge put|show|list|delete with compare-and-set.
func TestCLIKnowledge(t *testing.T) {
	w := initWorld(t)
	if r := armoryCmd(t, nil, "--world", w, "knowledge", "put", "howto/deploy", "make ship", "--title", "Deploy", "--expect-version", "0"); r.code != 0 || !strings.Contains(r.stdout, "at version 1") {
		t.Fatalf("put: %+v", r)
	}
	inTrail(t, w, "knowledge.write")
	if r := armoryCmd(t, nil, "--world", w, "knowledge", "put", "howto/deploy", "again", "--expect-version", "0"); r.code != exitInvalid || !strings.Contains(r.stderr, "version") {
		t.Fatalf("stale put: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "knowledge", "show", "howto/deploy"); r.code != 0 || !strings.Contains(r.stdout, "make ship") || !strings.Contains(r.stdout, "(people only)") {
		t.Fatalf("show: %+v", r)
	}
	l := listJSON(t, armoryCmd(t, nil, "--world", w, "knowledge", "list", "--prefix", "howto/", "--json"))
	if len(l.Items) != 1 || l.Items[0]["key"] != "howto/deploy" {
		t.Fatalf("list: %+v", l)
	}
	if r := armoryCmd(t, nil, "--world", w, "knowledge", "delete", "howto/deploy", "--expect-version", "7"); r.code != exitInvalid {
		t.Fatalf("stale delete: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "knowledge", "delete", "howto/deploy"); r.code != 0 || !strings.Contains(r.stdout, "deleted") {
		t.Fatalf("delete: %+v", r)
	}
	inTrail(t, w, "knowledge.delete")
	if r := armoryCmd(t, nil, "--world", w, "knowledge", "show", "howto/deploy"); r.code != exitInvalid {
		t.Fatalf("show deleted: %+v", r)
	}
}

// armory state set|get|list: --expect-version is a compare-and-set whose
// stale write fails with exit 2 and the current version.
func TestCLIState(t *testing.T) {
	w := initWorld(t)
	if r := armoryCmd(t, nil, "--world", w, "state", "set", "counter", "1", "--expect-version", "0"); r.code != 0 || r.stdout != "counter at version 1\n" {
		t.Fatalf("set: %+v", r)
	}
	inTrail(t, w, "state.write")
	r := armoryCmd(t, nil, "--world", w, "state", "set", "counter", "2", "--expect-version", "0")
	if r.code != exitInvalid || !strings.Contains(r.stderr, "already exists, at version 1") {
		t.Fatalf("stale set: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "state", "set", "counter", "2", "--expect-version", "1", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"version": 2`) {
		t.Fatalf("set at 1: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "state", "set", "other", "x"); r.code != 0 {
		t.Fatalf("unconditional set: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "state", "get", "counter"); r.code != 0 || r.stdout != "counter (version 2): 2\n" {
		t.Fatalf("get: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "state", "get", "nothing"); r.code != exitInvalid || !strings.Contains(r.stderr, "does not exist") {
		t.Fatalf("get missing: %+v", r)
	}
	l := listJSON(t, armoryCmd(t, nil, "--world", w, "state", "list", "--json", "--limit", "1"))
	if len(l.Items) != 1 || l.Items[0]["key"] != "counter" || l.NextCursor == "" {
		t.Fatalf("list: %+v", l)
	}
	l = listJSON(t, armoryCmd(t, nil, "--world", w, "state", "list", "--json", "--cursor", l.NextCursor))
	if len(l.Items) != 1 || l.Items[0]["key"] != "other" {
		t.Fatalf("list page 2: %+v", l)
	}
}
