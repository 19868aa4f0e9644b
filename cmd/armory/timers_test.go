package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// armory call sets a timer (and fires nothing); armory timers list shows
// it, --json as JSON; armory timers delete removes it, audited as the
// human's; an unknown ID is a readable error.
func TestCLITimers(t *testing.T) {
	w := initWorld(t)
	r := armoryCmd(t, nil, "--world", w, "call", "architect", "util.cron", "--args", `{"action":"create","name":"daily","schedule":"0 9 * * *"}`)
	if r.code != 0 {
		t.Fatalf("call: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "call", "architect", "util.cron", "--args", `{"action":"create","name":"bad","schedule":"0 25 * * *"}`)
	if r.code == 0 || !strings.Contains(r.stdout, "end of range (25) above maximum (23)") {
		t.Fatalf("bad cron: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "timers", "list")
	if r.code != 0 || !strings.Contains(r.stdout, "architect") || !strings.Contains(r.stdout, "0 9 * * *") {
		t.Fatalf("list: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "timers", "list", "--json", "--agent", "architect")
	var views []struct{ ID, Name, Owner string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &views) != nil || len(views) != 1 || views[0].Name != "daily" {
		t.Fatalf("list --json: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "timers", "delete", views[0].ID)
	if r.code != 0 || r.stdout != "deleted cron \"daily\" of architect\n" {
		t.Fatalf("delete: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "audit", "--tool", "timers.delete")
	if r.code != 0 || !strings.Contains(r.stdout, "timers.delete") {
		t.Fatalf("audit: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "timers", "delete", views[0].ID)
	if r.code == 0 || !strings.Contains(r.stderr, "no timer") {
		t.Fatalf("second delete: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "timers", "list", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Fatalf("list after delete: %+v", r)
	}
}
