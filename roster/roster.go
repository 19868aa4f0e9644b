// Package roster loads a world and lists its agents: it gathers every tool the
// world defines (built-ins and toolboxes) into one catalog, checks which
// requirements are met, resolves each agent's access policy and builds each
// agent's registry, once, when the world loads.
//
// Roster is the one place where world files, policy and tools meet; the
// guarded pipeline and every surface (CLI, MCP, REST) work from a Roster.
package roster

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/access"
	"github.com/armory-dev/armory/builtin"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/toolbox"
	"github.com/armory-dev/armory/world"
)

// Options configure Open. The zero value is the production default.
type Options struct {
	// Builtins are the built-in tools (default builtin.All()).
	Builtins []armory.Tool
	// LookPath resolves a binary requirement (default exec.LookPath).
	LookPath func(file string) (string, error)
	// Getenv reads an "env" requirement's variable (default os.Getenv).
	Getenv func(key string) string
	// Sandbox checks a "sandbox" requirement for the world's sandbox
	// setting (default sandbox.Requirement).
	Sandbox func(backend string) error
	// Modules are further tools for the catalog, grouped by the engine
	// module that contributes them: the tools of upstream MCP servers (see
	// package upstream), later the world's services, skills and WASM
	// tools. They are governed like any tool; a name that another tool
	// has is an error of the world. Each group's Source is what
	// `tool list --long`, explain and REST show for its tools.
	Modules []ModuleTools
	// Unavailable says, per tool name or family, why tools that the world
	// declares are not in the catalog: an upstream MCP server that failed
	// to start ("mcp.fs"), a definition withheld until a human accepts it
	// ("mcp.fs.read_file"). Explain gives the reason of the most specific
	// entry covering a tool; a group or toolkit entry naming one is not
	// warned about as undefined.
	Unavailable map[string]string
}

// ModuleTools are the tools one module contributes, with the source they
// show under. Source is a short lower-case name ("upstream") and cannot be
// a source Armory gives its own tools (built-in, toolbox, pipeline, run
// time): those sources decide what runs before admission and which
// network policy a web tool dials under, so a module cannot claim them.
type ModuleTools struct {
	Source string
	Tools  []armory.Tool
}

// Roster is a loaded world with its agents' registries. It is safe for
// concurrent use once Open returns.
type Roster struct {
	World      *world.World
	Catalog    *registry.Catalog
	Privileges *access.Privileges
	Toolkits   *access.Toolkits
	Warnings   world.Diagnostics

	agents map[string]*Agent
	// worldRules are the world's permission rules; srcGroups and srcKits
	// say where its privilege groups and toolkits are defined.
	worldRules         []access.Rule
	srcGroups, srcKits map[string]string
	unmet              map[string][]string // tool → unmet requirements, with why
	box                map[string]string   // toolbox tool full name → toolbox name
	unavail            map[string]string   // Options.Unavailable
	pipe               map[string]*PipelineTool
	// module maps the name of each Options.Modules tool to its source.
	module map[string]string
	// skillTools are the names of the world's skills' tools.
	skillTools map[string]bool

	// added are the agents created at run time (Add), copy-on-write: a
	// reader loads the pointer, Add swaps in a new set under addMu.
	added atomic.Pointer[addedAgents]
	addMu sync.Mutex

	// opts are the options New was given (requirements of run-time tools
	// are checked with them); runTime explains run-time tools (runtime.go).
	opts    Options
	runTime atomic.Pointer[runTimeHolder]
}

// addedAgents are the agents Add added, in the order added.
type addedAgents struct {
	byID  map[string]*Agent
	order []*Agent
}

// Agent is one hosted agent.
type Agent struct {
	ID       string
	Def      *world.Agent
	Access   *access.ToolAccess
	Switches access.Switches
	Registry *registry.Registry
	Env      *armory.AgentEnv
	// listed holds the toolbox tools the agent's "## Toolbox" names.
	listed map[string]bool
	// rules are the agent's "## Permissions" rules; src says where each
	// access rule was written (for the reasons).
	rules      []access.Rule
	profileSrc string
	src        *access.Sources
}

// Open loads the world at dir and builds every agent's registry. A world
// with errors gives a *world.InvalidError listing all of them (including
// duplicate tool names across built-ins and toolboxes); a missing world an
// *armory.Error of kind KindNotFound.
func Open(dir string, opts Options) (*Roster, error) {
	w, err := world.Load(dir)
	if err != nil {
		return nil, err
	}
	return New(w, opts)
}

