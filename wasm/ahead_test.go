package wasm

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
)

// named makes the probe's tool lab.NAME: the probe does what NAME says
// before it reads its input.
func named(n string) func(*world.ToolboxTool) {
	return func(d *world.ToolboxTool) { d.Name = n }
}

// onStarted calls tool for the agent of workspace ws once an instance is
// started ahead for it, and checks that the call was served by one.
func onStarted(t *testing.T, tool *Tool, ws string, args any) armory.Result {
	t.Helper()
	startedAhead(t, tool, ws)
	before := tool.servedStarted.Load()
	res := call(t, tool, ws, args)
	if tool.servedStarted.Load() != before+1 {
		t.Fatalf("the call was not served by an instance started ahead: %s", res.Text)
	}
	return res
}

// An instance started ahead has run its module up to its first read of
// stdin, and waits there; its call feeds the arguments.
func TestStartedAheadWaitsInItsRead(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	startedAhead(t, tool, "")
	tool.mu.Lock()
	in := tool.pool[0]
	tool.mu.Unlock()
	select {
	case <-in.stdin.ready:
	default:
		t.Fatal("a kept instance has not read stdin")
	}
	select {
	case <-in.exited:
		t.Fatal("a kept instance has ended")
	default:
	}
	if got := ok(t, onStarted(t, tool, "", op{"op": "echo", "text": "fed"})); got != "fed" {
		t.Fatalf("echo = %q", got)
	}
	// Still one call an instance.
	for range 3 {
		if got := ok(t, onStarted(t, tool, "", op{"op": "count"})); got != "1" {
			t.Fatalf("count = %q", got)
		}
	}
	if n := tool.startsTried.Load(); n < 4 {
		t.Fatalf("%d instances started ahead", n)
	}
}

// An instance started for one agent (its grants mounted from that agent's
// workspace) never serves another; the call mounts its own grants.
func TestStartedAheadServesItsAgentOnly(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), named("read-first"), grants(world.WasmFile{Path: "data"})))
	wsA, wsB := t.TempDir(), t.TempDir()
	writeFiles(t, wsA, map[string]string{"data/who.txt": "A"})
	writeFiles(t, wsB, map[string]string{"data/who.txt": "B"})

	startedAhead(t, tool, wsA)
	served := tool.servedStarted.Load()
	if got := ok(t, call(t, tool, wsB, op{"op": "who"})); got != "B" {
		t.Fatalf("B's call read %q before its input", got)
	}
	// Another agent on A's workspace is another agent too.
	res := tool.Execute(context.Background(), armory.Invocation{Args: []byte(`{"op":"who"}`), Agent: &armory.AgentEnv{ID: "other", Workspace: wsA}})
	if ok(t, res) != "A" || tool.servedStarted.Load() != served {
		t.Fatalf("an instance started for tester@A served another agent (%d served)", tool.servedStarted.Load()-served)
	}
	// With one kept in all, the latest caller's replaces it.
	waitFor(t, func() bool { return keptFor(tool, &armory.AgentEnv{ID: "other", Workspace: wsA}) == 1 })
	if keptFor(tool, tester(wsA)) != 0 || keptFor(tool, tester(wsB)) != 0 {
		t.Fatal("more than Warm instances kept")
	}
	if got := ok(t, onStarted(t, tool, wsA, op{"op": "who"})); got != "A" {
		t.Fatalf("A's call read %q", got)
	}

	// The call mounts the grants it opens itself: a folder replaced
	// while the instance waited is the new one.
	startedAhead(t, tool, wsA)
	if err := os.Rename(filepath.Join(wsA, "data"), filepath.Join(wsA, "data-old")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, wsA, map[string]string{"data/who.txt": "A, again"})
	before := tool.servedStarted.Load()
	if got := ok(t, call(t, tool, wsA, op{"op": "read", "path": "/workspace/data/who.txt"})); got != "A, again" || tool.servedStarted.Load() != before+1 {
		t.Fatalf("read %q", got)
	}

	// Two kept: two agents each get theirs.
	two := mustTool(t, newRuntime(t, Options{Warm: 2}), def(probe(t), named("read-first"), grants(world.WasmFile{Path: "data"})))
	startedAhead(t, two, wsA)
	startedAhead(t, two, wsB)
	for range 2 {
		if a, b := ok(t, onStarted(t, two, wsA, op{"op": "who"})), ok(t, onStarted(t, two, wsB, op{"op": "who"})); a != "A, again" || b != "B" {
			t.Fatalf("A read %q, B read %q", a, b)
		}
	}
}

