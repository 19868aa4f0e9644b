package access

import (
	"strings"
	"testing"

	"github.com/armory-dev/armory"
)

// Every kind of rule, given where it was written, puts that position in the
// reason it decides; without Sources the reasons stay as they were.
func TestReasonsNameSources(t *testing.T) {
	p, err := NewPrivileges(map[string][]string{"dev": {"workspace.write"}, "ops": {"channel"}})
	if err != nil {
		t.Fatal(err)
	}
	kits := NewToolkits([]Toolkit{{Name: "inspect", Tools: []string{"workspace.list"}}, {Name: "web", Tools: []string{"tool.fetch"}, Default: false}})
	src := &Sources{
		Groups:      map[string]string{"dev": "world-config.yaml:7", "ops": "world-config.yaml:9"},
		AgentGroups: map[string]string{"dev": "archetype/a/config.md:3"},
		Overrides:   map[string]string{"channel": `archetype/a/config.md:4 "- channel"`},
		Legacy:      map[string]string{"workspace.read": `archetype/b/config.md:2 "- workspace.read"`},
		Toolkits:    map[string]string{"web": "world-config.yaml:20"},
		Switches:    map[string]string{"inspect": "archetype/a/config.md:8", "workspace.edit": "archetype/a/config.md:9"},
	}
	acc := p.Resolve([]string{"dev"}, []string{"channel"})
	legacy := noPrivileges(t).Legacy([]string{"workspace.read"})
	sw := Switches{"inspect": false, "workspace.edit": false}
	tests := []struct {
		name string
		ta   *ToolAccess
		tool string
		want string
	}{
		{"group definition", acc, "workspace.write", "privileged: in group(s) dev (world-config.yaml:7)"},
		{"agent's group", acc, "workspace.write", `granted by group "dev" (archetype/a/config.md:3)`},
		{"override", acc, "channel.send", `granted by override "channel" (family) (archetype/a/config.md:4 "- channel")`},
		{"legacy Tools", legacy, "workspace.read", `listed in "## Tools" as "workspace.read" (archetype/b/config.md:2 "- workspace.read")`},
		{"toolkit switch", acc, "workspace.list", `toolkit "inspect" is switched off ("inspect: false" at archetype/a/config.md:8)`},
		{"tool switch", acc, "workspace.edit", `switched off by its own "workspace.edit: false" line (archetype/a/config.md:9)`},
		{"toolkit default", acc, "tool.fetch", `toolkit "web" is off by default and the agent does not switch it on (world-config.yaml:20)`},
	}
	for _, tc := range tests {
		d := Decide(Input{Tool: tc.tool, Defined: true, Access: tc.ta, Toolkits: kits, Switches: sw, Sources: src})
		if all := strings.Join(d.Reasons, "\n"); !strings.Contains(all, tc.want) {
			t.Errorf("%s: reasons lack %q:\n%s", tc.name, tc.want, all)
		}
		bare := Decide(Input{Tool: tc.tool, Defined: true, Access: tc.ta, Toolkits: kits, Switches: sw})
		if all := strings.Join(bare.Reasons, "\n"); strings.Contains(all, ".yaml:") || strings.Contains(all, ".md:") {
			t.Errorf("%s: no sources, yet a position: %s", tc.name, all)
		}
	}
}

func noPrivileges(t *testing.T) *Privileges {
	p, err := NewPrivileges(nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPermissionReasonsNameSources(t *testing.T) {
	m := armory.Manifest{Category: armory.CatFileWrite, Permission: armory.PermAuto}
	tests := []struct {
		name string
		in   LevelInput
		want string
	}{
		{"agent rule", LevelInput{Tool: "workspace.write", Manifest: m, AgentRules: []Rule{{Tool: "workspace", Level: armory.PermDeny, Src: `archetype/a/config.md:12 "workspace: deny"`}}},
			`deny by the agent's permission rule "workspace" (archetype/a/config.md:12 "workspace: deny")`},
		{"profile", LevelInput{Tool: "workspace.write", Manifest: m, Profile: ProfileRestricted, ProfileSrc: `archetype/a/config.md:11 "profile: restricted"`},
			`deny by profile restricted (archetype/a/config.md:11 "profile: restricted") for file_write tools`},
		{"world rule", LevelInput{Tool: "workspace.write", Manifest: m, WorldRules: []Rule{{Tool: "workspace.write", Level: armory.PermConfirm, Src: `world-config.yaml:15 "workspace.write: confirm"`}}},
			`confirm by the world's permission rule "workspace.write" (world-config.yaml:15 "workspace.write: confirm")`},
	}
	for _, tc := range tests {
		_, why := EffectiveLevel(tc.in)
		if all := strings.Join(why, "\n"); !strings.Contains(all, tc.want) {
			t.Errorf("%s: reasons lack %q:\n%s", tc.name, tc.want, all)
		}
	}
}