// New builds every agent's registry for the world w that world.Load
// returned (a caller that needs the world before the roster, to start its
// upstream servers, loads it once and passes it here). Errors as Open's.
func New(w *world.World, opts Options) (*Roster, error) {
	if opts.Builtins == nil {
		opts.Builtins = builtin.All()
	}
	if opts.LookPath == nil {
		opts.LookPath = exec.LookPath
	}
	if opts.Sandbox == nil {
		opts.Sandbox = sandbox.Requirement
	}
	h := &Roster{World: w, agents: map[string]*Agent{}, unmet: map[string][]string{}, box: map[string]string{}, unavail: opts.Unavailable,
		pipe: map[string]*PipelineTool{}, module: map[string]string{}, opts: opts}
	var ds world.Diagnostics

	// Catalog: built-ins and toolbox tools. Report every duplicate at once,
	// at the toolbox line that introduces it.
	tools := slices.Clone(opts.Builtins)
	seen := map[string]string{}
	for _, t := range opts.Builtins {
		seen[t.Spec().Name] = "a built-in tool"
	}
	for _, t := range toolbox.FromWorld(w) {
		tt := t.(*toolbox.Tool)
		def := tt.Def()
		name := def.FullName()
		if prev, dup := seen[name]; dup {
			ds.Errorf(def.File, def.Line, "duplicate tool name %q (also %s)", name, prev)
			continue
		}
		seen[name] = fmt.Sprintf("%s:%d", def.File, def.Line)
		h.box[name] = def.Toolbox
		tools = append(tools, t)
	}
	for _, mt := range opts.Modules {
		if err := checkModuleSource(mt.Source); err != nil {
			return nil, err
		}
		for _, t := range mt.Tools {
			name := t.Spec().Name
			if prev, dup := seen[name]; dup {
				ds.Errorf(world.ConfigFile, 0, "duplicate tool name %q (also %s)", name, prev)
				continue
			}
			seen[name] = "a tool of module " + mt.Source
			h.module[name] = mt.Source
			if tb := toolboxOf(w, name); tb != "" {
				// A toolbox's tool that a module runs (a WASM module): an
				// agent's "## Toolbox" grants it, as the toolbox's others.
				h.box[name] = tb
			}
			tools = append(tools, t)
		}
	}
	// A skill's tools join registries at run time (runtime.go), but their
	// names are the world's: one may not take a catalog tool's name.
	h.skillTools = map[string]bool{}
	for _, sk := range allSkills(w) {
		if sk.MCPServer != nil && w.MCPServer(sk.Name) != nil {
			ds.Errorf(sk.File, 0, "skill %s has an MCP server (%s) named like world-config.yaml mcp_servers.%s: both servers' tools would be mcp.%s.*; rename one", sk.Name, world.SkillMCPFile, sk.Name, sk.Name)
		}
		if sk.Toolbox == nil {
			continue
		}
		for _, def := range sk.Toolbox.Tools {
			name := def.FullName()
			prev, dup := seen[name]
			if !dup && pipelineName(name) {
				// Reserved whether or not some agent gets it now.
				prev, dup = "a tool the pipeline adds", true
			}
			if dup {
				ds.Errorf(def.File, def.Line, "skill %s: tool name %q is taken (%s); a skill's tool cannot take the name of a tool of the world", sk.Name, name, prev)
				continue
			}
			h.skillTools[name] = true
		}
	}
	// Tools the pipeline adds, when some agent gets them.
	for _, pt := range PipelineTools() {
		name := pt.Spec().Name
		if !slices.ContainsFunc(w.Agents, func(a *world.Agent) bool { return pt.Grants(a.Config) }) {
			continue
		}
		if prev, dup := seen[name]; dup {
			ds.Errorf(world.ConfigFile, 0, "duplicate tool name %q (also %s); the pipeline adds it for %s", name, prev, pt.why)
			continue
		}
		seen[name] = "a tool the pipeline adds"
		h.pipe[name] = pt
		tools = append(tools, pt)
	}
	cat, err := registry.NewCatalog(tools)
	if err != nil {
		ds.Errorf(world.ConfigFile, 0, "%s", armory.Message(err))
	}
	h.Catalog = cat

	// Requirements, checked once.
	for _, t := range tools {
		for _, r := range t.Manifest().Requires {
			if why := checkRequirement(r, opts, w.Sandbox); why != "" {
				h.unmet[t.Spec().Name] = append(h.unmet[t.Spec().Name], why)
			}
		}
	}

	// Policy.
	groups := map[string][]string{}
	for _, g := range w.Groups {
		groups[g.Name] = itemValues(g.Tools)
	}
	var known []string
	if cat != nil {
		known = cat.Names()
	}
	if h.Privileges, err = access.NewPrivileges(groups, known...); err != nil {
		ds.Errorf(world.ConfigFile, 0, "%s", armory.Message(err))
	}
	var kits []access.Toolkit
	for _, k := range w.Toolkits {
		kits = append(kits, access.Toolkit{Name: k.Name, Tools: itemValues(k.Tools), Default: k.Default, Policy: k.Policy})
		if cat != nil && cat.Has(k.Name) {
			ds.Errorf(world.ConfigFile, k.Line, "toolkit %q has the name of a tool; \"## Toolkits\" lines could not tell them apart", k.Name)
		}
	}
	h.Toolkits = access.NewToolkits(kits)
	h.srcGroups, h.srcKits = worldSources(w)
	h.worldRules = permRules(world.ConfigFile, w.Policy.Permissions)
	if err := ds.Err(); err != nil {
		return nil, withWarnings(err, w.Diagnostics)
	}
	h.checkNames(&ds)

	for _, a := range w.Agents {
		h.agents[a.ID] = h.buildAgent(a, &ds)
	}
	if err := ds.Err(); err != nil {
		return nil, withWarnings(err, w.Diagnostics)
	}
	h.Warnings = append(slices.Clone(w.Diagnostics), ds.Warnings()...)
	return h, nil
}

