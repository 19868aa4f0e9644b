package engine_test

import (
	"context"
	"slices"

	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
)

// starter is a module with background work: Start records itself and,
// unless fail is set, runs one goroutine that waits for its context (or,
// with stubborn, for release) and records its end. It declares the event
// kinds in kinds and keeps its Env.
type starter struct {
	name     string
	kinds    []string
	fail     error
	stubborn bool
	release  chan struct{}

	mu  sync.Mutex
	log []string
	env engine.Env
	rt  engine.Runtime
}

func (m *starter) note(s string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.log = append(m.log, s)
}

func (m *starter) events() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.log...)
}

func (m *starter) Name() string { return m.name }

func (m *starter) Provision(ctx context.Context, env engine.Env) (engine.Contribution, error) {
	m.env = env
	return engine.Contribution{EventKinds: m.kinds}, nil
}

func (m *starter) Start(ctx context.Context, rt engine.Runtime) error {
	m.note("start")
	m.rt = rt
	if m.fail != nil {
		return m.fail
	}
	rt.Go(func() {
		if m.stubborn {
			<-m.release
		} else {
			<-ctx.Done()
		}
		m.note("work ended")
	})
	return nil
}

func (m *starter) Close() error {
	m.note("close")
	return nil
}

// A Starter is started by Start, not by Open, with the runtime's pipeline
// and store; Close ends its background work (cancels its context and
// waits for it) before it closes the module. Start runs once.
func TestStartStartsStartersOnly(t *testing.T) {
	ctx := context.Background()
	m := &starter{name: "timers"}
	e, err := engine.Open(ctx, engine.Options{World: testenv.ExampleWorld(t), Skip: engine.Trail, Modules: []engine.Module{m}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if got := m.events(); len(got) != 0 {
		t.Fatalf("Open started the module: %v", got)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := m.events(); !slices.Equal(got, []string{"start"}) {
		t.Fatalf("after Start: %v", got)
	}
	if m.rt.Pipeline != e.Pipeline() || m.rt.Store != e.Store() || m.rt.Roster != e.Roster() || m.rt.World != e.World() {
		t.Fatal("the runtime is not the engine's")
	}
	if err := e.Start(ctx); armory.KindOf(err) != armory.KindConflict {
		t.Fatalf("a second Start: %v", err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if got := m.events(); !slices.Equal(got, []string{"start", "work ended", "close"}) {
		t.Fatalf("Close did not end the work before closing the module: %v", got)
	}
	if m.rt.Go(func() { t.Error("work ran after Close") }) {
		t.Fatal("Go accepted work after Close")
	}
	if err := e.Start(ctx); armory.KindOf(err) != armory.KindConflict {
		t.Fatalf("Start after Close: %v", err)
	}
}

// The modules' context ends with Start's: the work ends without Close.
func TestStartContextEndsTheWork(t *testing.T) {
	m := &starter{name: "timers"}
	e, err := engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Skip: engine.Trail, Modules: []engine.Module{m}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ended := make(chan struct{})
	m.rt.Go(func() { <-ctx.Done(); close(ended) })
	cancel()
	<-ended
}

// A module's Start error fails Start, naming the module, with its kind;
// the work the modules before it started is stopped at once.
func TestStartFailure(t *testing.T) {
	ctx := context.Background()
	first := &starter{name: "timers"}
	bad := &starter{name: "watches", fail: armory.E("", armory.KindUnavailable, "no inotify")}
	e, err := engine.Open(ctx, engine.Options{World: testenv.ExampleWorld(t), Skip: engine.Trail, Modules: []engine.Module{first, bad}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	err = e.Start(ctx)
	if armory.KindOf(err) != armory.KindUnavailable || !strings.Contains(err.Error(), "module watches") || !strings.Contains(err.Error(), "no inotify") {
		t.Fatalf("Start: %v", err)
	}
	if got := first.events(); !slices.Equal(got, []string{"start", "work ended"}) {
		t.Fatalf("the first module's work after the failed Start: %v", got)
	}
	if err := e.Start(ctx); armory.KindOf(err) != armory.KindConflict {
		t.Fatalf("Start after a failed Start: %v", err)
	}
}

// An engine without a pipeline has nothing to start modules with.
func TestStartWithoutPipeline(t *testing.T) {
	e, err := engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Skip: engine.StoreOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.Start(context.Background()); armory.KindOf(err) != armory.KindInvalid {
		t.Fatalf("Start: %v", err)
	}
}

// Close waits for the background work at most StopTimeout: work that does
// not end is named in a KindTimeout error, and the modules are closed all
// the same. (The work blocks until the test releases it: the bound is
// what is tested, not a duration.)
func TestCloseBoundsTheWait(t *testing.T) {
	ctx := context.Background()
	m := &starter{name: "timers", stubborn: true, release: make(chan struct{})}
	defer close(m.release)
	e, err := engine.Open(ctx, engine.Options{World: testenv.ExampleWorld(t), Skip: engine.Trail, Modules: []engine.Module{m}, StopTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err = e.Close()
	if armory.KindOf(err) != armory.KindTimeout || !strings.Contains(err.Error(), "module timers") {
		t.Fatalf("Close: %v", err)
	}
	if got := m.events(); !slices.Equal(got, []string{"start", "close"}) {
		t.Fatalf("lifecycle: %v", got)
	}
}

// A module's event kinds are checked at Open; a module publishes only its
// own kinds, once Open has returned, to this process's subscribers.
func TestModuleEventKinds(t *testing.T) {
	ctx := context.Background()
	dir := testenv.ExampleWorld(t)
	for _, kinds := range [][]string{{""}, {"Message"}, {"1task"}, {"a-b"}, {"msg\nevent: x"}, {strings.Repeat("k", engine.MaxEventKind+1)},
		{engine.EventGap}, {pipeline.EventCallFinished}, {"task", "task"}} {
		_, err := engine.Open(ctx, engine.Options{World: dir, Skip: engine.Trail, Modules: []engine.Module{&starter{name: "svc", kinds: kinds}}})
		if armory.KindOf(err) != armory.KindInvalid {
			t.Errorf("kinds %q: %v", kinds, err)
		}
	}
	svc := &starter{name: "services", kinds: []string{"message", "task_2"}}
	other := &starter{name: "other", kinds: []string{"timer"}}
	e, err := engine.Open(ctx, engine.Options{World: dir, Skip: engine.Trail, Modules: []engine.Module{svc, other}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	want := []string{"approval_decided", "approval_requested", "call_finished", "limit_reached", "message", "task_2", "timer"}
	if got := e.EventKinds(); !slices.Equal(got, want) {
		t.Fatalf("EventKinds %v", got)
	}
	var got []pipeline.Event
	defer e.Subscribe(func(ev pipeline.Event) { got = append(got, ev) })()
	for _, ev := range []pipeline.Event{{Kind: "timer"}, {Kind: "chat"}, {Kind: pipeline.EventCallFinished}, {Kind: "message", Ref: strings.Repeat("r", engine.MaxEventRef+1)}} {
		if err := svc.env.Publish(ev); armory.KindOf(err) != armory.KindInvalid {
			t.Errorf("publish %q: %v", ev.Kind, err)
		}
	}
	if err := svc.env.Publish(pipeline.Event{Kind: "message", Agent: "architect", Ref: "m1"}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Kind != "message" || got[0].Ref != "m1" || got[0].Time.IsZero() {
		t.Fatalf("events %+v", got)
	}
	if err := (engine.Env{}).Publish(pipeline.Event{Kind: "message"}); armory.KindOf(err) != armory.KindUnavailable {
		t.Fatalf("an Env the engine did not build: %v", err)
	}
}

// Publishing before Open returned is refused (the kinds are not fixed yet).
func TestPublishDuringProvision(t *testing.T) {
	m := &publishing{}
	e, err := engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Skip: engine.Trail, Modules: []engine.Module{m}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if armory.KindOf(m.err) != armory.KindUnavailable {
		t.Fatalf("Publish in Provision: %v", m.err)
	}
}

type publishing struct{ err error }

func (*publishing) Name() string { return "early" }
func (m *publishing) Provision(_ context.Context, env engine.Env) (engine.Contribution, error) {
	m.err = env.Publish(pipeline.Event{Kind: "message"})
	return engine.Contribution{EventKinds: []string{"message"}}, nil
}
func (*publishing) Close() error { return nil }

// A module's event published in one process (a short command, never
// started) reaches the peer subscribers of another process on the same
// database (the server), which knows the kind from the same module; on
// SQLite as on Postgres.
func TestModuleEventsCrossProcesses(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testModuleEventsCrossProcesses(t, "") })
	t.Run("postgres", func(t *testing.T) { testModuleEventsCrossProcesses(t, testenv.PostgresSchema(t)) })
}

func testModuleEventsCrossProcesses(t *testing.T, dsn string) {
	ctx := context.Background()
	dir := testenv.ExampleWorld(t)
	srvMod := &starter{name: "services", kinds: []string{"message"}}
	srv, err := engine.Open(ctx, engine.Options{World: dir, DB: dsn, Skip: engine.Trail, Modules: []engine.Module{srvMod}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if err := srv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	evs := make(chan pipeline.Event, 16)
	defer srvMod.rt.SubscribePeers(func(ev pipeline.Event) { evs <- ev })()

	cliMod := &starter{name: "services", kinds: []string{"message"}}
	cli, err := engine.Open(ctx, engine.Options{World: dir, DB: dsn, Skip: engine.Trail, Modules: []engine.Module{cliMod}})
	if err != nil {
		t.Fatal(err)
	}
	if err := cliMod.env.Publish(pipeline.Event{Kind: "message", Agent: "architect", Ref: "msg-1"}); err != nil {
		t.Fatal(err)
	}
	cli.Close() // at once, as a CLI command does
	if got := cliMod.events(); !slices.Equal(got, []string{"close"}) {
		t.Fatalf("the short-lived engine started its module: %v", got)
	}
	select {
	case ev := <-evs:
		if ev.Kind != "message" || ev.Agent != "architect" || ev.Ref != "msg-1" {
			t.Fatalf("event %+v", ev)
		}
	case <-time.After(time.Minute): // a bound, not a timing check
		t.Fatal("the other process's message never arrived")
	}
}
