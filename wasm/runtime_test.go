package wasm

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
)

// cacheFiles lists the files of a cache folder with their inode and
// modification time: a compilation writes a new file, a load writes none.
func cacheFiles(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out[p] = fmt.Sprintf("%d %d %d", fi.Sys().(*syscall.Stat_t).Ino, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	return out
}

// A restarted runtime serves its first call from the compilation cache on
// disk: nothing is compiled (nor written) again.
func TestCompilationCacheServesARestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "wasm-cache")
	bin := probe(t)
	r1 := newRuntime(t, Options{CacheDir: dir})
	ok(t, call(t, mustTool(t, r1, def(bin)), "", op{"op": "echo"}))
	r1.Close(context.Background())
	first := cacheFiles(t, dir)
	if len(first) == 0 {
		t.Fatal("nothing was cached")
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache folder: %v %v", fi.Mode(), err)
	}

	r2 := newRuntime(t, Options{CacheDir: dir})
	if got := ok(t, call(t, mustTool(t, r2, def(bin)), "", op{"op": "echo", "text": "warm"})); got != "warm" {
		t.Fatalf("echo = %q", got)
	}
	second := cacheFiles(t, dir)
	if fmt.Sprint(first) != fmt.Sprint(second) {
		t.Fatalf("the restart compiled again:\nbefore %v\nafter  %v", first, second)
	}
	// Another module is compiled and written.
	mustTool(t, r2, def(wasmFile(t, command(nothing))))
	if len(cacheFiles(t, dir)) != len(first)+1 {
		t.Fatal("a new module was not cached")
	}
}

func TestConcurrentCalls(t *testing.T) {
	r := newRuntime(t, Options{MaxCalls: 2})
	tool := mustTool(t, r, def(probe(t)))
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprint("call ", i)
			res := call(t, tool, "", op{"op": "echo", "text": want})
			if !res.Success || res.Text != want {
				errs <- fmt.Sprintf("%d: %v %q", i, res.Kind, res.Text)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// With every place taken, a call waits at most its timeout.
func TestWaitForAPlaceIsBounded(t *testing.T) {
	r := newRuntime(t, Options{MaxCalls: 1})
	busy := mustTool(t, r, def(probe(t)))
	quick := mustTool(t, r, def(probe(t), timeout(300*time.Millisecond)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan armory.Result)
	go func() { done <- callCtx(ctx, t, busy, "", op{"op": "spin"}) }()
	waitFor(t, func() bool { return len(r.slots) == 1 })
	failed(t, call(t, quick, "", op{"op": "echo"}), armory.KindTimeout, "no place was free within the timeout of 300ms (1 WASM calls run at once)")
	cancel()
	<-done
	stillServes(t, quick)
}

// waitFor polls cond for up to a minute (a bound for a broken test, not a
// measure of speed).
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not reached within a minute")
		}
	}
}

// After its first call a tool keeps instances made ahead (started, for
// the caller); closing the tool stops them, and the refiller.
func TestWarmInstances(t *testing.T) {
	r := newRuntime(t, Options{Warm: 2})
	tool := mustTool(t, r, def(probe(t)))
	if n := keptAll(tool); n != 0 {
		t.Fatalf("%d instances made ahead before any call", n)
	}
	stillServes(t, tool)
	waitFor(t, func() bool { return keptFor(tool, nil) == 2 })
	for range 3 {
		if got := ok(t, call(t, tool, "", op{"op": "count"})); got != "1" {
			t.Fatalf("an instance made ahead had served a call before: count %q", got)
		}
	}
	if tool.servedStarted.Load() == 0 {
		t.Fatal("no call was served by an instance started ahead")
	}
	if err := tool.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := keptAll(tool); n != 0 || r.live.Load() != 0 {
		t.Fatalf("after Close: %d kept, %d instances open", n, r.live.Load())
	}
	failed(t, call(t, tool, "", op{"op": "echo"}), armory.KindUnavailable, "the WASM runtime is closed")

	none := newRuntime(t, Options{Warm: -1})
	cold := mustTool(t, none, def(probe(t)))
	stillServes(t, cold)
	if cold.refilling || keptAll(cold) != 0 {
		t.Fatal("Warm < 0 keeps instances")
	}

	// Made ahead without being started: the module has run no code.
	plain := mustTool(t, newRuntime(t, Options{noStart: true}), def(probe(t)))
	stillServes(t, plain)
	waitFor(t, func() bool { return keptAll(plain) == 1 })
	if in := plain.pool[0]; in.started || in.stdin.ready != nil {
		t.Fatal("an instance made ahead was started")
	}
	if got := ok(t, call(t, plain, "", op{"op": "count"})); got != "1" || plain.servedStarted.Load() != 0 {
		t.Fatalf("count %q, %d served started", got, plain.servedStarted.Load())
	}
}

func TestClosedRuntime(t *testing.T) {
	r, err := NewRuntime(context.Background(), Options{CacheDir: cacheDir})
	if err != nil {
		t.Fatal(err)
	}
	tool := mustTool(t, r, def(probe(t)))
	stillServes(t, tool)
	// A call running when the runtime closes is stopped and says so.
	done := make(chan armory.Result)
	go func() { done <- call(t, tool, "", op{"op": "spin"}) }()
	waitFor(t, func() bool { return len(r.slots) == 1 })
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	failed(t, <-done, armory.KindUnavailable, "the WASM runtime clos") // closed while it ran, or before it started
	r.Close(context.Background())
	failed(t, call(t, tool, "", op{"op": "echo"}), armory.KindUnavailable, "the WASM runtime is closed")
	if _, err := r.Tool(def(probe(t))); armory.KindOf(err) != armory.KindUnavailable {
		t.Fatalf("Tool after Close: %v", err)
	}
}

// A definition not made by world's parser (a skill pack's) is held to the
// same rules.
func TestToolRefusesABadDefinition(t *testing.T) {
	r := newRuntime(t, Options{})
	m := probe(t)
	tests := []struct {
		edit func(*world.ToolboxTool)
		want string
	}{
		{grants(world.WasmFile{Path: "../up"}), `the granted folder "../up" is not a clean path inside the workspace`},
		{grants(world.WasmFile{Path: "/etc"}), `the granted folder "/etc" is not a clean path`},
		{grants(world.WasmFile{Path: "a/./b"}), `is not a clean path`},
		{grants(world.WasmFile{Path: "repo/.git"}), `is or is inside .git, .ssh or .armory`},
		{grants(world.WasmFile{Path: ".", Write: true}), `the whole workspace cannot be granted for writing`},
		{func(d *world.ToolboxTool) {
			d.Wasm.Files = []world.WasmFile{{Path: "out", Write: true}}
			d.Manifest.Capabilities = []armory.Capability{armory.CapReadFS}
		}, `granted for writing but the tool does not declare write_fs`},
		{func(d *world.ToolboxTool) { d.Wasm.Memory = 2 << 30 }, `memory 2147483648 is not a whole number of 64KiB pages up to 1GiB`},
		{func(d *world.ToolboxTool) { d.Timeout = 0 }, `timeout 0s is not between`},
		{func(d *world.ToolboxTool) { d.MaxOutput = 0 }, `max_output 0 is not between`},
		{func(d *world.ToolboxTool) { d.Wasm.ModulePath = "m.wasm" }, `is not absolute`},
	}
	for _, tc := range tests {
		_, err := r.Tool(def(m, tc.edit))
		if armory.KindOf(err) != armory.KindInvalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error = %v, want %q", err, tc.want)
		}
	}
}