// allSkills returns the world's skills and every archetype's.
func allSkills(w *world.World) []*world.Skill {
	var out []*world.Skill
	for _, s := range w.Skills {
		out = append(out, s)
	}
	for _, m := range w.ArchetypeSkills {
		for _, s := range m {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].File < out[j].File })
	return out
}

// toolboxOf returns the toolbox that declares the tool named name, or "".
func toolboxOf(w *world.World, name string) string {
	tb, short, ok := strings.Cut(name, ".")
	if !ok || w.Toolboxes[tb] == nil || w.Toolboxes[tb].Tool(short) == nil {
		return ""
	}
	return tb
}

func withWarnings(err error, warns world.Diagnostics) error {
	if ie, ok := err.(*world.InvalidError); ok {
		ie.Diagnostics = append(ie.Diagnostics, warns...)
	}
	return err
}

func checkRequirement(r armory.Requirement, opts Options, backend string) string {
	lookPath := opts.LookPath
	switch r.Kind {
	case sandbox.RequirementKind:
		if err := opts.Sandbox(backend); err != nil {
			return "no working sandbox: " + err.Error()
		}
		return ""
	case armory.RequirementEnv:
		getenv := opts.Getenv
		if getenv == nil {
			getenv = os.Getenv
		}
		if getenv(r.Name) == "" {
			return fmt.Sprintf("environment variable %s is not set on the server", r.Name)
		}
		return ""
	case "binary":
		if filepath.IsAbs(r.Name) {
			fi, err := os.Stat(r.Name)
			if err != nil {
				return fmt.Sprintf("binary %s does not exist", r.Name)
			}
			if fi.IsDir() || fi.Mode()&0o111 == 0 {
				return fmt.Sprintf("binary %s is not executable", r.Name)
			}
			return ""
		}
		if _, err := lookPath(r.Name); err != nil {
			return fmt.Sprintf("binary %q not found on PATH", r.Name)
		}
		return ""
	}
	return fmt.Sprintf("unknown requirement kind %q", r.Kind)
}

