package access

import (
	"strings"
	"testing"
)

// Seajelly toolkits' rule, one row per sentence of its rule.
func TestToolkitRule(t *testing.T) {
	kits := NewToolkits([]Toolkit{
		{Name: "web", Tools: []string{"tool.fetch", "tool.browser"}, Default: true, Policy: "Prefer tool.fetch."},
		{Name: "self_evolution", Tools: []string{"skill.create", "skill.edit"}, Default: false},
		{Name: "scrape", Tools: []string{"tool.browser", "tool.screenshot"}, Default: true},
	})
	tests := []struct {
		name string
		sw   Switches
		tool string
		want bool
	}{
		// A tool in no toolkit: its per-tool boolean, else on.
		{"no toolkit, nothing set", Switches{}, "tool.cli", true},
		{"no toolkit, per-tool false", Switches{"tool.cli": false}, "tool.cli", false},
		{"no toolkit, per-tool true", Switches{"tool.cli": true}, "tool.cli", true},
		// Any false → off (a per-tool true does not override).
		{"toolkit false", Switches{"web": false}, "tool.fetch", false},
		{"toolkit false beats per-tool true", Switches{"web": false, "tool.fetch": true}, "tool.fetch", false},
		{"one of two toolkits false", Switches{"web": true, "scrape": false}, "tool.browser", false},
		// Any true → the per-tool boolean if set, else on.
		{"toolkit true", Switches{"self_evolution": true}, "skill.create", true},
		{"toolkit true, per-tool false", Switches{"self_evolution": true, "skill.create": false}, "skill.create", false},
		{"toolkit true, per-tool true", Switches{"self_evolution": true, "skill.edit": true}, "skill.edit", true},
		// No toolkit switch set → another member explicitly true: toolkit counts as on (legacy configs).
		{"legacy member on", Switches{"skill.edit": true}, "skill.create", true},
		{"legacy member on, per-tool false", Switches{"skill.edit": true, "skill.create": false}, "skill.create", false},
		// Otherwise the per-tool boolean if set, else the toolkit's default.
		{"default off", Switches{}, "skill.create", false},
		{"default on", Switches{}, "tool.fetch", true},
		{"per-tool true over default off", Switches{"skill.create": true}, "skill.create", true},
		{"per-tool false over default on", Switches{"tool.fetch": false}, "tool.fetch", false},
		{"member false does not switch siblings", Switches{"tool.browser": false}, "tool.fetch", true},
		// Two toolkits containing the tool, no switch: on only if every default is on.
		{"two defaults on", Switches{}, "tool.browser", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := kits.Enabled(tc.sw, tc.tool); got != tc.want {
				t.Fatalf("Enabled(%v, %q) = %v, want %v", tc.sw, tc.tool, got, tc.want)
			}
			got, reasons := kits.Explain(tc.sw, tc.tool)
			if got != tc.want {
				t.Fatalf("Explain disagrees with Enabled: %v %v", got, reasons)
			}
			if !got && len(reasons) == 0 {
				t.Fatalf("an off tool must say why")
			}
		})
	}
}

func TestToolkitDefaultsDisagree(t *testing.T) {
	kits := NewToolkits([]Toolkit{
		{Name: "a", Tools: []string{"x.t"}, Default: true},
		{Name: "b", Tools: []string{"x.t"}, Default: false},
	})
	on, reasons := kits.Explain(Switches{}, "x.t")
	if on {
		t.Fatal("when the toolkits containing a tool disagree on the default, the tool stays off")
	}
	if !strings.Contains(strings.Join(reasons, ";"), `"b" is off by default`) {
		t.Fatalf("reasons: %v", reasons)
	}
	if !kits.Enabled(Switches{"b": true}, "x.t") {
		t.Fatal("switching b on turns it on")
	}
}

func TestDecide(t *testing.T) {
	ta := mustResolve(t, []string{"communicator"}, nil)
	kits := NewToolkits([]Toolkit{{Name: "chat", Tools: []string{"channel.send"}, Default: true}})
	tests := []struct {
		name        string
		in          Input
		visible     bool
		public      bool
		wantReasons []string
	}{
		{"visible privileged", Input{Tool: "channel.send", Defined: true}, true, false, []string{"privileged", `granted by group "communicator"`, "on by default"}},
		{"toolkit off", Input{Tool: "channel.send", Defined: true, Switches: Switches{"chat": false}}, false, false, []string{`"chat" is switched off`}},
		{"requirement unmet", Input{Tool: "tool.browser", Defined: true, Unmet: []string{`binary "chromium" not found on PATH`}}, false, true, []string{"public", "requirement not met: binary \"chromium\""}},
		{"undefined", Input{Tool: "tool.nope", Defined: false}, false, true, []string{"no tool named tool.nope"}},
		{"withheld", Input{Tool: "dev.x", Defined: true, Withheld: []string{"toolbox tool: not listed"}}, false, true, []string{"not listed"}},
		{"not granted", Input{Tool: "syscall.broadcast", Defined: true}, false, false, []string{"not granted"}},
		{"always on ignores toolkits", Input{Tool: "syscall.skill.list", Defined: true, Switches: Switches{"syscall.skill.list": false}}, true, true, []string{"always on"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Access = ta
			if tc.in.Toolkits == nil {
				tc.in.Toolkits = kits
			}
			d := Decide(tc.in)
			if d.Visible != tc.visible || d.Public != tc.public {
				t.Fatalf("Decide = %+v, want visible %v public %v", d, tc.visible, tc.public)
			}
			all := strings.Join(d.Reasons, "\n")
			for _, w := range tc.wantReasons {
				if !strings.Contains(all, w) {
					t.Errorf("reasons lack %q:\n%s", w, all)
				}
			}
		})
	}
}
