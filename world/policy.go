package world

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/armory-dev/armory"
)

// PermRule sets the permission level of a tool or family.
type PermRule struct {
	Tool  string // tool name or family
	Level armory.Permission
	Line  int
}

// PatternKind is veto (block) or bias (raise the level by one step).
type PatternKind string

// Pattern kinds (akh-medu).
const (
	PatternVeto PatternKind = "veto"
	PatternBias PatternKind = "bias"
)

// Pattern is a veto or bias pattern from world-config.yaml. It matches a
// call when the tool's capabilities overlap Capabilities, or its danger is
// at or above DangerAtLeast, or a trigger word appears (case-insensitive) in
// the arguments.
type Pattern struct {
	Name          string
	Kind          PatternKind
	Capabilities  []armory.Capability
	DangerAtLeast *armory.Danger
	Triggers      []string // lower-cased
	Explanation   string
	Line          int
}

// Limit names of session safety caps (Agenthood).
const (
	LimitStreamEvents     = "stream_events"
	LimitToolInvocations  = "tool_invocations"
	LimitSessionRuntime   = "session_runtime" // seconds in Limits; written as a duration
	LimitEditsPerFile     = "edits_per_file"
	LimitTerminalCommands = "terminal_commands"
	LimitWebSearches      = "web_searches"
)

// LimitNames lists every cap name, in the order of Agenthood's table.
var LimitNames = []string{LimitStreamEvents, LimitToolInvocations, LimitSessionRuntime, LimitEditsPerFile, LimitTerminalCommands, LimitWebSearches}

// FrameworkLimitNames are the "## Limits" keys of config.md that are no
// session cap but belong to the agent framework running the agent; they
// are kept and not warned about.
var FrameworkLimitNames = []string{"max_turns", "max_tokens", "max_steps"}

// Profiles are the permission profiles of "## Permissions" profile:.
var Profiles = []string{"restricted", "standard", "trusted"}

// Limit is one configured cap value (seconds for session_runtime).
type Limit struct {
	Value int64
	Line  int
}

// Policy is the governing part of world-config.yaml: world default
// permission levels, veto/bias patterns, session caps and approval timing.
type Policy struct {
	Permissions     []PermRule
	Patterns        []Pattern
	Limits          map[string]Limit
	ApprovalTimeout time.Duration // how long an approval agent may take (default 60s)
	// SessionIdleTimeout ends an unnamed session (the one of calls that
	// name none) after this long without a call; the next call opens a new
	// one (default 10m, world-config.yaml session_idle_timeout).
	SessionIdleTimeout time.Duration
}

// DefaultSessionIdleTimeout is how long an unnamed session may stay idle
// before the next call opens a new one.
const DefaultSessionIdleTimeout = 10 * time.Minute

// DefaultApprovalTimeout is how long an approval agent has before a request
// goes to the human queue.
const DefaultApprovalTimeout = 60 * time.Second

func (w *World) parsePermissions(r nodeReader, n *yamlNode, what string) []PermRule {
	pairs, _ := r.mapping(n, what)
	var out []PermRule
	for _, p := range pairs {
		if !armory.ValidToolName(p.key) {
			r.ds.Errorf(r.file, p.k.Line, "%s: %q is not a valid tool name or family", what, p.key)
			continue
		}
		s, ok := r.str(p.v, what+"."+p.key)
		if !ok {
			continue
		}
		lvl, err := armory.ParsePermission(s)
		if err != nil {
			r.ds.Errorf(r.file, p.v.Line, "%s.%s: %v", what, p.key, err)
			continue
		}
		out = append(out, PermRule{Tool: p.key, Level: lvl, Line: p.k.Line})
	}
	return out
}

var patternKeys = []string{"name", "kind", "capabilities", "danger_at_least", "triggers", "explanation"}

