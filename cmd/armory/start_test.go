package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
)

// bgModule is a module with background work; it records its lifecycle.
type bgModule struct {
	started chan struct{}

	mu  sync.Mutex
	log []string
}

func (m *bgModule) note(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = append(m.log, s)
}

func (m *bgModule) events() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.log)
}

func (*bgModule) Name() string { return "timers" }
func (m *bgModule) Provision(context.Context, engine.Env) (engine.Contribution, error) {
	m.note("provision")
	return engine.Contribution{}, nil
}
func (m *bgModule) Start(ctx context.Context, rt engine.Runtime) error {
	m.note("start")
	rt.Go(func() { <-ctx.Done(); m.note("work ended") })
	close(m.started)
	return nil
}
func (m *bgModule) Close() error { m.note("close"); return nil }

// Only `armory serve` starts the modules' background work: `armory call`
// provisions the same modules (their tools run) and never starts them;
// serve starts them once and stops them, before closing them, when it is
// told to stop.
func TestOnlyServeStartsModules(t *testing.T) {
	dir := testenv.ExampleWorld(t)

	m := &bgModule{started: make(chan struct{})}
	a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, modules: []engine.Module{m}}
	root := a.rootCmd()
	root.SetArgs([]string{"--world", dir, "call", "architect", "workspace.list"})
	if err := root.Execute(); err != nil {
		t.Fatalf("call: %v\n%s", err, a.stderr)
	}
	a.closeAll()
	if got := m.events(); !slices.Equal(got, []string{"provision", "close"}) {
		t.Fatalf("armory call: %v", got)
	}

	m = &bgModule{started: make(chan struct{})}
	var stderr testenv.LockedBuffer
	a = &app{stdout: &bytes.Buffer{}, stderr: &stderr, modules: []engine.Module{m}}
	defer a.closeAll()
	root = a.rootCmd()
	root.SetArgs([]string{"--world", dir, "serve", "--addr", "127.0.0.1:0"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	select {
	case <-m.started:
	case err := <-done:
		t.Fatalf("serve ended before starting the modules: %v", err)
	case <-time.After(time.Minute): // a bound, not a timing check
		t.Fatal("serve never started the modules")
	}
	deadline := time.Now().Add(time.Minute) // a bound, not a timing check
	for !strings.Contains(stderr.String(), "armory: listening on") {
		if time.Now().After(deadline) {
			t.Fatalf("serve never listened:\n%s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // as SIGTERM does
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	a.closeAll()
	if got := m.events(); !slices.Equal(got, []string{"provision", "start", "work ended", "close"}) {
		t.Fatalf("armory serve: %v", got)
	}
}
