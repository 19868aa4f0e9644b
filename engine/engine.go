package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
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

// Part names a part of the runtime that Open can leave out (Options.Skip).
type Part uint8

const (
	// Store: open the store only if a module asks for it.
	Store Part = 1 << iota
	// Modules: provision no module (no upstream MCP servers are started).
	Modules
	// Trail: start no JSONL trail follower.
	Trail
	// Pipeline: build no pipeline (Engine.Pipeline returns nil).
	Pipeline
)

// StoreOnly is what the commands that read or change the store and run no
// tool skip: they get the world (without upstream tools), the store and
// nothing else.
const StoreOnly = Modules | Trail | Pipeline

// DefaultTrailCloseTimeout bounds the JSONL trail's last catch-up in Close
// (what it does not copy, the next start does).
const DefaultTrailCloseTimeout = 10 * time.Second

// DefaultStopTimeout bounds, in Close, the wait for the started modules'
// background work to end.
const DefaultStopTimeout = 10 * time.Second

// Options configure Open. Open copies them; zero fields take the defaults
// documented on each.
type Options struct {
	// World is the world folder. Required.
	World string
	// DB names the store: a postgres:// (or postgresql://) URL, or a
	// SQLite file path (optionally sqlite://…); default
	// <world>/.armory/armory.db. The world's durability setting applies.
	DB string
	// Store is an open store to use instead of opening DB. The caller keeps
	// it: Close leaves it open.
	Store store.Store
	// Skip leaves parts out (0: build everything).
	Skip Part
	// Modules are provisioned after the built-in ones (the upstream MCP
	// servers), in order, unless Skip has Modules.
	Modules []Module
	// RunLease is the lease of run claims (pipeline.Options.RunLease;
	// default pipeline.DefaultRunLease).
	RunLease time.Duration
	// Logger receives the runtime's notes: upstream restarts, the trail's
	// problems (default: discard).
	Logger *slog.Logger
	// Builtins replaces the built-in tools (roster.Options.Builtins;
	// default builtin.All()); tests use it.
	Builtins []armory.Tool
	// TrailCloseTimeout bounds the trail's last catch-up in Close (default
	// DefaultTrailCloseTimeout).
	TrailCloseTimeout time.Duration
	// StopTimeout bounds how long Close waits for the started modules'
	// background work to end (Runtime.Go) before it closes the modules
	// (default DefaultStopTimeout).
	StopTimeout time.Duration
}

// Engine is the runtime of one world. Its accessors are safe for
// concurrent use; Close must be called once the Engine is no longer used.
type Engine struct {
	opts     Options
	world    *world.World
	st       store.Store
	ownStore bool
	mods     []Module // provisioned, in order
	roster   *roster.Roster
	fol      *trail.Follower
	p        *pipeline.Pipeline
	events   hooks
	relay    relay
	kinds    map[string]string // the modules' event kinds → module name; fixed once Open returns
	opened   atomic.Bool       // Open returned the Engine: Publish works

	startMu sync.Mutex
	started bool        // Start ran (once only)
	closed  bool        // Close began: Start is refused
	bg      *background // the started modules' work, while Start ran

	closeOnce sync.Once
	closeErr  error
}

