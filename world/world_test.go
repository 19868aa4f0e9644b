package world

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

// writeWorld writes files (path → content) into a new folder.
func writeWorld(t testing.TB, files map[string]string) string {
	t.Helper()
	return testenv.WriteTree(t, t.TempDir(), files)
}

const goodConfig = `name: demo
agents:
  - id: architect
    archetype: architect
  - id: reviewer
    archetype: reviewer
toolboxes: [devtools]
tool_privileges:
  admin: [syscall.agent.create]
  communicator: [channel, syscall.ask]
toolkits:
  web:
    tools: [tool.fetch, tool.browser]
    default: true
    policy: "Prefer tool.fetch."
`

const goodToolbox = `name: devtools
tools:
  - name: repo-git
    description: Manage the workspace git repository
    binary: bin/repo-git
    args:
      - {name: command, type: positional, required: true, description: "git subcommand"}
      - {name: message, type: flag, flag: --message}
      - {name: all, type: flag_bool, flag: --all}
    danger: dangerous
    capabilities: [process_exec, write_fs]
    permission: confirm
    timeout: 30s
    max_output: 65536
`

const architectMD = `# architect
## Tool Access
privilege_groups: admin, communicator
- workspace.write
- tool.browser

## Toolbox
source: toolbox/devtools/toolbox.yaml
- repo-git

## Toolkits
web: true
tool.browser: false

## Provider
model: big-model
`

func goodFiles() map[string]string {
	return map[string]string{
		"world-config.yaml":             goodConfig,
		"tools.md":                      "# Tools\nprose",
		"archetype/architect/config.md": architectMD,
		"archetype/architect/agent.md":  "how-to",
		"archetype/reviewer/config.md":  "## Tools\n- workspace.read\n",
		"toolbox/devtools/toolbox.yaml": goodToolbox,
		"toolbox/devtools/bin/repo-git": "#!/bin/sh\n",
		"toolbox/unlisted/toolbox.yaml": "name: unlisted\ntools: []\n",
	}
}

func TestLoadGoodWorld(t *testing.T) {
	w, err := Load(writeWorld(t, goodFiles()))
	if err != nil {
		t.Fatal(err)
	}
	if w.Name != "demo" || len(w.Agents) != 2 || w.ToolsProse == "" {
		t.Fatalf("world = %+v", w)
	}
	a := w.Agent("architect")
	c := a.Config
	if !c.HasToolAccess || len(c.Groups) != 2 || c.Groups[1].Value != "communicator" || len(c.Overrides) != 2 {
		t.Fatalf("tool access = %+v", c)
	}
	if len(c.Toolboxes) != 1 || c.Toolboxes[0].Tools[0].Value != "repo-git" || c.Toolboxes[0].Line != 8 {
		t.Fatalf("toolbox = %+v", c.Toolboxes)
	}
	if len(c.Toolkits) != 2 || !c.Toolkits[0].On || c.Toolkits[1].On || c.Toolkits[1].Name != "tool.browser" {
		t.Fatalf("toolkits = %+v", c.Toolkits)
	}
	if v, _ := c.Sections["provider"].Get("model"); v != "big-model" {
		t.Fatalf("other sections are kept as key/values: %+v", c.Sections)
	}
	if a.Prose != "how-to" {
		t.Fatal("agent.md not kept")
	}
	tb := w.Toolboxes["devtools"]
	rg := tb.Tool("repo-git")
	if rg == nil || rg.Manifest.Danger != armory.DangerDangerous || rg.Manifest.Permission != armory.PermConfirm || len(rg.Args) != 3 || rg.Args[2].Type != ArgFlagBool {
		t.Fatalf("toolbox tool = %+v", rg)
	}
	if rg.BinaryPath != filepath.Join(w.Dir, "toolbox/devtools/bin/repo-git") {
		t.Fatalf("binary path %q", rg.BinaryPath)
	}
	if _, ok := w.Toolboxes["unlisted"]; ok {
		t.Fatal("a toolbox not in the allow-list must not be loaded")
	}
	if !hasDiag(w.Diagnostics, `toolbox/unlisted/toolbox.yaml: warning: toolbox "unlisted" is not in the world's toolboxes allow-list`) {
		t.Fatalf("a discovered but unlisted toolbox is a warning: %v", w.Diagnostics)
	}
	// reviewer has a legacy list but the world defines groups: warning.
	if !hasDiag(w.Diagnostics, "archetype/reviewer/config.md:2: warning: the \"## Tools\" list is ignored") {
		t.Fatalf("warnings: %v", w.Diagnostics)
	}
}

