package wasm

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// Each attack is refused or bounded with an error that says what
// happened, and the runtime serves an ordinary call afterwards.

func TestAttackInfiniteLoop(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), timeout(time.Second)))
	res := call(t, tool, "", op{"op": "spin"})
	failed(t, res, armory.KindTimeout, "[lab.probe: timed out after 1s; the module was stopped (timeout: in toolbox.yaml)]")
	if v := res.Value.(map[string]any); v["timed_out"] != true {
		t.Fatalf("value = %v", v)
	}
	stillServes(t, tool)

	// The same in a module's own code, with no runtime of its own to yield.
	native := mustTool(t, r, def(wasmFile(t, command(loopForever)), timeout(300*time.Millisecond)))
	failed(t, call(t, native, "", op{}), armory.KindTimeout, "timed out after 300ms")
	stillServes(t, tool)
}

// A module that loops before it reads its input is stopped at the start
// bound when started ahead, once: the tool's instances are then made ahead
// without starting them, so no module code runs while no call waits; its
// calls are bounded by the timeout as any, and say it; one that reads its
// input after the bound still works.
func TestAttackLoopsBeforeReadingItsInput(t *testing.T) {
	var log lockedBuffer
	r := newRuntime(t, Options{Logger: slog.New(slog.NewTextHandler(&log, nil)), startBound: 200 * time.Millisecond})
	good := mustTool(t, r, def(probe(t)))
	spin := mustTool(t, r, def(probe(t), named("spin-first"), timeout(time.Second)))
	for range 3 {
		failed(t, call(t, spin, "", op{"op": "echo"}), armory.KindTimeout, "[lab.spin-first: timed out after 1s; the module was stopped")
		waitFor(t, func() bool { return spin.noStart.Load() && keptAll(spin) == 1 })
	}
	if n := spin.startsTried.Load(); n != 1 {
		t.Fatalf("started ahead %d times", n)
	}
	spin.mu.Lock()
	started := spin.pool[0].started
	spin.mu.Unlock()
	if started || r.live.Load() != 1 {
		t.Fatalf("a module runs with no call: %d instances open, the kept one started: %v", r.live.Load(), started)
	}
	if n := log.count("does not wait for its input"); n != 1 {
		t.Fatalf("logged %d times:\n%s", n, log.b.String())
	}
	stillServes(t, good)

	// Work before the read, longer than the bound: not started ahead,
	// served as before.
	slow := mustTool(t, r, def(probe(t), named("slow-first")))
	for range 3 {
		if got := ok(t, call(t, slow, "", op{"op": "echo", "text": "late"})); got != "late" {
			t.Fatalf("echo = %q", got)
		}
		waitFor(t, func() bool { return slow.noStart.Load() && keptAll(slow) == 1 })
	}
	if n := slow.startsTried.Load(); n != 1 || slow.servedStarted.Load() != 0 {
		t.Fatalf("started ahead %d times, served %d", n, slow.servedStarted.Load())
	}
	if n := log.count("does not wait for its input"); n != 2 {
		t.Fatalf("logged %d times:\n%s", n, log.b.String())
	}
}