// Open builds the runtime that opts describe (see the package doc for the
// order). Errors: the world's (*world.InvalidError, or KindNotFound for a
// missing world), KindUnavailable for a store that cannot be opened, a
// module's Provision or Validate error. On error nothing stays open.
func Open(ctx context.Context, opts Options) (_ *Engine, err error) {
	if opts.World == "" {
		return nil, armory.E("engine.Open", armory.KindInvalid, "a world folder is required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TrailCloseTimeout <= 0 {
		opts.TrailCloseTimeout = DefaultTrailCloseTimeout
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = DefaultStopTimeout
	}
	e := &Engine{opts: opts, kinds: map[string]string{}}
	defer func() {
		if err != nil {
			e.Close()
		}
	}()
	if e.world, err = world.Load(opts.World); err != nil {
		return nil, err
	}
	if opts.Skip&Store == 0 {
		if _, err = e.store(ctx); err != nil {
			return nil, err
		}
	}
	var ropts roster.Options
	ropts.Builtins = opts.Builtins
	var warns world.Diagnostics
	var gates []pipeline.Gate
	if opts.Skip&Modules == 0 {
		for _, m := range append([]Module{Upstreams()}, opts.Modules...) {
			env := Env{World: e.world, Logger: opts.Logger, store: e.store, eng: e, module: m.Name()}
			c, err := m.Provision(ctx, env)
			e.mods = append(e.mods, m) // closed even when its provision failed midway
			if err != nil {
				return nil, armory.E("engine.Open", armory.KindOf(err), "module "+m.Name(), err)
			}
			if err := e.addKinds(m.Name(), c.EventKinds); err != nil {
				return nil, err
			}
			ropts = c.addTo(ropts, m.Name())
			if c.Gate != nil {
				gates = append(gates, c.Gate)
			}
			warns = append(warns, c.Warnings...)
		}
	}
	if e.roster, err = roster.New(e.world, ropts); err != nil {
		return nil, err
	}
	e.roster.Warnings = append(e.roster.Warnings, warns...)
	for _, m := range e.mods {
		if v, ok := m.(Validator); ok {
			if err := v.Validate(e.roster); err != nil {
				return nil, armory.E("engine.Open", armory.KindOf(err), "module "+m.Name(), err)
			}
		}
	}
	if opts.Skip&(Trail|Pipeline) != Trail|Pipeline {
		if _, err = e.store(ctx); err != nil {
			return nil, err
		}
	}
	popts := pipeline.Options{Store: e.st, RunLease: opts.RunLease, OnEvent: e.emit, Gates: gates}
	if opts.Skip&Trail == 0 {
		e.fol = trail.Start(filepath.Join(e.world.Dir, ".armory", "audit"), e.st, trail.Options{Logger: opts.Logger})
		popts.AfterAudit = e.fol.Committed
	}
	if opts.Skip&Pipeline == 0 {
		if e.p, err = pipeline.New(e.roster, popts); err != nil {
			return nil, err
		}
		e.relay.start(e.st, e.knownKind)
	}
	e.opened.Store(true)
	return e, nil
}

// addKinds registers the event kinds module declared.
func (e *Engine) addKinds(module string, kinds []string) error {
	for _, k := range kinds {
		if err := checkEventKind(k); err != nil {
			return armory.E("engine.Open", armory.KindInvalid, "module "+module, err)
		}
		if other, ok := e.kinds[k]; ok {
			return armory.E("engine.Open", armory.KindInvalid, fmt.Sprintf("module %s: event kind %q is module %s's", module, k, other))
		}
		e.kinds[k] = module
	}
	return nil
}

// store returns the engine's store, opening it on first use (a module may
// ask for it while Open runs, before the roster exists).
func (e *Engine) store(ctx context.Context) (store.Store, error) {
	if e.st != nil {
		return e.st, nil
	}
	if e.opts.Store != nil {
		e.st = e.opts.Store
		return e.st, nil
	}
	st, err := openStore(ctx, e.opts.DB, e.world)
	if err != nil {
		return nil, err
	}
	e.st, e.ownStore = st, true
	return st, nil
}

// openStore opens the store named by dsn (see Options.DB) in the world's
// durability mode (world-config.yaml durability:).
func openStore(ctx context.Context, dsn string, w *world.World) (store.Store, error) {
	mode, window := store.Durability(w.Durability), w.DurabilityWindow
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		st, err := postgres.OpenWith(ctx, dsn, postgres.Options{Durability: mode, Window: window})
		if err != nil {
			return nil, armory.E("store", armory.KindUnavailable, "cannot open the Postgres store", err)
		}
		return st, nil
	case dsn == "":
		dsn = filepath.Join(w.Dir, ".armory", "armory.db")
	}
	dsn = strings.TrimPrefix(dsn, "sqlite://")
	st, err := sqlite.OpenWith(dsn, sqlite.Options{Durability: mode, Window: window})
	if err != nil {
		return nil, armory.E("store", armory.KindUnavailable, "cannot open the SQLite store "+dsn, err)
	}
	return st, nil
}

// Close closes what Open (and Start) opened, in reverse order: the started
// modules' background work (its context is cancelled and Close waits for
// it, at most Options.StopTimeout), the trail follower (after its bounded
// last catch-up), the modules (last provisioned first), the store (unless
// Options.Store gave it). It is idempotent and returns the first call's
// errors, joined: KindTimeout names the modules whose background work
// did not end in time (they are closed all the same).
func (e *Engine) Close() error {
	e.closeOnce.Do(func() {
		var errs []error
		e.startMu.Lock()
		e.closed = true
		bg := e.bg
		e.startMu.Unlock()
		if bg != nil {
			errs = append(errs, bg.stop(e.opts.StopTimeout))
		}
		e.relay.stop()
		if e.fol != nil {
			ctx, cancel := context.WithTimeout(context.Background(), e.opts.TrailCloseTimeout)
			errs = append(errs, e.fol.Close(ctx))
			cancel()
		}
		for i := len(e.mods) - 1; i >= 0; i-- {
			errs = append(errs, e.mods[i].Close())
		}
		if e.ownStore {
			errs = append(errs, e.st.Close())
		}
		e.closeErr = errors.Join(errs...)
	})
	return e.closeErr
}

// Module returns the provisioned module named name, or nil: a surface
// reaches a module's methods for humans through it (the server, the
// services module's agents).
func (e *Engine) Module(name string) Module {
	for _, m := range e.mods {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

// World returns the loaded world.
func (e *Engine) World() *world.World { return e.world }

// Roster returns the world with every agent's registry.
func (e *Engine) Roster() *roster.Roster { return e.roster }

// Store returns the store, or nil when Options.Skip left it out and no
// module asked for it.
func (e *Engine) Store() store.Store { return e.st }

// Pipeline returns the one pipeline, or nil when Options.Skip has Pipeline.
func (e *Engine) Pipeline() *pipeline.Pipeline { return e.p }

// Trail returns the JSONL trail's follower, or nil when Options.Skip has
// Trail. Exported for embedders (and tests) that read the JSONL copy and
// need it caught up first (Follower.WaitWritten); armory itself only
// closes it.
func (e *Engine) Trail() *trail.Follower { return e.fol }
