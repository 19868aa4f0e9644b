package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// callValue runs `armory call AGENT TOOL --args ARGS` in w and returns the
// outcome's status and value, failing the test on a non-zero exit.
func callValue(t *testing.T, w, agent, tool, args string) (string, map[string]any) {
	t.Helper()
	r := armoryCmd(t, nil, "--world", w, "call", agent, tool, "--args", args)
	var o struct {
		Status string
		Result string
		Value  map[string]any
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &o) != nil {
		t.Fatalf("call %s %s %s: %+v", agent, tool, args, r)
	}
	return o.Status, o.Value
}

// TestCLIServicesInExampleWorld is the README's tour of the world services:
// the architect (manager, communicator) gives the scribe a task, the scribe
// finds it in its inbox, and an ask made in one process is answered from
// another — each step an `armory call`, its own process on the world's
// SQLite store.
func TestCLIServicesInExampleWorld(t *testing.T) {
	w := initWorld(t)
	_, v := callValue(t, w, "architect", "syscall.task.create", `{"title":"Write the release notes","assignee":"scribe"}`)
	task := v["task"].(map[string]any)
	if task["assignee"] != "scribe" || task["creator"] != "architect" {
		t.Fatalf("task %v", task)
	}
	_, v = callValue(t, w, "scribe", "syscall.inbox", `{}`)
	msgs := v["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["kind"] != "task" || !strings.Contains(msgs[0].(map[string]any)["body"].(string), task["id"].(string)) {
		t.Fatalf("scribe's inbox: %v", v)
	}
	// The scribe is no manager: creating tasks is not among its tools.
	if r := armoryCmd(t, nil, "--world", w, "call", "scribe", "syscall.task.create", "--args", `{"title":"x"}`); r.code != exitInvalid || !strings.Contains(r.stdout+r.stderr, "syscall.task.create") {
		t.Fatalf("scribe creating a task: %+v", r)
	}

	// The ask waits in its own process; the reply comes from another.
	ask := exec.Command(binary, "--world", w, "call", "architect", "syscall.ask", "--args", `{"to":"scribe","message":"Are the notes ready?","timeout_secs":120}`)
	ask.Env = os.Environ()
	var askOut bytes.Buffer
	ask.Stdout, ask.Stderr = &askOut, &askOut
	if err := ask.Start(); err != nil {
		t.Fatal(err)
	}
	defer ask.Process.Kill()
	var askID string
	for deadline := time.Now().Add(time.Minute); askID == "" && time.Now().Before(deadline); {
		_, v = callValue(t, w, "scribe", "syscall.inbox", `{}`)
		for _, m := range v["messages"].([]any) {
			if mm := m.(map[string]any); mm["kind"] == "ask" {
				askID = mm["id"].(string)
			}
		}
		if askID == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if askID == "" {
		t.Fatal("the ask never reached the scribe's inbox")
	}
	callValue(t, w, "scribe", "syscall.reply", `{"message_id":"`+askID+`","message":"Yes: notes.md"}`)
	if err := ask.Wait(); err != nil {
		t.Fatalf("ask: %v %s", err, askOut.String())
	}
	var o struct {
		Status string
		Value  map[string]any
	}
	if err := json.Unmarshal(askOut.Bytes(), &o); err != nil || o.Status != "success" || o.Value["status"] != "answered" || !strings.Contains(askOut.String(), "Yes: notes.md") {
		t.Fatalf("ask outcome: %v %s", err, askOut.String())
	}
}

// TestCLIGroupsWorldCheck: the ghost world's privilege groups (admin,
// manager, communicator, google-searcher, in testdata/groups-world)
// name only tools that exist — the world services, the channel tools and
// tool.google_search — so world check warns about no unknown tool. (Its
// config.md's overrides of public tools still warn: they grant nothing.)
func TestCLIGroupsWorldCheck(t *testing.T) {
	r := armoryCmd(t, nil, "--world", "../../testdata/groups-world", "world", "check")
	if r.code != 0 || strings.Contains(r.stderr, "is defined") {
		t.Fatalf("world check of the groups world: %+v", r)
	}
	if strings.Count(r.stderr, "warning:") != 2 || strings.Count(r.stderr, "is public (in no privilege group); the override grants nothing") != 2 {
		t.Errorf("warnings:\n%s", r.stderr)
	}
}