func hasDiag(ds Diagnostics, want string) bool {
	for _, d := range ds {
		if strings.Contains(d.String(), want) {
			return true
		}
	}
	return false
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		edit  map[string]string // files to replace ("" deletes)
		want  []string          // every one must appear, as file:line: message
		warns []string
	}{
		{"unknown privilege group names the groups that exist",
			map[string]string{"archetype/architect/config.md": "## Tool Access\nprivilege_groups: admin, wizards\n"},
			[]string{`archetype/architect/config.md:2: unknown privilege group "wizards" (groups: admin, communicator)`}, nil},
		{"unknown archetype folder",
			map[string]string{"world-config.yaml": strings.Replace(goodConfig, "archetype: reviewer", "archetype: ghost", 1)},
			[]string{`world-config.yaml:5: agent "reviewer": unknown archetype "ghost" (no folder archetype/ghost/; archetypes here: architect, reviewer)`}, nil},
		{"duplicate agent id",
			map[string]string{"world-config.yaml": strings.Replace(goodConfig, "id: reviewer", "id: architect", 1)},
			[]string{`world-config.yaml:5: duplicate agent id "architect" (first at line 3)`}, nil},
		{"toolbox not in the allow-list",
			map[string]string{"archetype/reviewer/config.md": "## Tool Access\n## Toolbox\nsource: toolbox/unlisted/toolbox.yaml\n- x\n"},
			[]string{`archetype/reviewer/config.md:3: toolbox "unlisted" is not in the world's toolbox allow-list (toolboxes: [devtools])`}, nil},
		{"malformed value: bool",
			map[string]string{"world-config.yaml": strings.Replace(goodConfig, "default: true", "default: maybe", 1)},
			[]string{`world-config.yaml:14: toolkits.web.default must be true or false, got the value "maybe"`}, nil},
		{"malformed value: toolbox timeout and danger",
			map[string]string{"toolbox/devtools/toolbox.yaml": strings.NewReplacer("timeout: 30s", "timeout: soon", "danger: dangerous", "danger: spicy").Replace(goodToolbox)},
			[]string{`toolbox/devtools/toolbox.yaml:13: tool repo-git: timeout must be a duration`, `toolbox/devtools/toolbox.yaml:10: tool repo-git: danger: unknown danger "spicy"`}, nil},
		{"errors are collected, not stopped at the first",
			map[string]string{
				"world-config.yaml":             strings.Replace(strings.Replace(goodConfig, "id: reviewer", "id: architect", 1), "default: true", "default: 3", 1),
				"archetype/architect/config.md": "## Tool Access\nprivilege_groups: nope\n## Toolkits\nweb: perhaps\n",
			},
			[]string{"duplicate agent id", `unknown privilege group "nope"`, "web: want true or false", "default must be true or false"}, nil},
		{"YAML syntax error has a line",
			map[string]string{"world-config.yaml": "name: demo\nagents:\n  - id: [unclosed\n"},
			[]string{"world-config.yaml:"}, nil},
		{"unknown top-level key",
			map[string]string{"world-config.yaml": goodConfig + "tool_priviledges: {}\n"},
			[]string{`world-config.yaml:16: world-config.yaml: unknown key "tool_priviledges" (did you mean "tool_privileges"?) (known keys: name, agents,`}, nil},
		{"network allow-list entries and keys",
			map[string]string{"world-config.yaml": goodConfig + "network:\n  allow: [docs.example.com, 10.0.0.1/8, \"host:99999\"]\n  alow: []\n"},
			[]string{`world-config.yaml:17: network.allow: "10.0.0.1/8" has host bits set; did you mean 10.0.0.0/8?`, `world-config.yaml:17: network.allow: "host:99999": port "99999" must be a number from 1 to 65535`, `world-config.yaml:18: network: unknown key "alow" (did you mean "allow"?)`}, nil},
		{"bad agent id",
			map[string]string{"world-config.yaml": strings.Replace(goodConfig, "id: reviewer", "id: Re viewer", 1)},
			[]string{`world-config.yaml:5: agent id "Re viewer" is not valid`}, nil},
		{"missing name",
			map[string]string{"world-config.yaml": strings.Replace(goodConfig, "name: demo\n", "", 1)},
			[]string{"world-config.yaml:1: name is missing"}, nil},
		{"duplicate tool in toolbox",
			map[string]string{"toolbox/devtools/toolbox.yaml": goodToolbox + "  - name: repo-git\n    binary: git\n    description: again\n"},
			[]string{`toolbox/devtools/toolbox.yaml:15: duplicate tool "repo-git" in toolbox "devtools" (first at line 3)`}, nil},
		{"allow-listed toolbox missing",
			map[string]string{"world-config.yaml": strings.Replace(goodConfig, "toolboxes: [devtools]", "toolboxes: [devtools, ghost]", 1), "archetype/reviewer/config.md": ""},
			[]string{`world-config.yaml:7: toolboxes: "ghost" has no toolbox/ghost/toolbox.yaml`}, nil},
		{"toolbox name differs from folder",
			map[string]string{"toolbox/devtools/toolbox.yaml": strings.Replace(goodToolbox, "name: devtools", "name: other", 1)},
			[]string{`toolbox/devtools/toolbox.yaml: toolbox name "other" does not match its folder toolbox/devtools/`}, nil},
		{"binary leaving the toolbox",
			map[string]string{"toolbox/devtools/toolbox.yaml": strings.Replace(goodToolbox, "binary: bin/repo-git", "binary: ../../../bin/sh", 1)},
			[]string{`binary "../../../bin/sh" leaves the toolbox folder`}, nil},
		{"bad arg type",
			map[string]string{"toolbox/devtools/toolbox.yaml": strings.Replace(goodToolbox, "type: flag_bool", "type: switch", 1)},
			[]string{`toolbox/devtools/toolbox.yaml:9: tool repo-git: arg "all": unknown type "switch"`}, nil},
		{"stray prose in an access section",
			map[string]string{"archetype/reviewer/config.md": "## Tool Access\nplease give me everything\n"},
			[]string{`archetype/reviewer/config.md:2: section "Tool Access": expected "- name" or "key: value"`}, nil},
		{"invalid tool name in a group",
			map[string]string{"world-config.yaml": strings.Replace(goodConfig, "admin: [syscall.agent.create]", "admin: [Syscall..x]", 1)},
			[]string{`world-config.yaml:9: tool_privileges.admin: "Syscall..x" is not a valid tool name`}, nil},
		{"warnings: unknown toolbox tool, legacy list ignored",
			map[string]string{"archetype/reviewer/config.md": "## Tool Access\n## Toolbox\nsource: toolbox/devtools/toolbox.yaml\n- nope\n## Tools\n- workspace.read\n"},
			nil, []string{`archetype/reviewer/config.md:4: warning: toolbox "devtools" defines no tool "nope" (it has: repo-git)`, `archetype/reviewer/config.md:6: warning: the "## Tools" list is ignored because it has a "## Tool Access" section`}},
		{"missing config.md is a warning",
			map[string]string{"archetype/reviewer/config.md": "", "archetype/reviewer/agent.md": "x"},
			nil, []string{`archetype/reviewer/config.md: warning: agent "reviewer" has no config.md`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := goodFiles()
			for p, c := range tc.edit {
				if c == "" {
					delete(files, p)
				} else {
					files[p] = c
				}
			}
			w, err := Load(writeWorld(t, files))
			var diags Diagnostics
			if len(tc.want) > 0 {
				var ie *InvalidError
				if !errors.As(err, &ie) {
					t.Fatalf("want an *InvalidError, got %v", err)
				}
				if armory.KindOf(err) != armory.KindInvalid {
					t.Fatalf("kind = %v", armory.KindOf(err))
				}
				diags = ie.Diagnostics
				for _, want := range tc.want {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("errors lack %q:\n%s", want, err)
					}
				}
			} else {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				diags = w.Diagnostics
			}
			for _, want := range tc.warns {
				if !hasDiag(diags, want) {
					t.Errorf("warnings lack %q:\n%v", want, diags)
				}
			}
		})
	}
}

