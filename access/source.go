package access

// Sources says where each rule of an agent's policy was written, so that
// explanations name the world file and line that decided ("archetype/dev/
// config.md:12 \"workspace.write: deny\""), the way a policy engine's
// diagnostics name the deciding policies. Every map is keyed by the rule's
// name as written; a missing entry just leaves the position out. Sources
// are read only on the explain and decide paths, never by CanAccess.
type Sources struct {
	Groups      map[string]string // world privilege group → its definition
	AgentGroups map[string]string // agent's privilege_groups entry → its line
	Overrides   map[string]string // "## Tool Access" item → its line
	Legacy      map[string]string // "## Tools" item → its line
	Toolkits    map[string]string // world toolkit → its definition
	Switches    map[string]string // "## Toolkits" switch (toolkit or tool) → its line
}

// at returns " (where)" for key of m, or "" when the position is unknown.
func at(m map[string]string, key string) string {
	if s, ok := m[key]; ok && s != "" {
		return " (" + s + ")"
	}
	return ""
}

// noSources stands for a nil *Sources: every position unknown.
var noSources Sources

// orNone returns s, or an empty Sources when s is nil, so that callers
// read its maps without a nil check.
func (s *Sources) orNone() *Sources {
	if s == nil {
		return &noSources
	}
	return s
}
