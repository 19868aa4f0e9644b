package roster

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/example"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/world"
)

func exampleWorld(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "world")
	if err := example.Write(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

func names(h *Roster, id string) []string {
	ag, _ := h.Agent(id)
	var out []string
	for _, s := range ag.Registry.Specs() {
		out = append(out, s.Name)
	}
	return out
}

func TestExampleWorldRegistries(t *testing.T) {
	h, err := Open(exampleWorld(t), Options{LookPath: func(f string) (string, error) { return "/usr/bin/" + f, nil }, Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"architect":  {"devtools.repo-git", "devtools.word-count", "tool.cli", "tool.fetch", "tool.python", "web.search", "workspace.delete", "workspace.edit", "workspace.list", "workspace.read", "workspace.search", "workspace.write"},
		"reviewer":   {"devtools.word-count", "workspace.read", "workspace.search"},
		"scribe":     {"workspace.delete", "workspace.edit", "workspace.read", "workspace.write"},
		"intern":     {"workspace.list", "workspace.read", "workspace.search"},
		"researcher": {"tool.browser", "tool.fetch", "web.search", "workspace.list", "workspace.read", "workspace.search"},
		"warden":     {"approval.decide", "approval.list", "workspace.list", "workspace.read", "workspace.search"}, // approval.* are added by the pipeline, known up front
	}
	for id, w := range want {
		if got := names(h, id); !slices.Equal(got, w) {
			t.Errorf("%s sees %v, want %v", id, got, w)
		}
	}
}

// The fast path that builds registries and the explaining path must agree
// on every agent and every tool.
func TestExplainAgreesWithRegistry(t *testing.T) {
	h, err := Open(exampleWorld(t), Options{Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	tools := append(h.Catalog.Names(), "syscall.skill.list", "tool.nope", "devtools", "devtools.nope")
	for _, ag := range h.Agents() {
		for _, tool := range tools {
			ex, err := h.Explain(ag.ID, tool)
			if err != nil {
				t.Fatal(err)
			}
			if ex.Visible != ag.Registry.Has(tool) {
				t.Errorf("%s/%s: explain says %v, registry says %v: %v", ag.ID, tool, ex.Visible, ag.Registry.Has(tool), ex.Reasons)
			}
			if len(ex.Reasons) == 0 {
				t.Errorf("%s/%s: no reasons", ag.ID, tool)
			}
		}
	}
}

func TestExplainReasons(t *testing.T) {
	h, err := Open(exampleWorld(t), Options{Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		agent, tool string
		visible     bool
		reasons     []string
	}{
		{"architect", "devtools.repo-git", true, []string{"privileged: in group(s) devops", `granted by group "devops"`, `listed in the agent's "## Toolbox"`}},
		{"reviewer", "devtools.word-count", true, []string{`granted by override "devtools.word-count"`, `toolkit "inspect" switched on`}},
		{"reviewer", "workspace.list", false, []string{"public", `tool switched off by "workspace.list: false"`}},
		{"scribe", "workspace.list", false, []string{`toolkit "inspect" is switched off`}},
		{"intern", "workspace.write", false, []string{`privileged: in group(s) writer`, "not granted"}},
		{"intern", "workspace.list", true, []string{`toolkit "inspect" on by default`}},
		{"architect", "tool.nope", false, []string{"no tool named tool.nope is defined"}},
	}
	for _, tc := range tests {
		ex, err := h.Explain(tc.agent, tc.tool)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(ex.Reasons, "\n")
		if ex.Visible != tc.visible {
			t.Errorf("%s/%s visible = %v: %s", tc.agent, tc.tool, ex.Visible, all)
		}
		for _, r := range tc.reasons {
			if !strings.Contains(all, r) {
				t.Errorf("%s/%s reasons lack %q:\n%s", tc.agent, tc.tool, r, all)
			}
		}
	}
	if _, err := h.Explain("ghost", "workspace.read"); armory.KindOf(err) != armory.KindNotFound || !strings.Contains(err.Error(), "agents: architect, intern, researcher, reviewer, scribe, warden") {
		t.Fatalf("unknown agent: %v", err)
	}
}

func TestAccessSummary(t *testing.T) {
	h, err := Open(exampleWorld(t), Options{Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := h.Agent("architect")
	s := h.AccessSummary(ag)
	if s.Mode != "access" || !slices.Equal(s.Groups, []string{"admin", "communicator", "devops", "manager", "writer"}) || !slices.Equal(s.GrantedPrivileged, []string{"devtools.repo-git", "devtools.word-count", "tool.cli", "tool.python", "workspace.delete", "workspace.edit", "workspace.write"}) {
		t.Fatalf("summary = %+v", s)
	}
	b, _ := json.Marshal(h.AccessSummary(h.agents["intern"]))
	if string(b) != `{"agent":"intern","mode":"access","groups":[],"overrides":[],"granted_privileged":[],"tools":["workspace.list","workspace.read","workspace.search"],"pipeline_tools":[]}` {
		t.Fatalf("json = %s", b)
	}
}

// openWorld writes files (path → content) into a new world folder and
// opens it.
func openWorld(t *testing.T, files map[string]string) (*Roster, error) {
	t.Helper()
	return Open(testenv.WriteTree(t, t.TempDir(), files), Options{})
}

// mustOpen is openWorld for a world that must open.
func mustOpen(t *testing.T, files map[string]string) *Roster {
	t.Helper()
	h, err := openWorld(t, files)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestLegacyWorld(t *testing.T) {
	h := mustOpen(t, map[string]string{
		"world-config.yaml":     "name: old\nagents:\n  - {id: a}\n  - {id: b}\n  - {id: c}\n",
		"archetype/a/config.md": "## Tools\n- workspace.read\n- workspace.list\n",
		"archetype/b/config.md": "## Provider\nmodel: x\n",
		"archetype/c/config.md": "## Tool Access\n",
	})
	if got := names(h, "a"); !slices.Equal(got, []string{"workspace.list", "workspace.read"}) {
		t.Errorf("legacy list: %v", got)
	}
	publicTools := 0
	for _, n := range h.Catalog.Names() {
		if h.unmet[n] == nil { // chromium or an API key may be missing here
			publicTools++
		}
	}
	if got := names(h, "b"); len(got) != 0 {
		t.Errorf("legacy, no list = none: %v", got)
	}
	if got := names(h, "c"); len(got) != publicTools || !slices.Contains(got, "workspace.write") {
		t.Errorf("access mode with no groups = every public tool (%d): %v", publicTools, got)
	}
	ex, _ := h.Explain("a", "workspace.write")
	if ex.Visible || !strings.Contains(strings.Join(ex.Reasons, " "), "legacy mode") {
		t.Errorf("explain: %+v", ex)
	}
}

func TestDuplicateToolNamesListedAtOnce(t *testing.T) {
	_, err := openWorld(t, map[string]string{
		"world-config.yaml":              "name: d\nagents: [{id: a}]\ntoolboxes: [workspace]\n",
		"archetype/a/config.md":          "## Tool Access\n",
		"toolbox/workspace/toolbox.yaml": "name: workspace\ntools:\n  - {name: read, binary: cat, description: x}\n  - {name: write, binary: cat, description: x}\n  - {name: grep, binary: grep, description: x}\n",
	})
	var ie *world.InvalidError
	if !errors.As(err, &ie) {
		t.Fatalf("want InvalidError, got %v", err)
	}
	for _, want := range []string{
		`toolbox/workspace/toolbox.yaml:3: duplicate tool name "workspace.read" (also a built-in tool)`,
		`toolbox/workspace/toolbox.yaml:4: duplicate tool name "workspace.write" (also a built-in tool)`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q:\n%s", want, err)
		}
	}
}

func TestWarnings(t *testing.T) {
	h := mustOpen(t, map[string]string{
		"world-config.yaml":     "name: w\nagents: [{id: a}]\ntool_privileges:\n  ops: [workspace.write, tool.ghost]\ntoolkits:\n  k: {tools: [workspace.read, nope.tool]}\n",
		"archetype/a/config.md": "## Tool Access\n- workspace.read\n- made.up\n## Toolkits\nzzz: true\n",
	})
	var all []string
	for _, d := range h.Warnings {
		all = append(all, d.String())
	}
	got := strings.Join(all, "\n")
	for _, want := range []string{
		`world-config.yaml:4: warning: tool_privileges.ops: no tool or family "tool.ghost" is defined`,
		`world-config.yaml:6: warning: toolkits.k: no tool "nope.tool" is defined`,
		`archetype/a/config.md:2: warning: tool access: "workspace.read" is public (in no privilege group); the override grants nothing`,
		`archetype/a/config.md:3: warning: tool access: no tool or family "made.up" is defined`,
		`archetype/a/config.md:5: warning: toolkits: "zzz" is neither a toolkit nor a tool of this world`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings lack %q:\n%s", want, got)
		}
	}
}

func TestToolkitMayShareAFamilyName(t *testing.T) {
	// "workspace" is a family, not a tool: allowed.
	mustOpen(t, map[string]string{
		"world-config.yaml":     "name: w\nagents: [{id: a}]\ntoolkits:\n  workspace: {tools: [workspace.read]}\n",
		"archetype/a/config.md": "## Tool Access\n",
	})
}

func TestUnmetRequirementDropsTool(t *testing.T) {
	dir := exampleWorld(t)
	h, err := Open(dir, Options{LookPath: func(string) (string, error) { return "", errors.New("not found") }, Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(names(h, "architect"), "devtools.word-count") {
		t.Fatal("a tool whose binary is missing must be dropped")
	}
	ex, _ := h.Explain("architect", "devtools.word-count")
	if ex.Visible || !strings.Contains(strings.Join(ex.Reasons, " "), `requirement not met: binary "wc" not found on PATH`) {
		t.Fatalf("explain: %+v", ex)
	}
	if !slices.Contains(names(h, "architect"), "devtools.repo-git") {
		t.Fatal("repo-git's binary is a file in the toolbox and exists")
	}
}

// The example world's tools work end to end: write, read, list, and the
// toolbox tools run their real binaries in the real sandbox.
func TestExampleToolsRun(t *testing.T) {
	testenv.LookPath(t, "git", "apt-get install git")
	testenv.LookPath(t, "bwrap", "apt-get install bubblewrap")
	h, err := Open(exampleWorld(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := h.Agent("architect")
	call := func(tool, args string) armory.Result {
		tl, err := ag.Registry.Lookup(tool)
		if err != nil {
			t.Fatal(err)
		}
		return tl.Execute(context.Background(), armory.Invocation{Args: json.RawMessage(args), Agent: ag.Env})
	}
	if r := call("workspace.write", `{"path":"repo/notes/a.txt","content":"one\ntwo\n"}`); !r.Success {
		t.Fatal(r.Text)
	}
	if r := call("workspace.read", `{"path":"@me/repo/notes/a.txt"}`); r.Text != "one\ntwo\n" {
		t.Fatalf("read: %+v", r)
	}
	if r := call("devtools.word-count", `{"file":"repo/notes/a.txt","lines":true}`); !r.Success || !strings.HasPrefix(r.Text, "2 repo/notes/a.txt") {
		t.Fatalf("word-count: %+v", r)
	}
	for _, args := range []string{`{"command":"init"}`, `{"command":"add","all":true}`, `{"command":"commit","message":"first"}`} {
		if r := call("devtools.repo-git", args); !r.Success {
			t.Fatalf("repo-git %s: %+v", args, r)
		}
	}
	if r := call("devtools.repo-git", `{"command":"log"}`); !r.Success || !strings.Contains(r.Text, "first") || !strings.Contains(r.Text, "Author: architect") {
		t.Fatalf("log: %+v", r)
	}
	if r := call("devtools.repo-git", `{"command":"push"}`); r.Success || !strings.Contains(r.Text, "must be one of") {
		t.Fatalf("enum: %+v", r)
	}
}

// noSandboxCheck stands in for the sandbox probe where a test is about the
// policy, not the machine; TestExampleToolsRun uses the real one.
func noSandboxCheck(string) error { return nil }

// An "env" requirement (tool.google_search's API key) is met only while the
// variable is set; the reason names the variable, never a value.
func TestEnvRequirement(t *testing.T) {
	for _, key := range []string{"", "AIza-secret"} {
		h, err := Open(exampleWorld(t), Options{Sandbox: noSandboxCheck, LookPath: func(f string) (string, error) { return "/usr/bin/" + f, nil },
			Getenv: func(k string) string {
				if k == "GEMINI_API_KEY" {
					return key
				}
				return ""
			}})
		if err != nil {
			t.Fatal(err)
		}
		ex, _ := h.Explain("architect", "tool.google_search")
		reasons := strings.Join(ex.Reasons, " ")
		if got := slices.Contains(names(h, "architect"), "tool.google_search"); got != (key != "") || strings.Contains(reasons, "AIza") {
			t.Errorf("key %q: visible %v: %+v", key, got, ex)
		}
		if key == "" && !strings.Contains(reasons, "environment variable GEMINI_API_KEY is not set") {
			t.Errorf("reasons %q", reasons)
		}
	}
}
