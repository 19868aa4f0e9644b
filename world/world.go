// Package world loads and validates a world folder into plain structs.
//
// A world is a folder:
//
//	world-config.yaml            name, agents, toolbox allow-list, tool_privileges, toolkits
//	tools.md                     optional prose about tools, kept for prompts
//	archetype/<arch>/config.md   per-agent machine-readable config (never sent to a model)
//	archetype/<arch>/agent.md    optional how-to prose for prompts
//	toolbox/<name>/toolbox.yaml  toolbox (external CLI tools)
//
// Load collects every problem rather than stopping at the first; each is
// reported as file:line: message. Load reads files only; it runs nothing and
// decides no access (see package access).
package world

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/armory-dev/armory"
)

// ConfigFile is the name of the world's main file.
const ConfigFile = "world-config.yaml"

// World is a loaded world folder.
type World struct {
	Dir  string // absolute path of the world folder
	Name string

	Agents []*Agent // in file order

	// ToolboxAllow is the world's toolbox allow-list ("toolboxes:").
	ToolboxAllow []Item
	// Toolboxes holds the allowed toolboxes found under toolbox/, by name.
	Toolboxes map[string]*Toolbox

	// Skills are the world's skill packs (skills/<name>/), by name;
	// ArchetypeSkills an archetype's own (archetype/<arch>/skills/<name>/),
	// by archetype then name. See skill.go.
	Skills          map[string]*Skill
	ArchetypeSkills map[string]map[string]*Skill

	Groups   []Group   // tool_privileges, in file order
	Toolkits []Toolkit // toolkits, in file order

	// WorkspaceRoot is the absolute folder under which each agent gets its
	// workspace, <WorkspaceRoot>/<agent id>. Default <Dir>/workspaces.
	WorkspaceRoot string

	// Roots are shared folders agents may be granted ("## Roots" in
	// config.md), keyed "project:<id>" or "org:<id>", absolute paths.
	Roots map[string]string

	// Sandbox is the world's sandbox backend for agents' processes: "" (the
	// best available), "bwrap", "landlock" or "none" (explicitly unsandboxed).
	Sandbox string

	// MCPServers are the upstream MCP servers ("mcp_servers:"), in file
	// order; see mcpservers.go.
	MCPServers []MCPServer

	// MCPSessions bounds the MCP sessions armory serve keeps open
	// ("mcp_sessions:"); zero fields leave the server's defaults.
	MCPSessions MCPSessionLimits
	// Network is the world's network allow-list for the web tools
	// ("network: allow:"); nil when not set (the default policy).
	Network *NetAllow

	// Durability is the audit store's durability mode ("durability:"):
	// "" or DurabilityStrict (the default) or DurabilityBatched;
	// DurabilityWindow ("durability_window:") is a batched commit's longest
	// wait for its sync, 0 for the default (docs/storage.md).
	Durability           string
	DurabilityWindow     time.Duration
	durabilityWindowLine int

	// ToolsProse is tools.md, kept for prompts.
	ToolsProse string

	// Policy holds world default permissions, patterns, caps and approval
	// timing.
	Policy Policy

	// Diagnostics holds the warnings found while loading.
	Diagnostics Diagnostics
}

// MCPSessionLimits are the world's MCP session limits ("mcp_sessions:"
// with max_per_token, max_total and idle_timeout). A zero field is unset.
type MCPSessionLimits struct {
	MaxPerToken int           // stateful sessions one token may have open
	MaxTotal    int           // stateful sessions open on a server in all
	IdleTimeout time.Duration // a session with no request this long is closed
}

var mcpSessionKeys = []string{"max_per_token", "max_total", "idle_timeout"}

func (w *World) parseMCPSessions(r nodeReader, n *yamlNode) {
	pairs, _ := r.mapping(n, "mcp_sessions")
	for _, p := range pairs {
		what := "mcp_sessions." + p.key
		switch p.key {
		case "max_per_token":
			if v, ok := r.integer(p.v, what, 1, 1<<20); ok {
				w.MCPSessions.MaxPerToken = int(v)
			}
		case "max_total":
			if v, ok := r.integer(p.v, what, 1, 1<<20); ok {
				w.MCPSessions.MaxTotal = int(v)
			}
		case "idle_timeout":
			if d, ok := r.duration(p.v, what, 24*time.Hour); ok {
				w.MCPSessions.IdleTimeout = d
			}
		default:
			r.unknownKey(p, "mcp_sessions", mcpSessionKeys)
		}
	}
}

