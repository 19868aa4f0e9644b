package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A call refused by a deny rule: explain, the call's outcome and its audit
// record name the config.md line of the rule; the model's text does not.
func TestCLIReasonsNameRuleSource(t *testing.T) {
	w := filepath.Join(t.TempDir(), "w")
	for p, c := range map[string]string{
		"world-config.yaml":       "name: src\nagents:\n  - {id: dev}\n",
		"archetype/dev/config.md": "# dev\n\n## Tool Access\n\n## Permissions\nworkspace.write: deny\n",
	} {
		full := filepath.Join(w, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"ARMORY_WORLD=" + w}
	const pos = `archetype/dev/config.md:6 "workspace.write: deny"`

	r := armoryCmd(t, env, "access", "explain", "dev", "workspace.write")
	if r.code != 0 || !strings.Contains(r.stdout, `permission: deny by the agent's permission rule "workspace.write" (`+pos+`)`) {
		t.Fatalf("explain: %+v", r)
	}

	r = armoryCmd(t, env, "call", "dev", "workspace.write", "--args", `{"path":"a.txt","content":"x"}`)
	o := callJSON(t, r)
	if r.code != 3 /* blocked or denied by policy */ || o.Status != "denied" || !strings.Contains(strings.Join(o.Reasons, "\n"), pos) {
		t.Fatalf("call: %+v", r)
	}
	if strings.Contains(o.Result, "config.md") {
		t.Errorf("the model's text names config.md: %q", o.Result)
	}

	r = armoryCmd(t, env, "audit", "--json", "--agent", "dev")
	var entries []struct {
		Status string `json:"status"`
		Stages []struct {
			Name    string   `json:"name"`
			Reasons []string `json:"reasons"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) == 0 {
		t.Fatalf("audit: %v %+v", err, r)
	}
	found := false
	for _, e := range entries {
		for _, st := range e.Stages {
			if st.Name == "permission" && e.Status == "denied" && strings.Contains(strings.Join(st.Reasons, "\n"), pos) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no denied audit record whose permission stage names %s: %s", pos, r.stdout)
	}
}
