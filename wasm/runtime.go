package wasm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Options configure a Runtime. The zero value is usable.
type Options struct {
	// CacheDir keeps compiled modules on disk, so that a restarted process
	// serves a tool's first call without compiling it again; "" keeps them
	// in memory only. It is made (0700) when missing. Only the runtime may
	// write there: the code it holds runs in this process.
	CacheDir string
	// MaxCalls bounds the calls running at once, across every tool
	// (default 2 per CPU, at least 4). Each call holds up to its memory cap
	// and wazero's call stack (a few hundred MiB at most, for a module that
	// recurses without end) of the host's memory. A call waits for a place
	// up to its timeout.
	MaxCalls int
	// Warm is how many instances each tool keeps made ahead of its calls,
	// once it has been called (default 1; negative: none). An instance
	// serves one call and is then closed. One made ahead is also started
	// ahead: its module runs until it reads stdin, where it waits for its
	// call, and it serves the calls of the agent it was made for only. A
	// module that does not read stdin first is made ahead without being
	// started (it runs no code before its call). See ahead.go.
	Warm int
	// WarmIdle is how long an instance made ahead waits for its call
	// before it is closed (default DefaultWarmIdle).
	WarmIdle time.Duration
	// MaxModuleBytes bounds a .wasm file (default DefaultMaxModuleBytes).
	MaxModuleBytes int64
	// Logger receives what fails in the background (making an instance
	// ahead; a module that does not wait for its input, once per tool);
	// default: discard.
	Logger *slog.Logger

	// For tests and benchmarks: make instances ahead without starting
	// them; bound the start of one started ahead (default: the tool's
	// timeout, at most MaxStartBound).
	noStart    bool
	startBound time.Duration
}

// DefaultMaxModuleBytes bounds a .wasm file unless Options say otherwise.
const DefaultMaxModuleBytes = 128 << 20

// Runtime runs the WASM tools of a world (and of skill packs) on one
// wazero runtime with one compilation cache. It is safe for concurrent
// use; Close it once done.
type Runtime struct {
	opts    Options
	cache   wazero.CompilationCache
	rt      wazero.Runtime
	wasi    map[string]api.FunctionDefinition // what WASI preview 1 exports
	slots   chan struct{}
	compile sync.Mutex // one compilation at a time: the machine's cores serve the calls
	unmap   *unmapper  // closed instances' memories, given back off the calls' path

	mu      sync.Mutex
	closed  bool
	tools   map[*Tool]struct{}
	running map[*running]struct{}
	calls   sync.WaitGroup

	live atomic.Int64 // instances not yet closed, for tests
}

// errClosed is the cause of a call stopped because the runtime closes.
var errClosed = errors.New("the WASM runtime is closed")

// NewRuntime makes a runtime: wazero's compiler (its interpreter where the
// compiler does not run), WebAssembly 2.0 features without threads, every
// call stoppable at its deadline, and WASI preview 1 as the only host
// module. Errors: KindUnavailable when the cache folder cannot be made.
func NewRuntime(ctx context.Context, o Options) (*Runtime, error) {
	const op = "wasm.NewRuntime"
	if o.MaxCalls <= 0 {
		o.MaxCalls = max(4, 2*runtime.GOMAXPROCS(0))
	}
	switch {
	case o.Warm == 0:
		o.Warm = 1
	case o.Warm < 0:
		o.Warm = 0
	}
	if o.WarmIdle <= 0 {
		o.WarmIdle = DefaultWarmIdle
	}
	if o.MaxModuleBytes <= 0 {
		o.MaxModuleBytes = DefaultMaxModuleBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{opts: o, slots: make(chan struct{}, o.MaxCalls), tools: map[*Tool]struct{}{},
		running: map[*running]struct{}{}}
	if o.CacheDir != "" {
		if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
			return nil, armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot make the compilation cache %s: %v", o.CacheDir, err))
		}
		c, err := wazero.NewCompilationCacheWithDir(o.CacheDir)
		if err != nil {
			return nil, armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot use the compilation cache %s: %v", o.CacheDir, err))
		}
		r.cache = c
	} else {
		r.cache = wazero.NewCompilationCache()
	}
	// No runtime-wide memory limit below WebAssembly's own 4 GiB: each
	// tool's cap is enforced by the memory allocator of its instances
	// (capAllocator), which also tells what a module asked for.
	cfg := wazero.NewRuntimeConfig().
		WithCompilationCache(r.cache).
		WithCloseOnContextDone(true)
	r.rt = wazero.NewRuntimeWithConfig(ctx, cfg)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, r.rt); err != nil {
		r.rt.Close(ctx)
		r.cache.Close(ctx)
		return nil, armory.E(op, armory.KindInternal, "cannot instantiate WASI", err)
	}
	r.wasi = r.rt.Module(wasi_snapshot_preview1.ModuleName).ExportedFunctionDefinitions()
	r.unmap = newUnmapper()
	return r, nil
}