// A world-config.yaml that is not YAML is reported once, at its line, and
// nothing follows from it: its toolboxes are not warned about as missing
// from an allow-list it could not state.
func TestLoadUnparsableConfigMisleadsNothing(t *testing.T) {
	files := goodFiles()
	files["world-config.yaml"] = "name: demo\nagents:\n  - id: [unclosed\n"
	_, err := Load(writeWorld(t, files))
	var ie *InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), "world-config.yaml:") {
		t.Fatalf("got %v", err)
	}
	for _, d := range ie.Diagnostics {
		if d.File != ConfigFile {
			t.Errorf("a diagnostic that follows from the unparsable config: %v", d)
		}
	}
}

func TestLoadMissingWorld(t *testing.T) {
	_, err := Load(t.TempDir())
	if armory.KindOf(err) != armory.KindNotFound || !strings.Contains(err.Error(), "armory init") {
		t.Fatalf("err = %v (kind %v)", err, armory.KindOf(err))
	}
}

func TestLoadLimits(t *testing.T) {
	files := goodFiles()
	files["archetype/reviewer/config.md"] = strings.Repeat("x", maxConfigMDSize+1)
	_, err := Load(writeWorld(t, files))
	if err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("oversized config.md: %v", err)
	}
	files = goodFiles()
	files["world-config.yaml"] = goodConfig + "# " + strings.Repeat("y", maxYAMLSize)
	if _, err = Load(writeWorld(t, files)); err == nil || !strings.Contains(err.Error(), "larger than the limit") {
		t.Fatalf("oversized world-config.yaml: %v", err)
	}
	// A FIFO where a config file should be must not hang the loader.
	dir := writeWorld(t, goodFiles())
	os.Remove(filepath.Join(dir, "tools.md"))
	if err := mkfifo(filepath.Join(dir, "tools.md")); err != nil {
		t.Skip("mkfifo:", err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("FIFO tools.md: %v", err)
	}
}