// A module that never reads its input (it exits, or fails, first) is
// stopped when started ahead, once, and its calls return what they did.
func TestAttackNeverReadsItsInput(t *testing.T) {
	var log lockedBuffer
	r := newRuntime(t, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	exits := mustTool(t, r, def(probe(t), named("exit-first")))
	panics := mustTool(t, r, def(probe(t), named("panic-first")))
	for range 3 {
		if got := ok(t, call(t, exits, "", op{"op": "echo"})); got != "done without input" {
			t.Fatalf("stdout = %q", got)
		}
		failed(t, call(t, panics, "", op{"op": "echo"}), armory.KindOther, "panic: probe panics before reading its input", "exit code 2")
		waitFor(t, func() bool {
			return exits.noStart.Load() && panics.noStart.Load() && keptAll(exits) == 1 && keptAll(panics) == 1
		})
	}
	if exits.startsTried.Load() != 1 || panics.startsTried.Load() != 1 {
		t.Fatalf("started ahead %d and %d times", exits.startsTried.Load(), panics.startsTried.Load())
	}
	if n := log.count("does not wait for its input"); n != 2 || log.count("exited (code 0) before reading its input") != 1 || log.count("exited (code 2) before reading its input") != 1 {
		t.Fatalf("logged %d times:\n%s", n, log.b.String())
	}
	stillServes(t, mustTool(t, r, def(probe(t))))
}

// What a module writes before it reads its input is its call's output,
// bounded as any: stdout counts toward max_output (past it, the module is
// not started ahead and its calls fail as before), stderr keeps its head
// and tail.
func TestAttackWritesALotBeforeReadingItsInput(t *testing.T) {
	r := newRuntime(t, Options{})
	chatty := mustTool(t, r, def(probe(t), named("chatty-first")))
	if got := ok(t, call(t, chatty, "", op{"op": "echo", "text": "hi"})); got != "before;hi" {
		t.Fatalf("stdout = %q", got)
	}
	waitFor(t, func() bool { return keptFor(chatty, nil) == 1 })
	before := chatty.servedStarted.Load()
	res := call(t, chatty, "", op{"op": "stderr", "bytes": 10, "code": 3})
	if chatty.servedStarted.Load() != before+1 {
		t.Fatal("not served by an instance started ahead")
	}
	failed(t, res, armory.KindOther, "before;\n[stderr]\nchatter starts\ncccc", "bytes of stderr left out …]\n", "the last line", "[lab.chatty-first: exit code 3]")
	if len(res.Text) > StderrHead+StderrTail+256 {
		t.Fatalf("stderr not bounded: %d bytes", len(res.Text))
	}

	flood := mustTool(t, r, def(probe(t), named("flood-first")))
	for range 3 {
		res := call(t, flood, "", op{"op": "echo"})
		failed(t, res, armory.KindOther, "[lab.flood-first: output exceeded max_output (65536 bytes); the module was stopped and its output is not returned")
		if strings.Contains(res.Text, "xxxx") {
			t.Fatal("a cut output was returned")
		}
		waitFor(t, func() bool { return flood.noStart.Load() && keptAll(flood) == 1 })
	}
	if flood.startsTried.Load() != 1 {
		t.Fatalf("started ahead %d times", flood.startsTried.Load())
	}
	stillServes(t, mustTool(t, r, def(probe(t))))
}

// A module asleep (WASI poll_oneoff on a clock) wakes at the call's end.
func TestAttackSleepsPastItsTimeout(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), timeout(time.Second)))
	failed(t, call(t, tool, "", op{"op": "sleep"}), armory.KindTimeout, "timed out after 1s")
	stillServes(t, tool)
}

// The caller ending the call stops the module too.
func TestCallerCancelStopsTheModule(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan armory.Result)
	go func() { done <- callCtx(ctx, t, tool, "", op{"op": "spin"}) }()
	cancel()
	failed(t, <-done, armory.KindOther, "the call ended after", "context canceled")
	stillServes(t, tool)
}

func TestAttackHugeAllocation(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	// 4 GiB is all of a 32-bit memory: Go's runtime in the module does not
	// even ask.
	failed(t, call(t, tool, "", op{"op": "alloc", "bytes": 4 << 30}), armory.KindOther,
		"fatal error: out of memory", "exit code 2")
	// 1 GiB it asks for, and the cap refuses.
	failed(t, call(t, tool, "", op{"op": "alloc", "bytes": 1 << 30}), armory.KindOther,
		"fatal error: out of memory", "exit code 2", "the module asked for 1.0GiB", "its cap is 64MiB (memory: in toolbox.yaml, at most 1GiB)")
	stillServes(t, tool)
	// Memory taken a piece at a time stops at the cap too.
	small := mustTool(t, r, def(probe(t), func(d *world.ToolboxTool) { d.Wasm.Memory = 16 << 20 }))
	res := call(t, small, "", op{"op": "grow"})
	failed(t, res, armory.KindOther, "out of memory", "its cap is 16MiB")
	if m := res.Value.(map[string]any)["memory_bytes"].(uint64); m > 16<<20 {
		t.Fatalf("the module's memory reached %d bytes, over its 16 MiB cap", m)
	}
	// A module's own memory.grow of 4 GiB is refused; this one traps on it.
	native := mustTool(t, r, def(wasmFile(t, command(growHuge, oneMemory))))
	failed(t, call(t, native, "", op{}), armory.KindOther, "the module trapped: wasm error: unreachable", "the module asked for 4GiB of memory, its cap is 64MiB")
	stillServes(t, tool)
}