func (w *World) parsePatterns(r nodeReader, n *yamlNode) {
	if n.Kind != yamlSequence {
		r.ds.Errorf(r.file, n.Line, "patterns must be a list, got %s", kindName(n))
		return
	}
	seen := map[string]int{}
	for _, pn := range n.Content {
		pairs, ok := r.mapping(pn, "pattern")
		if !ok {
			continue
		}
		p := Pattern{Line: pn.Line}
		bad := false
		for _, f := range pairs {
			what := "pattern " + p.Name + ": " + f.key
			switch f.key {
			case "name":
				p.Name, _ = r.str(f.v, "pattern name")
			case "kind":
				s, _ := r.str(f.v, what)
				p.Kind = PatternKind(s)
			case "capabilities":
				p.Capabilities = append(p.Capabilities, parsedList(r, f.v, what, armory.ParseCapability, &bad)...)
			case "danger_at_least":
				if d, ok := parsed(r, f.v, what, armory.ParseDanger, &bad); ok {
					p.DangerAtLeast = &d
				}
			case "triggers":
				items, _ := r.strList(f.v, what)
				for _, it := range items {
					if t := strings.ToLower(strings.TrimSpace(it.Value)); t != "" {
						p.Triggers = append(p.Triggers, t)
					}
				}
			case "explanation":
				p.Explanation, _ = r.str(f.v, what)
			default:
				r.unknownKey(f, "pattern", patternKeys)
			}
		}
		switch {
		case p.Name == "":
			r.ds.Errorf(r.file, pn.Line, "pattern has no name")
			bad = true
		case p.Kind != PatternVeto && p.Kind != PatternBias:
			r.ds.Errorf(r.file, pn.Line, "pattern %q: kind must be veto or bias, got %q", p.Name, p.Kind)
			bad = true
		case len(p.Capabilities) == 0 && p.DangerAtLeast == nil && len(p.Triggers) == 0:
			r.ds.Errorf(r.file, pn.Line, "pattern %q matches nothing: give capabilities, danger_at_least or triggers", p.Name)
			bad = true
		}
		if prev, dup := seen[p.Name]; dup && p.Name != "" {
			r.ds.Errorf(r.file, pn.Line, "duplicate pattern %q (first at line %d)", p.Name, prev)
			bad = true
		}
		seen[p.Name] = pn.Line
		if p.Explanation == "" {
			p.Explanation = "matched pattern " + p.Name
		}
		if !bad {
			w.Policy.Patterns = append(w.Policy.Patterns, p)
		}
	}
}

func (w *World) parseLimits(r nodeReader, n *yamlNode) {
	pairs, _ := r.mapping(n, "limits")
	for _, p := range pairs {
		v, ok := parseLimitValue(r, p.key, p.v)
		if ok {
			w.Policy.Limits[p.key] = Limit{Value: v, Line: p.k.Line}
		}
	}
}

// parseLimitValue parses one cap: a positive whole number, or a duration for
// session_runtime (stored in seconds).
func parseLimitValue(r nodeReader, key string, v *yamlNode) (int64, bool) {
	what := "limits." + key
	switch key {
	case LimitSessionRuntime:
		d, ok := r.duration(v, what, 24*time.Hour)
		return int64(d / time.Second), ok
	case LimitStreamEvents, LimitToolInvocations, LimitEditsPerFile, LimitTerminalCommands, LimitWebSearches:
		return r.integer(v, what, 1, 1<<40)
	}
	r.ds.Errorf(r.file, v.Line, "limits: unknown limit %q%s (known: %s)", key, didYouMean(key, LimitNames), strings.Join(LimitNames, ", "))
	return 0, false
}

// AgentPolicy is an agent's governing config from config.md:
// "## Permissions" (profile and per-tool levels), "## Capabilities"
// (tool_approval scope) and the caps of "## Limits".
type AgentPolicy struct {
	Profile       string // restricted | standard | trusted | "" (none)
	ProfileLine   int
	Permissions   []PermRule
	ApprovalScope []Item // tools or families (a trailing ".*" is accepted) this agent may approve
	Limits        map[string]Limit
	// Network grants the agent's sandboxed processes network access
	// ("## Sandbox" network: true).
	Network bool
	// Roots lists the shared roots ("project:web", "org:acme") the agent
	// may reach with @project:web/ and @org:acme/ paths ("## Roots").
	Roots []Item
	// NetAllow is the agent's network allow-list for the web tools
	// ("## Network"); nil when the section is absent (the world's applies).
	NetAllow *NetAllow
}

