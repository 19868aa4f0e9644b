package main

import (
	"context"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
)

// engine opens the command's runtime from the flags (--world, --db,
// --run-lease), leaving out the parts in skip (see engine.Part): the world
// loaded once, one store shared by the upstream servers' pins, the
// pipeline and the admin commands, the JSONL trail's follower. A command
// opens one engine; asking again returns it if it has the parts asked for.
// It is closed when the command ends (closeAll).
func (a *app) engine(ctx context.Context, skip engine.Part) (*engine.Engine, error) {
	if a.eng != nil {
		if a.skip&^skip != 0 {
			return nil, armory.E("engine", armory.KindInternal, "the command's engine is open already without a part it now needs")
		}
		return a.eng, nil
	}
	e, err := engine.Open(ctx, engine.Options{World: a.world, DB: a.db, Skip: skip, RunLease: a.runLease, Logger: a.logger(), Modules: a.modules})
	if err != nil {
		return nil, err
	}
	a.eng, a.skip = e, skip
	a.closers = append(a.closers, func() { e.Close() })
	return e, nil
}

// open loads the world named by --world with its store, for the commands
// that show what agents have and run no tool (tool list, access explain):
// the store says which skills an agent acquired, so the view is the one a
// server shows.
func (a *app) open() (*roster.Roster, error) {
	e, err := a.engine(context.Background(), engine.Trail|engine.Pipeline)
	if err != nil {
		return nil, err
	}
	return e.Roster(), nil
}

// openWorld loads the world named by --world, with the tools of its
// upstream MCP servers (whose pins open the store), and opens the store
// for nothing else: for the commands that check or tour the world's files
// (world check must not create a store in a world folder).
func (a *app) openWorld() (*roster.Roster, error) {
	e, err := a.engine(context.Background(), engine.Store|engine.Trail|engine.Pipeline)
	if err != nil {
		return nil, err
	}
	return e.Roster(), nil
}

// openAgent loads the world and finds agent id in it.
func (a *app) openAgent(id string) (*roster.Roster, *roster.Agent, error) {
	h, err := a.open()
	if err != nil {
		return nil, nil, err
	}
	ag, err := h.Agent(id)
	return h, ag, err
}

// pipeline opens the whole runtime (upstream servers, trail, pipeline)
// and returns its pipeline, to run calls.
func (a *app) pipeline(ctx context.Context) (*pipeline.Pipeline, error) {
	e, err := a.engine(ctx, 0)
	if err != nil {
		return nil, err
	}
	return e.Pipeline(), nil
}

// reader opens the world, its store and a pipeline without running tools
// nor copying the trail: for commands that read what the pipeline derives
// (an approval's diff, a session's state).
func (a *app) reader(ctx context.Context) (*pipeline.Pipeline, error) {
	e, err := a.engine(ctx, engine.Modules|engine.Trail)
	if err != nil {
		return nil, err
	}
	return e.Pipeline(), nil
}

// closeAll releases what the command opened for its whole run (its engine,
// the sandbox pool), last opened first.
func (a *app) closeAll() {
	for i := len(a.closers) - 1; i >= 0; i-- {
		a.closers[i]()
	}
	a.closers = nil
}
