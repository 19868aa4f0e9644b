package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
)

// Starter is a Module that works in the background once the runtime is
// built: timers that fire, watches, delivery of messages. Engine.Start
// calls Start once, in a long-lived process only (armory serve); the short
// commands (armory call, approvals, …) never start modules, so a timer
// fires in the server, not in every command that opened the world.
//
// Start must not block: it starts the module's background work with
// rt.Go and returns. That work runs until ctx is done — when the caller's
// context of Engine.Start ends, or when Engine.Close begins — and Close
// waits for it (bounded by Options.StopTimeout) before it closes any
// module. A Start error fails Engine.Start.
type Starter interface {
	Start(ctx context.Context, rt Runtime) error
}

// Runtime is what a started module works with: its Env (the world, the
// logger, Publish and the subscriptions to events), the built roster, the
// one pipeline — what a module fires on an agent's behalf (a timer's
// call) goes through Pipeline.Execute like any call — and the store.
type Runtime struct {
	Env
	Roster   *roster.Roster
	Pipeline *pipeline.Pipeline
	Store    store.Store

	bg *background
}

// Go runs f in a goroutine of the module's background work: f must return
// once the context given to Start is done, and Engine.Close waits for it
// before closing the modules. Once Close has begun, f is not run and Go
// returns false.
func (rt Runtime) Go(f func()) bool {
	if rt.bg == nil {
		return false
	}
	return rt.bg.run(rt.module, f)
}

// Start starts the background work of every module that is a Starter, in
// the order they were provisioned. Only a long-lived process calls it
// (armory serve, after Open); it is the start step of the lifecycle (see
// the package doc). ctx bounds the background work as well as Close: the
// modules' context ends with ctx. Errors: KindConflict when Start ran
// before or Close has begun; KindInvalid for an engine opened without its
// pipeline (Options.Skip); a module's Start error, naming the module —
// then the work that other modules had started is stopped (as Close
// would) and the Engine must still be closed.
func (e *Engine) Start(ctx context.Context) error {
	e.startMu.Lock()
	defer e.startMu.Unlock()
	switch {
	case e.closed:
		return armory.E("engine.Start", armory.KindConflict, "the engine is closed")
	case e.started:
		return armory.E("engine.Start", armory.KindConflict, "the engine was started already (Start runs once)")
	case e.p == nil:
		return armory.E("engine.Start", armory.KindInvalid, "the engine has no pipeline (opened with engine.Pipeline skipped): nothing to start modules with")
	}
	e.started = true
	bctx, cancel := context.WithCancel(ctx)
	e.bg = &background{cancel: cancel, running: map[string]int{}}
	for _, m := range e.mods {
		s, ok := m.(Starter)
		if !ok {
			continue
		}
		rt := Runtime{
			Env:      Env{World: e.world, Logger: e.opts.Logger, store: e.store, eng: e, module: m.Name()},
			Roster:   e.roster,
			Pipeline: e.p,
			Store:    e.st,
			bg:       e.bg,
		}
		if err := s.Start(bctx, rt); err != nil {
			stopErr := e.bg.stop(e.opts.StopTimeout)
			if stopErr != nil {
				err = fmt.Errorf("%w (and %w)", err, stopErr)
			}
			return armory.E("engine.Start", armory.KindOf(err), "module "+m.Name(), err)
		}
	}
	return nil
}

// background is the started modules' work: goroutines counted per module,
// and the cancel of their context.
type background struct {
	cancel context.CancelFunc

	mu       sync.Mutex
	stopping bool
	running  map[string]int // module name → goroutines running
	wg       sync.WaitGroup
}

// run runs f as module's, unless stop has begun.
func (b *background) run(module string, f func()) bool {
	b.mu.Lock()
	if b.stopping {
		b.mu.Unlock()
		return false
	}
	b.running[module]++
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer func() {
			b.mu.Lock()
			if b.running[module]--; b.running[module] == 0 {
				delete(b.running, module)
			}
			b.mu.Unlock()
			b.wg.Done()
		}()
		f()
	}()
	return true
}

// stop cancels the work's context and waits for its goroutines, at most
// timeout; KindTimeout names the modules still running then. It may be
// called more than once.
func (b *background) stop(timeout time.Duration) error {
	b.mu.Lock()
	b.stopping = true // no wg.Add from now on: Wait below is safe
	b.mu.Unlock()
	b.cancel()
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	b.mu.Lock()
	names := make([]string, 0, len(b.running))
	for n := range b.running {
		names = append(names, n)
	}
	b.mu.Unlock()
	slices.Sort(names)
	return armory.E("engine.Close", armory.KindTimeout, fmt.Sprintf("the background work of module %s did not stop within %s", strings.Join(names, ", "), timeout))
}