// Tool compiles the module of def (a toolbox tool with Wasm set) once and
// returns the tool that runs it; its Spec and Manifest come from def.
// The module must be a WASI preview 1 command: only
// wasi_snapshot_preview1 functions imported, an exported _start, no start
// section, at most one memory whose initial size fits the tool's cap, and
// function tables with a declared maximum (MaxTableEntries in all); each
// problem is named in the error. Errors: KindNotFound when the module file
// does not exist (errors.Is(err, fs.ErrNotExist)), KindInvalid for a file
// or module that cannot be used, KindUnavailable once the runtime is
// closed. The returned value is a *Tool; Close it to free its compiled
// code before the runtime closes (the runtime closes what is left).
func (r *Runtime) Tool(def *world.ToolboxTool) (armory.Tool, error) {
	if def == nil || def.Wasm == nil {
		return nil, armory.E("wasm.Tool", armory.KindInvalid, "not a WASM tool (no wasm: module)")
	}
	op := "wasm " + def.FullName()
	where := fmt.Sprintf("%s:%d: module %s", def.File, def.Wasm.Line, def.Wasm.Module)
	if r.isClosed() {
		return nil, armory.E(op, armory.KindUnavailable, "the WASM runtime is closed")
	}
	if why := checkDef(def); why != "" {
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("%s:%d: %s", def.File, def.Wasm.Line, why))
	}
	bin, err := world.ReadLimited(def.Wasm.ModulePath, r.opts.MaxModuleBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, armory.E(op, armory.KindNotFound, fmt.Sprintf("%s does not exist", where), err)
	}
	if err != nil {
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("%s cannot be read: %v", where, err))
	}
	_, bin, err = inspect(bin, def.Wasm.Memory)
	if err != nil {
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("%s %v", where, err))
	}
	r.compile.Lock()
	cm, err := r.rt.CompileModule(context.Background(), bin)
	r.compile.Unlock()
	if err != nil {
		if r.isClosed() {
			return nil, armory.E(op, armory.KindUnavailable, "the WASM runtime is closed")
		}
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("%s is not a valid WebAssembly module: %v", where, err))
	}
	for _, f := range cm.ImportedFunctions() {
		if _, name, _ := f.Import(); r.wasi[name] == nil {
			cm.Close(context.Background())
			return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("%s imports %s.%s, which WASI preview 1 does not have", where, WASI, name))
		}
	}
	t := newTool(r, def, cm)
	// One instance now: what links only at instantiation (a WASI function
	// imported with the wrong type) is refused here, not at the first call.
	ctx, cancel := context.WithTimeout(context.Background(), def.Timeout)
	in, err := t.newInstance(ctx)
	cancel()
	if err != nil {
		cm.Close(context.Background())
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("%s cannot be instantiated: %v", where, err))
	}
	in.close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		cm.Close(context.Background())
		return nil, armory.E(op, armory.KindUnavailable, "the WASM runtime is closed")
	}
	r.tools[t] = struct{}{}
	return t, nil
}

