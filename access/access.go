// Package access is Armory's pure access policy: which tools an agent may
// see. It does no I/O; everything it needs (the world's privilege groups and
// toolkits, the agent's groups, overrides and switches, which requirements
// are met) is passed in, so every rule can be tested as a table and every
// decision carries its reasons.
//
// The rules (the ghost world and seajelly toolkits):
//   - A tool in no privilege group is public: every agent can access it.
//   - A privileged tool (in at least one group) is accessible only through
//     one of the agent's groups or an override. An entry that names a family
//     ("channel") covers every tool below it ("channel.send").
//   - syscall.skill.* tools are always on, whatever the policy.
//   - Legacy mode, when the agent has no "## Tool Access" section and the
//     world has no tool_privileges: exactly the "## Tools" list (plus the
//     always-on tools); no list means none.
//   - Toolkits switch tools off or on but never grant access.
//   - Visible = CanAccess and toolkit-enabled and requirements met.
package access

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/armory-dev/armory"
)

// AlwaysOnFamily is the family of tools every agent has, whatever the policy.
const AlwaysOnFamily = "syscall.skill"

// IsAlwaysOn reports whether name is an always-on tool (syscall.skill.*).
func IsAlwaysOn(name string) bool {
	return len(name) > len(AlwaysOnFamily)+1 && name[len(AlwaysOnFamily)] == '.' && name[:len(AlwaysOnFamily)] == AlwaysOnFamily
}

// MaxGroups is the most privilege groups a world may define.
const MaxGroups = 256

type groupSet [MaxGroups / 64]uint64

func (s *groupSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s *groupSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }
func (s *groupSet) or(o *groupSet) { s[0] |= o[0]; s[1] |= o[1]; s[2] |= o[2]; s[3] |= o[3] }
func (s *groupSet) intersects(o *groupSet) bool {
	return s[0]&o[0] != 0 || s[1]&o[1] != 0 || s[2]&o[2] != 0 || s[3]&o[3] != 0
}

// Privileges is the world's tool_privileges, indexed for fast lookups. It is
// immutable and safe for concurrent use.
type Privileges struct {
	names   []string             // group names; index = bit
	byName  map[string]int       // group name → index
	entries map[string]*groupSet // tool name or family → groups listing it
	// resolved caches, for the names given at construction (the world's
	// catalog), the union over every entry that covers the name, so that
	// CanAccess on a known tool is one map lookup.
	resolved map[string]resolvedEntry
	// maxDots is the most dots in any entry: prefixes of a name with more
	// dots than that cannot match and are not looked up.
	maxDots int
}

type resolvedEntry struct {
	groups     groupSet
	privileged bool
}

// NewPrivileges indexes privilege groups: group name → tool names or
// families. known optionally lists the tool names the world defines; lookups
// of those names are precomputed (any other name still works, a little
// slower). It fails with more than MaxGroups groups.
func NewPrivileges(groups map[string][]string, known ...string) (*Privileges, error) {
	if len(groups) > MaxGroups {
		return nil, armory.E("access.NewPrivileges", armory.KindInvalid, fmt.Sprintf("%d privilege groups; the limit is %d", len(groups), MaxGroups))
	}
	p := &Privileges{byName: map[string]int{}, entries: map[string]*groupSet{}}
	for g := range groups {
		p.names = append(p.names, g)
	}
	sort.Strings(p.names)
	for i, g := range p.names {
		p.byName[g] = i
		for _, t := range groups[g] {
			s := p.entries[t]
			if s == nil {
				s = new(groupSet)
				p.entries[t] = s
			}
			s.add(i)
			if d := strings.Count(t, "."); d > p.maxDots {
				p.maxDots = d
			}
		}
	}
	if len(known) > 0 {
		p.resolved = make(map[string]resolvedEntry, len(known))
		for _, n := range known {
			var e resolvedEntry
			e.privileged = p.walk(n, &e.groups)
			p.resolved[n] = e
		}
	}
	return p, nil
}

// Groups returns the group names, sorted.
func (p *Privileges) Groups() []string { return slices.Clone(p.names) }

// HasGroup reports whether the world defines group g.
func (p *Privileges) HasGroup(g string) bool { _, ok := p.byName[g]; return ok }

