package access

import (
	"slices"
	"strings"
	"testing"
)

// The world of the ghost world's example.
var seedPrivileges = map[string][]string{
	"admin":           {"syscall.agent.create", "syscall.agent.stop", "syscall.agent.start", "syscall.agent.inspect", "syscall.resource.usage"},
	"manager":         {"syscall.task.create", "syscall.task.update", "syscall.knowledge.write", "syscall.knowledge.delete", "syscall.broadcast"},
	"communicator":    {"channel", "syscall.ask", "syscall.channel.send", "syscall.channel.handoff"},
	"google-searcher": {"tool.google_search"},
}

func mustResolve(t *testing.T, groups, overrides []string) *ToolAccess {
	t.Helper()
	ta, err := ResolveToolAccess(seedPrivileges, groups, overrides)
	if err != nil {
		t.Fatal(err)
	}
	return ta
}

func TestCanAccessSeedRules(t *testing.T) {
	// The ghost world's agent: privilege_groups: manager, communicator; overrides workspace.write, tool.browser.
	agent := mustResolve(t, []string{"manager", "communicator"}, []string{"workspace.write", "tool.browser"})
	bare := mustResolve(t, nil, nil)
	tests := []struct {
		name string
		ta   *ToolAccess
		tool string
		want bool
		rule string
	}{
		// "Public tools — tools not listed in any privilege group. Every agent can use them."
		{"public to agent", agent, "workspace.read", true, "public"},
		{"public to bare", bare, "workspace.read", true, "public"},
		{"public unknown name", bare, "tool.cli", true, "public"},
		// "Privileged tool: in at least one group → accessible only if the agent's groups include that group"
		{"group grants", agent, "syscall.task.create", true, "group"},
		{"group grants 2", agent, "syscall.broadcast", true, "group"},
		{"other group refused", agent, "syscall.agent.create", false, "privileged"},
		{"bare refused", bare, "syscall.task.create", false, "privileged"},
		{"google refused", agent, "tool.google_search", false, "privileged"},
		// "A family entry (channel) covers every tool named channel.*"
		{"family member", agent, "channel.send", true, "family"},
		{"family deep member", agent, "channel.file.attach", true, "family"},
		{"family itself", agent, "channel", true, "family"},
		{"family refused to bare", bare, "channel.handoff", false, "family"},
		{"family prefix is not a family", bare, "channelx.send", true, "public: channelx is not channel"},
		{"family is not a string prefix", bare, "channel_send", true, "public"},
		// "or the tool is in the agent's override list"
		{"override of public is harmless", agent, "workspace.write", true, "override"},
		{"override unrelated", agent, "tool.browser", true, "override"},
		// "Skill syscalls (syscall.skill.*) are always-on regardless of access."
		{"always on", bare, "syscall.skill.acquire", true, "always on"},
		{"always on list", bare, "syscall.skill.list", true, "always on"},
		{"not always on: the family name itself", bare, "syscall.skill", true, "public (not privileged here)"},
		{"skillx is not skill", bare, "syscall.skillx.list", true, "public"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.ta.CanAccess(tc.tool); got != tc.want {
				t.Fatalf("CanAccess(%q) = %v, want %v (%s)", tc.tool, got, tc.want, tc.rule)
			}
			ok, reasons := tc.ta.Explain(tc.tool)
			if ok != tc.want {
				t.Fatalf("Explain(%q) = %v, want %v: %v", tc.tool, ok, tc.want, reasons)
			}
			if len(reasons) == 0 {
				t.Fatalf("Explain(%q) gave no reasons", tc.tool)
			}
		})
	}
}

func TestOverrideGrantsPrivileged(t *testing.T) {
	ta := mustResolve(t, nil, []string{"syscall.agent.inspect", "channel"})
	for tool, want := range map[string]bool{
		"syscall.agent.inspect": true,  // exact override
		"syscall.agent.stop":    false, // same group, not overridden
		"channel.send":          true,  // family override
		"channel.handoff":       true,
		"syscall.ask":           false,
	} {
		if got := ta.CanAccess(tool); got != want {
			t.Errorf("CanAccess(%q) = %v, want %v", tool, got, want)
		}
	}
	_, reasons := ta.Explain("channel.send")
	if !slices.ContainsFunc(reasons, func(r string) bool { return strings.Contains(r, `override "channel" (family)`) }) {
		t.Errorf("reasons do not name the family override: %v", reasons)
	}
}

