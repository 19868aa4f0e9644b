package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/armory-dev/armory/server"
)

// A REST call's outcome carries the same reasons as the audit record: the
// permission stage names the config.md line of the rule that decided.
func TestRESTOutcomeReasonsNameRuleSource(t *testing.T) {
	e := start(t, server.Options{})
	tok := e.token("architect")
	status, body, _ := e.do("POST", "/api/agents/architect/calls", tok, `{"tool":"workspace.delete","args":{"path":"a"}}`, "Content-Type", "application/json")
	var o struct {
		Status  string   `json:"status"`
		Reasons []string `json:"reasons"`
		Result  string   `json:"result"`
	}
	// A pending call is a 2xx (202 where the surface says "accepted").
	if status/100 != 2 || json.Unmarshal([]byte(body), &o) != nil {
		t.Fatalf("call: %d %s", status, body)
	}
	want := `permission: confirm by profile trusted (archetype/architect/config.md:15 "profile: trusted") for file_delete tools`
	if o.Status != "pending" || !strings.Contains(strings.Join(o.Reasons, "\n"), want) {
		t.Fatalf("outcome lacks %q: %s", want, body)
	}
}
