package wasm

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/toolbox"
	"github.com/armory-dev/armory/world"
)

// benchRequest is what the benchmarks ask the example jsonpick tool.
const benchRequest = `{"json":{"items":[{"id":1,"name":"a"},{"id":2,"name":"b"},{"id":3,"name":"c"}]},"paths":["items.*.id","items.-1.name"]}`

const benchAnswer = `{"missing":[],"picked":{"items.*.id":[1,2,3],"items.-1.name":"c"}}` + "\n"

// goNative builds the Go main package in dir for this machine.
func goNative(b *testing.B, dir string) string {
	b.Helper()
	out := filepath.Join(b.TempDir(), filepath.Base(dir))
	cmd := exec.Command("go", "build", "-o", out, "./"+dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", dir, err, msg)
	}
	return out
}

// BenchmarkWarmCallVsSandboxedBinary runs the example jsonpick tool as a
// WASM tool and, interleaved in the same loop, the same Go program built
// for the host as a toolbox binary tool in the process sandbox (bwrap):
// wasm-ns/op and binary-ns/op are each one call, faster is binary-ns over
// wasm-ns. "cold" runs the sandbox without its warm pool, "warm-pool" with
// it (armory serve's default); the WASM tool keeps its own instance made
// and started ahead (Options.Warm, the default) in both; started-ahead is
// the share of its calls that found one, taken-starting of those that took
// one still starting.
func BenchmarkWarmCallVsSandboxedBinary(b *testing.B) {
	if err := sandbox.Requirement("bwrap"); err != nil {
		b.Skip("no bwrap sandbox:", err)
	}
	wasmDef := def(goWasm(b, "../example/wasm/jsonpick"))
	binDef := &world.ToolboxTool{Toolbox: "lab", Name: "jsonpick", Binary: goNative(b, "../example/wasm/jsonpick"),
		Args:    []world.Arg{{Name: "request", Type: world.ArgPositional, Required: true}},
		Timeout: 20 * time.Second, MaxOutput: 64 << 10, Manifest: armory.Manifest{Danger: armory.DangerSafe}}
	binDef.BinaryPath = binDef.Binary
	bin := toolbox.New(binDef)
	r := newRuntime(b, Options{})
	wt := mustTool(b, r, wasmDef)
	agent := &armory.AgentEnv{ID: "bench", Workspace: b.TempDir(), Sandbox: armory.SandboxPolicy{Backend: "bwrap"}}
	wasmInv := armory.Invocation{Args: json.RawMessage(benchRequest), Agent: agent}
	binArgs, _ := json.Marshal(map[string]string{"request": benchRequest})
	binInv := armory.Invocation{Args: binArgs, Agent: agent}
	run := func(tool armory.Tool, inv armory.Invocation) {
		if res := tool.Execute(context.Background(), inv); !res.Success || res.Text != benchAnswer {
			b.Fatalf("%s: %v %q", tool.Spec().Name, res.Kind, res.Text)
		}
	}
	run(wt, wasmInv) // the first call starts the tool's warm instances
	waitFor(b, func() bool { return keptFor(wt, agent) == 1 })
	// The share of calls that found an instance started ahead, and that
	// took one still starting.
	type counts struct{ started, starting int64 }
	count := func(tool *Tool) counts { return counts{tool.servedStarted.Load(), tool.servedStarting.Load()} }
	served := func(tool *Tool, b *testing.B, from counts) {
		now := count(tool)
		b.ReportMetric(float64(now.started-from.started)/float64(b.N), "started-ahead")
		b.ReportMetric(float64(now.starting-from.starting)/float64(b.N), "taken-starting")
	}
	for _, mode := range []string{"cold", "warm-pool"} {
		b.Run(mode, func(b *testing.B) {
			if mode == "warm-pool" {
				sandbox.EnablePool(sandbox.PoolOptions{})
				defer sandbox.ClosePool()
				run(bin, binInv)
			}
			var tw, tb time.Duration
			from := count(wt)
			for b.Loop() {
				t0 := time.Now()
				run(wt, wasmInv)
				t1 := time.Now()
				run(bin, binInv)
				tw += t1.Sub(t0)
				tb += time.Since(t1)
			}
			b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N), "wasm-ns/op")
			b.ReportMetric(float64(tb.Nanoseconds())/float64(b.N), "binary-ns/op")
			b.ReportMetric(float64(tb)/float64(tw), "faster")
			served(wt, b, from)
		})
	}
	// Back to back, with no gap for the next instance to be made and
	// started; with instances made ahead but not started (the module's
	// start in the call); with none kept at all.
	b.Run("wasm-back-to-back", func(b *testing.B) {
		from := count(wt)
		for b.Loop() {
			run(wt, wasmInv)
		}
		served(wt, b, from)
	})
	b.Run("wasm-not-started", func(b *testing.B) {
		plain := mustTool(b, newRuntime(b, Options{noStart: true}), wasmDef)
		run(plain, wasmInv)
		waitFor(b, func() bool { return keptAll(plain) == 1 })
		var tw time.Duration
		for b.Loop() {
			t0 := time.Now()
			run(plain, wasmInv)
			tw += time.Since(t0)
			// The next instance made, as between an agent's calls.
			waitFor(b, func() bool { return keptAll(plain) == 1 })
		}
		b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N), "wasm-ns/op")
	})
	// A Go module with no work of its own (it copies stdin to stdout).
	b.Run("go-copy", func(b *testing.B) {
		cp := mustTool(b, r, def(goWasm(b, "testdata/gocopy")))
		inv := armory.Invocation{Args: json.RawMessage(benchRequest), Agent: agent}
		copied := func() {
			if res := cp.Execute(context.Background(), inv); res.Text != benchRequest {
				b.Fatalf("%v %q", res.Kind, res.Text)
			}
		}
		copied()
		from := count(cp)
		var tw time.Duration
		for b.Loop() {
			waitFor(b, func() bool { return keptFor(cp, agent) == 1 })
			t0 := time.Now()
			copied()
			tw += time.Since(t0)
		}
		b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N), "wasm-ns/op")
		served(cp, b, from)
	})
	b.Run("wasm-no-warm", func(b *testing.B) {
		cold := mustTool(b, newRuntime(b, Options{Warm: -1}), wasmDef)
		for b.Loop() {
			run(cold, wasmInv)
		}
	})
	// What a call costs without a language runtime starting inside the
	// module (a hand-written WASI echo): Armory's and wazero's share.
	b.Run("minimal-module", func(b *testing.B) {
		echo := mustTool(b, r, def(wasmFile(b, echoModule())))
		inv := armory.Invocation{Args: json.RawMessage(benchRequest), Agent: agent}
		echoed := func() {
			if res := echo.Execute(context.Background(), inv); res.Text != benchRequest {
				b.Fatalf("%v %q", res.Kind, res.Text)
			}
		}
		echoed()
		from := count(echo)
		var tw time.Duration
		for b.Loop() {
			waitFor(b, func() bool { return keptFor(echo, agent) == 1 })
			t0 := time.Now()
			echoed()
			tw += time.Since(t0)
		}
		b.ReportMetric(float64(tw.Nanoseconds())/float64(b.N), "wasm-ns/op")
		served(echo, b, from)
	})
}

