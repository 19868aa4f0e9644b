package roster

import (
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/access"
	"github.com/armory-dev/armory/internal/testenv"
)

// A world whose every rule sits on a known line: each explanation and each
// permission decision must name the file and line of the rule that decided.
func sourceWorld(t *testing.T) *Roster {
	t.Helper()
	dir := testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml": `name: src
agents:
  - {id: dev}
  - {id: ops}
  - {id: old}
tool_privileges:
  writer:
    - workspace.write
permissions:
  workspace.delete: deny
toolkits:
  inspect:
    tools: [workspace.list]
    default: false
`,
		"archetype/dev/config.md": `# dev

## Tool Access
privilege_groups: writer

## Permissions
profile: standard
workspace.write: deny

## Toolkits
inspect: true
`,
		"archetype/ops/config.md": `## Tool Access
- workspace.write
`,
		"archetype/old/config.md": "## Provider\nmodel: x\n",
	})
	h, err := Open(dir, Options{Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestExplainNamesRuleSources(t *testing.T) {
	h := sourceWorld(t)
	tests := []struct {
		name, agent, tool string
		want              []string
	}{
		{"privilege group", "dev", "workspace.write", []string{
			"privileged: in group(s) writer (world-config.yaml:7)",
			`granted by group "writer" (archetype/dev/config.md:4)`}},
		{"override", "ops", "workspace.write", []string{
			`granted by override "workspace.write" (archetype/ops/config.md:2 "- workspace.write")`}},
		{"toolkit switch", "dev", "workspace.list", []string{
			`toolkit "inspect" switched on (archetype/dev/config.md:11)`}},
		{"toolkit default", "ops", "workspace.list", []string{
			`toolkit "inspect" is off by default and the agent does not switch it on (world-config.yaml:12)`}},
	}
	for _, tc := range tests {
		ex, err := h.Explain(tc.agent, tc.tool)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(ex.Reasons, "\n")
		for _, w := range tc.want {
			if !strings.Contains(all, w) {
				t.Errorf("%s: %s/%s reasons lack %q:\n%s", tc.name, tc.agent, tc.tool, w, all)
			}
		}
	}
}

func TestExplainNamesLegacyToolsLine(t *testing.T) {
	h := mustOpen(t, map[string]string{
		"world-config.yaml":     "name: old\nagents:\n  - {id: a}\n",
		"archetype/a/config.md": "# a\n\n## Tools\n- workspace.list\n- workspace.read\n",
	})
	ex, _ := h.Explain("a", "workspace.read")
	want := `legacy mode: listed in "## Tools" as "workspace.read" (archetype/a/config.md:5 "- workspace.read")`
	if !ex.Visible || !strings.Contains(strings.Join(ex.Reasons, "\n"), want) {
		t.Errorf("want %q: %+v", want, ex)
	}
}

func TestPermissionReasonsNameRuleSources(t *testing.T) {
	h := sourceWorld(t)
	tests := []struct {
		name, agent, tool string
		cat               armory.Category
		want              string
	}{
		{"agent rule", "dev", "workspace.write", armory.CatFileWrite,
			`deny by the agent's permission rule "workspace.write" (archetype/dev/config.md:8 "workspace.write: deny")`},
		{"profile", "dev", "workspace.edit", armory.CatFileWrite,
			`confirm by profile standard (archetype/dev/config.md:7 "profile: standard") for file_write tools`},
		{"world rule", "ops", "workspace.delete", armory.CatFileDelete,
			`deny by the world's permission rule "workspace.delete" (world-config.yaml:10 "workspace.delete: deny")`},
	}
	for _, tc := range tests {
		ag, err := h.Agent(tc.agent)
		if err != nil {
			t.Fatal(err)
		}
		_, reasons := access.EffectiveLevel(h.LevelInput(ag, tc.tool, armory.Manifest{Category: tc.cat, Permission: armory.PermAuto}))
		if all := strings.Join(reasons, "\n"); !strings.Contains(all, tc.want) {
			t.Errorf("%s: reasons lack %q:\n%s", tc.name, tc.want, all)
		}
	}
}

func TestExplainNamesPermissionRule(t *testing.T) {
	h := sourceWorld(t)
	ex, err := h.Explain("dev", "workspace.write")
	if err != nil {
		t.Fatal(err)
	}
	want := `permission: deny by the agent's permission rule "workspace.write" (archetype/dev/config.md:8 "workspace.write: deny")`
	if !ex.Visible || !strings.Contains(strings.Join(ex.Reasons, "\n"), want) {
		t.Errorf("want %q: %+v", want, ex)
	}
}