func TestAttackDeepRecursion(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	// Go keeps its stacks in the module's memory: the cap stops it.
	failed(t, call(t, tool, "", op{"op": "recurse"}), armory.KindOther, "exit code 2", "its cap is 64MiB")
	// A module's own calls use wazero's stack, bounded by wazero.
	native := mustTool(t, r, def(wasmFile(t, command(callSelf))))
	failed(t, call(t, native, "", op{}), armory.KindOther, "the module trapped: stack overflow")
	stillServes(t, tool)
}

func TestAttackHugeOutput(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	res := call(t, tool, "", op{"op": "flood"}) // without end
	failed(t, res, armory.KindOther, "[lab.probe: output exceeded max_output (65536 bytes); the module was stopped and its output is not returned")
	if strings.Contains(res.Text, "xxxx") || len(res.Text) > 1024 {
		t.Fatalf("a cut output was returned (%d bytes)", len(res.Text))
	}
	// Exactly max_output is fine.
	if got := ok(t, call(t, tool, "", op{"op": "flood", "bytes": 64 << 10})); len(got) != 64<<10 {
		t.Fatalf("output of %d bytes", len(got))
	}
	stillServes(t, tool)
}

func TestStderrTailAndExitCodes(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	res := call(t, tool, "", op{"op": "stderr", "bytes": 1 << 20, "code": 3})
	failed(t, res, armory.KindOther, "[stderr]\neeee", "bytes of stderr left out …]\neeee", "the last line", "[lab.probe: exit code 3]")
	if len(res.Text) > StderrHead+StderrTail+256 {
		t.Fatalf("stderr not bounded: %d bytes", len(res.Text))
	}
	failed(t, call(t, tool, "", op{"op": "panic"}), armory.KindOther, "panic: probe panics", "exit code 2")
	// A module that writes to stderr and succeeds returns only stdout.
	if got := ok(t, call(t, tool, "", op{"op": "stderr", "bytes": 10, "code": 0})); got != "" {
		t.Fatalf("stdout = %q", got)
	}
	stillServes(t, tool)
}

func TestAttackReadsOutsideItsGrants(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), grants(world.WasmFile{Path: "data"})))
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"data/in.txt": "in", "secret.txt": "secret"})
	for _, p := range []string{"/etc/passwd", "/workspace/data/../../etc/passwd", "../../etc/passwd", "/proc/self/environ", "/workspace/secret.txt", "/workspace/data/../secret.txt"} {
		failed(t, call(t, tool, ws, op{"op": "read", "path": p}), armory.KindOther, "no such file or directory")
	}
	failed(t, call(t, tool, ws, op{"op": "list", "path": "/etc"}), armory.KindOther, "no such file or directory")
	stillServes(t, tool, ws)
}

func TestAttackWritesOutsideItsGrants(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), grants(world.WasmFile{Path: "data"}, world.WasmFile{Path: "out", Write: true})))
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"data/in.txt": "in"})
	for _, p := range []string{"/tmp/x", "/x", "/workspace/x", "/workspace/data/x", "/workspace/data/in.txt", "/workspace/out/../x"} {
		failed(t, call(t, tool, ws, op{"op": "write", "path": p, "text": "pwned"}), armory.KindOther, "read-only file system")
	}
	failed(t, call(t, tool, ws, op{"op": "mkdir", "path": "/workspace/data/d"}), armory.KindOther, "read-only file system")
	failed(t, call(t, tool, ws, op{"op": "remove", "path": "/workspace/data/in.txt"}), armory.KindOther, "read-only file system")
	failed(t, call(t, tool, ws, op{"op": "rename", "path": "/workspace/data/in.txt", "to": "/workspace/out/in.txt"}), armory.KindOther)
	// Nothing changed on the host.
	var seen []string
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(ws, p)
		seen = append(seen, rel)
		return nil
	})
	if strings.Join(seen, ",") != ".,data,data/in.txt,out" {
		t.Fatalf("the workspace holds %v", seen)
	}
	if _, err := os.Stat("/x"); err == nil {
		t.Fatal("/x exists")
	}
	stillServes(t, tool, ws)
}