// BenchmarkColdStart is a restart's first call: a new runtime, the tool
// made (its module compiled, or loaded from the compilation cache on
// disk), one call. "cached" has the cache a previous run left; "uncached"
// keeps compiled code in memory only, so each start compiles.
func BenchmarkColdStart(b *testing.B) {
	module := goWasm(b, "../example/wasm/jsonpick")
	dir := filepath.Join(b.TempDir(), "cache")
	start := func(b *testing.B, cache string) {
		r, err := NewRuntime(context.Background(), Options{CacheDir: cache})
		if err != nil {
			b.Fatal(err)
		}
		tool, err := r.Tool(def(module))
		if err != nil {
			b.Fatal(err)
		}
		if res := tool.Execute(context.Background(), armory.Invocation{Args: json.RawMessage(benchRequest)}); res.Text != benchAnswer {
			b.Fatalf("%v %q", res.Kind, res.Text)
		}
		r.Close(context.Background())
	}
	start(b, dir) // fills the cache
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			start(b, dir)
		}
	})
	b.Run("uncached", func(b *testing.B) {
		for b.Loop() {
			start(b, "")
		}
	})
}

// BenchmarkMakeInstance is what making an instance of the example jsonpick
// tool costs (no code run): what a call that finds none kept pays, and
// the refill of one in the background.
func BenchmarkMakeInstance(b *testing.B) {
	tool := mustTool(b, newRuntime(b, Options{}), def(goWasm(b, "../example/wasm/jsonpick")))
	for b.Loop() {
		in, err := tool.newInstance(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		in.close()
	}
}