// A call that finds no instance kept for its agent, while one is starting
// for it, takes that one: the module reads the call's arguments when it
// gets to its read, with the call's grants mounted.
func TestCallClaimsAnInstanceStarting(t *testing.T) {
	r := newRuntime(t, Options{})
	slow := mustTool(t, r, def(probe(t), named("slow-first"), grants(world.WasmFile{Path: "data"})))
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"data/x.txt": "first"})
	starting := func(ag *armory.AgentEnv) bool {
		slow.mu.Lock()
		defer slow.mu.Unlock()
		return slow.starting != nil && slow.starting.key == agentOf(ag).key
	}
	stillServes(t, slow, ws)
	waitFor(t, func() bool { return starting(tester(ws)) }) // 300 ms of work before its read
	if err := os.Rename(filepath.Join(ws, "data"), filepath.Join(ws, "data-old")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, ws, map[string]string{"data/x.txt": "second"})
	if got := ok(t, call(t, slow, ws, op{"op": "read", "path": "/workspace/data/x.txt"})); got != "second" || slow.servedStarting.Load() != 1 {
		t.Fatalf("read %q, %d claimed", got, slow.servedStarting.Load())
	}
	if slow.noStart.Load() {
		t.Fatal("a module that reads its input was taken for one that does not")
	}
	// Another agent's call does not take it.
	waitFor(t, func() bool { return starting(tester(ws)) })
	other := &armory.AgentEnv{ID: "other", Workspace: ws}
	if got := ok(t, slow.Execute(context.Background(), armory.Invocation{Args: []byte(`{"op":"echo","text":"B"}`), Agent: other})); got != "B" || slow.servedStarting.Load() != 1 {
		t.Fatalf("echo = %q, %d claimed", got, slow.servedStarting.Load())
	}
}

