package engine

import (
	"context"
	"log/slog"
	"maps"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/upstream"
	"github.com/armory-dev/armory/world"
)

// Module is a capability plugged into the engine, with a lifecycle:
// Provision once while Open runs (before the roster is built), Close once
// when the Engine closes — also when its Provision failed, so a module
// closes whatever it started before failing.
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

// Env is what a module gets to provision itself; the engine builds it.
type Env struct {
	World  *world.World
	Logger *slog.Logger
	store  func(context.Context) (store.Store, error)
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
