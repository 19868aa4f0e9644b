package services

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
)

// The agents service: syscall.agent.* and syscall.reflect, and
// the gate that refuses a stopped agent's calls.
//
// Status. Every agent runs unless the store says it is stopped
// (store.Agents). An agent created at run time has a row from its creation;
// a world agent (world-config.yaml) gets a row the first time it is
// stopped, marked CreatedBy WorldRow, which holds only its status (the
// world file stays its definition).
//
// The gate. The pipeline asks the module's gate (engine.Contribution.Gate,
// pipeline.Gate) on every call whether the calling agent may make calls.
// The gate answers from a snapshot of the stopped agents, read from the
// store at most every Options.StatusTTL and at once after a change made
// in this process; a change made by another process is seen within the
// TTL (one read of the agents per TTL per busy process). Each read also
// hosts the agents another process created meanwhile. So a call costs an
// atomic load and a map lookup, not a store round trip. The "agent" event
// each change publishes is for the humans' streams (/api/events); the
// gate does not listen to the other processes' events, because a process
// that listens makes every process on a SQLite store write every event
// (docs/design.md).

// EventAgent is the kind of event the agents service publishes when an
// agent is created, stopped or started: Agent and Ref name it, Message
// says what happened ("created", "stopped", "started").
const EventAgent = "agent"

// WorldRow is the CreatedBy of a world agent's status row: the agent is
// defined by world-config.yaml, the row only keeps its status, and it is
// never restored as a created agent.
const WorldRow = "world-config.yaml"

// DefaultStatusTTL is how long the gate trusts its snapshot of the
// stopped agents when no event says it changed.
const DefaultStatusTTL = time.Second

// AgentInfo is one agent as syscall.agent.list, REST and `armory agents
// list` show it.
type AgentInfo struct {
	ID        string            `json:"id"`
	Archetype string            `json:"archetype"`
	Status    store.AgentStatus `json:"status"`
	// Origin is "world" (world-config.yaml) or "created" (at run time).
	Origin    string `json:"origin"`
	CreatedBy string `json:"created_by,omitempty"`
	// Since is when the agent was last started or stopped; for a world
	// agent never stopped, when this process opened the world.
	Since time.Time `json:"since"`
	// UptimeSeconds is the time since Since while running, else 0.
	UptimeSeconds int64 `json:"uptime_seconds"`
	Tools         int   `json:"tools"`
}

// statusSnap is the gate's view of the stopped agents.
type statusSnap struct {
	gen     int64
	at      time.Time
	stopped map[string]*store.Agent
}

// agentGate is the module's pipeline.Gate.
type agentGate struct {
	m *Module

	gen  atomic.Int64 // bumped by every known change: the snapshot is stale
	snap atomic.Pointer[statusSnap]
	mu   sync.Mutex // one refresh at a time
}

var _ pipeline.Gate = (*agentGate)(nil)

// Admit refuses the calls of a stopped agent (KindBlocked, with when it
// was stopped and who can start it again); KindUnavailable when the
// status cannot be read and no snapshot was ever read (fail closed).
func (g *agentGate) Admit(ctx context.Context, agent string) error {
	s := g.snap.Load()
	if s == nil || s.gen != g.gen.Load() || time.Since(s.at) > g.m.opts.StatusTTL {
		var err error
		if s, err = g.refresh(ctx); err != nil {
			return err
		}
	}
	if a, ok := s.stopped[agent]; ok {
		return armory.E("", armory.KindBlocked, fmt.Sprintf("agent %s is stopped (since %s): its calls are refused until a human (armory agents start %s, or POST /api/agents/%s/start) or an admin agent (syscall.agent.start) starts it",
			agent, a.StatusAt.UTC().Format(time.RFC3339), agent, agent))
	}
	return nil
}

// refresh reads the stopped agents from the store. When the store fails
// it keeps the last snapshot (logged) if there is one.
func (g *agentGate) refresh(ctx context.Context) (*statusSnap, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gen := g.gen.Load()
	if s := g.snap.Load(); s != nil && s.gen == gen && time.Since(s.at) <= g.m.opts.StatusTTL {
		return s, nil // another caller refreshed it
	}
	at := time.Now()
	rows, err := g.m.allAgents(ctx)
	if err != nil {
		if s := g.snap.Load(); s != nil {
			g.m.logger().Warn("agents: cannot read the agents' status; using the last one read", "err", err, "read", s.at)
			return s, nil
		}
		return nil, armory.E("", armory.KindUnavailable, "the agents' status cannot be read, so no call runs: "+err.Error())
	}
	s := &statusSnap{gen: gen, at: at, stopped: map[string]*store.Agent{}}
	h, _ := g.m.hosted()
	for _, a := range rows {
		if a.Status == store.AgentStopped {
			s.stopped[a.ID] = a
		}
		if h != nil {
			g.m.host(h, a) // created by another process since
		}
	}
	g.snap.Store(s)
	return s, nil
}

