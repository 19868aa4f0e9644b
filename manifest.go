package armory

import (
	"fmt"
	"slices"
	"strings"
)

// Danger orders how much harm a tool can do: Safe < Cautious < Dangerous < Critical.
type Danger uint8

// Danger levels. The zero value is DangerSafe.
const (
	DangerSafe      Danger = iota // no external effect (pure computation, listing)
	DangerCautious                // reads the outside world (files, network)
	DangerDangerous               // writes or executes
	DangerCritical                // can destroy data or reach beyond the agent
)

var dangerNames = [...]string{"safe", "cautious", "dangerous", "critical"}

func (d Danger) String() string { return levelName(d, dangerNames[:], "danger") }

// ParseDanger parses "safe", "cautious" (or "caution"), "dangerous" (or
// "danger") or "critical".
func ParseDanger(s string) (Danger, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "safe":
		return DangerSafe, nil
	case "cautious", "caution":
		return DangerCautious, nil
	case "dangerous", "danger":
		return DangerDangerous, nil
	case "critical":
		return DangerCritical, nil
	}
	return 0, fmt.Errorf("unknown danger %q (want one of %s)", s, strings.Join(dangerNames[:], ", "))
}

func (d Danger) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

func (d *Danger) UnmarshalText(b []byte) error { return unmarshalLevel(d, b, ParseDanger) }

// Capability names a kind of effect a tool can have.
type Capability string

// Known capabilities.
const (
	CapReadFS          Capability = "read_fs"
	CapWriteFS         Capability = "write_fs"
	CapNetwork         Capability = "network"
	CapProcessExec     Capability = "process_exec"
	CapUserInteraction Capability = "user_interaction"
	CapReadState       Capability = "read_state"  // world state, knowledge, tasks
	CapWriteState      Capability = "write_state" // world state, knowledge, tasks
	CapAgentControl    Capability = "agent_control"
)

// Capabilities lists every known capability, sorted.
func Capabilities() []Capability {
	c := []Capability{CapReadFS, CapWriteFS, CapNetwork, CapProcessExec, CapUserInteraction, CapReadState, CapWriteState, CapAgentControl}
	slices.Sort(c)
	return c
}

// ParseCapability accepts a known capability name.
func ParseCapability(s string) (Capability, error) {
	return parseKnown(s, "capability", Capabilities())
}

// Permission is the level that decides whether a call runs unattended.
// The order Auto < Confirm < AlwaysConfirm < Deny is the order of strictness
// used when a rule raises a level by one step.
type Permission uint8

// Permission levels. The zero value is PermAuto.
const (
	PermAuto          Permission = iota // run
	PermConfirm                         // a human must approve
	PermAlwaysConfirm                   // an approval agent covering the tool decides, else a human
	PermDeny                            // never run
)

var permNames = [...]string{"auto", "confirm", "always_confirm", "deny"}

func (p Permission) String() string { return levelName(p, permNames[:], "permission") }

// ParsePermission parses "auto", "confirm", "always_confirm" or "deny".
func ParsePermission(s string) (Permission, error) {
	for i, n := range permNames {
		if strings.EqualFold(strings.TrimSpace(s), n) {
			return Permission(i), nil
		}
	}
	return 0, fmt.Errorf("unknown permission %q (want one of %s)", s, strings.Join(permNames[:], ", "))
}

func (p Permission) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

func (p *Permission) UnmarshalText(b []byte) error { return unmarshalLevel(p, b, ParsePermission) }

// Category groups tools for permission profiles.
type Category string

// Known categories.
const (
	CatFileRead   Category = "file_read"
	CatFileWrite  Category = "file_write"
	CatFileDelete Category = "file_delete"
	CatTerminal   Category = "terminal"
	CatGit        Category = "git"
	CatWeb        Category = "web"
	CatMCP        Category = "mcp"
	CatAgent      Category = "agent"  // communication and coordination between agents
	CatSystem     Category = "system" // world syscalls, state, skills
	CatOther      Category = "other"
)

// Categories lists every known category, sorted.
func Categories() []Category {
	c := []Category{CatFileRead, CatFileWrite, CatFileDelete, CatTerminal, CatGit, CatWeb, CatMCP, CatAgent, CatSystem, CatOther}
	slices.Sort(c)
	return c
}

