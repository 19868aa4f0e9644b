package access

import (
	"fmt"
	"strings"

	"github.com/armory-dev/armory"
)

// Rule sets the permission level of a tool or a family of tools.
type Rule struct {
	Tool  string
	Level armory.Permission
	// Src says where the rule was written ("world-config.yaml:7
	// \"workspace.write: deny\""); reasons name it. Empty when unknown.
	Src string
}

// srcOf returns " (src)", or "" when src is empty.
func srcOf(src string) string {
	if src == "" {
		return ""
	}
	return " (" + src + ")"
}

// Profile is an agent's permission profile (Agenthood).
type Profile string

// Profiles.
const (
	ProfileNone       Profile = ""
	ProfileRestricted Profile = "restricted"
	ProfileStandard   Profile = "standard"
	ProfileTrusted    Profile = "trusted"
)

// Terminal classifies a terminal call by its command screening.
type Terminal uint8

// Terminal classes.
const (
	TerminalNone      Terminal = iota // not a terminal call
	TerminalSafe                      // every command known safe (screen: allow)
	TerminalDangerous                 // not known safe (screen: confirm)
)

// profileTable is Agenthood's "Permission Profiles and Tools" table:
// restricted / standard / trusted. Catastrophic commands never get here:
// screening blocks them in every profile.
var profileTable = map[string][3]armory.Permission{
	"file_read":          {armory.PermAuto, armory.PermAuto, armory.PermAuto},
	"file_write":         {armory.PermDeny, armory.PermConfirm, armory.PermAuto},
	"file_delete":        {armory.PermDeny, armory.PermConfirm, armory.PermConfirm},
	"terminal_safe":      {armory.PermDeny, armory.PermAuto, armory.PermAuto},
	"terminal_dangerous": {armory.PermDeny, armory.PermConfirm, armory.PermConfirm},
	"git":                {armory.PermDeny, armory.PermConfirm, armory.PermConfirm},
	"web":                {armory.PermAuto, armory.PermAuto, armory.PermAuto},
	"mcp":                {armory.PermDeny, armory.PermAuto, armory.PermAuto},
}

// ProfileLevel returns the profile's level for a tool of category cat, and
// whether the profile has a rule for it (Agenthood names no rule for agent,
// system and other tools: those fall through to the world default).
func ProfileLevel(p Profile, cat armory.Category, term Terminal) (armory.Permission, bool) {
	var col int
	switch p {
	case ProfileRestricted:
		col = 0
	case ProfileStandard:
		col = 1
	case ProfileTrusted:
		col = 2
	default:
		return 0, false
	}
	key := string(cat)
	if cat == armory.CatTerminal {
		key = "terminal_dangerous"
		if term == TerminalSafe {
			key = "terminal_safe"
		}
	}
	row, ok := profileTable[key]
	if !ok {
		return 0, false
	}
	return row[col], true
}

// matchRule returns the most specific rule covering tool (the exact name
// beats a family; a longer family beats a shorter one).
func matchRule(rules []Rule, tool string) (Rule, bool) {
	best, found := Rule{}, false
	for _, r := range rules {
		if armory.InFamily(tool, r.Tool) && (!found || len(r.Tool) > len(best.Tool)) {
			best, found = r, true
		}
	}
	return best, found
}

// LevelInput is what EffectiveLevel needs about one call.
type LevelInput struct {
	Tool       string
	Manifest   armory.Manifest
	AgentRules []Rule // config.md "## Permissions"
	Profile    Profile
	ProfileSrc string // where the profile was set, for the reasons
	WorldRules []Rule // world-config.yaml "permissions:"
	Terminal   Terminal
	Bias       []string // names of bias patterns that matched: each raises one step
}

// WithoutSources returns in with no rule positions, for reasons shown to
// a model: config.md is never sent to one, so neither are its file names,
// lines and rule texts.
func (in LevelInput) WithoutSources() LevelInput {
	strip := func(rs []Rule) []Rule {
		out := make([]Rule, len(rs))
		for i, r := range rs {
			out[i] = Rule{Tool: r.Tool, Level: r.Level}
		}
		return out
	}
	in.AgentRules, in.WorldRules, in.ProfileSrc = strip(in.AgentRules), strip(in.WorldRules), ""
	return in
}

// EffectiveLevel decides a call's permission level: the first defined of
// the agent's own rule → the agent's profile rule for the tool's category →
// the world's default → the tool's manifest default. A terminal command the
// screen does not know to be safe is at least confirm. Each matching bias
// pattern then raises the level by one step (deny stays deny). The reasons
// say which source decided.
func EffectiveLevel(in LevelInput) (armory.Permission, []string) {
	var lvl armory.Permission
	var reasons []string
	if r, ok := matchRule(in.AgentRules, in.Tool); ok {
		lvl = r.Level
		reasons = append(reasons, fmt.Sprintf("%s by the agent's permission rule %q%s", lvl, r.Tool, srcOf(r.Src)))
	} else if l, ok := ProfileLevel(in.Profile, in.Manifest.Category, in.Terminal); ok {
		lvl = l
		cat := string(in.Manifest.Category)
		if in.Terminal == TerminalSafe {
			cat = "terminal (safe)"
		} else if in.Terminal == TerminalDangerous {
			cat = "terminal (not known safe)"
		}
		reasons = append(reasons, fmt.Sprintf("%s by profile %s%s for %s tools", lvl, in.Profile, srcOf(in.ProfileSrc), cat))
	} else if r, ok := matchRule(in.WorldRules, in.Tool); ok {
		lvl = r.Level
		reasons = append(reasons, fmt.Sprintf("%s by the world's permission rule %q%s", lvl, r.Tool, srcOf(r.Src)))
	} else {
		lvl = in.Manifest.Permission
		reasons = append(reasons, fmt.Sprintf("%s by the tool's manifest default", lvl))
	}
	if f := in.Manifest.MinPermission; lvl < f {
		lvl = f
		reasons = append(reasons, fmt.Sprintf("raised to %s: the tool's manifest allows no lower level", f))
	}
	if in.Terminal == TerminalDangerous && lvl < armory.PermConfirm {
		lvl = armory.PermConfirm
		reasons = append(reasons, "raised to confirm: the command is not known to be safe")
	}
	for _, b := range in.Bias {
		if lvl < armory.PermDeny {
			lvl++
		}
		reasons = append(reasons, fmt.Sprintf("raised to %s by bias pattern %q", lvl, b))
	}
	return lvl, reasons
}

// Pattern is a veto or bias pattern (akh-medu).
type Pattern struct {
	Name          string
	Veto          bool // else bias
	Capabilities  []armory.Capability
	DangerAtLeast *armory.Danger
	Triggers      []string // lower case
	Explanation   string
}

// Match reports whether p matches a call of a tool with manifest m whose
// arguments, lower-cased, are argsLower: the tool's capabilities overlap,
// or its danger is at or above the threshold, or a trigger word appears in
// the arguments. It says which.
func (p Pattern) Match(m armory.Manifest, argsLower string) (bool, string) {
	for _, c := range p.Capabilities {
		if m.Has(c) {
			return true, fmt.Sprintf("capability %s", c)
		}
	}
	if p.DangerAtLeast != nil && m.Danger >= *p.DangerAtLeast {
		return true, fmt.Sprintf("danger %s ≥ %s", m.Danger, *p.DangerAtLeast)
	}
	for _, t := range p.Triggers {
		if t != "" && strings.Contains(argsLower, t) {
			return true, fmt.Sprintf("trigger word %q in the arguments", t)
		}
	}
	return false, ""
}
