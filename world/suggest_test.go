package world

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	known := []string{"tool access", "toolbox", "toolkits", "permissions", "limits"}
	for _, tc := range []struct{ in, want string }{
		{"Tool Acess", "tool access"},
		{"permisions", "permissions"},
		{"toolkit", "toolkits"},
		{"limtis", "limits"}, // a swap is one edit
		{"provider", ""},     // nothing near
		{"ab", ""},           // too short to guess
	} {
		if got := Closest(tc.in, known); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"tool_invocatons", "tool_invocations", 1}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}

func TestConfigMDTypoHints(t *testing.T) {
	var ds Diagnostics
	ParseConfigMD("config.md", []byte("# x\n## Permisions\nworkspace.write: deny\n## Permissions\nprofle: trusted\nprofile: trustd\n## Limits\nmax_turns: 4\ntool_invocatons: 5\n## Capabilities\n- tool_aproval: tool.cli\n"), &ds)
	want := []string{
		`config.md:2: warning: unknown section "Permisions" (did you mean "Permissions"?)`,
		`config.md:5: permissions: profle: `,
		`(did you mean "profile"?)`,
		`config.md:6: permissions: profile must be restricted, standard or trusted, got "trustd" (did you mean "trusted"?)`,
		`config.md:9: warning: limits: unknown limit "tool_invocatons" (did you mean "tool_invocations"?)`,
		`config.md:11: warning: capabilities: unknown capability "tool_aproval" (did you mean "tool_approval"?)`,
	}
	var all []string
	for _, d := range ds {
		all = append(all, d.String())
	}
	joined := strings.Join(all, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("missing %q in:\n%s", w, joined)
		}
	}
	if strings.Contains(joined, `unknown limit "max_turns"`) {
		t.Errorf("a framework limit is warned about:\n%s", joined)
	}
}
