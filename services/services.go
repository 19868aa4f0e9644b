package services

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
)

// Name is the module's name: the source its tools show under.
const Name = "services"

// Options configure the services module. The zero value gives the
// defaults; New copies it.
type Options struct {
	// Clock returns the current time (zero: time.Now). Tests fix it. The
	// timers' schedule follows it (when a one-shot or cron is due).
	Clock func() time.Time

	// MaxTimers bounds an agent's one-shot timers and crons together
	// (default DefaultMaxTimers); MaxWatches its watches (default
	// DefaultMaxWatches); MaxWatchesTotal the watches armed in one
	// process (default DefaultMaxWatchesTotal).
	MaxTimers, MaxWatches, MaxWatchesTotal int
	// TimerPoll is how often the scheduler looks for due timers (default
	// DefaultTimerPoll); DueBatch bounds the timers fired per look
	// (default DefaultDueBatch, at most store.MaxPage).
	TimerPoll time.Duration
	DueBatch  int
	// LeaseTTL is the lease of the replica that fires the timers (default
	// DefaultLeaseTTL): a replica that dies is replaced within it.
	LeaseTTL time.Duration
	// Replica names this process as the lease's holder (default: host,
	// process ID and a random suffix).
	Replica string
	// MaxWaiters bounds the syscall.ask calls waiting for a reply at once
	// in this process (default DefaultMaxWaiters); one more is refused.
	MaxWaiters int
	// AskPoll is how often a waiting ask re-reads the store when no event
	// woke it (default DefaultAskPoll).
	AskPoll time.Duration
	// StatusTTL bounds how long the stopped-agent gate trusts its snapshot
	// of the agents' status when no event says it changed (zero:
	// DefaultStatusTTL). See agents.go.
	StatusTTL time.Duration
}

// Module is the world's services as an engine.Module: Provision
// contributes their tools to the catalog (every agent reaches them through
// the one pipeline, governed like any tool); the store they persist to is
// opened when a tool first needs it, so commands that only read the world
// never open it. Safe for concurrent use once provisioned.
type Module struct {
	opts Options

	mu     sync.Mutex
	env    engine.Env
	roster *roster.Roster
	log    *slog.Logger

	wake    chan struct{} // pokes the timer scheduler
	rounds  atomic.Int64  // scheduler rounds run while holding the lease (tests)
	waiters waiters       // the asks waiting for replies
	gate    *agentGate    // the stopped-agent gate (agents.go)
	opened  time.Time     // when the module was made: a world agent's uptime
	// unhostable are the created agents whose archetype does not load
	// (warned about once).
	unhostable sync.Map
}

var (
	_ engine.Module    = (*Module)(nil)
	_ engine.Validator = (*Module)(nil)
	_ engine.Starter   = (*Module)(nil)
)

// New returns the services module.
func New(o Options) *Module {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	o.MaxTimers = cmp.Or(max(o.MaxTimers, 0), DefaultMaxTimers)
	o.MaxWatches = cmp.Or(max(o.MaxWatches, 0), DefaultMaxWatches)
	o.MaxWatchesTotal = cmp.Or(max(o.MaxWatchesTotal, 0), DefaultMaxWatchesTotal)
	o.TimerPoll = cmp.Or(max(o.TimerPoll, 0), DefaultTimerPoll)
	o.DueBatch = min(cmp.Or(max(o.DueBatch, 0), DefaultDueBatch), store.MaxPage)
	o.LeaseTTL = cmp.Or(max(o.LeaseTTL, 0), DefaultLeaseTTL)
	o.Replica = cmp.Or(o.Replica, replicaID())
	if o.MaxWaiters <= 0 {
		o.MaxWaiters = DefaultMaxWaiters
	}
	if o.AskPoll <= 0 {
		o.AskPoll = DefaultAskPoll
	}
	if o.StatusTTL <= 0 {
		o.StatusTTL = DefaultStatusTTL
	}
	m := &Module{opts: o, opened: time.Now(), wake: make(chan struct{}, 1)}
	m.gate = &agentGate{m: m}
	return m
}

// Name is "services".
func (*Module) Name() string { return Name }

// Provision keeps env and contributes every service tool.
func (m *Module) Provision(_ context.Context, env engine.Env) (engine.Contribution, error) {
	m.mu.Lock()
	m.env, m.log = env, env.Logger
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.mu.Unlock()
	return engine.Contribution{Tools: m.tools(), EventKinds: []string{EventMessage, EventChat, EventChannel, EventTimer, TaskEventKind, EventAgent}, Gate: m.gate}, nil
}

// Validate keeps the built roster, the world's agents, and hosts the
// agents created at run time that the store keeps — when the command
// opened the store (engine.Env.OpenedStore): a command that only reads
// the world sees the world's agents alone.
func (m *Module) Validate(r *roster.Roster) error {
	m.mu.Lock()
	m.roster = r
	env := m.env
	m.mu.Unlock()
	if _, ok := env.OpenedStore(); ok {
		m.restore(context.Background(), r)
	}
	return nil
}

// Close stops listening to events; an ask still waiting ends at its
// timeout or its call's end. The timer scheduler (Start) is background
// work of the engine, which ends it before Close.
func (m *Module) Close() error {
	m.waiters.close()
	return nil
}

// tools returns a new instance of every service tool.
func (m *Module) tools() []armory.Tool {
	var out []armory.Tool
	for _, t := range []*tool{thinkTool(), m.resourceUsageTool(),
		m.askTool(), m.replyTool(), m.inboxTool(), m.broadcastTool(),
		m.chatCreateTool(), m.chatSendTool(), m.chatInviteTool(), m.chatRemoveTool(), m.chatListTool(), m.chatHistoryTool(),
		m.timerTool(), m.cronTool(), m.watchTool()} {
		out = append(out, t)
	}
	// Tasks, knowledge, memory and state (tasks.go, knowledge.go, memory.go, state.go).
	for _, t := range append(append(append(m.taskTools(), m.knowledgeTools()...), m.memoryTools()...), m.stateReadTool(), m.stateWriteTool()) {
		out = append(out, t)
	}
	for _, t := range m.agentTools() {
		out = append(out, t)
	}
	for _, t := range m.channelTools() { // channel.go
		out = append(out, t)
	}
	return out
}

func (m *Module) now() time.Time { return m.opts.Clock() }

// store returns the engine's store, opening it on first use: the one way
// the services reach their persistence (a function that needs only some
// roles takes a small interface, e.g. store.Inboxes). Errors:
// KindUnavailable.
func (m *Module) store(ctx context.Context) (store.Store, error) {
	m.mu.Lock()
	env := m.env
	m.mu.Unlock()
	return env.Store(ctx)
}
