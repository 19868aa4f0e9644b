package skills

import (
	"slices"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
)

// Acquiring a skill never grants a tool the agent could not have: each of
// its tools meets the policy a catalog tool meets — privilege groups and
// overrides, the legacy "## Tools" list, toolkits and requirements. A
// withheld tool is in the acquire result with the reason, not in the
// registry, and access explain says it comes from the skill and why.
func TestSkillToolsObeyThePolicy(t *testing.T) {
	const ghostSkill = "---\nname: ghost\ndescription: A tool whose binary is missing.\n---\nx\n"
	const ghostToolbox = "name: ghost\ntools:\n  - name: run\n    description: runs a program that is not installed\n    binary: armory-test-no-such-binary\n    danger: safe\n    permission: auto\n"
	world := func(config string, more map[string]string) map[string]string {
		return withFiles(packFiles(), withFiles(map[string]string{
			"world-config.yaml":         "name: sk\nagents:\n  - {id: a, archetype: a}\ntool_privileges:\n  devops:\n    - text.search\n" + "toolkits:\n  counting:\n    tools: [text.count]\n    default: true\n    policy: Count before you read.\n",
			"archetype/a/config.md":     "# a\n\n" + config,
			"skills/ghost/SKILL.md":     ghostSkill,
			"skills/ghost/toolbox.yaml": ghostToolbox,
		}, more))
	}
	for _, tc := range []struct {
		name     string
		files    map[string]string
		skill    string
		tools    []string          // registered
		withheld map[string]string // tool → a part of the reason
		explain  map[string][]string
	}{
		{
			name:  "group grants the privileged tool",
			files: world("## Tool Access\nprivilege_groups: devops\n", nil),
			skill: "text", tools: []string{"text.count", "text.search"},
			explain: map[string][]string{"text.search": {"from skill text (skills/text/toolbox.yaml:14): the agent has acquired it", `granted by group "devops"`, "registered at run time (source: skill text)"}},
		},
		{
			name:  "no group: the privileged tool is withheld",
			files: world("## Tool Access\n", nil),
			skill: "text", tools: []string{"text.count"},
			withheld: map[string]string{"text.search": "not granted: the agent's groups (none) do not include devops"},
			explain:  map[string][]string{"text.search": {"from skill text (skills/text/toolbox.yaml:14): the agent has acquired it", "privileged: in group(s) devops", "not granted"}},
		},
		{
			name: "a family entry in a group covers the skill's tools",
			files: world("## Tool Access\nprivilege_groups: ops\n", map[string]string{
				"world-config.yaml":     "name: sk\nagents:\n  - {id: a, archetype: a}\n  - {id: b, archetype: b}\ntool_privileges:\n  ops:\n    - text\n",
				"archetype/b/config.md": "## Tool Access\n",
			}),
			skill: "text", tools: []string{"text.count", "text.search"},
			explain: map[string][]string{"text.count": {"privileged: in group(s) ops", `granted by group "ops"`}},
		},
		{
			name:  "override",
			files: world("## Tool Access\n- text.search\n", nil),
			skill: "text", tools: []string{"text.count", "text.search"},
			explain: map[string][]string{"text.search": {`granted by override "text.search"`, "archetype/a/config.md:"}},
		},
		{
			name:  "toolkit switched off",
			files: world("## Tool Access\nprivilege_groups: devops\n\n## Toolkits\ncounting: false\n", nil),
			skill: "text", tools: []string{"text.search"},
			withheld: map[string]string{"text.count": `toolkit "counting" is switched off`},
			explain:  map[string][]string{"text.count": {"from skill text", `toolkit "counting" is switched off`}},
		},
		{
			name:  "one tool switched off",
			files: world("## Tool Access\nprivilege_groups: devops\n\n## Toolkits\ntext.search: false\n", nil),
			skill: "text", tools: []string{"text.count"},
			withheld: map[string]string{"text.search": `switched off by its own "text.search: false" line`},
		},
		{
			name: "legacy Tools list",
			files: world("## Tools\n- text.count\n", map[string]string{
				"world-config.yaml": "name: sk\nagents:\n  - {id: a, archetype: a}\n",
			}),
			skill: "text", tools: []string{"text.count"},
			withheld: map[string]string{"text.search": `not in the agent's "## Tools" list`},
			explain:  map[string][]string{"text.count": {`legacy mode: listed in "## Tools" as "text.count"`}},
		},
		{
			name:  "legacy Tools family",
			files: world("## Tools\n- text\n", map[string]string{"world-config.yaml": "name: sk\nagents:\n  - {id: a, archetype: a}\n"}),
			skill: "text", tools: []string{"text.count", "text.search"},
		},
		{
			name:  "requirement not met",
			files: world("## Tool Access\n", nil),
			skill: "ghost", tools: nil,
			withheld: map[string]string{"ghost.run": `requirement not met: binary "armory-test-no-such-binary" not found on PATH`},
			explain:  map[string][]string{"ghost.run": {"from skill ghost (skills/ghost/toolbox.yaml:3): the agent has acquired it", "requirement not met"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := open(t, writeWorld(t, tc.files), "", Options{})
			var acq AcquireResult
			e.ok("a", "syscall.skill.acquire", map[string]string{"name": tc.skill}, &acq)
			if !slices.Equal(acq.Tools, append([]string{}, tc.tools...)) {
				t.Errorf("acquire gave %v, want %v (withheld %v)", acq.Tools, tc.tools, acq.Withheld)
			}
			if len(acq.Withheld) != len(tc.withheld) {
				t.Errorf("withheld %v, want %v", acq.Withheld, tc.withheld)
			}
			for tool, why := range tc.withheld {
				// The reason reaches a model: never where the world's
				// config files wrote a rule (config.md is never sent to one).
				if w := acq.Withheld[tool]; strings.Contains(w, "config.md") || strings.Contains(w, "world-config.yaml") {
					t.Errorf("withheld[%s] names the config files: %q", tool, w)
				}
				if !strings.Contains(acq.Withheld[tool], why) {
					t.Errorf("withheld[%s] = %q, want it to say %q", tool, acq.Withheld[tool], why)
				}
				if e.agent("a").Registry.Has(tool) {
					t.Errorf("the withheld %s is registered", tool)
				}
				if vis, _ := e.explain("a", tool); vis {
					t.Errorf("explain says the withheld %s is visible", tool)
				}
				// The agent's own list says so too.
				var list struct{ Skills []SkillInfo }
				e.ok("a", "syscall.skill.list", `{}`, &list)
				i := slices.IndexFunc(list.Skills, func(s SkillInfo) bool { return s.Name == tc.skill })
				if i < 0 || !strings.Contains(list.Skills[i].Withheld[tool], why) {
					t.Errorf("syscall.skill.list does not show %s withheld: %+v", tool, list.Skills)
				}
				// And a call of it is an unknown tool, not a run.
				e.refused("a", tool, `{}`, armory.KindNotFound, "Unknown tool: "+tool)
			}
			for _, tool := range tc.tools {
				if !e.agent("a").Registry.Has(tool) {
					t.Errorf("%s is not registered", tool)
				}
				if vis, why := e.explain("a", tool); !vis {
					t.Errorf("explain says the registered %s is not visible:\n%s", tool, why)
				}
			}
			for tool, wants := range tc.explain {
				_, why := e.explain("a", tool)
				for _, w := range wants {
					if !strings.Contains(why, w) {
						t.Errorf("explain %s lacks %q:\n%s", tool, w, why)
					}
				}
			}
		})
	}
}

// Before an agent acquires a skill, access explain of the skill's tool
// says where it is defined, that the agent has not acquired it and how
// to, and whether the policy would let it have the tool.
func TestExplainNotAcquiredSkillTool(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	for _, tc := range []struct {
		agent, tool string
		want        []string
	}{
		{"dev", "text.count", []string{`from skill text (skills/text/toolbox.yaml:3): the agent has not acquired it; syscall.skill.acquire {"name": "text"} loads its tools`, "public: in no privilege group", "the policy would let the agent have it once registered"}},
		{"dev", "text.search", []string{"the agent has not acquired it", `granted by group "devops"`, "the policy would let the agent have it once registered"}},
		{"guest", "text.search", []string{"the agent has not acquired it", "not granted: the agent's groups (none) do not include devops"}},
	} {
		vis, why := e.explain(tc.agent, tc.tool)
		if vis {
			t.Errorf("%s %s: visible before it is acquired", tc.agent, tc.tool)
		}
		for _, w := range tc.want {
			if !strings.Contains(why, w) {
				t.Errorf("explain %s %s lacks %q:\n%s", tc.agent, tc.tool, w, why)
			}
		}
		if strings.Contains(why, "would let") && strings.Contains(why, "not granted") {
			t.Errorf("explain %s %s contradicts itself:\n%s", tc.agent, tc.tool, why)
		}
	}
	// A tool no skill defines is still explained as undefined.
	if _, why := e.explain("dev", "text.nope"); !strings.Contains(why, "no tool named text.nope is defined") {
		t.Errorf("explain text.nope:\n%s", why)
	}
	// Once acquired and dropped again, the tool is back to "not acquired".
	e.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, nil)
	e.ok("dev", "syscall.skill.drop", `{"name":"text"}`, nil)
	if vis, why := e.explain("dev", "text.count"); vis || !strings.Contains(why, "the agent has not acquired it") {
		t.Errorf("explain after the drop (visible %v):\n%s", vis, why)
	}
}

// A skill's tool this process cannot build (a WebAssembly tool without a
// runtime) is explained as unavailable, with why, not as undefined.
func TestExplainUnavailableSkillTool(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	e.mod.mu.Lock()
	e.mod.packs[""]["text"].unavailable["text.wasm"] = "this process runs no WebAssembly runtime"
	e.mod.mu.Unlock()
	vis, why := e.explain("dev", "text.wasm")
	if vis || !strings.Contains(why, "from skill text: unavailable: this process runs no WebAssembly runtime") || strings.Contains(why, "no tool named") {
		t.Fatalf("explain (visible %v):\n%s", vis, why)
	}
}
