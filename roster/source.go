package roster

import (
	"fmt"

	"github.com/armory-dev/armory/access"
	"github.com/armory-dev/armory/world"
)

// where names a rule's position in the world folder: file:line, and the
// rule's text when given ("archetype/dev/config.md:12 \"workspace.write:
// deny\"").
func where(file string, line int, text string) string {
	if file == "" || line <= 0 {
		return ""
	}
	if text == "" {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return fmt.Sprintf("%s:%d %q", file, line, text)
}

// firstAt records key's position unless an earlier line already has it.
func firstAt(m map[string]string, key, pos string) {
	if _, ok := m[key]; !ok && pos != "" {
		m[key] = pos
	}
}

// worldSources are the positions of the world's privilege groups and
// toolkits, shared by every agent's Sources.
func worldSources(w *world.World) (groups, kits map[string]string) {
	groups, kits = map[string]string{}, map[string]string{}
	for _, g := range w.Groups {
		firstAt(groups, g.Name, where(world.ConfigFile, g.Line, ""))
	}
	for _, k := range w.Toolkits {
		firstAt(kits, k.Name, where(world.ConfigFile, k.Line, ""))
	}
	return groups, kits
}

// agentSources says where each access rule of config.md c was written.
func (h *Roster) agentSources(c *world.AgentConfig) *access.Sources {
	s := &access.Sources{Groups: h.srcGroups, Toolkits: h.srcKits,
		AgentGroups: map[string]string{}, Overrides: map[string]string{}, Legacy: map[string]string{}, Switches: map[string]string{}}
	for _, g := range c.Groups {
		firstAt(s.AgentGroups, g.Value, where(c.File, g.Line, ""))
	}
	for _, o := range c.Overrides {
		firstAt(s.Overrides, o.Value, where(c.File, o.Line, "- "+o.Value))
	}
	for _, t := range c.Tools {
		firstAt(s.Legacy, t.Value, where(c.File, t.Line, "- "+t.Value))
	}
	for _, sw := range c.Toolkits {
		// The switch reasons quote the line's text already.
		firstAt(s.Switches, sw.Name, where(c.File, sw.Line, ""))
	}
	return s
}

// permRules converts permission rules of file to the policy's, each with
// where it was written.
func permRules(file string, rs []world.PermRule) []access.Rule {
	out := make([]access.Rule, len(rs))
	for i, r := range rs {
		out[i] = access.Rule{Tool: r.Tool, Level: r.Level, Src: where(file, r.Line, r.Tool+": "+r.Level.String())}
	}
	return out
}