func TestAttackSymlinkEscape(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), grants(world.WasmFile{Path: "data"}, world.WasmFile{Path: "out", Write: true})))
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"data/in.txt": "in", "secret.txt": "secret"})
	links := map[string]string{
		"data/etc":    "/etc",               // absolute, out of the workspace
		"data/passwd": "/etc/passwd",        //
		"data/up":     "../secret.txt",      // relative, out of the folder
		"data/alias":  "in.txt",             // inside the folder: fine
		"out/etc":     "/etc",               // in a writable folder
		"out/far":     "../../../../../tmp", //
	}
	for l, target := range links {
		os.MkdirAll(filepath.Join(ws, filepath.Dir(l)), 0o755)
		if err := os.Symlink(target, filepath.Join(ws, l)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/workspace/data/etc/passwd", "/workspace/data/passwd", "/workspace/data/up", "/workspace/out/etc/passwd"} {
		failed(t, call(t, tool, ws, op{"op": "read", "path": p}), armory.KindOther, "operation not permitted")
	}
	failed(t, call(t, tool, ws, op{"op": "list", "path": "/workspace/data/etc"}), armory.KindOther, "operation not permitted")
	for _, p := range []string{"/workspace/out/etc/armory-pwned", "/workspace/out/far/armory-pwned"} {
		failed(t, call(t, tool, ws, op{"op": "write", "path": p, "text": "x"}), armory.KindOther, "operation not permitted")
	}
	if _, err := os.Stat("/tmp/armory-pwned"); err == nil {
		t.Fatal("a write left the workspace")
	}
	if got := ok(t, call(t, tool, ws, op{"op": "read", "path": "/workspace/data/alias"})); got != "in" {
		t.Fatalf("a link inside the folder reads %q", got)
	}
	// The module makes no links of its own.
	failed(t, call(t, tool, ws, op{"op": "symlink", "path": "/workspace/out/l", "to": "../../.."}), armory.KindOther, "operation not permitted")
	if _, err := os.Lstat(filepath.Join(ws, "out/l")); err == nil {
		t.Fatal("the module made a link")
	}
	stillServes(t, tool, ws)

	// A granted folder that is itself a link is not mounted.
	ws2 := t.TempDir()
	os.Symlink("/etc", filepath.Join(ws2, "data"))
	failed(t, call(t, tool, ws2, op{"op": "read", "path": "/workspace/data/passwd"}), armory.KindInvalid, "the granted folder data is reached through the symbolic link data")
}

// wazero's own directory mount resolves a path on the host, so a link in
// the folder leads out of it: the reason grants are mounted through
// grantFS. Should wazero change, this test says so.
func TestWazeroDirMountFollowsLinksOut(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(mustCache(t)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	bin, err := os.ReadFile(probe(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.Symlink("/etc", filepath.Join(dir, "etc"))
	var out, errOut strings.Builder
	cfg := wazero.NewModuleConfig().
		WithStdin(strings.NewReader(`{"op":"read","path":"/data/etc/hostname"}`)).WithStdout(&out).WithStderr(&errOut).
		WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(dir, "/data"))
	want, herr := os.ReadFile("/etc/hostname")
	if herr != nil {
		t.Skip("no /etc/hostname to read:", herr)
	}
	mod, err := rt.InstantiateWithConfig(ctx, bin, cfg)
	if mod != nil {
		mod.Close(ctx)
	}
	if out.String() != string(want) {
		t.Fatalf("wazero's mount no longer follows a link out of the folder (stdout %q, stderr %q, %v): grantFS may be simplified; see docs/design.md", out.String(), errOut.String(), err)
	}
}

func mustCache(t testing.TB) wazero.CompilationCache {
	t.Helper()
	c, err := wazero.NewCompilationCacheWithDir(cacheDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// .git, .ssh and .armory are out of reach even inside a grant, by name or
// through a link.
func TestAttackProtectedPaths(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), grants(world.WasmFile{Path: "."}, world.WasmFile{Path: "repo", Write: true})))
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{".ssh/id_ed25519": "KEY", "repo/.git/config": "[core]", "repo/.git/hooks/README": "", "notes.txt": "notes"})
	os.Symlink(".ssh/id_ed25519", filepath.Join(ws, "key"))
	os.Symlink(".git/hooks", filepath.Join(ws, "repo/hooks"))
	os.Symlink(".git/config", filepath.Join(ws, "repo/cfg"))
	if got := ok(t, call(t, tool, ws, op{"op": "read", "path": "/workspace/notes.txt"})); got != "notes" {
		t.Fatalf("read %q", got)
	}
	for _, p := range []string{"/workspace/.ssh/id_ed25519", "/workspace/key", "/workspace/repo/.git/config", "/workspace/repo/cfg"} {
		failed(t, call(t, tool, ws, op{"op": "read", "path": p}), armory.KindOther, "operation not permitted")
	}
	for _, p := range []string{"/workspace/repo/.git/config", "/workspace/repo/.git/hooks/post-commit", "/workspace/repo/hooks/post-commit", "/workspace/repo/cfg", "/workspace/repo/.GIT/x"} {
		failed(t, call(t, tool, ws, op{"op": "write", "path": p, "text": "#!/bin/sh\ncurl evil"}), armory.KindOther, "operation not permitted")
	}
	failed(t, call(t, tool, ws, op{"op": "rename", "path": "/workspace/repo/.git", "to": "/workspace/repo/git"}), armory.KindOther, "operation not permitted")
	if _, err := os.Stat(filepath.Join(ws, "repo/.git/hooks/post-commit")); err == nil {
		t.Fatal("a hook was written")
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "repo/.git/config")); string(b) != "[core]" {
		t.Fatalf(".git/config = %q", b)
	}
	stillServes(t, tool, ws)
}