// Agent is one agent of the world.
type Agent struct {
	ID        string
	Archetype string
	Line      int // line in world-config.yaml
	Config    *AgentConfig
	Prose     string // agent.md
}

// Group is a privilege group: a name and the tools or families it holds.
type Group struct {
	Name  string
	Line  int
	Tools []Item
}

// Toolkit is a bundle of tools with one switch (seajelly toolkits).
type Toolkit struct {
	Name        string
	Line        int
	Tools       []Item
	Default     bool   // members' default when an agent says nothing
	Policy      string // prompt text shown when a member is visible
	Description string
}

// Agent returns the agent with id, or nil.
func (w *World) Agent(id string) *Agent {
	return named(w.Agents, id, func(a *Agent) string { return a.ID })
}

// AgentIDs returns the ids of every agent in file order.
func (w *World) AgentIDs() []string {
	return names(w.Agents, func(a *Agent) string { return a.ID })
}

// Workspace returns the absolute workspace folder of agent id.
func (w *World) Workspace(id string) string { return filepath.Join(w.WorkspaceRoot, id) }

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// Limits of a world.
const (
	maxAgents    = 100_000
	maxProseSize = 1 << 20
)

var worldKeys = []string{"name", "agents", "toolboxes", "tool_privileges", "toolkits", "workspace_root", "permissions", "patterns", "limits", "approval_timeout", "session_idle_timeout", "sandbox", "roots", "mcp_servers", "mcp_sessions", "network", "durability", "durability_window"}

// Load reads the world folder dir. On success the returned World carries the
// warnings in Diagnostics. When the world has errors Load returns a nil
// World and an *InvalidError holding every error and warning found; its
// Unwrap is an *armory.Error of kind KindInvalid. A missing folder or
// world-config.yaml is an *armory.Error of kind KindNotFound.
func Load(dir string) (*World, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, armory.E("world.Load", armory.KindInvalid, "bad world folder "+dir, err)
	}
	data, err := ReadLimited(filepath.Join(abs, ConfigFile), maxYAMLSize)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, armory.E("world.Load", armory.KindNotFound, fmt.Sprintf("no %s in %s (create one with: armory init %s)", ConfigFile, abs, dir))
		}
		return nil, armory.E("world.Load", armory.KindInvalid, "cannot read "+ConfigFile, err)
	}
	var ds Diagnostics
	w := &World{Dir: abs, Toolboxes: map[string]*Toolbox{}, WorkspaceRoot: filepath.Join(abs, "workspaces"), Roots: map[string]string{},
		Policy: Policy{Limits: map[string]Limit{}, ApprovalTimeout: DefaultApprovalTimeout, SessionIdleTimeout: DefaultSessionIdleTimeout}}
	if w.parseConfig(data, &ds) {
		// (A config that is not YAML has no allow-list: every toolbox
		// would be warned about as left out of it.)
		w.loadToolboxes(&ds)
	}
	w.loadSkills(&ds)
	w.loadAgents(&ds)
	w.checkAgentSkills(&ds)
	if b, err := ReadLimited(filepath.Join(abs, "tools.md"), maxProseSize); err == nil {
		w.ToolsProse = string(b)
	} else if !errors.Is(err, fs.ErrNotExist) {
		ds.Errorf("tools.md", 0, "%v", err)
	}
	if err := ds.Err(); err != nil {
		var ie *InvalidError
		errors.As(err, &ie)
		ie.Diagnostics = append(ds.Errors(), ds.Warnings()...)
		return nil, ie
	}
	w.Diagnostics = ds.Warnings()
	return w, nil
}

