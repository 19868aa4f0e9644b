package wasm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
)

// Limits of one call.
const (
	// MaxInputBytes bounds the arguments a module reads on stdin.
	MaxInputBytes = 1 << 20
	// StderrHead and StderrTail are how much of the start and of the end of
	// a module's stderr a failed call reports (what is between is counted).
	StderrHead = 1 << 10
	StderrTail = 3 << 10
	// maxTrapText bounds the trap message (wazero's stack trace) reported.
	maxTrapText = 2 << 10
)

// env is the whole environment a module gets: its working directory is
// /workspace, no variable of the host reaches it.
var env = map[string]string{"PWD": world.WasmWorkspace, "HOME": world.WasmWorkspace, "LANG": "C.UTF-8", "TZ": "UTC"}

// Tool is a WASM tool: a compiled module run in a fresh instance for each
// call. Safe for concurrent use.
type Tool struct {
	r      *Runtime
	def    *world.ToolboxTool
	spec   armory.Spec
	man    armory.Manifest
	cm     wazero.CompiledModule
	guests []string

	// Instances made ahead of calls (ahead.go): pool holds them, in the
	// order they were made; wants are the agents whose calls ended, for
	// the refiller (started at the first call) to make instances for.
	kick      chan struct{}
	stop      chan struct{}
	stopped   chan struct{}
	noStart   atomic.Bool // made ahead without being started
	mu        sync.Mutex
	pool      []*instance
	starting  *starting // the refiller's start under way
	wants     []agentRef
	refilling bool
	closed    bool
	// The calls running, which Close stops and waits for.
	running map[*running]struct{}
	calls   sync.WaitGroup

	// Counts, for tests and benchmarks: instances started ahead, calls
	// served by one, calls that claimed one while it started.
	startsTried, servedStarted, servedStarting atomic.Int64
}

var _ armory.Tool = (*Tool)(nil)

func newTool(r *Runtime, def *world.ToolboxTool, cm wazero.CompiledModule) *Tool {
	t := &Tool{r: r, def: def, cm: cm, man: def.Manifest, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}), running: map[*running]struct{}{}}
	t.noStart.Store(r.opts.noStart)
	t.man.Capabilities = slices.Clone(def.Manifest.Capabilities)
	t.man.Requires = slices.Clone(def.Manifest.Requires)
	t.spec = armory.Spec{Name: def.FullName(), Description: def.Description, InputSchema: def.Wasm.InputSchema}
	for _, g := range def.Wasm.Files {
		t.guests = append(t.guests, g.GuestPath())
	}
	return t
}

// Def returns the tool's definition.
func (t *Tool) Def() *world.ToolboxTool { return t.def }

func (t *Tool) Spec() armory.Spec         { return t.spec }
func (t *Tool) Manifest() armory.Manifest { return t.man }

// Close stops the tool's calls still running (they fail with
// KindUnavailable) and waits for them, stops and closes its instances made
// ahead, and frees its compiled code; later calls fail with
// KindUnavailable. Should ctx end before the stopped calls have, Close
// returns ctx's error and leaves the compiled code (which they may still
// run) in place. Safe to call more than once.
func (t *Tool) Close(ctx context.Context) error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	refilling := t.refilling
	close(t.stop)
	for c := range t.running {
		c.stop(errToolClosed)
	}
	pool := t.pool
	t.pool, t.wants = nil, nil
	t.mu.Unlock()
	// The refiller stops what it is starting, at once.
	if refilling {
		<-t.stopped
	}
	for _, in := range pool {
		in.drop()
	}
	done := make(chan struct{})
	go func() {
		t.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return armory.E("wasm.Tool.Close", armory.KindTimeout, t.spec.Name+": calls still running", ctx.Err())
	}
	t.r.forget(t)
	return t.cm.Close(ctx)
}

// begin registers a call, which Close stops with stop; nil once the tool
// is closed. end is its pair.
func (t *Tool) begin(stop context.CancelCauseFunc) *running {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	c := &running{stop: stop}
	t.running[c] = struct{}{}
	t.calls.Add(1)
	return c
}