// A FIFO would block the host's open past the call's timeout: refused.
func TestAttackFIFO(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), grants(world.WasmFile{Path: "data"}, world.WasmFile{Path: "out", Write: true})))
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "data"), 0o755)
	os.MkdirAll(filepath.Join(ws, "out"), 0o755)
	for _, p := range []string{"data/fifo", "out/fifo"} {
		if err := syscall.Mkfifo(filepath.Join(ws, p), 0o644); err != nil {
			t.Skip("mkfifo:", err)
		}
	}
	failed(t, call(t, tool, ws, op{"op": "read", "path": "/workspace/data/fifo"}), armory.KindOther, "permission denied")
	res := call(t, tool, ws, op{"op": "write", "path": "/workspace/out/fifo", "text": "x"})
	if res.Success || res.Kind == armory.KindTimeout {
		t.Fatalf("writing a FIFO: %v %s", res.Kind, res.Text)
	}
	stillServes(t, tool, ws)
}

func TestAttackMalformedAndHostileModules(t *testing.T) {
	r := newRuntime(t, Options{})
	good := mustTool(t, r, def(probe(t)))
	wasiImport := func(field string) []byte {
		return section(2, vec(cat(name(WASI), name(field), []byte{0x00}, leb(0))))
	}
	tests := []struct {
		name string
		bin  []byte
		want string
	}{
		{"not WebAssembly", []byte("#!/bin/sh\necho hi\n"), "is not a WebAssembly module (no \\0asm header)"},
		{"empty", nil, "is not a WebAssembly module"},
		{"a component", []byte("\x00asm\x0d\x00\x01\x00"), "is a WebAssembly component, not a core module"},
		{"section past the end", []byte("\x00asm\x01\x00\x00\x00\x01\xff\xff\x03"), "is malformed: section 1 claims"},
		{"cut number", []byte("\x00asm\x01\x00\x00\x00\x01\xff"), "is malformed"},
		{"bad code", command([]byte{0xff, 0xfe}), "is not a valid WebAssembly module"},
		{"no _start", module(voidType, funcs(1), code(nothing)), "exports no function _start"},
		{"imports from env", module(voidType, section(2, vec(cat(name("env"), name("system"), []byte{0x00}, leb(0)))), funcs(1), exportStart(1), code(nothing)),
			"imports env.system (only wasi_snapshot_preview1 may be imported)"},
		{"imports a memory", module(voidType, section(2, vec(cat(name("env"), name("mem"), []byte{0x02, 0x00, 0x01}))), funcs(1), exportStart(0), code(nothing)),
			"imports a memory env.mem (only WASI functions may be imported)"},
		{"imports what WASI lacks", module(voidType, wasiImport("sock_open"), funcs(1), exportStart(1), code(nothing)),
			"imports wasi_snapshot_preview1.sock_open, which WASI preview 1 does not have"},
		{"imports a WASI function with the wrong type", module(voidType, wasiImport("fd_write"), funcs(1), exportStart(1), code(nothing)),
			"cannot be instantiated"},
		{"start section", command(nothing, section(8, leb(0))), "has a start section"},
		{"huge initial memory", command(nothing, section(5, vec(cat([]byte{0x00}, leb(65536))))), "declares an initial memory of 4GiB, above the tool's memory cap of 64MiB"},
		{"shared memory", command(nothing, section(5, vec([]byte{0x03, 0x01, 0x02}))), "shared or 64-bit memories are not supported"},
		{"two memories", command(nothing, section(5, vec([]byte{0x00, 0x01}, []byte{0x00, 0x01}))), "declares 2 memories"},
		{"huge table", command(nothing, section(4, vec(cat([]byte{0x70, 0x00}, leb(1<<27))))), "declares a table of 134217728 entries; the limit is 1048576"},
		{"many tables", command(nothing, section(4, vec([]byte{0x70, 0x00, 0x01}, []byte{0x70, 0x00, 0x01}, []byte{0x70, 0x00, 0x01}, []byte{0x70, 0x00, 0x01}, []byte{0x70, 0x00, 0x01}))), "declares 5 tables; the limit is 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Tool(def(wasmFile(t, tc.bin)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "toolbox/lab/toolbox.yaml:5: module m.wasm") || armory.KindOf(err) != armory.KindInvalid {
				t.Fatalf("error %v (%v) does not name the module at its line", err, armory.KindOf(err))
			}
			stillServes(t, good)
		})
	}
	// The file is read within bounds: its size, and a FIFO in its place
	// does not hang the read.
	small := newRuntime(t, Options{MaxModuleBytes: 1024})
	if _, err := small.Tool(def(probe(t))); err == nil || !strings.Contains(err.Error(), "is larger than the limit of 1024 bytes") {
		t.Fatalf("a module over MaxModuleBytes: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "m.wasm")
	if err := syscall.Mkfifo(fifo, 0o644); err == nil {
		if _, err := r.Tool(def(fifo)); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a FIFO module: %v", err)
		}
	}
	// A missing module is KindNotFound.
	_, err := r.Tool(def(filepath.Join(t.TempDir(), "none.wasm")))
	if armory.KindOf(err) != armory.KindNotFound || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing module: %v (%v)", err, armory.KindOf(err))
	}
}