// parseConfig reads world-config.yaml into w; false when it is not YAML
// at all (the error is in ds).
func (w *World) parseConfig(data []byte, ds *Diagnostics) bool {
	r := nodeReader{file: ConfigFile, ds: ds}
	root := parseYAML(ConfigFile, data, ds)
	if root == nil {
		return false
	}
	pairs, _ := r.mapping(root, "world-config.yaml")
	for _, p := range pairs {
		switch p.key {
		case "name":
			w.Name, _ = r.str(p.v, "name")
		case "agents":
			w.parseAgents(r, p.v)
		case "toolboxes":
			items, _ := r.strList(p.v, "toolboxes")
			seen := map[string]int{}
			for _, it := range items {
				if !nameRE.MatchString(it.Value) {
					ds.Errorf(ConfigFile, it.Line, "toolboxes: %q is not a valid toolbox name ([a-z0-9][a-z0-9_-]*)", it.Value)
					continue
				}
				if prev, dup := seen[it.Value]; dup {
					ds.Warnf(ConfigFile, it.Line, "toolboxes: %q listed twice (first at line %d)", it.Value, prev)
					continue
				}
				seen[it.Value] = it.Line
				w.ToolboxAllow = append(w.ToolboxAllow, it)
			}
		case "tool_privileges":
			gp, _ := r.mapping(p.v, "tool_privileges")
			for _, g := range gp {
				if !nameRE.MatchString(g.key) {
					ds.Errorf(ConfigFile, g.k.Line, "tool_privileges: %q is not a valid group name ([a-z0-9][a-z0-9_-]*)", g.key)
					continue
				}
				items, _ := r.strList(g.v, "tool_privileges."+g.key)
				w.Groups = append(w.Groups, Group{Name: g.key, Line: g.k.Line, Tools: checkToolNames(r, items, "tool_privileges."+g.key)})
			}
		case "toolkits":
			w.parseToolkits(r, p.v)
		case "permissions":
			w.Policy.Permissions = w.parsePermissions(r, p.v, "permissions")
		case "patterns":
			w.parsePatterns(r, p.v)
		case "limits":
			w.parseLimits(r, p.v)
		case "approval_timeout":
			if d, ok := r.duration(p.v, "approval_timeout", time.Hour); ok {
				w.Policy.ApprovalTimeout = d
			}
		case "session_idle_timeout":
			if d, ok := r.duration(p.v, "session_idle_timeout", 24*time.Hour); ok {
				w.Policy.SessionIdleTimeout = d
			}
		case "roots":
			w.parseRoots(r, p.v)
		case "mcp_servers":
			w.parseMCPServers(r, p.v)
		case "mcp_sessions":
			w.parseMCPSessions(r, p.v)
		case "network":
			w.Network = parseNetworkYAML(r, p)
		case "durability":
			w.parseDurability(r, p)
		case "durability_window":
			w.parseDurabilityWindow(r, p)
		case "sandbox":
			if v, ok := r.str(p.v, "sandbox"); ok {
				switch v {
				case "auto", "":
				case "bwrap", "landlock", "none":
					w.Sandbox = v
				default:
					ds.Errorf(ConfigFile, p.v.Line, "sandbox must be auto, bwrap, landlock or none, got %q", v)
				}
			}
		case "workspace_root":
			if s, ok := r.str(p.v, "workspace_root"); ok {
				if filepath.IsAbs(s) {
					w.WorkspaceRoot = filepath.Clean(s)
				} else {
					w.WorkspaceRoot = filepath.Join(w.Dir, s)
				}
			}
		default:
			r.unknownKey(p, ConfigFile, worldKeys)
		}
	}
	w.checkDurability(ds)
	if w.Name == "" {
		ds.Errorf(ConfigFile, root.Line, "name is missing")
	}
	if len(w.Agents) == 0 && !ds.hasErrorAt(ConfigFile) {
		ds.Warnf(ConfigFile, root.Line, "the world has no agents")
	}
	return true
}

func (ds Diagnostics) hasErrorAt(file string) bool {
	for _, d := range ds {
		if d.File == file && d.Severity == SevError {
			return true
		}
	}
	return false
}

func checkToolNames(r nodeReader, items []Item, what string) []Item {
	out := items[:0:0]
	for _, it := range items {
		if !armory.ValidToolName(it.Value) {
			r.ds.Errorf(r.file, it.Line, "%s: %q is not a valid tool name (dot-separated lower-case segments such as workspace.read)", what, it.Value)
			continue
		}
		out = append(out, it)
	}
	return out
}

func (w *World) parseAgents(r nodeReader, n *yamlNode) {
	if n.Kind != yamlSequence {
		r.ds.Errorf(r.file, n.Line, "agents must be a list, got %s", kindName(n))
		return
	}
	if len(n.Content) > maxAgents {
		r.ds.Errorf(r.file, n.Line, "agents: %d agents; the limit is %d", len(n.Content), maxAgents)
		return
	}
	seen := map[string]int{}
	for _, an := range n.Content {
		pairs, ok := r.mapping(an, "agent")
		if !ok {
			continue
		}
		a := &Agent{Line: an.Line}
		for _, p := range pairs {
			switch p.key {
			case "id":
				a.ID, _ = r.str(p.v, "agent id")
			case "archetype":
				a.Archetype, _ = r.str(p.v, "agent archetype")
			default:
				r.unknownKey(p, "agent", []string{"id", "archetype"})
			}
		}
		switch {
		case a.ID == "":
			r.ds.Errorf(r.file, an.Line, "agent has no id")
			continue
		case !armory.ValidAgentID(a.ID):
			r.ds.Errorf(r.file, an.Line, "agent id %q is not valid ([a-z0-9][a-z0-9_-]*, at most 64 characters)", a.ID)
			continue
		}
		if prev, dup := seen[a.ID]; dup {
			r.ds.Errorf(r.file, an.Line, "duplicate agent id %q (first at line %d)", a.ID, prev)
			continue
		}
		seen[a.ID] = an.Line
		if a.Archetype == "" {
			a.Archetype = a.ID
		}
		if !nameRE.MatchString(a.Archetype) {
			r.ds.Errorf(r.file, an.Line, "agent %q: archetype %q is not a valid folder name ([a-z0-9][a-z0-9_-]*)", a.ID, a.Archetype)
			continue
		}
		w.Agents = append(w.Agents, a)
	}
}