// Empty reports whether the world defines no privilege groups.
func (p *Privileges) Empty() bool { return p == nil || len(p.names) == 0 }

// lookup ORs the groups of every entry that covers name (the name itself and
// each family above it) into out. It reports whether any entry did.
func (p *Privileges) lookup(name string, out *groupSet) bool {
	if e, ok := p.resolved[name]; ok {
		out.or(&e.groups)
		return e.privileged
	}
	return p.walk(name, out)
}

func (p *Privileges) walk(name string, out *groupSet) bool {
	if len(p.entries) == 0 {
		return false
	}
	found := false
	if s, ok := p.entries[name]; ok {
		out.or(s)
		found = true
	}
	dots := 0
	for i := 0; i < len(name); i++ {
		if name[i] != '.' {
			continue
		}
		if dots > p.maxDots {
			break
		}
		dots++
		if s, ok := p.entries[name[:i]]; ok {
			out.or(s)
			found = true
		}
	}
	return found
}

// groupsCovering returns the names of the groups whose entries cover name.
func (p *Privileges) groupsCovering(name string) []string {
	var s groupSet
	p.lookup(name, &s)
	var out []string
	for i, g := range p.names {
		if s.has(i) {
			out = append(out, g)
		}
	}
	return out
}

// IsPublic reports whether name is in no privilege group.
func (p *Privileges) IsPublic(name string) bool {
	if p == nil {
		return true
	}
	var s groupSet
	return !p.lookup(name, &s)
}

// Mode is how an agent's access is decided.
type Mode string

const (
	// ModeAccess uses privilege groups and overrides.
	ModeAccess Mode = "access"
	// ModeLegacy uses the agent's "## Tools" allow-list.
	ModeLegacy Mode = "legacy"
)

// ToolAccess is one agent's resolved access policy. It is immutable and
// safe for concurrent use.
type ToolAccess struct {
	priv      *Privileges
	mode      Mode
	groups    groupSet
	groupList []string // sorted
	overrides []string // names or families, sorted, no duplicates
	legacy    []string // "## Tools" entries, sorted, no duplicates
}

// ResolveToolAccess computes an agent's access from the world's privilege
// groups, the agent's groups and its overrides (access mode). Groups the
// world does not define are ignored here; world.Load reports them.
//
// It is exported for embedders: the one-call form of the ghost world's
// config.ResolveToolAccess, for a framework that keeps its own privilege
// map. Armory's roster builds one Privileges for the whole world and calls
// Resolve (or Choose) per agent instead, so that agents share it.
func ResolveToolAccess(worldPrivileges map[string][]string, groups, overrides []string) (*ToolAccess, error) {
	p, err := NewPrivileges(worldPrivileges)
	if err != nil {
		return nil, err
	}
	return p.Resolve(groups, overrides), nil
}

// Resolve computes an agent's access in access mode.
func (p *Privileges) Resolve(groups, overrides []string) *ToolAccess {
	ta := &ToolAccess{priv: p, mode: ModeAccess}
	for _, g := range groups {
		if i, ok := p.byName[g]; ok && !ta.groups.has(i) {
			ta.groups.add(i)
			ta.groupList = append(ta.groupList, g)
		}
	}
	sort.Strings(ta.groupList)
	ta.overrides = sortedUnique(overrides)
	return ta
}

// Legacy computes an agent's access in legacy mode: exactly tools (names or
// families) plus the always-on tools.
func (p *Privileges) Legacy(tools []string) *ToolAccess {
	return &ToolAccess{priv: p, mode: ModeLegacy, legacy: sortedUnique(tools)}
}

// Choose applies the mode rule: legacy mode only when the agent has no
// "## Tool Access" section and the world has no privilege groups.
func (p *Privileges) Choose(hasToolAccess bool, groups, overrides, tools []string) *ToolAccess {
	if !hasToolAccess && p.Empty() {
		return p.Legacy(tools)
	}
	return p.Resolve(groups, overrides)
}

func sortedUnique(xs []string) []string {
	if len(xs) == 0 {
		return nil
	}
	out := slices.Clone(xs)
	sort.Strings(out)
	return slices.Compact(out)
}

// Mode returns how this agent's access is decided.
func (ta *ToolAccess) Mode() Mode { return ta.mode }

