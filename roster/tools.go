package roster

import (
	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/access"
	"github.com/armory-dev/armory/registry"
)

// ToolInfo is one tool of an agent as `tool list --long` and
// GET /api/agents/{id}/tools?long=1 show it.
type ToolInfo struct {
	Name         string              `json:"name"`
	Description  string              `json:"description"`
	Danger       armory.Danger       `json:"danger"`
	Capabilities []armory.Capability `json:"capabilities"`
	Category     armory.Category     `json:"category,omitempty"`
	// Permission is the agent's level for the tool before anything about
	// one call (command screening, bias patterns) raises it.
	Permission armory.Permission `json:"permission"`
	// Source is built-in, "toolbox NAME", upstream, pipeline or run time.
	Source string `json:"source"`
}

// Tools describes the tools agent ag's registry lists for a caller
// without a channel context (ToolsFor with the zero Caller), sorted by
// name.
func (h *Roster) Tools(ag *Agent) []ToolInfo { return h.ToolsFor(ag, registry.Caller{}) }

// ToolsFor describes the tools agent ag's registry lists for c
// (registry.Registry.ToolsFor), sorted by name.
func (h *Roster) ToolsFor(ag *Agent, c registry.Caller) []ToolInfo {
	tools := ag.Registry.ToolsFor(c)
	out := make([]ToolInfo, 0, len(tools))
	for _, t := range tools {
		s, m := t.Spec(), t.Manifest()
		lvl, _ := access.EffectiveLevel(h.LevelInput(ag, s.Name, m))
		caps := m.Capabilities
		if caps == nil {
			caps = []armory.Capability{}
		}
		out = append(out, ToolInfo{Name: s.Name, Description: s.Description, Danger: m.Danger, Capabilities: caps, Category: m.Category,
			Permission: lvl, Source: h.Source(ag, s.Name)})
	}
	return out
}

// LevelInput is what decides agent ag's permission level for a call of tool
// name with manifest m: the agent's rules and profile and the world's rules.
// The pipeline adds what the call itself says (terminal screening, bias).
func (h *Roster) LevelInput(ag *Agent, name string, m armory.Manifest) access.LevelInput {
	in := access.LevelInput{Tool: name, Manifest: m, WorldRules: h.worldRules, AgentRules: ag.rules}
	if cfg := ag.Def.Config; cfg != nil {
		in.Profile = access.Profile(cfg.Policy.Profile)
		in.ProfileSrc = ag.profileSrc
	}
	return in
}