func (t *Tool) end(c *running) {
	t.mu.Lock()
	delete(t.running, c)
	t.mu.Unlock()
	t.calls.Done()
}

// instance is one instantiation of the module, for one call. Everything a
// call brings (arguments, granted folders, its context) is bound just
// before _start runs, or, for an instance started ahead (ahead.go), while
// the module waits for its arguments in its first read of stdin; so an
// instance can be made ahead of its call.
type instance struct {
	t      *Tool
	mod    api.Module
	start  api.Function
	mem    *capAllocator
	stdin  *input
	stdout *capped
	stderr *headTail
	grants []*grantFS
	ctx    context.Context // the call's (started ahead: the instance's own), for sleeps
	closed bool

	// Made ahead: when it joined the pool. Started ahead: for whom, the
	// grants it was started with, its own context (the call's end cancels
	// it), exited (closed once _start returned, with err, and the module
	// is closed).
	made    time.Time
	started bool
	claimed bool // by a call, while it started
	key     string
	roots   []*os.Root
	cancel  context.CancelCauseFunc
	exited  chan struct{}
	err     error
}

// newInstance instantiates the module without running it.
func (t *Tool) newInstance(ctx context.Context) (*instance, error) {
	in := &instance{t: t, stdin: &input{}, stdout: &capped{max: t.def.MaxOutput}, stderr: &headTail{head: StderrHead, tail: StderrTail},
		mem: &capAllocator{cap: uint64(t.def.Wasm.Memory), unmap: t.r.unmap}}
	fsc := wazero.NewFSConfig().(sysfs.FSConfig).WithSysFSMount(newRootFS(t.guests), "/")
	for i, g := range t.def.Wasm.Files {
		gf := &grantFS{write: g.Write}
		in.grants = append(in.grants, gf)
		fsc = fsc.(sysfs.FSConfig).WithSysFSMount(gf, t.guests[i])
	}
	cfg := wazero.NewModuleConfig().
		WithName("").         // anonymous: instances of one module side by side
		WithStartFunctions(). // _start runs in the call
		WithArgs(t.spec.Name).
		WithStdin(in.stdin).WithStdout(in.stdout).WithStderr(in.stderr).
		WithFSConfig(fsc).
		WithSysWalltime().WithSysNanotime().WithNanosleep(in.sleep).WithOsyield(goruntime.Gosched).
		WithRandSource(rand.Reader)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		cfg = cfg.WithEnv(k, env[k])
	}
	mod, err := t.r.rt.InstantiateModule(experimental.WithMemoryAllocator(ctx, in.mem), t.cm, cfg)
	if err != nil {
		if mod != nil {
			mod.Close(context.Background())
		}
		return nil, err
	}
	t.r.live.Add(1)
	in.mod, in.start = mod, mod.ExportedFunction("_start")
	if in.start == nil {
		in.close()
		return nil, errors.New("exports no function _start")
	}
	return in, nil
}

// sleep is WASI's sleep (poll_oneoff on a clock): it ends early when the
// call does, so a sleeping module cannot outlast its timeout.
func (in *instance) sleep(ns int64) {
	if ns <= 0 || in.ctx == nil {
		return
	}
	tm := time.NewTimer(time.Duration(ns))
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-in.ctx.Done():
	}
}

func (in *instance) close() {
	if in.mod != nil && !in.closed {
		in.closed = true
		in.mod.Close(context.Background())
		in.t.r.live.Add(-1)
	}
}

// errOutput is the cause of a call stopped for its output;
// errToolClosed of one stopped because its tool closes.
var (
	errOutput     = errors.New("output over max_output")
	errToolClosed = errors.New("the WASM tool is closed")
)