// Groups returns the agent's (defined) privilege groups, sorted.
func (ta *ToolAccess) Groups() []string { return slices.Clone(ta.groupList) }

// Overrides returns the agent's overrides, sorted.
func (ta *ToolAccess) Overrides() []string { return slices.Clone(ta.overrides) }

// LegacyTools returns the legacy allow-list, sorted (legacy mode only).
func (ta *ToolAccess) LegacyTools() []string { return slices.Clone(ta.legacy) }

// IsPublic reports whether name is in no privilege group of the world.
func (ta *ToolAccess) IsPublic(name string) bool { return ta.priv.IsPublic(name) }

// CanAccess reports whether the agent may access tool name: always-on, or
// (legacy mode) listed, or (access mode) public, granted by one of its
// groups, or overridden. It does not allocate.
func (ta *ToolAccess) CanAccess(name string) bool {
	if IsAlwaysOn(name) {
		return true
	}
	if ta.mode == ModeLegacy {
		return covered(ta.legacy, name)
	}
	var s groupSet
	if ta.priv == nil || !ta.priv.lookup(name, &s) {
		return true // public
	}
	if s.intersects(&ta.groups) {
		return true
	}
	return covered(ta.overrides, name)
}

// covered reports whether a name or family in list covers name. Lists are
// short (a handful of overrides), so a scan beats hashing.
func covered(list []string, name string) bool {
	for _, e := range list {
		if armory.InFamily(name, e) {
			return true
		}
	}
	return false
}

// GrantedPrivileged returns, sorted and without duplicates, the privileged
// tools among known that this agent can access (through a group or an
// override). In legacy mode it returns nil.
func (ta *ToolAccess) GrantedPrivileged(known []string) []string {
	if ta.mode == ModeLegacy {
		return nil
	}
	var out []string
	for _, n := range known {
		if !ta.priv.IsPublic(n) && ta.CanAccess(n) {
			out = append(out, n)
		}
	}
	return sortedUnique(out)
}

// Explain says why the agent can or cannot access name.
func (ta *ToolAccess) Explain(name string) (ok bool, reasons []string) {
	return ta.ExplainFrom(name, nil)
}

// ExplainFrom is Explain with each reason naming where its rule was
// written (src may be nil).
func (ta *ToolAccess) ExplainFrom(name string, src *Sources) (ok bool, reasons []string) {
	src = src.orNone()
	if IsAlwaysOn(name) {
		return true, []string{"always on: syscall.skill.* tools are available to every agent"}
	}
	if ta.mode == ModeLegacy {
		for _, e := range ta.legacy {
			if armory.InFamily(name, e) {
				return true, []string{fmt.Sprintf("legacy mode: listed in \"## Tools\" as %q%s", e, at(src.Legacy, e))}
			}
		}
		return false, []string{"legacy mode (no \"## Tool Access\" section and no tool_privileges in the world): not in the agent's \"## Tools\" list"}
	}
	covering := ta.priv.groupsCovering(name)
	if len(covering) == 0 {
		return true, []string{"public: in no privilege group"}
	}
	in := make([]string, len(covering))
	for i, g := range covering {
		in[i] = g + at(src.Groups, g)
	}
	reasons = append(reasons, fmt.Sprintf("privileged: in group(s) %s", strings.Join(in, ", ")))
	for _, g := range covering {
		if slices.Contains(ta.groupList, g) {
			ok = true
			reasons = append(reasons, fmt.Sprintf("granted by group %q%s", g, at(src.AgentGroups, g)))
		}
	}
	for _, e := range ta.overrides {
		if armory.InFamily(name, e) {
			ok = true
			if e == name {
				reasons = append(reasons, fmt.Sprintf("granted by override %q%s", e, at(src.Overrides, e)))
			} else {
				reasons = append(reasons, fmt.Sprintf("granted by override %q (family)%s", e, at(src.Overrides, e)))
			}
		}
	}
	if !ok {
		g := "none"
		if len(ta.groupList) > 0 {
			g = strings.Join(ta.groupList, ", ")
		}
		reasons = append(reasons, fmt.Sprintf("not granted: the agent's groups (%s) do not include %s, and no override names it", g, strings.Join(covering, " or ")))
	}
	return ok, reasons
}