func TestFamilyGroupEntryDeep(t *testing.T) {
	ta, err := ResolveToolAccess(map[string][]string{"ops": {"syscall.agent"}, "x": {"a.b.c"}}, []string{"ops"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for tool, want := range map[string]bool{
		"syscall.agent.create": true,
		"syscall.agent":        true,
		"syscall.task.create":  true, // public
		"a.b.c":                false,
		"a.b.c.d":              false, // covered by a.b.c family, not granted
		"a.b":                  true,  // public: entries cover only themselves and below
	} {
		if got := ta.CanAccess(tool); got != want {
			t.Errorf("CanAccess(%q) = %v, want %v", tool, got, want)
		}
	}
}

func TestIsPublicAndGranted(t *testing.T) {
	ta := mustResolve(t, []string{"communicator"}, []string{"syscall.agent.stop", "workspace.read"})
	if !ta.IsPublic("workspace.read") || ta.IsPublic("channel.send") || ta.IsPublic("syscall.ask") {
		t.Fatal("IsPublic wrong")
	}
	known := []string{"workspace.read", "channel.send", "channel.send", "syscall.ask", "syscall.agent.stop", "syscall.agent.start", "channel.handoff"}
	got := ta.GrantedPrivileged(known)
	want := []string{"channel.handoff", "channel.send", "syscall.agent.stop", "syscall.ask"}
	if !slices.Equal(got, want) {
		t.Fatalf("GrantedPrivileged = %v, want %v (sorted, no duplicates, no public tools)", got, want)
	}
}

func TestUndefinedGroupIgnored(t *testing.T) {
	ta := mustResolve(t, []string{"nosuch", "manager", "manager"}, nil)
	if !slices.Equal(ta.Groups(), []string{"manager"}) {
		t.Fatalf("Groups = %v", ta.Groups())
	}
}

func TestLegacyMode(t *testing.T) {
	empty, _ := NewPrivileges(nil)
	withGroups, _ := NewPrivileges(seedPrivileges)
	tests := []struct {
		name          string
		p             *Privileges
		hasToolAccess bool
		tools         []string
		wantMode      Mode
		can           map[string]bool
	}{
		// "If config.md has no ## Tool Access section and world-config.yaml has no
		// tool_privileges, the config allow-list behavior is preserved."
		{"legacy list", empty, false, []string{"workspace.read", "channel"}, ModeLegacy,
			map[string]bool{"workspace.read": true, "workspace.write": false, "channel.send": true, "syscall.skill.list": true}},
		{"legacy no list = none", empty, false, nil, ModeLegacy,
			map[string]bool{"workspace.read": false, "tool.cli": false, "syscall.skill.acquire": true}},
		// The agent has a Tool Access section: access mode, even with no world groups.
		{"tool access section wins", empty, true, []string{"workspace.read"}, ModeAccess,
			map[string]bool{"workspace.read": true, "workspace.write": true}},
		// The world has groups: access mode; the list is ignored.
		{"world groups win", withGroups, false, []string{"syscall.ask"}, ModeAccess,
			map[string]bool{"syscall.ask": false, "workspace.read": true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ta := tc.p.Choose(tc.hasToolAccess, nil, nil, tc.tools)
			if ta.Mode() != tc.wantMode {
				t.Fatalf("mode = %s, want %s", ta.Mode(), tc.wantMode)
			}
			for tool, want := range tc.can {
				if got := ta.CanAccess(tool); got != want {
					t.Errorf("CanAccess(%q) = %v, want %v", tool, got, want)
				}
				if ok, r := ta.Explain(tool); ok != want {
					t.Errorf("Explain(%q) = %v %v", tool, ok, r)
				}
			}
			if tc.wantMode == ModeLegacy && ta.GrantedPrivileged([]string{"workspace.read"}) != nil {
				t.Error("legacy mode has no privileged grants")
			}
		})
	}
}

func TestTooManyGroups(t *testing.T) {
	g := map[string][]string{}
	for i := 0; i <= MaxGroups; i++ {
		g[strings.Repeat("g", 1)+string(rune('a'+i%26))+strings.Repeat("x", i/26)] = []string{"t"}
	}
	if _, err := NewPrivileges(g); err == nil {
		t.Fatal("want an error above MaxGroups")
	}
	delete(g, "ga")
	p, err := NewPrivileges(g)
	if err != nil {
		t.Fatal(err)
	}
	last := p.Groups()[len(p.Groups())-1]
	if !p.Resolve([]string{last}, nil).CanAccess("t") {
		t.Fatal("the 256th group must work")
	}
}

func TestCanAccessDoesNotAllocate(t *testing.T) {
	ta := mustResolve(t, []string{"manager"}, []string{"channel"})
	names := []string{"workspace.read", "syscall.task.create", "channel.send", "syscall.agent.stop", "syscall.skill.list"}
	allocs := testing.AllocsPerRun(200, func() {
		for _, n := range names {
			ta.CanAccess(n)
		}
	})
	if allocs != 0 {
		t.Fatalf("CanAccess allocates %.1f times per run; want 0", allocs)
	}
}

// Precomputed lookups (NewPrivileges with known names) must agree with the
// walk for every name, known or not.
func TestPrecomputedAgrees(t *testing.T) {
	names := []string{"workspace.read", "channel", "channel.send", "channel.x.y", "syscall.ask", "syscall.agent.stop", "syscall.skill.list", "tool.google_search", "tool.google_search.sub", "syscall", "syscall.task"}
	plain, _ := NewPrivileges(seedPrivileges)
	pre, _ := NewPrivileges(seedPrivileges, names[:6]...)
	for _, groups := range [][]string{nil, {"communicator"}, {"admin", "manager"}} {
		for _, ovr := range [][]string{nil, {"syscall.agent"}, {"tool.google_search"}} {
			a, b := plain.Resolve(groups, ovr), pre.Resolve(groups, ovr)
			for _, n := range names {
				if a.CanAccess(n) != b.CanAccess(n) || a.IsPublic(n) != b.IsPublic(n) {
					t.Errorf("groups %v overrides %v: %q differs (walk %v, precomputed %v)", groups, ovr, n, a.CanAccess(n), b.CanAccess(n))
				}
			}
		}
	}
}