// Execute runs the module once: a fresh instance, the arguments as JSON
// on stdin, the granted folders of the agent's workspace mounted, and
// stdout as the result. The whole call is bounded by the tool's timeout.
// Failures (Result.Success false): KindInvalid (arguments not a JSON
// object; a granted folder that is not a real folder), KindTooLarge
// (arguments over MaxInputBytes), KindNotFound (a folder granted
// read-only is missing), KindUnavailable (no workspace for a tool that
// needs one, the runtime closed), KindTimeout (the module was stopped at
// the timeout, or every place was taken that long), KindOther (a non-zero
// exit, a trap, output over max_output — never a cut result — or memory
// over the cap, named in the text, with stderr's tail).
func (t *Tool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	began := time.Now()
	name := t.spec.Name
	args, err := callInput(name, inv.Args)
	if err != nil {
		return armory.FailErr(err)
	}
	callCtx, cancel := context.WithTimeout(ctx, t.def.Timeout)
	defer cancel()
	// runCtx ends the module early: for its output, or the runtime or the
	// tool closing.
	runCtx, stop := context.WithCancelCause(callCtx)
	defer stop(nil)
	running := t.r.begin(stop)
	if running == nil {
		return armory.Failf(armory.KindUnavailable, "%s: the WASM runtime is closed", name)
	}
	defer t.r.end(running)
	mine := t.begin(stop)
	if mine == nil {
		return armory.Failf(armory.KindUnavailable, "%s: the WASM runtime is closed", name)
	}
	defer t.end(mine)
	var roots []*os.Root
	if len(t.def.Wasm.Files) > 0 {
		if inv.Agent == nil || inv.Agent.Workspace == "" {
			return armory.Failf(armory.KindUnavailable, "%s: this agent has no workspace, and the tool reads or writes folders of one", name)
		}
		if err := os.MkdirAll(inv.Agent.Workspace, 0o750); err != nil {
			return armory.Failf(armory.KindUnavailable, "%s: cannot create the workspace: %v", name, err)
		}
		if roots, err = openGrants(name, inv.Agent.Workspace, t.def.Wasm.Files); err != nil {
			return armory.FailErr(err)
		}
		defer func() {
			for _, r := range roots {
				r.Close()
			}
		}()
	}
	if err := t.r.acquire(runCtx); err != nil {
		if c := context.Cause(runCtx); c == errClosed || c == errToolClosed {
			return armory.Failf(armory.KindUnavailable, "%s: the WASM runtime is closed", name)
		}
		if ctx.Err() != nil {
			return armory.Failf(armory.KindTimeout, "%s: the call ended before a place was free (%d WASM calls run at once)", name, cap(t.r.slots))
		}
		return armory.Failf(armory.KindTimeout, "%s: no place was free within the timeout of %s (%d WASM calls run at once)", name, t.def.Timeout, cap(t.r.slots))
	}
	defer t.r.release()
	agent := agentOf(inv.Agent)
	in, err := t.take(runCtx, agent)
	if err != nil {
		if t.r.isClosed() || t.isClosed() {
			return armory.Failf(armory.KindUnavailable, "%s: the WASM runtime is closed", name)
		}
		return armory.Failf(armory.KindOther, "%s: cannot instantiate the module: %v", name, err)
	}
	defer t.refill(agent) // after the call: making the next instance does not compete with it
	if in.started {
		if in.claimed {
			t.servedStarting.Add(1)
		} else {
			t.servedStarted.Add(1)
		}
		err := in.serve(runCtx, args, roots)
		return t.report(in, err, ctx, callCtx, runCtx, time.Since(began))
	}
	defer in.close()

	in.ctx = runCtx
	in.stdin.r = bytes.NewReader(args)
	in.stdout.over = func() { stop(errOutput) }
	for i, g := range in.grants {
		g.bind(roots[i])
	}
	_, err = in.start.Call(runCtx)
	return t.report(in, err, ctx, callCtx, runCtx, time.Since(began))
}

