package skills

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/toolbox"
	"github.com/armory-dev/armory/upstream"
	"github.com/armory-dev/armory/world"
)

// Name is the module's name and the source its syscall tools show under.
const Name = "skills"

// EventSkill is the kind of event the module publishes when an agent's
// skill state changes (Ref "agent:<id>") or a skill pack joins or leaves
// the world (Ref "pack:<name>"). A peer process reconciles what it names.
const EventSkill = "skill"

// Defaults.
const (
	// DefaultStateTTL is how long a process trusts its view of one agent's
	// skill state before a call of a skill's tool reads it again.
	DefaultStateTTL = 2 * time.Second
	// DefaultResync is how often `armory serve` reconciles every agent's
	// skill state with the store, in case an event was lost.
	DefaultResync = 30 * time.Second
	// MaxReadBytes bounds what syscall.skill.read returns of a file.
	MaxReadBytes = 64 << 10
)

// WasmRuntime builds a skill's WebAssembly tools (package wasm's Runtime).
type WasmRuntime interface {
	Tool(def *world.ToolboxTool) (armory.Tool, error)
}

// Options configure the module. The zero value is the production default.
type Options struct {
	// Wasm builds WASM tools; nil leaves a skill's WASM tools unavailable
	// (with the reason). Set by the command that wires the wasm module.
	Wasm func() WasmRuntime
	// StateTTL: see DefaultStateTTL.
	StateTTL time.Duration
	// Resync: see DefaultResync.
	Resync time.Duration
	// Builtin are the built-in skill packs that syscall.skill.install
	// {source: builtin} copies into a world (default: the packs shipped
	// in this package).
	Builtin BuiltinPacks
	// fetch bounds installs from archives and folders (tests open the
	// loopback address here).
	fetch fetchOptions
}

// Module is the skills engine module: skill packs, the syscall.skill.*
// tools, per-agent skill state in the store and the agents' registries
// kept in step with it.
type Module struct {
	opts Options

	mu     sync.Mutex
	env    engine.Env
	log    *slog.Logger
	roster *roster.Roster
	// packs are the world's skill packs, world scope under "" and each
	// archetype's under its name; installs and removals change them.
	packs map[string]map[string]*pack
	// held is, per agent, the skills whose tools this process registered
	// and when it last read the agent's state.
	held map[string]*agentView
	// agentMu serialises reconciling one agent.
	agentMu map[string]*sync.Mutex
	// reads numbers the reads of skill state from the store, in the order
	// they begin: a reconcile never applies a view read before one already
	// applied (concurrent changes of one agent end in the latest state).
	reads atomic.Uint64
	unsub []func()
	// started are the MCP servers of skills this process started (mcp.go).
	started []*upstream.Set
}

// pack is one loaded skill pack with its tools.
type pack struct {
	skill *world.Skill
	tools []*Tool
	// unavailable says why a tool of the pack could not be built (a WASM
	// module that is missing). Fixed once the pack is built.
	unavailable map[string]string
	// mcp is the pack's MCP server, started when first needed (mcp.go),
	// or nil.
	mcp *mcpPack
}

// toolsOf returns pack p's tools: its toolbox's and, once started (ctx
// bounds the start), its MCP server's.
func (m *Module) toolsOf(ctx context.Context, p *pack) []*Tool {
	out := append([]*Tool(nil), p.tools...)
	return append(out, m.ensureMCP(ctx, p)...)
}

// toolNames returns the names of the pack's tools this process knows (an
// MCP server's once started), sorted.
func (p *pack) toolNames() []string {
	names := p.skill.Tools()
	if p.mcp != nil {
		tools, _, _ := p.mcp.state()
		for _, t := range tools {
			names = append(names, t.Spec().Name)
		}
		sort.Strings(names)
	}
	return names
}