func (w *World) parseToolkits(r nodeReader, n *yamlNode) {
	pairs, _ := r.mapping(n, "toolkits")
	for _, p := range pairs {
		if !nameRE.MatchString(p.key) {
			r.ds.Errorf(r.file, p.k.Line, "toolkits: %q is not a valid toolkit name ([a-z0-9][a-z0-9_-]*)", p.key)
			continue
		}
		tk := Toolkit{Name: p.key, Line: p.k.Line}
		fields, _ := r.mapping(p.v, "toolkit "+p.key)
		hasTools := false
		for _, f := range fields {
			switch f.key {
			case "tools":
				items, _ := r.strList(f.v, "toolkits."+p.key+".tools")
				tk.Tools = checkToolNames(r, items, "toolkits."+p.key+".tools")
				hasTools = true
			case "default":
				tk.Default, _ = r.boolean(f.v, "toolkits."+p.key+".default")
			case "policy":
				tk.Policy, _ = r.str(f.v, "toolkits."+p.key+".policy")
				tk.Policy = strings.TrimSpace(tk.Policy)
			case "description":
				tk.Description, _ = r.str(f.v, "toolkits."+p.key+".description")
			default:
				r.unknownKey(f, "toolkit "+p.key, []string{"tools", "default", "policy", "description"})
			}
		}
		if !hasTools || len(tk.Tools) == 0 {
			r.ds.Warnf(r.file, p.k.Line, "toolkit %q has no tools", p.key)
		}
		w.Toolkits = append(w.Toolkits, tk)
	}
}

// loadAgents reads each agent's archetype folder and checks its config
// against the world: groups exist, toolboxes are allowed.
func (w *World) loadAgents(ds *Diagnostics) {
	groups := map[string]bool{}
	var groupNames []string
	for _, g := range w.Groups {
		groups[g.Name] = true
		groupNames = append(groupNames, g.Name)
	}
	sort.Strings(groupNames)
	parsed := map[string]*AgentConfig{} // archetypes are shared: parse once
	prose := map[string]string{}
	for _, a := range w.Agents {
		dir := filepath.Join(w.Dir, "archetype", a.Archetype)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			ds.Errorf(ConfigFile, a.Line, "agent %q: unknown archetype %q (no folder archetype/%s/; archetypes here: %s)", a.ID, a.Archetype, a.Archetype, listDirs(filepath.Join(w.Dir, "archetype")))
			continue
		}
		if cfg, ok := parsed[a.Archetype]; ok {
			a.Config, a.Prose = cfg, prose[a.Archetype]
			continue
		}
		rel := filepath.ToSlash(filepath.Join("archetype", a.Archetype, "config.md"))
		data, err := ReadLimited(filepath.Join(dir, "config.md"), maxConfigMDSize)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			ds.Warnf(rel, 0, "agent %q has no config.md: it gets only the always-on tools", a.ID)
			data = nil
		case err != nil:
			ds.Errorf(rel, 0, "%v", err)
			continue
		}
		cfg := ParseConfigMD(rel, data, ds)
		w.checkAgentConfig(cfg, groups, groupNames, ds)
		parsed[a.Archetype] = cfg
		a.Config = cfg
		if b, err := ReadLimited(filepath.Join(dir, "agent.md"), maxProseSize); err == nil {
			a.Prose = string(b)
		} else if !errors.Is(err, fs.ErrNotExist) {
			ds.Errorf(filepath.ToSlash(filepath.Join("archetype", a.Archetype, "agent.md")), 0, "%v", err)
		}
		prose[a.Archetype] = a.Prose
	}
}