// ParseCategory accepts a known category name.
func ParseCategory(s string) (Category, error) { return parseKnown(s, "category", Categories()) }

// Requirement is something a tool needs from the machine to be usable, for
// example a binary on PATH. Whether it is met is decided outside the policy
// (see access.Requirements) so that the policy stays pure.
type Requirement struct {
	// Kind is "binary" (Name must resolve on PATH or be an existing
	// executable path), "sandbox" (a working process sandbox) or
	// RequirementEnv (the environment variable Name is set and not empty:
	// a credential such as an API key; only its presence is checked).
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// RequirementEnv is the Requirement kind of an environment variable that
// must be set.
const RequirementEnv = "env"

func (r Requirement) String() string { return r.Kind + " " + r.Name }

// Manifest says what a tool can do to the world and how it is governed by
// default.
type Manifest struct {
	Danger       Danger       `json:"danger"`
	Capabilities []Capability `json:"capabilities"`
	// Permission is the tool's default level, used when no agent override,
	// profile rule or world default applies.
	Permission Permission    `json:"permission"`
	Category   Category      `json:"category"`
	Requires   []Requirement `json:"requires,omitempty"`
	// NeedsChannel says the tool acts on the conversation a call names
	// (Invocation.Channel: channel.send, syscall.channel.handoff, …): it
	// is registered only for a call that carries a channel context. It is
	// in the catalog (policy and world check know it), but the pipeline's
	// lookup refuses a call of it that names no conversation, and a
	// listing for a caller without one omits it (registry.Caller).
	NeedsChannel bool `json:"needs_channel,omitempty"`
	// MinPermission is the lowest level any rule, profile or override may
	// give the tool: a world that sets it lower gets it raised, with the
	// reason (syscall.skill.install is never below confirm: installing a
	// skill always needs an approval). Zero (auto) sets no floor.
	MinPermission Permission `json:"min_permission,omitempty"`
}

// Has reports whether the manifest lists capability c.
func (m Manifest) Has(c Capability) bool { return slices.Contains(m.Capabilities, c) }

// Annotations are the MCP tool annotations (hints for clients; never grants).
type Annotations struct {
	ReadOnly    bool `json:"readOnlyHint"`
	Destructive bool `json:"destructiveHint"`
	Idempotent  bool `json:"idempotentHint"`
	OpenWorld   bool `json:"openWorldHint"`
}

// Annotations derives MCP annotations from the manifest:
//   - read-only: no write_fs, process_exec, write_state or agent_control
//     capability, and not a write, delete, terminal or git category;
//   - destructive: not read-only and (danger ≥ dangerous or a delete category);
//   - idempotent: read-only;
//   - open-world: network capability, or the web or mcp category.
func (m Manifest) Annotations() Annotations {
	ro := !m.Has(CapWriteFS) && !m.Has(CapProcessExec) && !m.Has(CapWriteState) && !m.Has(CapAgentControl)
	switch m.Category {
	case CatFileWrite, CatFileDelete, CatTerminal, CatGit:
		ro = false
	}
	return Annotations{
		ReadOnly:    ro,
		Destructive: !ro && (m.Danger >= DangerDangerous || m.Category == CatFileDelete),
		Idempotent:  ro,
		OpenWorld:   m.Has(CapNetwork) || m.Category == CatWeb || m.Category == CatMCP,
	}
}

// levelName is the name of level v (Danger, Permission), or "what(v)" for
// a value without one.
func levelName[T ~uint8](v T, names []string, what string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", what, v)
}

// unmarshalLevel sets *dst to the level that parse reads in b, leaving it
// unchanged on error.
func unmarshalLevel[T any](dst *T, b []byte, parse func(string) (T, error)) error {
	v, err := parse(string(b))
	if err == nil {
		*dst = v
	}
	return err
}

// parseKnown accepts s, trimmed and in any case, when it is one of known
// (capabilities, categories); what names the kind in the error.
func parseKnown[S ~string](s, what string, known []S) (S, error) {
	v := S(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(known, v) {
		return v, nil
	}
	return "", fmt.Errorf("unknown %s %q (want one of %s)", what, s, joinStrings(known))
}

func joinStrings[S ~string](xs []S) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