// A call served by an instance started ahead is bounded as any: its
// timeout from the call's start, its output, its memory, its stderr, the
// caller.
func TestStartedAheadKeepsTheCallsLimits(t *testing.T) {
	r := newRuntime(t, Options{})
	quick := mustTool(t, r, def(probe(t), timeout(time.Second)))
	tool := mustTool(t, r, def(probe(t)))

	res := onStarted(t, quick, "", op{"op": "spin"})
	failed(t, res, armory.KindTimeout, "[lab.probe: timed out after 1s; the module was stopped (timeout: in toolbox.yaml)]")
	if v := res.Value.(map[string]any); v["timed_out"] != true {
		t.Fatalf("value = %v", v)
	}
	failed(t, onStarted(t, quick, "", op{"op": "sleep"}), armory.KindTimeout, "timed out after 1s")
	// The time an instance waits for its call is not the call's.
	startedAhead(t, quick, "")
	time.Sleep(1500 * time.Millisecond)
	if got := ok(t, onStarted(t, quick, "", op{"op": "echo", "text": "in time"})); got != "in time" {
		t.Fatalf("echo = %q", got)
	}

	res = onStarted(t, tool, "", op{"op": "flood"})
	failed(t, res, armory.KindOther, "[lab.probe: output exceeded max_output (65536 bytes); the module was stopped and its output is not returned")
	if strings.Contains(res.Text, "xxxx") {
		t.Fatal("a cut output was returned")
	}
	failed(t, onStarted(t, tool, "", op{"op": "alloc", "bytes": 1 << 30}), armory.KindOther,
		"fatal error: out of memory", "exit code 2", "the module asked for 1.0GiB", "its cap is 64MiB")
	res = onStarted(t, tool, "", op{"op": "stderr", "bytes": 1 << 20, "code": 3})
	failed(t, res, armory.KindOther, "[stderr]\neeee", "bytes of stderr left out …]\neeee", "the last line", "[lab.probe: exit code 3]")
	if len(res.Text) > StderrHead+StderrTail+256 {
		t.Fatalf("stderr not bounded: %d bytes", len(res.Text))
	}
	failed(t, onStarted(t, tool, "", op{"op": "panic"}), armory.KindOther, "panic: probe panics", "exit code 2")
	if v := onStarted(t, tool, "", op{"op": "env"}).Value.(map[string]any); v["memory_bytes"].(uint64) == 0 {
		t.Fatalf("value = %v", v)
	}

	// The caller ending the call stops the module.
	startedAhead(t, tool, "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan armory.Result)
	before := tool.servedStarted.Load()
	go func() { done <- callCtx(ctx, t, tool, "", op{"op": "spin"}) }()
	waitFor(t, func() bool { return tool.servedStarted.Load() == before+1 })
	cancel()
	failed(t, <-done, armory.KindOther, "the call ended after", "context canceled")
	stillServes(t, tool)
}

// Instances that wait longer than WarmIdle are closed.
func TestStartedAheadIdleAreClosed(t *testing.T) {
	base := goruntime.NumGoroutine()
	r := newRuntime(t, Options{Warm: 2, WarmIdle: 200 * time.Millisecond})
	tool := mustTool(t, r, def(probe(t)))
	stillServes(t, tool)
	waitFor(t, func() bool { return tool.startsTried.Load() >= 2 && keptAll(tool) == 0 && r.live.Load() == 0 })
	// The refiller waits for the next call, the unmapper for memory to
	// give back; the instances' goroutines are gone.
	noMoreGoroutines(t, base+2)
	stillServes(t, tool)
}

// Closing stops instances started ahead, those starting, and calls served
// by one: no instance and no goroutine is left.
func TestCloseStopsInstancesStartedAhead(t *testing.T) {
	for _, closeTool := range []bool{false, true} {
		base := goruntime.NumGoroutine()
		r, err := NewRuntime(context.Background(), Options{CacheDir: cacheDir, Warm: 2})
		if err != nil {
			t.Fatal(err)
		}
		tool := mustTool(t, r, def(probe(t)))
		slow := mustTool(t, r, def(probe(t), named("slow-first")))
		wsA, wsB := t.TempDir(), t.TempDir()
		startedAhead(t, tool, wsA)
		startedAhead(t, tool, wsB)
		startedAhead(t, tool, wsA)
		// A call running on an instance started ahead.
		done := make(chan armory.Result)
		before := tool.servedStarted.Load()
		go func() { done <- call(t, tool, wsA, op{"op": "spin"}) }()
		waitFor(t, func() bool { return tool.servedStarted.Load() == before+1 })
		// An instance starting (300 ms of work before it reads stdin).
		ok(t, call(t, slow, "", op{"op": "echo"}))
		if closeTool {
			if err := tool.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			failed(t, <-done, armory.KindUnavailable, "the tool was closed while the module ran")
			if err := slow.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if r.live.Load() != 0 {
				t.Fatalf("%d instances open after the tools closed", r.live.Load())
			}
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if !closeTool {
			failed(t, <-done, armory.KindUnavailable, "the WASM runtime closed while the module ran")
		}
		if r.live.Load() != 0 {
			t.Fatalf("%d instances open after Close", r.live.Load())
		}
		noMoreGoroutines(t, base)
	}
}

// noMoreGoroutines waits until at most n goroutines run, and shows them
// if they do not end.
func noMoreGoroutines(t *testing.T, n int) {
	t.Helper()
	for end := time.Now().Add(time.Minute); goruntime.NumGoroutine() > n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			var b bytes.Buffer
			pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Fatalf("%d goroutines, want at most %d:\n%s", goruntime.NumGoroutine(), n, b.String())
		}
	}
}

// lockedBuffer is a log's output, read by the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}