func (t *Tool) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// callInput checks the arguments: one JSON object (nothing or null is {}).
func callInput(op string, raw json.RawMessage) ([]byte, error) {
	b := bytes.TrimSpace(raw)
	switch {
	case len(b) == 0 || string(b) == "null":
		return []byte("{}"), nil
	case len(b) > MaxInputBytes:
		return nil, armory.E(op, armory.KindTooLarge, fmt.Sprintf("arguments are %d bytes; the limit is %d", len(b), MaxInputBytes))
	case b[0] != '{' || !json.Valid(b):
		return nil, armory.E(op, armory.KindInvalid, "arguments must be one JSON object")
	}
	return b, nil
}

// report turns how _start ended into the result.
func (t *Tool) report(in *instance, err error, ctx, callCtx, runCtx context.Context, took time.Duration) armory.Result {
	code, trap := uint32(0), error(nil)
	var ee *sys.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		trap = err
	}
	var memBytes uint64
	var refused uint64
	if m := in.mem.mem; m != nil {
		memBytes, refused = m.size, m.refused
	}
	value := map[string]any{
		"exit_code": code, "duration_ms": took.Milliseconds(), "memory_bytes": memBytes,
		"output_bytes": in.stdout.total, "timed_out": false,
	}
	stoppedByCtx := runCtx.Err() != nil && (code == sys.ExitCodeDeadlineExceeded || code == sys.ExitCodeContextCanceled || trap != nil)
	var status string
	kind := armory.KindOther
	withOut := true
	switch {
	case in.stdout.total > int64(in.stdout.max):
		withOut = false
		status = fmt.Sprintf("output exceeded max_output (%d bytes); the module was stopped and its output is not returned: ask for less, or raise max_output in toolbox.yaml (at most %d)", in.stdout.max, world.MaxToolMaxOutput)
	case stoppedByCtx && context.Cause(runCtx) == errClosed:
		kind = armory.KindUnavailable
		status = "the WASM runtime closed while the module ran; it was stopped"
	case stoppedByCtx && context.Cause(runCtx) == errToolClosed:
		kind = armory.KindUnavailable
		status = "the tool was closed while the module ran; it was stopped"
	case stoppedByCtx && callCtx.Err() == context.DeadlineExceeded && ctx.Err() == nil:
		kind, value["timed_out"] = armory.KindTimeout, true
		status = fmt.Sprintf("timed out after %s; the module was stopped (timeout: in toolbox.yaml)", t.def.Timeout)
	case stoppedByCtx:
		kind = armory.KindTimeout
		if errors.Is(ctx.Err(), context.Canceled) {
			kind = armory.KindOther
		}
		status = fmt.Sprintf("the call ended after %s (%v); the module was stopped", took.Round(time.Millisecond), ctx.Err())
	case trap != nil:
		msg := trap.Error()
		if len(msg) > maxTrapText {
			msg = msg[:maxTrapText] + "…"
		}
		status = "the module trapped: " + strings.TrimSpace(msg)
	case code != 0:
		status = fmt.Sprintf("exit code %d", code)
	}
	if refused > 0 && status != "" {
		// A module that coped with a refused grow succeeded; one that
		// failed is told why.
		status += fmt.Sprintf("; the module asked for %s of memory, its cap is %s (memory: in toolbox.yaml, at most %s)", sizeName(refused), sizeName(in.mem.cap), sizeName(world.MaxWasmMemory))
	}
	out := strings.ToValidUTF8(in.stdout.buf.String(), "\uFFFD")
	if status == "" {
		return armory.Result{Success: true, Text: out, Value: value}
	}
	var b strings.Builder
	if withOut && out != "" {
		b.WriteString(out)
		if !strings.HasSuffix(out, "\n") {
			b.WriteByte('\n')
		}
	}
	if e := in.stderr.text(); e != "" {
		b.WriteString("[stderr]\n")
		b.WriteString(strings.ToValidUTF8(e, "\uFFFD"))
		if !strings.HasSuffix(e, "\n") {
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "[%s: %s]", t.spec.Name, status)
	return armory.Result{Success: false, Kind: kind, Text: b.String(), Value: value}
}