// checkNames warns about names that nothing defines and overrides that name
// public tools.
func (h *Roster) checkNames(ds *world.Diagnostics) {
	defined := func(name string) bool {
		if h.Catalog.Has(name) || access.IsAlwaysOn(name) || h.skillTools[name] {
			return true
		}
		for n := range h.unavail { // declared, though not available now
			if armory.InFamily(n, name) || armory.InFamily(name, n) {
				return true
			}
		}
		for _, n := range h.Catalog.Names() { // a family
			if armory.InFamily(n, name) {
				return true
			}
		}
		return false
	}
	// Names a typo most likely meant: every tool and every family.
	var names []string
	fams := map[string]bool{}
	for _, n := range h.Catalog.Names() {
		names = append(names, n)
		for i := len(n) - 1; i > 0; i-- {
			if n[i] == '.' && !fams[n[:i]] {
				fams[n[:i]] = true
				names = append(names, n[:i])
			}
		}
	}
	hint := func(name string) string { return world.DidYouMean(name, names) }
	w := h.World
	for _, r := range w.Policy.Permissions {
		if !defined(r.Tool) {
			ds.Warnf(world.ConfigFile, r.Line, "permissions: no tool or family %q is defined%s; the rule applies to nothing", r.Tool, hint(r.Tool))
		}
	}
	for _, g := range w.Groups {
		for _, t := range g.Tools {
			if !defined(t.Value) {
				ds.Warnf(world.ConfigFile, t.Line, "tool_privileges.%s: no tool or family %q is defined%s", g.Name, t.Value, hint(t.Value))
			}
		}
	}
	for _, k := range w.Toolkits {
		for _, t := range k.Tools {
			if !defined(t.Value) {
				ds.Warnf(world.ConfigFile, t.Line, "toolkits.%s: no tool %q is defined%s", k.Name, t.Value, hint(t.Value))
			}
		}
	}
	done := map[*world.AgentConfig]bool{}
	for _, a := range w.Agents {
		c := a.Config
		if c == nil || done[c] {
			continue
		}
		done[c] = true
		for _, o := range c.Overrides {
			switch {
			case !defined(o.Value):
				ds.Warnf(c.File, o.Line, "tool access: no tool or family %q is defined%s", o.Value, hint(o.Value))
			case h.Privileges.IsPublic(o.Value) && !h.familyHasPrivileged(o.Value):
				ds.Warnf(c.File, o.Line, "tool access: %q is public (in no privilege group); the override grants nothing", o.Value)
			}
		}
		if c.HasTools && !c.HasToolAccess && h.Privileges.Empty() {
			for _, t := range c.Tools {
				if !defined(t.Value) {
					ds.Warnf(c.File, t.Line, "tools: no tool or family %q is defined%s", t.Value, hint(t.Value))
				}
			}
		}
		for _, s := range c.Toolkits {
			if !h.Toolkits.Has(s.Name) && !defined(s.Name) {
				ds.Warnf(c.File, s.Line, "toolkits: %q is neither a toolkit nor a tool of this world%s", s.Name, world.DidYouMean(s.Name, append(toolkitNames(h.Toolkits), names...)))
			}
		}
		for _, r := range c.Policy.Permissions {
			if !defined(r.Tool) {
				ds.Warnf(c.File, r.Line, "permissions: no tool or family %q is defined%s; the rule applies to nothing", r.Tool, hint(r.Tool))
			}
		}
		for _, t := range c.Policy.ApprovalScope {
			if t.Value != "*" && !defined(t.Value) {
				ds.Warnf(c.File, t.Line, "capabilities: tool_approval: no tool or family %q is defined%s", t.Value, hint(t.Value))
			}
		}
	}
}

// familyHasPrivileged reports whether a family entry covers some privileged
// catalog tool (then an override of it is meaningful).
func (h *Roster) familyHasPrivileged(fam string) bool {
	for _, n := range h.Catalog.Names() {
		if armory.InFamily(n, fam) && !h.Privileges.IsPublic(n) {
			return true
		}
	}
	return false
}