// checkDef holds a definition made by other code than world's parser (a
// skill pack's) to the rules world.ParseToolbox enforces: the limits in
// their bounds, grants that stay in the workspace clear of protected
// folders, and the capability each grant needs. It returns what is wrong.
func checkDef(def *world.ToolboxTool) string {
	w := def.Wasm
	switch {
	case def.Timeout <= 0 || def.Timeout > world.MaxToolTimeout:
		return fmt.Sprintf("timeout %s is not between 0 and %s", def.Timeout, world.MaxToolTimeout)
	case def.MaxOutput <= 0 || def.MaxOutput > world.MaxToolMaxOutput:
		return fmt.Sprintf("max_output %d is not between 1 and %d", def.MaxOutput, world.MaxToolMaxOutput)
	case w.Memory < world.WasmPageSize || w.Memory > world.MaxWasmMemory || w.Memory%world.WasmPageSize != 0:
		return fmt.Sprintf("memory %d is not a whole number of 64KiB pages up to 1GiB", w.Memory)
	case len(w.Files) > world.MaxWasmFiles:
		return fmt.Sprintf("%d granted folders; the limit is %d", len(w.Files), world.MaxWasmFiles)
	case !filepath.IsAbs(w.ModulePath):
		return fmt.Sprintf("the module path %q is not absolute", w.ModulePath)
	}
	for _, g := range w.Files {
		p := g.Path
		switch {
		case p == "" || path.Clean(p) != p || path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") || strings.ContainsAny(p, "\\\x00"):
			return fmt.Sprintf("the granted folder %q is not a clean path inside the workspace", p)
		case protectedPath(p):
			return fmt.Sprintf("the granted folder %q is or is inside .git, .ssh or .armory", p)
		case g.Write && p == ".":
			return "the whole workspace cannot be granted for writing"
		case g.Write && !def.Manifest.Has(armory.CapWriteFS):
			return fmt.Sprintf("the folder %q is granted for writing but the tool does not declare write_fs", p)
		case !g.Write && !def.Manifest.Has(armory.CapReadFS):
			return fmt.Sprintf("the folder %q is granted for reading but the tool does not declare read_fs", p)
		}
	}
	return ""
}

func (r *Runtime) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// acquire takes a place among the MaxCalls running calls, waiting while
// ctx lasts.
func (r *Runtime) acquire(ctx context.Context) error {
	select {
	case r.slots <- struct{}{}:
		return nil
	default:
	}
	select {
	case r.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runtime) release() { <-r.slots }

// running is a call in progress: Close stops it and waits for it.
type running struct{ stop context.CancelCauseFunc }

// begin registers a call, which Close stops with stop; nil once the
// runtime is closed. end is its pair.
func (r *Runtime) begin(stop context.CancelCauseFunc) *running {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	c := &running{stop: stop}
	r.running[c] = struct{}{}
	r.calls.Add(1)
	return c
}

func (r *Runtime) end(c *running) {
	r.mu.Lock()
	delete(r.running, c)
	r.mu.Unlock()
	r.calls.Done()
}

func (r *Runtime) forget(t *Tool) {
	r.mu.Lock()
	delete(r.tools, t)
	r.mu.Unlock()
}

// Close stops the calls still running (they fail with KindUnavailable)
// and waits for them to end, then closes every tool (their instances made
// ahead, stopped where they wait, and their compiled code), the runtime
// and the cache (on disk, the cache stays). Later calls fail with KindUnavailable. Should ctx end before
// the stopped calls have (a module stops at its next loop or call; a
// host call it is in finishes first), Close returns ctx's error and
// leaves wazero's runtime open rather than free memory a module may still
// touch. Close is safe to call more than once.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	for c := range r.running {
		c.stop(errClosed)
	}
	tools := make([]*Tool, 0, len(r.tools))
	for t := range r.tools {
		tools = append(tools, t)
	}
	r.tools = nil
	r.mu.Unlock()
	done := make(chan struct{})
	go func() {
		r.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return armory.E("wasm.Runtime.Close", armory.KindTimeout, "calls still running", ctx.Err())
	}
	for _, t := range tools {
		t.Close(ctx)
	}
	// The compilation lock: a compilation under way ends before the
	// runtime under it goes.
	r.compile.Lock()
	defer r.compile.Unlock()
	err := r.rt.Close(ctx)
	if e := r.cache.Close(ctx); err == nil {
		err = e
	}
	r.unmap.close()
	return err
}