// parseAgentPolicy reads the policy sections of a parsed config.md.
func parseAgentPolicy(cfg *AgentConfig, ds *Diagnostics) AgentPolicy {
	pol := AgentPolicy{Limits: map[string]Limit{}}
	if s := cfg.Sections["permissions"]; s != nil {
		for _, kv := range s.KVs {
			if strings.EqualFold(kv.Key, "profile") {
				switch v := strings.ToLower(kv.Value); v {
				case "restricted", "standard", "trusted":
					pol.Profile, pol.ProfileLine = v, kv.Line
				default:
					ds.Errorf(cfg.File, kv.Line, "permissions: profile must be restricted, standard or trusted, got %q%s", kv.Value, didYouMean(kv.Value, Profiles))
				}
				continue
			}
			if !armory.ValidToolName(kv.Key) {
				ds.Errorf(cfg.File, kv.Line, "permissions: %q is not a valid tool name or family", kv.Key)
				continue
			}
			lvl, err := armory.ParsePermission(kv.Value)
			if err != nil {
				ds.Errorf(cfg.File, kv.Line, "permissions: %s: %v%s", kv.Key, err, didYouMean(strings.ToLower(kv.Key), []string{"profile"}))
				continue
			}
			pol.Permissions = append(pol.Permissions, PermRule{Tool: kv.Key, Level: lvl, Line: kv.Line})
		}
		for _, it := range s.Items {
			ds.Errorf(cfg.File, it.Line, "permissions: want \"tool: level\" or \"profile: name\", got \"- %s\"", it.Value)
		}
	}
	if s := cfg.Sections["capabilities"]; s != nil {
		// "- tool_approval: tool.cli, devtools.*" (list item) or "tool_approval: …".
		var entries []KV
		entries = append(entries, s.KVs...)
		for _, it := range s.Items {
			k, v, ok := strings.Cut(it.Value, ":")
			if !ok {
				ds.Errorf(cfg.File, it.Line, "capabilities: want \"- name: params\", got %q", it.Value)
				continue
			}
			entries = append(entries, KV{Key: strings.TrimSpace(k), Value: strings.TrimSpace(v), Line: it.Line})
		}
		for _, kv := range entries {
			if kv.Key != "tool_approval" {
				ds.Warnf(cfg.File, kv.Line, "capabilities: unknown capability %q%s (known: tool_approval); it grants nothing", kv.Key, didYouMean(kv.Key, []string{"tool_approval"}))
				continue
			}
			for _, t := range splitList(kv.Value) {
				t = strings.TrimSuffix(t, ".*")
				if t != "*" && !armory.ValidToolName(t) {
					ds.Errorf(cfg.File, kv.Line, "capabilities: tool_approval: %q is not a tool name or family", t)
					continue
				}
				pol.ApprovalScope = append(pol.ApprovalScope, Item{Value: t, Line: kv.Line})
			}
		}
	}
	if s := cfg.Sections["roots"]; s != nil {
		for _, it := range s.Items {
			v := strings.TrimPrefix(strings.TrimSuffix(it.Value, "/"), "@")
			if !rootKeyRE.MatchString(v) {
				ds.Errorf(cfg.File, it.Line, "roots: %q is not a root name (project:<id> or org:<id>)", it.Value)
				continue
			}
			pol.Roots = append(pol.Roots, Item{Value: v, Line: it.Line})
		}
	}
	if s := cfg.Sections["sandbox"]; s != nil {
		for _, kv := range s.KVs {
			switch strings.ToLower(kv.Key) {
			case "network":
				on, ok := parseBool(kv.Value)
				if !ok {
					ds.Errorf(cfg.File, kv.Line, "sandbox: network must be true or false, got %q", kv.Value)
					continue
				}
				pol.Network = on
			default:
				ds.Errorf(cfg.File, kv.Line, "sandbox: unknown key %q%s (known: network)", kv.Key, didYouMean(kv.Key, []string{"network"}))
			}
		}
	}
	pol.NetAllow = parseNetworkMD(cfg, ds)
	if s := cfg.Sections["limits"]; s != nil {
		for _, kv := range s.KVs {
			if !isCapName(kv.Key) {
				// Other limits (max_turns …) belong to the agent framework;
				// a name that is neither is most likely a typo of a cap.
				if !slices.Contains(FrameworkLimitNames, kv.Key) {
					ds.Warnf(cfg.File, kv.Line, "limits: unknown limit %q%s; it sets no cap (caps: %s; kept for the agent framework: %s)",
						kv.Key, didYouMean(kv.Key, append(slices.Clone(LimitNames), FrameworkLimitNames...)), strings.Join(LimitNames, ", "), strings.Join(FrameworkLimitNames, ", "))
				}
				continue
			}
			var v int64
			var err error
			if kv.Key == LimitSessionRuntime {
				var d time.Duration
				d, err = time.ParseDuration(kv.Value)
				v = int64(d / time.Second)
			} else {
				v, err = strconv.ParseInt(kv.Value, 10, 64)
			}
			if err != nil || v <= 0 {
				ds.Errorf(cfg.File, kv.Line, "limits: %s: want a positive %s, got %q", kv.Key, map[bool]string{true: "duration such as 20m", false: "whole number"}[kv.Key == LimitSessionRuntime], kv.Value)
				continue
			}
			pol.Limits[kv.Key] = Limit{Value: v, Line: kv.Line}
		}
	}
	return pol
}

func isCapName(k string) bool {
	for _, n := range LimitNames {
		if n == k {
			return true
		}
	}
	return false
}

var rootKeyRE = regexp.MustCompile(`^(project|org):[a-z0-9][a-z0-9_-]*$`)

// parseRoots reads "roots:" — {project: {id: folder}, org: {id: folder}};
// folders are relative to the world folder or absolute.
func (w *World) parseRoots(r nodeReader, n *yamlNode) {
	kinds, _ := r.mapping(n, "roots")
	for _, k := range kinds {
		if k.key != "project" && k.key != "org" {
			r.ds.Errorf(r.file, k.k.Line, "roots: %q is not a kind of root (project or org)", k.key)
			continue
		}
		ids, _ := r.mapping(k.v, "roots."+k.key)
		for _, id := range ids {
			key := k.key + ":" + id.key
			if !rootKeyRE.MatchString(key) {
				r.ds.Errorf(r.file, id.k.Line, "roots.%s: %q is not a valid id ([a-z0-9][a-z0-9_-]*)", k.key, id.key)
				continue
			}
			dir, ok := r.str(id.v, "roots."+key)
			if !ok || dir == "" {
				continue
			}
			if !filepath.IsAbs(dir) {
				dir = filepath.Join(w.Dir, dir)
			}
			w.Roots[key] = filepath.Clean(dir)
		}
	}
}
