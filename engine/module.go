package engine

import (
	"context"
	"log/slog"
	"maps"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/upstream"
	"github.com/armory-dev/armory/world"
)

// Module is a capability plugged into the engine, with a lifecycle:
// Provision once while Open runs (before the roster is built), Start once
// if it is a Starter and the process is long-lived (Engine.Start), Close
// once when the Engine closes — also when its Provision failed, so a
// module closes whatever it started before failing.
type Module interface {
	// Name names the module in errors and is the source its tools show
	// under (`tool list --long`, explain, REST): a short lower-case name
	// that is not one of Armory's own sources (see roster.ModuleTools).
	Name() string
	// Provision prepares the module for the world in env and returns the
	// tools it contributes to the catalog. A failure that leaves the world
	// usable (one upstream server down) is a warning and an unavailable
	// reason in the Contribution, not an error.
	Provision(ctx context.Context, env Env) (Contribution, error)
	// Close releases what Provision started. It is called once.
	Close() error
}

// Validator is a Module that checks the roster once it is built (the
// validate step of the lifecycle); an error fails Open.
type Validator interface {
	Validate(r *roster.Roster) error
}

// Env is what a module gets to provision itself; the engine builds one
// per module. A module may keep it: Publish, Subscribe and SubscribePeers
// work once Open has returned, in every process (a short command's tool
// call publishes its service's events too).
type Env struct {
	World  *world.World
	Logger *slog.Logger
	store  func(context.Context) (store.Store, error)
	eng    *Engine
	module string // the module's Name: the kinds it may publish are its own
}

// Publish raises ev, an event of one of the kinds this module declared
// (Contribution.EventKinds), to the engine's subscribers and, through the
// store, to every other process on the same database (see Engine.Subscribe
// and Engine.SubscribePeers). Delivery is best effort, as for the
// pipeline's events: publish the record to the store first; the event only
// says it changed (Event.Ref names it). A zero Time is set to now.
// Errors: KindInvalid for a kind this module did not declare or a Ref of
// more than MaxEventRef bytes; KindUnavailable before Open has returned
// (or for an Env the engine did not build). Safe for concurrent use.
func (e Env) Publish(ev pipeline.Event) error {
	if e.eng == nil {
		return armory.E("engine.Env.Publish", armory.KindUnavailable, "no engine behind this Env")
	}
	return e.eng.publish(e.module, ev)
}

// Subscribe is Engine.Subscribe: this process's events (the pipeline's
// and the modules'). The returned func unsubscribes; it does nothing for
// an Env the engine did not build.
func (e Env) Subscribe(f func(pipeline.Event)) (unsubscribe func()) {
	if e.eng == nil {
		return func() {}
	}
	return e.eng.Subscribe(f)
}

// SubscribePeers is Engine.SubscribePeers: the other processes' events
// (a delivery another process published for an agent waiting here).
func (e Env) SubscribePeers(f func(pipeline.Event)) (unsubscribe func()) {
	if e.eng == nil {
		return func() {}
	}
	return e.eng.SubscribePeers(f)
}

// OpenedStore returns the engine's store if a part of the runtime opened
// it already (Open opens it first unless Options.Skip has Store), without
// opening it: a module that only wants the store when the command has one
// (the services module restores the agents created at run time) asks here.
func (e Env) OpenedStore() (store.Store, bool) {
	if e.eng == nil || e.eng.st == nil {
		return nil, false
	}
	return e.eng.st, true
}

// Store returns the engine's store, opening it if no part needed it yet.
// Errors: KindUnavailable for a store that cannot be opened; KindInvalid
// for an Env the engine did not build.
func (e Env) Store(ctx context.Context) (store.Store, error) {
	if e.store == nil {
		return nil, armory.E("engine.Env.Store", armory.KindInvalid, "no engine behind this Env")
	}
	return e.store(ctx)
}

// Contribution is what a module adds to the catalog.
type Contribution struct {
	// Tools join the catalog, governed like any tool.
	Tools []armory.Tool
	// Unavailable says why declared tools are missing (roster.Options.Unavailable).
	Unavailable map[string]string
	// Warnings are shown with the world's (armory world check).
	Warnings world.Diagnostics
	// EventKinds are the kinds of event the module publishes (Env.Publish):
	// "message", "task", "timer", … Each is 1 to 32 of a-z, 0-9 and _,
	// starting with a letter; not one of the pipeline's kinds, not
	// EventGap, not another module's (Open fails with KindInvalid). Only
	// declared kinds cross between processes: a peer's event of a kind
	// nobody declared here is dropped.
	EventKinds []string
	// Gate, when set, joins the pipeline's gates (pipeline.Gate): it
	// decides, on every call, whether the calling agent may make calls at
	// all — the services module refuses a stopped agent's calls there, so
	// every surface refuses them. It must be cheap: it runs on every call.
	Gate pipeline.Gate
}

// addTo adds c to o, its tools under the source of the module named
// source.
func (c Contribution) addTo(o roster.Options, source string) roster.Options {
	if len(c.Tools) > 0 {
		o.Modules = append(o.Modules, roster.ModuleTools{Source: source, Tools: c.Tools})
	}
	if len(c.Unavailable) > 0 {
		if o.Unavailable == nil {
			o.Unavailable = map[string]string{}
		}
		maps.Copy(o.Unavailable, c.Unavailable)
	}
	return o
}

// Upstreams is the module of the world's upstream MCP servers
// (world-config.yaml mcp_servers): it starts them, pins their tool
// definitions in the engine's store and contributes their tools; Close
// stops them. A world without servers opens nothing.
func Upstreams() Module { return &upstreams{} }

type upstreams struct{ set *upstream.Set }

func (*upstreams) Name() string { return roster.SourceUpstream }

func (m *upstreams) Provision(ctx context.Context, env Env) (Contribution, error) {
	if len(env.World.MCPServers) == 0 {
		return Contribution{}, nil
	}
	st, err := env.Store(ctx)
	if err != nil {
		return Contribution{}, err
	}
	if m.set, err = upstream.Start(ctx, env.World, upstream.Options{Pins: st, Logger: env.Logger}); err != nil {
		return Contribution{}, err
	}
	return Contribution{Tools: m.set.Tools(), Unavailable: m.set.Unavailable(), Warnings: m.set.Warnings()}, nil
}

func (m *upstreams) Close() error {
	if m.set == nil {
		return nil
	}
	return m.set.Close()
}