func (h *Roster) buildAgent(a *world.Agent, ds *world.Diagnostics) *Agent {
	c := a.Config
	if c == nil {
		c = &world.AgentConfig{}
	}
	ag := &Agent{
		ID:       a.ID,
		Def:      a,
		Access:   h.Privileges.Choose(c.HasToolAccess, itemValues(c.Groups), itemValues(c.Overrides), itemValues(c.Tools)),
		Switches: access.Switches{},
		Env:      &armory.AgentEnv{ID: a.ID, Workspace: h.World.Workspace(a.ID), Sandbox: armory.SandboxPolicy{Backend: h.World.Sandbox, Network: c.Policy.Network}},
		listed:   map[string]bool{},
		rules:    permRules(c.File, c.Policy.Permissions),
		src:      h.agentSources(c),
		// where "profile:" is set, for the permission reasons
		profileSrc: where(c.File, c.Policy.ProfileLine, "profile: "+c.Policy.Profile),
	}
	for _, s := range c.Toolkits {
		ag.Switches[s.Name] = s.On
	}
	if n := h.netAllow(c); n != nil {
		ag.Env.Net = &armory.NetPolicy{Allow: n.Entries(), From: n.From()}
	}
	for _, r := range c.Policy.Roots {
		if dir, ok := h.World.Roots[r.Value]; ok {
			if ag.Env.Roots == nil {
				ag.Env.Roots = map[string]string{}
			}
			ag.Env.Roots[r.Value] = dir
		}
	}
	for _, ref := range c.Toolboxes {
		tbName := filepath.Base(filepath.Dir(filepath.Clean(ref.Source)))
		if !world.IsToolboxFile(filepath.Base(ref.Source)) {
			tbName = filepath.Base(filepath.Clean(ref.Source))
		}
		for _, t := range ref.Tools {
			ag.listed[tbName+"."+t.Value] = true
		}
	}
	ag.Registry = registry.New(h.Catalog, func(name string) bool { return h.visible(ag, name) })
	return ag
}

// visible is decide without the reasons, for building registries fast. A
// test checks that both agree on every agent and tool of a world.
func (h *Roster) visible(ag *Agent, name string) bool {
	if pt, ok := h.pipe[name]; ok {
		return pt.Grants(ag.Def.Config)
	}
	if !h.Catalog.Has(name) || len(h.unmet[name]) > 0 || !ag.Access.CanAccess(name) {
		return false
	}
	if _, ok := h.box[name]; ok && !ag.listed[name] {
		return false
	}
	return access.IsAlwaysOn(name) || h.Toolkits.Enabled(ag.Switches, name)
}

// decide says whether agent ag sees tool name, with every reason.
func (h *Roster) decide(ag *Agent, name string) access.Decision {
	if pt, ok := h.pipe[name]; ok {
		v, why := pipelineDecision(pt, ag)
		return access.Decision{Visible: v, Reasons: why}
	}
	in := access.Input{Tool: name, Defined: h.Catalog.Has(name), Access: ag.Access, Toolkits: h.Toolkits, Switches: ag.Switches, Unmet: h.unmet[name], Sources: ag.src}
	var extra []string
	if why, ok := h.unavailable(name); ok && !in.Defined {
		in.Withheld = append(in.Withheld, why)
	}
	if tb, ok := h.box[name]; ok && !ag.listed[name] {
		in.Withheld = []string{fmt.Sprintf("toolbox tool: the agent's \"## Toolbox\" does not list %q from toolbox %q", name[len(tb)+1:], tb)}
	} else if ok {
		extra = append(extra, fmt.Sprintf("toolbox tool: listed in the agent's \"## Toolbox\" (toolbox %q)", tb))
	}
	d := access.Decide(in)
	d.Reasons = append(d.Reasons, extra...)
	return d
}

// unavailable returns the reason of the most specific Options.Unavailable
// entry covering name.
func (h *Roster) unavailable(name string) (string, bool) {
	best, why := "", ""
	for n, w := range h.unavail {
		if armory.InFamily(name, n) && len(n) > len(best) {
			best, why = n, w
		}
	}
	return why, best != ""
}

// Agent returns the hosted agent id (of the world or added at run time),
// or an error of kind KindNotFound.
func (h *Roster) Agent(id string) (*Agent, error) {
	if a, ok := h.agents[id]; ok {
		return a, nil
	}
	if ad := h.added.Load(); ad != nil {
		if a, ok := ad.byID[id]; ok {
			return a, nil
		}
	}
	ids := h.World.AgentIDs()
	if ad := h.added.Load(); ad != nil {
		for _, a := range ad.order {
			ids = append(ids, a.ID)
		}
	}
	return nil, armory.E("roster.Agent", armory.KindNotFound, fmt.Sprintf("unknown agent %q (agents: %s)", id, joinOrNone(ids)))
}