// Gate returns the module's stopped-agent gate (the one its Provision
// contributes), for embedders that build a pipeline themselves.
func (m *Module) Gate() pipeline.Gate { return m.gate }

// invalidate makes the next call read the status again.
func (g *agentGate) invalidate() { g.gen.Add(1) }

func (m *Module) logger() *slog.Logger {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.log
}

// allAgents reads every agent row, page by page.
func (m *Module) allAgents(ctx context.Context) ([]*store.Agent, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	var out []*store.Agent
	cursor := ""
	for {
		page, next, err := st.ListAgents(ctx, store.Page{Limit: store.MaxPage, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

func (m *Module) hosted() (*roster.Roster, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.roster == nil {
		return nil, armory.E("agents", armory.KindUnavailable, "the world's agents are not loaded yet")
	}
	return m.roster, nil
}

// ListAgents returns every agent the roster hosts (the world's, then those
// created at run time) with its status, read from the store now. Errors:
// the store's (KindUnavailable). Safe for concurrent use.
func (m *Module) ListAgents(ctx context.Context) ([]AgentInfo, error) {
	h, err := m.hosted()
	if err != nil {
		return nil, err
	}
	rows, err := m.allAgents(ctx)
	if err != nil {
		return nil, store.Err("agents.list", err)
	}
	byID := make(map[string]*store.Agent, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	now := time.Now()
	out := []AgentInfo{}
	for _, ag := range h.Agents() {
		out = append(out, m.info(h, ag, byID[ag.ID], now))
	}
	return out, nil
}

// info describes ag with its status row r (nil: never stopped).
func (m *Module) info(h *roster.Roster, ag *roster.Agent, r *store.Agent, now time.Time) AgentInfo {
	i := AgentInfo{ID: ag.ID, Archetype: ag.Def.Archetype, Status: store.AgentRunning, Origin: "world", Since: m.opened, Tools: ag.Registry.Len()}
	if h.World.Agent(ag.ID) == nil {
		i.Origin = "created"
	}
	if r != nil {
		i.Status, i.Since = r.Status, r.StatusAt
		if r.CreatedBy != WorldRow {
			i.CreatedBy = r.CreatedBy
		}
	}
	if i.Status == store.AgentRunning && !i.Since.IsZero() {
		i.UptimeSeconds = int64(now.Sub(i.Since) / time.Second)
	}
	return i
}

// setStatus stores agent id's status (a world agent's first change creates
// its status row), drops the gate's snapshot and publishes an "agent"
// event. changed is false when the agent had that status already (nothing
// is written then). Errors: KindNotFound (an agent the roster does not
// host), the store's.
func (m *Module) setStatus(ctx context.Context, id string, to store.AgentStatus) (info AgentInfo, changed bool, err error) {
	op := "agents.stop"
	if to == store.AgentRunning {
		op = "agents.start"
	}
	h, err := m.hosted()
	if err != nil {
		return AgentInfo{}, false, err
	}
	ag, err := h.Agent(id)
	if err != nil {
		return AgentInfo{}, false, err
	}
	st, err := m.store(ctx)
	if err != nil {
		return AgentInfo{}, false, err
	}
	r, err := st.GetAgent(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if to == store.AgentRunning {
			return m.info(h, ag, nil, time.Now()), false, nil // never stopped
		}
		r = &store.Agent{ID: id, Archetype: ag.Def.Archetype, Status: to, CreatedBy: WorldRow}
		if err = st.PutAgent(ctx, r); errors.Is(err, store.ErrConflict) {
			// Another process wrote the row meanwhile: set it.
			r, err = st.SetAgentStatus(ctx, id, to)
		}
	case err != nil:
	case r.Status == to:
		return m.info(h, ag, r, time.Now()), false, nil
	default:
		r, err = st.SetAgentStatus(ctx, id, to)
	}
	if err != nil {
		return AgentInfo{}, false, store.Err(op, err)
	}
	m.agentChanged(id, string(r.Status))
	return m.info(h, ag, r, time.Now()), true, nil
}

// agentChanged drops the gate's snapshot and tells the other processes.
func (m *Module) agentChanged(id, what string) {
	m.gate.invalidate()
	m.publish(pipeline.Event{Kind: EventAgent, Agent: id, Ref: id, Message: what})
}

// StopAgent stops agent id for a human (armory agents stop, REST with an
// admin token): its calls are refused on every surface from now on (in
// another process within its event's delivery, at most StatusTTL). The
// action is audited through a (the pipeline: tool agent.stop, decided_by
// human, args {via}); stopping a stopped agent changes and audits
// nothing. Errors: KindNotFound, the store's; KindUnavailable when the
// agent stopped but the audit entry could not be written.
func (m *Module) StopAgent(ctx context.Context, a Auditor, id, via string) (AgentInfo, error) {
	return m.humanSet(ctx, a, id, via, store.AgentStopped)
}

// StartAgent starts agent id for a human (as StopAgent): its calls are
// allowed again. A running agent is left as it is.
func (m *Module) StartAgent(ctx context.Context, a Auditor, id, via string) (AgentInfo, error) {
	return m.humanSet(ctx, a, id, via, store.AgentRunning)
}

// Auditor records a human's action; *pipeline.Pipeline is one.
type Auditor interface {
	AuditHuman(ctx context.Context, a pipeline.HumanAction) error
}

func (m *Module) humanSet(ctx context.Context, a Auditor, id, via string, to store.AgentStatus) (AgentInfo, error) {
	info, changed, err := m.setStatus(ctx, id, to)
	if err != nil || !changed {
		return info, err
	}
	tool, verb := "agent.stop", "stopped"
	if to == store.AgentRunning {
		tool, verb = "agent.start", "started"
	}
	return info, a.AuditHuman(ctx, pipeline.HumanAction{Tool: tool, Agent: id, Args: map[string]any{"agent": id, "via": via}, Result: fmt.Sprintf("agent %s %s by %s via %s", id, verb, pipeline.Human, via)})
}

// Created reports whether st keeps agent id as an agent created at run
// time (not a world agent's status row), for a command that opens the
// store without hosting the created agents (armory token create).
func Created(ctx context.Context, st store.Agents, id string) (bool, error) {
	r, err := st.GetAgent(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return r.CreatedBy != WorldRow, nil
}

// restore hosts the agents created at run time that the store keeps and
// the roster lacks (at Open, and when a peer says it created one). A row
// whose archetype no longer loads is skipped with a warning: the world
// still opens.
func (m *Module) restore(ctx context.Context, h *roster.Roster) {
	rows, err := m.allAgents(ctx)
	if err != nil {
		m.logger().Warn("agents: cannot read the agents created at run time", "err", err)
		return
	}
	for _, r := range rows {
		m.host(h, r)
	}
}

// host adds the created agent r to the roster unless it is there or r is a
// world agent's status row.
func (m *Module) host(h *roster.Roster, r *store.Agent) {
	if r.CreatedBy == WorldRow || h.World.Agent(r.ID) != nil {
		return
	}
	if _, err := h.Agent(r.ID); err == nil {
		return
	}
	if _, failed := m.unhostable.Load(r.ID); failed {
		return // warned once
	}
	def, err := h.World.NewAgent(r.ID, r.Archetype)
	if err == nil {
		_, err = h.Add(def)
	}
	if err != nil && armory.KindOf(err) != armory.KindConflict {
		m.unhostable.Store(r.ID, true)
		m.logger().Warn("agents: a created agent cannot be hosted", "agent", r.ID, "archetype", r.Archetype, "err", armory.Message(err))
	}
}

// createAgent creates agent id from archetype arch for creator: checked
// (id, archetype, its config) before anything is written, persisted, then
// hosted with a registry built like a world agent's, and announced to the
// other processes. Errors: KindInvalid, KindNotFound (archetype),
// KindConflict (the id exists), the store's.
func (m *Module) createAgent(ctx context.Context, id, arch, creator string) (AgentInfo, error) {
	h, err := m.hosted()
	if err != nil {
		return AgentInfo{}, err
	}
	if _, err := h.Agent(id); err == nil {
		return AgentInfo{}, armory.E("agents.create", armory.KindConflict, fmt.Sprintf("agent %q exists already; choose another id", id))
	}
	def, err := h.World.NewAgent(id, arch)
	if err != nil {
		return AgentInfo{}, err
	}
	st, err := m.store(ctx)
	if err != nil {
		return AgentInfo{}, err
	}
	r := &store.Agent{ID: id, Archetype: arch, Status: store.AgentRunning, CreatedBy: creator}
	if err := st.PutAgent(ctx, r); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return AgentInfo{}, armory.E("agents.create", armory.KindConflict, fmt.Sprintf("agent %q exists already (in the store: created by another process, or a world agent's status); choose another id", id))
		}
		return AgentInfo{}, store.Err("agents.create", err)
	}
	ag, err := h.Add(def)
	if err != nil {
		// Persisted: the next open hosts it.
		return AgentInfo{}, armory.E("agents.create", armory.KindInternal, fmt.Sprintf("agent %q is stored but could not be hosted in this process (it will be when the world is opened again)", id), err)
	}
	m.agentChanged(id, "created")
	return m.info(h, ag, r, time.Now()), nil
}
