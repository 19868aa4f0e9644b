package main

import (
	"context"
	"path/filepath"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/postgres"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/world"
)

// store returns the command's store, opening it on first use: one store
// per command, shared by the upstream servers' pins, the pipeline and the
// admin commands, and closed when the command ends (closeAll), after what
// was opened later (the JSONL trail's follower, the upstreams).
func (a *app) store(ctx context.Context, w *world.World) (store.Store, error) {
	if a.st != nil {
		return a.st, nil
	}
	st, err := a.openStore(ctx, w)
	if err != nil {
		return nil, err
	}
	a.st = st
	a.closers = append(a.closers, func() { st.Close() })
	return st, nil
}

// openStore opens the store named by --db (or $ARMORY_DB): a postgres://
// URL, or a SQLite file path; default <world>/.armory/armory.db; in the
// world's durability mode (world-config.yaml durability:).
func (a *app) openStore(ctx context.Context, w *world.World) (store.Store, error) {
	dsn, worldDir := a.db, w.Dir
	mode, window := store.Durability(w.Durability), w.DurabilityWindow
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		st, err := postgres.OpenWith(ctx, dsn, postgres.Options{Durability: mode, Window: window})
		if err != nil {
			return nil, armory.E("store", armory.KindUnavailable, "cannot open the Postgres store", err)
		}
		return st, nil
	case dsn == "":
		dsn = filepath.Join(worldDir, ".armory", "armory.db")
	}
	dsn = strings.TrimPrefix(dsn, "sqlite://")
	st, err := sqlite.OpenWith(dsn, sqlite.Options{Durability: mode, Window: window})
	if err != nil {
		return nil, armory.E("store", armory.KindUnavailable, "cannot open the SQLite store "+dsn, err)
	}
	return st, nil
}

// runtime loads the world and opens what a pipeline runs on: the store
// and the follower that copies the store's audit trail into the world's
// JSONL trail (<world>/.armory/audit). The JSONL trail has one writer at a
// time; when another process (a server) holds it, that process copies this
// one's records too. release closes what was opened, first letting the
// follower copy what is committed (bounded).
func (a *app) runtime(ctx context.Context) (h *roster.Roster, opts pipeline.Options, release func(), err error) {
	if h, err = a.open(); err != nil {
		return nil, opts, nil, err
	}
	st, err := a.store(ctx, h.World)
	if err != nil {
		return nil, opts, nil, err
	}
	opts.Store = st
	opts.RunLease = a.runLease
	fol := trail.Start(filepath.Join(h.World.Dir, ".armory", "audit"), st, trail.Options{Logger: a.logger()})
	opts.AfterAudit = fol.Committed
	return h, opts, func() {
		cctx, cancel := context.WithTimeout(context.Background(), trailCloseTimeout)
		defer cancel()
		fol.Close(cctx) // the store stays open until the command ends
	}, nil
}

// trailCloseTimeout bounds the JSONL trail's last catch-up when a command
// ends (what it does not copy, the next start does).
const trailCloseTimeout = 10 * time.Second

// pipeline builds the guarded pipeline over runtime. The returned func
// releases what it opened.
func (a *app) pipeline(ctx context.Context) (*pipeline.Pipeline, func(), error) {
	h, opts, release, err := a.runtime(ctx)
	if err != nil {
		return nil, nil, err
	}
	p, err := pipeline.New(h, opts)
	if err != nil {
		release()
		return nil, nil, err
	}
	return p, release, nil
}

// storeOnly opens the world and its store (for approvals, sessions,
// audit, tokens); the store is closed when the command ends (closeAll).
// It loads the world without starting its upstream MCP servers: these
// commands run no tools.
func (a *app) storeOnly(ctx context.Context) (*roster.Roster, store.Store, error) {
	h, err := roster.Open(a.world, roster.Options{})
	if err != nil {
		return nil, nil, err
	}
	st, err := a.store(ctx, h.World)
	if err != nil {
		return nil, nil, err
	}
	return h, st, nil
}