// Agents returns the agents in world order, then those added at run time
// in the order they were added.
func (h *Roster) Agents() []*Agent {
	ad := h.added.Load()
	n := len(h.agents)
	if ad != nil {
		n += len(ad.order)
	}
	out := make([]*Agent, 0, n)
	for _, id := range h.World.AgentIDs() {
		out = append(out, h.agents[id])
	}
	if ad != nil {
		out = append(out, ad.order...)
	}
	return out
}

// Add builds the registry of an agent created at run time — def as
// world.World.NewAgent returns it: an archetype's config — exactly as a
// world agent's is built (same catalog, access policy, toolkits, network
// and roots), and hosts it: Agent, Agents and every surface that asks the
// roster find it from then on. The world (World.Agents) is not changed.
// A pipeline tool (approval.list, approval.decide) is in the catalog only
// when a world agent gets it, so an added agent whose archetype no world
// agent shares may lack it (Explain says so).
//
// Errors (*armory.Error): KindConflict for an id the roster hosts
// already; KindInvalid for a def without an id. Safe for concurrent use
// with every reader of the roster.
func (h *Roster) Add(def *world.Agent) (*Agent, error) {
	const op = "roster.Add"
	if def == nil || def.ID == "" {
		return nil, armory.E(op, armory.KindInvalid, "an agent to add needs an id")
	}
	h.addMu.Lock()
	defer h.addMu.Unlock()
	if _, err := h.Agent(def.ID); err == nil {
		return nil, armory.E(op, armory.KindConflict, fmt.Sprintf("agent %q exists already", def.ID))
	}
	var ds world.Diagnostics
	ag := h.buildAgent(def, &ds)
	if err := ds.Err(); err != nil {
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("agent %q", def.ID), err)
	}
	next := &addedAgents{byID: map[string]*Agent{}}
	if old := h.added.Load(); old != nil {
		maps.Copy(next.byID, old.byID)
		next.order = slices.Clone(old.order)
	}
	next.byID[ag.ID] = ag
	next.order = append(next.order, ag)
	h.added.Store(next)
	return ag, nil
}

// Explanation is why a tool is or is not visible to an agent.
type Explanation struct {
	Agent   string   `json:"agent"`
	Tool    string   `json:"tool"`
	Visible bool     `json:"visible"`
	Public  bool     `json:"public"`
	Reasons []string `json:"reasons"`
}

// Explain says whether agent id sees tool, and every reason. An unknown
// agent is a KindNotFound error; an unknown tool is explained, not an error.
func (h *Roster) Explain(id, tool string) (Explanation, error) {
	ag, err := h.Agent(id)
	if err != nil {
		return Explanation{}, err
	}
	var note []string
	if !h.Catalog.Has(tool) && !ag.Registry.Has(tool) {
		if real, ok := h.providerName(ag, tool); ok {
			note = []string{fmt.Sprintf("%q is the provider name (OpenAI/Anthropic) of %s", tool, real)}
			tool = real
		}
	}
	d, runTime := h.explainRunTime(ag, tool)
	if !runTime {
		d = h.decide(ag, tool)
	}
	d.Reasons = append(note, d.Reasons...)
	if why, ok := h.netReason(ag, tool); ok {
		d.Reasons = append(d.Reasons, why)
	}
	// A run-time registration or removal of a catalog tool (a library
	// user's) overrides the load-time view.
	if v := ag.Registry.Has(tool); !runTime && v != d.Visible {
		d.Visible = v
		if v {
			d.Reasons = append(d.Reasons, "registered at run time")
		} else {
			d.Reasons = append(d.Reasons, "unregistered at run time")
		}
	}
	// A visible tool's permission level, before anything about one call
	// (command screening, bias patterns) raises it, with the rule that set it.
	if d.Visible {
		if t, err := ag.Registry.Lookup(tool); err == nil {
			_, why := access.EffectiveLevel(h.LevelInput(ag, tool, t.Manifest()))
			for _, w := range why {
				d.Reasons = append(d.Reasons, "permission: "+w)
			}
			if t.Manifest().NeedsChannel {
				d.Reasons = append(d.Reasons, "channel context: registered only for a call that names its conversation (X-Armory-Channel, the REST \"channel\" field, MCP _meta \"armory.dev/channel\"); listed only to such a caller")
			}
		}
	}
	return Explanation{Agent: id, Tool: tool, Visible: d.Visible, Public: d.Public, Reasons: d.Reasons}, nil
}

