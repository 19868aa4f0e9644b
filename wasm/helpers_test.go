package wasm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/world"
)

// cacheDir is one compilation cache for the package's tests: each test
// module is compiled once per run, later runtimes load it.
var cacheDir string

func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper() // the benchmarks run a toolbox binary in the sandbox
	dir, err := os.MkdirTemp("", "armory-wasm-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cacheDir = filepath.Join(dir, "cache")
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var builds sync.Map // package dir → *built

type built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// goWasm builds the Go main package in dir (relative to this package) for
// GOOS=wasip1 GOARCH=wasm with the local toolchain, once per test run, and
// returns the module's path. extra files (relative to this package) are
// added to the package for the build.
func goWasm(t testing.TB, dir string, extra ...string) string {
	t.Helper()
	key := strings.Join(append([]string{dir}, extra...), "+")
	v, _ := builds.LoadOrStore(key, &built{})
	b := v.(*built)
	b.once.Do(func() {
		goBin, err := exec.LookPath("go")
		if err != nil {
			b.err = err
			return
		}
		name := filepath.Base(dir)
		args := []string{"build"}
		if len(extra) > 0 {
			replace := map[string]string{}
			for _, e := range extra {
				abs, err := filepath.Abs(e)
				if err != nil {
					b.err = err
					return
				}
				pkg, err := filepath.Abs(filepath.Join(dir, "zz_"+filepath.Base(e)))
				if err != nil {
					b.err = err
					return
				}
				replace[pkg] = abs
				name += "+" + strings.TrimSuffix(filepath.Base(e), ".go")
			}
			overlay := filepath.Join(filepath.Dir(cacheDir), name+".overlay.json")
			data, _ := json.Marshal(map[string]any{"Replace": replace})
			if b.err = os.WriteFile(overlay, data, 0o644); b.err != nil {
				return
			}
			args = append(args, "-overlay", overlay)
		}
		b.path = filepath.Join(filepath.Dir(cacheDir), name+".wasm")
		cmd := exec.Command(goBin, append(args, "-o", b.path, "./"+dir)...)
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
		b.out, b.err = cmd.CombinedOutput()
	})
	if b.err != nil {
		t.Fatalf("building %s for wasip1: %v\n%s", dir, b.err, b.out)
	}
	return b.path
}

// probe is the path of testdata/probe built for WASI.
func probe(t testing.TB) string { return goWasm(t, "testdata/probe") }

// newRuntime makes a runtime on the package's cache, closed with the test.
func newRuntime(t testing.TB, o Options) *Runtime {
	t.Helper()
	if o.CacheDir == "" {
		o.CacheDir = cacheDir
	}
	r, err := NewRuntime(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// def is a WASM toolbox tool running module.
func def(module string, edit ...func(*world.ToolboxTool)) *world.ToolboxTool {
	d := &world.ToolboxTool{
		Toolbox: "lab", Name: "probe", File: "toolbox/lab/toolbox.yaml", Line: 3,
		Description: "the test probe", Timeout: 20 * time.Second, MaxOutput: 64 << 10,
		Manifest: armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Capabilities: []armory.Capability{armory.CapReadFS, armory.CapWriteFS}},
		Wasm: &world.WasmTool{Module: filepath.Base(module), ModulePath: module, InputSchema: armory.EmptyObjectSchema,
			Memory: world.DefaultWasmMemory, Line: 5},
	}
	for _, e := range edit {
		e(d)
	}
	return d
}

func grants(files ...world.WasmFile) func(*world.ToolboxTool) {
	return func(d *world.ToolboxTool) { d.Wasm.Files = files }
}

func timeout(d time.Duration) func(*world.ToolboxTool) {
	return func(d2 *world.ToolboxTool) { d2.Timeout = d }
}

// mustTool compiles def's module.
func mustTool(t testing.TB, r *Runtime, d *world.ToolboxTool) *Tool {
	t.Helper()
	tool, err := r.Tool(d)
	if err != nil {
		t.Fatal(err)
	}
	return tool.(*Tool)
}

// call runs tool for an agent whose workspace is ws ("" for none).
func call(t testing.TB, tool armory.Tool, ws string, args any) armory.Result {
	t.Helper()
	return callCtx(context.Background(), t, tool, ws, args)
}

func callCtx(ctx context.Context, t testing.TB, tool armory.Tool, ws string, args any) armory.Result {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tool.Execute(ctx, armory.Invocation{Args: raw, Agent: tester(ws)})
}

// tester is the agent whose workspace is ws; nil for "".
func tester(ws string) *armory.AgentEnv {
	if ws == "" {
		return nil
	}
	return &armory.AgentEnv{ID: "tester", Workspace: ws}
}

// op is a probe request.
type op = map[string]any

// ok checks a successful call and returns its text.
func ok(t testing.TB, res armory.Result) string {
	t.Helper()
	if !res.Success {
		t.Fatalf("call failed (%v): %s", res.Kind, res.Text)
	}
	return res.Text
}

// failed checks a failed call of kind k whose text holds every want.
func failed(t testing.TB, res armory.Result, k armory.Kind, want ...string) {
	t.Helper()
	if res.Success {
		t.Fatalf("call succeeded, want a %v failure: %s", k, res.Text)
	}
	if res.Kind != k {
		t.Errorf("kind = %v, want %v: %s", res.Kind, k, res.Text)
	}
	for _, w := range want {
		if !strings.Contains(strings.ToLower(res.Text), strings.ToLower(w)) {
			t.Errorf("text lacks %q:\n%s", w, res.Text)
		}
	}
}

// stillServes checks that the runtime serves an ordinary call (of a tool
// with grants, for an agent with workspace ws).
func stillServes(t testing.TB, tool armory.Tool, ws ...string) {
	t.Helper()
	if got := ok(t, call(t, tool, strings.Join(ws, ""), op{"op": "echo", "text": "still here"})); got != "still here" {
		t.Fatalf("echo = %q", got)
	}
}

// writeFiles writes files (slash path → content) under dir.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// keptFor counts the instances a tool keeps started ahead for agent ag
// (nil: calls with no agent).
func keptFor(tool *Tool, ag *armory.AgentEnv) int {
	a := agentOf(ag)
	tool.mu.Lock()
	defer tool.mu.Unlock()
	n := 0
	for _, in := range tool.pool {
		if in.started && in.key == a.key {
			n++
		}
	}
	return n
}

// keptAll counts the instances a tool keeps made ahead.
func keptAll(tool *Tool) int {
	tool.mu.Lock()
	defer tool.mu.Unlock()
	return len(tool.pool)
}

// startedAhead calls tool once for the agent with workspace ws (the call
// makes instances ahead for that agent), and waits until one is started.
func startedAhead(t testing.TB, tool *Tool, ws string) {
	t.Helper()
	stillServes(t, tool, ws)
	waitFor(t, func() bool { return keptFor(tool, tester(ws)) > 0 })
}