// unavailableTools returns why tools of the pack are missing: those that
// could not be built, an MCP server's withheld tools, or the server itself
// ("mcp.<skill>") when it failed.
func (p *pack) unavailableTools() map[string]string {
	out := map[string]string{}
	for k, v := range p.unavailable {
		out[k] = v
	}
	if p.mcp != nil {
		_, unav, why := p.mcp.state()
		for k, v := range unav {
			out[k] = v
		}
		if why != "" {
			out["mcp."+p.skill.Name] = why
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// agentView is what this process knows of one agent's skills.
type agentView struct {
	acquired map[string]bool // skills whose tools are registered here
	active   map[string]bool
	readAt   time.Time
	read     uint64 // the number of the read applied (Module.reads)
	// withheld: tool → why the policy keeps it from the agent, for the
	// skills acquired.
	withheld map[string]string
}

// New returns the module.
func New(o Options) *Module {
	if o.StateTTL <= 0 {
		o.StateTTL = DefaultStateTTL
	}
	if o.Resync <= 0 {
		o.Resync = DefaultResync
	}
	if o.Builtin == nil {
		o.Builtin = shippedPacks()
	}
	// o.fetch keeps its zero fields: each use takes the defaults, and a
	// nil Guard lets an install dial under the caller's allow-list.
	return &Module{opts: o, held: map[string]*agentView{}, agentMu: map[string]*sync.Mutex{}}
}

// Name is "skills".
func (*Module) Name() string { return Name }

// Provision loads the world's skill packs and contributes the
// syscall.skill.* tools.
func (m *Module) Provision(_ context.Context, env engine.Env) (engine.Contribution, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.env, m.log = env, env.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.packs = map[string]map[string]*pack{"": {}}
	var warns world.Diagnostics
	for name, s := range env.World.Skills {
		p := m.buildPack(s)
		m.packs[""][name] = p
		warns = append(warns, p.warnings()...)
	}
	for arch, set := range env.World.ArchetypeSkills {
		m.packs[arch] = map[string]*pack{}
		for name, s := range set {
			p := m.buildPack(s)
			m.packs[arch][name] = p
			warns = append(warns, p.warnings()...)
		}
	}
	return engine.Contribution{Tools: m.syscalls(), EventKinds: []string{EventSkill}, Warnings: warns}, nil
}

// warnings are the pack's unavailable tools, as world warnings.
func (p *pack) warnings() world.Diagnostics {
	var ds world.Diagnostics
	names := make([]string, 0, len(p.unavailable))
	for n := range p.unavailable {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		file, line := p.skill.File, 0
		if p.skill.Toolbox != nil {
			if d := p.skill.Toolbox.Tool(strings.TrimPrefix(n, p.skill.Name+".")); d != nil {
				file, line = d.File, d.Line
			}
		}
		ds.Warnf(file, line, "skill %s: tool %s is unavailable: %s", p.skill.Name, n, p.unavailable[n])
	}
	return ds
}

// buildPack builds the tools of skill s.
func (m *Module) buildPack(s *world.Skill) *pack {
	p := &pack{skill: s, unavailable: map[string]string{}}
	if s.MCPServer != nil {
		p.mcp = &mcpPack{}
	}
	if s.Toolbox == nil {
		return p
	}
	for _, def := range s.Toolbox.Tools {
		var inner armory.Tool
		if def.Wasm != nil {
			var rt WasmRuntime
			if m.opts.Wasm != nil {
				rt = m.opts.Wasm()
			}
			if rt == nil {
				p.unavailable[def.FullName()] = "this process runs no WebAssembly runtime"
				continue
			}
			t, err := rt.Tool(def)
			if err != nil {
				p.unavailable[def.FullName()] = armory.Message(err)
				continue
			}
			inner = t
		} else {
			inner = toolbox.New(def)
		}
		p.tools = append(p.tools, &Tool{inner: inner, skill: s.Name, m: m})
	}
	return p
}

// Validate keeps the roster, makes the module the roster's explainer of
// skill tools, and registers, for every agent, the tools of the skills
// the store says it holds — when the command opened the store
// (engine.Env.OpenedStore): a command that only checks the world's files
// opens none, and sees no agent's acquired skills.
func (m *Module) Validate(r *roster.Roster) error {
	m.mu.Lock()
	m.roster = r
	env := m.env
	m.mu.Unlock()
	r.SetRunTimeSource(m)
	if _, ok := env.OpenedStore(); !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.reconcileAll(ctx); err != nil {
		m.log.Warn("skills: reading the agents' skill state failed", "err", err)
	}
	return nil
}

// Start acquires the skills each agent's config.md lists under "##
// Skills" (held from the agent's start) and follows the other processes'
// skill changes (Follow). It runs in `armory serve` only.
func (m *Module) Start(ctx context.Context, rt engine.Runtime) error {
	h := m.rosterOf()
	if h == nil {
		return nil
	}
	for _, ag := range h.Agents() {
		if ag.Def == nil || ag.Def.Config == nil {
			continue
		}
		for _, it := range ag.Def.Config.Skills {
			if _, err := m.acquire(ctx, ag, it.Value); err != nil {
				m.log.Warn("skills: a skill of config.md could not be acquired", "agent", ag.ID, "skill", it.Value, "err", err)
			}
		}
	}
	stop := m.Follow()
	if !rt.Go(func() { <-ctx.Done(); stop() }) {
		stop()
	}
	return nil
}

// Follow keeps this process's registries in step with the other
// processes' skill changes until the returned func is called (or the
// module closes): it reconciles what each peer's skill event names, and
// every Options.Resync in case an event was lost. A long-lived process
// calls it: `armory serve` (through Start) and `armory mcp`, so a
// connected client's tools/list follows an acquire made elsewhere.
// Events wait in a bounded queue; when it is full, the next resync
// catches up.
func (m *Module) Follow() (stop func()) {
	m.mu.Lock()
	env := m.env
	m.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	queue := make(chan pipeline.Event, 256)
	unsub := env.SubscribePeers(func(ev pipeline.Event) {
		if ev.Kind != EventSkill {
			return
		}
		select {
		case queue <- ev:
		default:
		}
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A change another process made after Validate read the state and
		// before the subscription above raised an event nobody here heard:
		// read the state once more now that events are heard.
		if err := m.reconcileAll(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("skills: reading the agents' skill state failed", "err", err)
		}
		t := time.NewTicker(m.opts.Resync)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-queue:
				m.onPeerEvent(ctx, ev)
			case <-t.C:
				m.rescanPacks()
				if err := m.reconcileAll(ctx); err != nil && ctx.Err() == nil {
					m.log.Warn("skills: resync failed", "err", err)
				}
			}
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			unsub()
			cancel()
			<-done
		})
	}
	m.mu.Lock()
	m.unsub = append(m.unsub, stop)
	m.mu.Unlock()
	return stop
}

// Close stops listening to events.
func (m *Module) Close() error {
	m.mu.Lock()
	unsub := m.unsub
	m.unsub = nil
	m.mu.Unlock()
	for _, u := range unsub {
		u()
	}
	return m.closeMCP()
}

// onPeerEvent reconciles what another process's event names.
func (m *Module) onPeerEvent(ctx context.Context, ev pipeline.Event) {
	switch {
	case strings.HasPrefix(ev.Ref, "agent:"):
		h := m.rosterOf()
		if h == nil {
			return
		}
		ag, err := h.Agent(strings.TrimPrefix(ev.Ref, "agent:"))
		if err != nil {
			return
		}
		if err := m.reconcile(ctx, ag); err != nil {
			m.log.Warn("skills: reconcile after a peer's change failed", "agent", ag.ID, "err", err)
		}
	case strings.HasPrefix(ev.Ref, "pack:"):
		m.reloadPack(strings.TrimPrefix(ev.Ref, "pack:"))
		if err := m.reconcileAll(ctx); err != nil {
			m.log.Warn("skills: reconcile after a peer's install failed", "err", err)
		}
	}
}

func (m *Module) rosterOf() *roster.Roster {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.roster
}

// states is the store's Skills role.
func (m *Module) states(ctx context.Context) (store.Skills, error) {
	m.mu.Lock()
	env := m.env
	m.mu.Unlock()
	return env.Store(ctx)
}

// publish raises a skill event (best effort: the store is the truth).
func (m *Module) publish(ref string) {
	m.mu.Lock()
	env := m.env
	m.mu.Unlock()
	if err := env.Publish(pipeline.Event{Kind: EventSkill, Ref: ref}); err != nil {
		m.log.Debug("skills: event not published", "ref", ref, "err", err)
	}
}

// skillFor returns the pack called name that agent ag sees: its
// archetype's own first, then the world's.
func (m *Module) skillFor(ag *roster.Agent, name string) *pack {
	m.mu.Lock()
	defer m.mu.Unlock()
	arch := archetypeOf(ag)
	if p := m.packs[arch][name]; p != nil && arch != "" {
		return p
	}
	return m.packs[""][name]
}

// packsFor returns the packs agent ag sees, sorted by name.
func (m *Module) packsFor(ag *roster.Agent) []*pack {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]*pack{}
	for n, p := range m.packs[""] {
		seen[n] = p
	}
	if arch := archetypeOf(ag); arch != "" {
		for n, p := range m.packs[arch] {
			seen[n] = p
		}
	}
	out := make([]*pack, 0, len(seen))
	for _, p := range seen {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].skill.Name < out[j].skill.Name })
	return out
}