// ToolkitPrompts returns the toolkit policy texts in world order.
func (h *Roster) ToolkitPrompts() []registry.ToolkitPrompt {
	var out []registry.ToolkitPrompt
	for _, k := range h.Toolkits.All() {
		out = append(out, registry.ToolkitPrompt{Toolkit: k.Name, Tools: k.Tools, Text: k.Policy})
	}
	return out
}

// Briefing renders agent ag's <tools> block.
func (h *Roster) Briefing(ag *Agent) string {
	return registry.Briefing(ag.Registry.Specs(), h.ToolkitPrompts())
}

// AccessSummary is what `armory access show` prints.
type AccessSummary struct {
	Agent             string   `json:"agent"`
	Mode              string   `json:"mode"`
	Groups            []string `json:"groups"`
	Overrides         []string `json:"overrides"`
	GrantedPrivileged []string `json:"granted_privileged"`
	LegacyTools       []string `json:"legacy_tools,omitempty"`
	// Tools are every tool the agent sees, sorted (the registry: the same
	// list as tool list, REST and MCP tools/list).
	Tools []string `json:"tools"`
	// PipelineTools are those of Tools the pipeline adds (approval.list,
	// approval.decide for approval agents).
	PipelineTools []string `json:"pipeline_tools"`
}

// AccessSummary summarises agent ag's access policy.
func (h *Roster) AccessSummary(ag *Agent) AccessSummary {
	s := AccessSummary{
		Agent:             ag.ID,
		Mode:              string(ag.Access.Mode()),
		Groups:            nonNil(ag.Access.Groups()),
		Overrides:         nonNil(ag.Access.Overrides()),
		GrantedPrivileged: nonNil(ag.Access.GrantedPrivileged(h.Catalog.Names())),
		LegacyTools:       ag.Access.LegacyTools(),
		Tools:             []string{},
		PipelineTools:     []string{},
	}
	for _, sp := range ag.Registry.Specs() {
		s.Tools = append(s.Tools, sp.Name)
		if _, ok := h.pipe[sp.Name]; ok {
			s.PipelineTools = append(s.PipelineTools, sp.Name)
		}
	}
	return s
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

func itemValues(items []world.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Value
	}
	return out
}

func joinOrNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	s := slices.Clone(xs)
	sort.Strings(s)
	out := ""
	for i, x := range s {
		if i > 0 {
			out += ", "
		}
		out += x
	}
	return out
}

func toolkitNames(t *access.Toolkits) []string {
	var out []string
	for _, k := range t.All() {
		out = append(out, k.Name)
	}
	return out
}

// providerName maps a name an OpenAI or Anthropic rendering gave a tool
// back to the tool: one of the agent's registry, else one of the catalog
// (an explanation may be about a tool the agent does not see).
func (h *Roster) providerName(ag *Agent, name string) (string, bool) {
	if real, ok := ag.Registry.Resolve(name); ok {
		return real, true
	}
	found := ""
	for _, n := range h.Catalog.Names() {
		if registry.APIName(n) == name {
			if found != "" {
				return "", false // two tools render to one name
			}
			found = n
		}
	}
	return found, found != ""
}

// netAllow is the network allow-list that applies to an agent with config
// c: its "## Network", else the world's "network:", else nil.
func (h *Roster) netAllow(c *world.AgentConfig) *world.NetAllow {
	if c != nil && c.Policy.NetAllow != nil {
		return c.Policy.NetAllow
	}
	return h.World.Network
}

// netReason says which network policy a built-in web tool of the agent
// dials under.
func (h *Roster) netReason(ag *Agent, tool string) (string, bool) {
	t, ok := h.Catalog.Lookup(tool)
	if !ok || h.Source(ag, tool) != SourceBuiltin || !t.Manifest().Has(armory.CapNetwork) {
		return "", false
	}
	n := ag.Env.Net
	if n == nil {
		return "network: the default policy: public addresses only; private, loopback, link-local and cloud-metadata addresses are refused (no network allow-list in world-config.yaml or the agent's \"## Network\")", true
	}
	if len(n.Allow) == 0 {
		return fmt.Sprintf("network: the allow-list at %s is empty: the tool reaches no destination", n.From), true
	}
	return fmt.Sprintf("network: only the allow-list at %s: %s (a name never opens a private, loopback, link-local or metadata address; an address or range entry does)", n.From, strings.Join(n.Allow, ", ")), true
}