func (w *World) checkAgentConfig(cfg *AgentConfig, groups map[string]bool, groupNames []string, ds *Diagnostics) {
	for _, g := range cfg.Groups {
		if !groups[g.Value] {
			have := "none are defined"
			if len(groupNames) > 0 {
				have = "groups: " + strings.Join(groupNames, ", ")
			}
			ds.Errorf(cfg.File, g.Line, "unknown privilege group %q (%s)", g.Value, have)
		}
	}
	for _, o := range cfg.Overrides {
		if !armory.ValidToolName(o.Value) {
			ds.Errorf(cfg.File, o.Line, "tool access: %q is not a valid tool name", o.Value)
		}
	}
	for _, t := range cfg.Tools {
		if !armory.ValidToolName(t.Value) {
			ds.Errorf(cfg.File, t.Line, "tools: %q is not a valid tool name", t.Value)
		}
	}
	if cfg.HasTools && (cfg.HasToolAccess || len(w.Groups) > 0) {
		why := "it has a \"## Tool Access\" section"
		if !cfg.HasToolAccess {
			why = "the world defines tool_privileges"
		}
		ds.Warnf(cfg.File, cfg.Tools0Line(), "the \"## Tools\" list is ignored because %s (access mode)", why)
	}
	for i := range cfg.Toolboxes {
		ref := &cfg.Toolboxes[i]
		name, ok := w.toolboxForSource(ref.Source)
		if !ok {
			ds.Errorf(cfg.File, ref.Line, "toolbox source %q must be toolbox/<name>/toolbox.yaml (or toolbox.json) inside the world", ref.Source)
			continue
		}
		if !w.allowed(name) {
			ds.Errorf(cfg.File, ref.Line, "toolbox %q is not in the world's toolbox allow-list (toolboxes: [%s])", name, strings.Join(itemValues(w.ToolboxAllow), ", "))
			continue
		}
		tb := w.Toolboxes[name]
		if tb == nil {
			continue // reported where the allow-list names it
		}
		for _, t := range ref.Tools {
			if tb.Tool(t.Value) == nil {
				ds.Warnf(cfg.File, t.Line, "toolbox %q defines no tool %q (it has: %s)", name, t.Value, strings.Join(tb.ToolNames(), ", "))
			}
		}
	}
	for _, r := range cfg.Policy.Roots {
		if _, ok := w.Roots[r.Value]; !ok {
			ds.Errorf(cfg.File, r.Line, "roots: the world defines no root %q (world-config.yaml roots: %s)", r.Value, strings.Join(sortedKeys(w.Roots), ", "))
		}
	}
	if cfg.Toolkits != nil {
		seen := map[string]int{}
		for _, s := range cfg.Toolkits {
			if prev, dup := seen[s.Name]; dup {
				ds.Errorf(cfg.File, s.Line, "toolkits: %q set twice (first at line %d)", s.Name, prev)
			}
			seen[s.Name] = s.Line
		}
	}
}

// Tools0Line is the line of the first "## Tools" entry (or 0).
func (c *AgentConfig) Tools0Line() int {
	if len(c.Tools) > 0 {
		return c.Tools[0].Line
	}
	return 0
}

// toolboxForSource maps "toolbox/<name>/toolbox.yaml" (or "toolbox/<name>")
// to name.
func (w *World) toolboxForSource(src string) (string, bool) {
	s := filepath.ToSlash(filepath.Clean(src))
	s = strings.TrimPrefix(s, "./")
	parts := strings.Split(s, "/")
	if len(parts) == 3 && parts[0] == "toolbox" && IsToolboxFile(parts[2]) && nameRE.MatchString(parts[1]) {
		return parts[1], true
	}
	if len(parts) == 2 && parts[0] == "toolbox" && nameRE.MatchString(parts[1]) {
		return parts[1], true
	}
	return "", false
}

func (w *World) allowed(name string) bool {
	return slices.ContainsFunc(w.ToolboxAllow, func(it Item) bool { return it.Value == name })
}

func itemValues(items []Item) []string {
	return names(items, func(it Item) string { return it.Value })
}

// names returns name(x) for each of xs, in order.
func names[T any](xs []T, name func(T) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = name(x)
	}
	return out
}

// named returns the first of xs whose name is n, or nil.
func named[T any](xs []*T, n string, name func(*T) string) *T {
	for _, x := range xs {
		if name(x) == n {
			return x
		}
	}
	return nil
}

func listDirs(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "none"
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ReadLimited reads a regular file of at most limit bytes (the world's
// files, a WASM module). It opens
// non-blocking so that a FIFO in place of a file cannot hang the loader.
func ReadLimited(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than the limit of %d bytes", filepath.Base(path), limit)
	}
	return b, nil
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