func archetypeOf(ag *roster.Agent) string {
	if ag == nil || ag.Def == nil {
		return ""
	}
	return ag.Def.Archetype
}

// lockAgent serialises changes to one agent's registered skill tools.
func (m *Module) lockAgent(id string) func() {
	m.mu.Lock()
	l := m.agentMu[id]
	if l == nil {
		l = &sync.Mutex{}
		m.agentMu[id] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// reconcileAll reconciles every agent the roster hosts with the store.
func (m *Module) reconcileAll(ctx context.Context) error {
	h := m.rosterOf()
	if h == nil {
		return nil
	}
	ss, err := m.states(ctx)
	if err != nil {
		return err
	}
	read := m.reads.Add(1)
	want := map[string][]*store.SkillState{}
	cursor := ""
	for {
		page, next, err := ss.ListSkillStates(ctx, "", store.Page{Limit: store.MaxPage, Cursor: cursor})
		if err != nil {
			return err
		}
		for _, st := range page {
			want[st.Agent] = append(want[st.Agent], st)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for _, ag := range h.Agents() {
		m.apply(ctx, ag, want[ag.ID], read)
	}
	return nil
}

// reconcile reads agent ag's skill state and brings its registry in step.
func (m *Module) reconcile(ctx context.Context, ag *roster.Agent) error {
	ss, err := m.states(ctx)
	if err != nil {
		return err
	}
	read := m.reads.Add(1)
	states, _, err := ss.ListSkillStates(ctx, ag.ID, store.Page{Limit: store.MaxSkillHolds})
	if err != nil {
		return err
	}
	m.apply(ctx, ag, states, read)
	return nil
}

// apply registers the tools of the skills states says ag has acquired and
// unregisters those of the skills it no longer has. states is read number
// read (Module.reads): older than the view applied already, it is not
// applied (that view was read later, so it is as new or newer).
func (m *Module) apply(ctx context.Context, ag *roster.Agent, states []*store.SkillState, read uint64) {
	unlock := m.lockAgent(ag.ID)
	defer unlock()
	h := m.rosterOf()
	want, active := map[string]bool{}, map[string]bool{}
	for _, st := range states {
		if st.Acquired {
			want[st.Skill] = true
		}
		if st.Active {
			active[st.Skill] = true
		}
	}
	m.mu.Lock()
	v := m.held[ag.ID]
	if v == nil {
		v = &agentView{acquired: map[string]bool{}, withheld: map[string]string{}}
		m.held[ag.ID] = v
	}
	stale := v.read > read
	m.mu.Unlock()
	if stale {
		return
	}
	// Every skill tool the registry holds that no wanted pack provides
	// (dropped, or its pack removed or replaced) goes.
	keep := map[string]*Tool{}
	for name := range want {
		if p := m.skillFor(ag, name); p != nil {
			for _, t := range m.toolsOf(ctx, p) {
				keep[t.Spec().Name] = t
			}
		}
	}
	for _, t := range ag.Registry.RunTimeTools() {
		st, ok := t.(*Tool)
		if !ok {
			continue // another module's or a library user's
		}
		if k := keep[st.Spec().Name]; k != st {
			if err := h.Unregister(ag, st.Spec().Name); err != nil {
				m.log.Debug("skills: unregister", "agent", ag.ID, "tool", st.Spec().Name, "err", err)
			}
		}
	}
	withheld := map[string]string{}
	for name, t := range keep {
		if ag.Registry.RunTime(name) {
			continue
		}
		if _, err := h.Register(ag, t); err != nil {
			withheld[name] = armory.Message(err)
		}
	}
	m.mu.Lock()
	v.acquired, v.active, v.withheld, v.readAt, v.read = want, active, withheld, time.Now(), read
	m.mu.Unlock()
}

// fresh reports whether agent id holds skill, reading the store again
// when this process's view is older than StateTTL.
func (m *Module) fresh(ctx context.Context, ag *roster.Agent, skill string) (bool, error) {
	m.mu.Lock()
	v := m.held[ag.ID]
	stale := v == nil || time.Since(v.readAt) > m.opts.StateTTL
	m.mu.Unlock()
	if stale {
		if err := m.reconcile(ctx, ag); err != nil {
			return false, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v = m.held[ag.ID]
	return v != nil && v.acquired[skill], nil
}

// view returns a copy of what this process knows of agent id's skills.
func (m *Module) view(id string) (acquired, active map[string]bool, withheld map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	acquired, active, withheld = map[string]bool{}, map[string]bool{}, map[string]string{}
	if v := m.held[id]; v != nil {
		for k := range v.acquired {
			acquired[k] = true
		}
		for k := range v.active {
			active[k] = true
		}
		for k, w := range v.withheld {
			withheld[k] = w
		}
	}
	return acquired, active, withheld
}

// About implements roster.RunTimeSource: a skill tool's origin for an
// agent, and whether the agent holds the skill.
func (m *Module) About(ag *roster.Agent, name string) (armory.Tool, []string, bool) {
	skill, rest, ok := strings.Cut(name, ".")
	if !ok {
		return nil, nil, false
	}
	if skill == "mcp" { // an MCP server's skill: mcp.<skill>.<tool>
		if skill, _, ok = strings.Cut(rest, "."); !ok {
			return nil, nil, false
		}
	}
	p := m.skillFor(ag, skill)
	if p == nil {
		return nil, nil, false
	}
	tools := p.tools
	if p.mcp != nil {
		started, _, _ := p.mcp.state()
		tools = append(append([]*Tool(nil), tools...), started...)
	}
	for _, t := range tools {
		if t.Spec().Name != name {
			continue
		}
		where := p.skill.File
		if p.skill.Toolbox != nil {
			if d := p.skill.Toolbox.Tool(strings.TrimPrefix(name, skill+".")); d != nil {
				where = fmt.Sprintf("%s:%d", d.File, d.Line)
			}
		}
		acquired, _, _ := m.view(ag.ID)
		if acquired[skill] {
			return t, []string{fmt.Sprintf("from skill %s (%s): the agent has acquired it", skill, where)}, true
		}
		return t, []string{fmt.Sprintf("from skill %s (%s): the agent has not acquired it; syscall.skill.acquire {\"name\": %q} loads its tools", skill, where, skill)}, true
	}
	if why, ok := p.unavailableTools()[name]; ok {
		return nil, []string{fmt.Sprintf("from skill %s: unavailable: %s", skill, why)}, true
	}
	return nil, nil, false
}

var _ roster.RunTimeSource = (*Module)(nil)
var _ engine.Validator = (*Module)(nil)
var _ engine.Starter = (*Module)(nil)
