package services

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/roster"
)

// Name is the module's name: the source its tools show under.
const Name = "services"

// Options configure the services module. The zero value gives the
// defaults; New copies it.
type Options struct {
	// Clock returns the current time (zero: time.Now). Tests fix it.
	Clock func() time.Time
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

	gate   *agentGate // the stopped-agent gate (agents.go)
	opened time.Time  // when the module was made: a world agent's uptime
	// unhostable are the created agents whose archetype does not load
	// (warned about once).
	unhostable sync.Map
}

var (
	_ engine.Module    = (*Module)(nil)
	_ engine.Validator = (*Module)(nil)
)

// New returns the services module.
func New(o Options) *Module {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.StatusTTL <= 0 {
		o.StatusTTL = DefaultStatusTTL
	}
	m := &Module{opts: o, opened: time.Now()}
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
	return engine.Contribution{Tools: m.tools(), EventKinds: []string{EventAgent}, Gate: m.gate}, nil
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

// Close releases nothing yet: the module starts no work of its own.
func (m *Module) Close() error { return nil }

// tools returns a new instance of every service tool.
func (m *Module) tools() []armory.Tool {
	var out []armory.Tool
	for _, t := range append([]*tool{thinkTool(), m.resourceUsageTool()}, m.agentTools()...) {
		out = append(out, t)
	}
	return out
}

func (m *Module) now() time.Time { return m.opts.Clock() }