func TestYAMLAliasBomb(t *testing.T) {
	bomb := `name: demo
a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
`
	_, err := Load(writeWorld(t, map[string]string{"world-config.yaml": bomb}))
	if err == nil {
		t.Fatal("an alias bomb must not load")
	}
}

func TestRoots(t *testing.T) {
	files := goodFiles()
	files["world-config.yaml"] = goodConfig + "roots:\n  project:\n    web: shared/web\n  org:\n    acme: /srv/acme\n"
	files["archetype/architect/config.md"] = architectMD + "\n## Roots\n- project:web\n- @org:acme/\n"
	w, err := Load(writeWorld(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if w.Roots["project:web"] != filepath.Join(w.Dir, "shared/web") || w.Roots["org:acme"] != "/srv/acme" {
		t.Fatalf("roots = %v", w.Roots)
	}
	if got := w.Agent("architect").Config.Policy.Roots; len(got) != 2 || got[1].Value != "org:acme" {
		t.Fatalf("agent roots = %v", got)
	}
	files["archetype/architect/config.md"] = architectMD + "\n## Roots\n- project:nope\n- team:x\n"
	files["world-config.yaml"] = goodConfig + "roots:\n  team:\n    x: y\n"
	_, err = Load(writeWorld(t, files))
	for _, want := range []string{`roots: "team" is not a kind of root`, `roots: the world defines no root "project:nope"`, `roots: "team:x" is not a root name`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("errors lack %q: %v", want, err)
		}
	}
}

func TestMCPSessionsSetting(t *testing.T) {
	files := goodFiles()
	files["world-config.yaml"] = goodConfig + "mcp_sessions:\n  max_per_token: 8\n  max_total: 100\n  idle_timeout: 90s\n"
	w, err := Load(writeWorld(t, files))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.MCPSessions; got != (MCPSessionLimits{MaxPerToken: 8, MaxTotal: 100, IdleTimeout: 90 * time.Second}) {
		t.Errorf("mcp_sessions = %+v", got)
	}
	lines := strings.Count(goodConfig, "\n")
	for _, tc := range []struct{ yaml, want string }{
		{"mcp_sessions:\n  max_sessions: 3\n", fmt.Sprintf(`world-config.yaml:%d: mcp_sessions: unknown key "max_sessions" (known keys: max_per_token, max_total, idle_timeout)`, lines+2)},
		{"mcp_sessions:\n  max_per_token: 0\n", fmt.Sprintf(`world-config.yaml:%d: mcp_sessions.max_per_token must be between 1 and 1048576, got 0`, lines+2)},
		{"mcp_sessions:\n  max_total: lots\n", fmt.Sprintf(`world-config.yaml:%d: mcp_sessions.max_total must be a whole number`, lines+2)},
		{"mcp_sessions:\n  idle_timeout: forever\n", fmt.Sprintf(`world-config.yaml:%d: mcp_sessions.idle_timeout must be a duration`, lines+2)},
		{"mcp_sessions: 5\n", fmt.Sprintf(`world-config.yaml:%d: mcp_sessions must be a mapping`, lines+1)},
	} {
		files["world-config.yaml"] = goodConfig + tc.yaml
		_, err := Load(writeWorld(t, files))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.yaml, err, tc.want)
		}
	}
}