// A table declared without a maximum is given one: table.grow past it
// fails instead of taking the host's memory.
func TestTablesGetAMaximum(t *testing.T) {
	bin := command(nothing, section(4, vec([]byte{0x70, 0x00, 0x02})))
	_, out, err := inspect(bin, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := command(nothing, section(4, vec(cat([]byte{0x70, 0x01, 0x02}, leb(MaxTableEntries)))))
	if string(out) != string(want) {
		t.Fatalf("rewritten:\n% x\nwant\n% x", out, want)
	}
	// A bounded table is left as it is, and so is the binary.
	bin = command(nothing, section(4, vec([]byte{0x70, 0x01, 0x02, 0x08})))
	if _, out, err := inspect(bin, 1<<20); err != nil || &out[0] != &bin[0] {
		t.Fatalf("a bounded table was rewritten: %v", err)
	}
	r := newRuntime(t, Options{})
	grow := cat([]byte{0xd0, 0x70}, []byte{0x41}, sleb(1<<21), []byte{0xfc, 0x0f, 0x00, 0x41, 0x7f, 0x46, 0x04, 0x40, 0x00, 0x0b}) // ref.null func; table.grow 2M; == -1 → unreachable
	tool := mustTool(t, r, def(wasmFile(t, command(grow, section(4, vec([]byte{0x70, 0x00, 0x01}))))))
	failed(t, call(t, tool, "", op{}), armory.KindOther, "wasm error: unreachable")
}

func FuzzInspect(f *testing.F) {
	f.Add(command(nothing))
	f.Add(command(growHuge, oneMemory, section(4, vec([]byte{0x70, 0x00, 0x02}))))
	f.Add(module(voidType, section(2, vec(cat(name("env"), name("mem"), []byte{0x02, 0x00, 0x01})))))
	f.Add([]byte("\x00asm\x01\x00\x00\x00\x04\x03\x01\x70\x00"))
	var segs [][]byte
	for i := range 70 {
		segs = append(segs, dataSegment(int32(5*i), []byte{1, 2, byte(i)}))
	}
	f.Add(command(nothing, oneMemory, section(11, vec(segs...))))
	f.Fuzz(func(t *testing.T, bin []byte) {
		s, out, err := inspect(bin, 1<<20)
		if err != nil {
			return
		}
		if !s.start || out == nil {
			t.Fatalf("accepted without _start or binary: %+v", s)
		}
		// What is accepted, inspected again, is accepted unchanged.
		_, again, err := inspect(out, 1<<20)
		if err != nil || string(again) != string(out) {
			t.Fatalf("the rewritten binary does not inspect clean: %v", err)
		}
	})
}
