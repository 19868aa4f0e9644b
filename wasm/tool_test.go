package wasm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
)

func TestCallEchoesAndSeesOnlyItsEnvironment(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	if s := tool.Spec(); s.Name != "lab.probe" || s.Description != "the test probe" || string(s.InputSchema) != string(armory.EmptyObjectSchema) {
		t.Fatalf("spec = %+v", s)
	}
	if m := tool.Manifest(); m.Danger != armory.DangerSafe || m.Permission != armory.PermAuto {
		t.Fatalf("manifest = %+v", m)
	}
	if got := ok(t, call(t, tool, "", op{"op": "echo", "text": "hello"})); got != "hello" {
		t.Fatalf("echo = %q", got)
	}
	var env struct {
		Env    []string
		Args   []string
		WD     string
		Year   int
		Random string
	}
	res := call(t, tool, "", op{"op": "env"})
	if err := json.Unmarshal([]byte(ok(t, res)), &env); err != nil {
		t.Fatal(err)
	}
	want := []string{"HOME=/workspace", "LANG=C.UTF-8", "PWD=/workspace", "TZ=UTC"}
	if !slices.Equal(env.Env, want) || !slices.Equal(env.Args, []string{"lab.probe"}) || env.WD != "/workspace" {
		t.Fatalf("environment = %+v", env)
	}
	if env.Year < 2025 {
		t.Fatalf("the clock is not the real one: year %d", env.Year)
	}
	var again struct{ Random string }
	json.Unmarshal([]byte(ok(t, call(t, tool, "", op{"op": "env"}))), &again)
	if again.Random == env.Random {
		t.Fatalf("random bytes repeat across calls: %s", env.Random)
	}
	v, _ := res.Value.(map[string]any)
	if v["exit_code"] != uint32(0) || v["memory_bytes"].(uint64) == 0 {
		t.Fatalf("value = %v", res.Value)
	}
}

func TestArgumentsMustBeAnObject(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	failed(t, tool.Execute(t.Context(), armory.Invocation{Args: json.RawMessage(`[1]`)}), armory.KindInvalid, "arguments must be one JSON object")
	failed(t, tool.Execute(t.Context(), armory.Invocation{Args: json.RawMessage(`{"op":`)}), armory.KindInvalid, "arguments must be one JSON object")
	big := json.RawMessage(`{"text":"` + strings.Repeat("x", MaxInputBytes) + `"}`)
	failed(t, tool.Execute(t.Context(), armory.Invocation{Args: big}), armory.KindTooLarge, "the limit is 1048576")
	// No arguments at all reach the module as {}.
	failed(t, tool.Execute(t.Context(), armory.Invocation{}), armory.KindOther, `unknown op ""`, "exit code 1")
}

func TestGrantedFolders(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), grants(
		world.WasmFile{Path: "data"},
		world.WasmFile{Path: "out/reports", Write: true},
	)))
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"data/in.txt": "the input", "data/sub/x": "x", "secret.txt": "not granted"})

	if got := ok(t, call(t, tool, ws, op{"op": "read", "path": "/workspace/data/in.txt"})); got != "the input" {
		t.Fatalf("read = %q", got)
	}
	// Relative to the working directory, /workspace.
	if got := ok(t, call(t, tool, ws, op{"op": "read", "path": "data/in.txt"})); got != "the input" {
		t.Fatalf("relative read = %q", got)
	}
	// The write grant did not exist: the first call made it, empty.
	if ents, err := os.ReadDir(filepath.Join(ws, "out", "reports")); err != nil || len(ents) != 0 {
		t.Fatalf("the write grant: %v %v", ents, err)
	}
	ok(t, call(t, tool, ws, op{"op": "write", "path": "/workspace/out/reports/r.txt", "text": "report"}))
	if b, err := os.ReadFile(filepath.Join(ws, "out/reports/r.txt")); err != nil || string(b) != "report" {
		t.Fatalf("written file: %q %v", b, err)
	}
	ok(t, call(t, tool, ws, op{"op": "mkdir", "path": "/workspace/out/reports/a/b"}))
	ok(t, call(t, tool, ws, op{"op": "rename", "path": "/workspace/out/reports/r.txt", "to": "/workspace/out/reports/a/r.txt"}))
	ok(t, call(t, tool, ws, op{"op": "append", "path": "/workspace/out/reports/a/r.txt", "text": " and more"}))
	ok(t, call(t, tool, ws, op{"op": "truncate", "path": "/workspace/out/reports/a/r.txt", "bytes": 10}))
	if b, _ := os.ReadFile(filepath.Join(ws, "out/reports/a/r.txt")); string(b) != "report and" {
		t.Fatalf("after append and truncate: %q", b)
	}
	ok(t, call(t, tool, ws, op{"op": "remove", "path": "/workspace/out/reports/a/r.txt"}))
	// Listings: the tree around the grants, and a grant's own folder.
	if got := ok(t, call(t, tool, ws, op{"op": "list", "path": "/workspace"})); got != "data,out" {
		t.Fatalf("/workspace lists %q", got)
	}
	if got := ok(t, call(t, tool, ws, op{"op": "list", "path": "/workspace/data"})); got != "in.txt,sub" {
		t.Fatalf("/workspace/data lists %q", got)
	}
	if got := ok(t, call(t, tool, ws, op{"op": "list", "path": "/"})); got != "workspace" {
		t.Fatalf("/ lists %q", got)
	}
	// What is not granted is not there.
	failed(t, call(t, tool, ws, op{"op": "read", "path": "/workspace/secret.txt"}), armory.KindOther, "no such file or directory")
}

func TestReadOnlyGrantMustExist(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t), grants(world.WasmFile{Path: "data"})))
	ws := t.TempDir()
	failed(t, call(t, tool, ws, op{"op": "echo"}), armory.KindNotFound, "the workspace has no folder data, which this tool reads (granted read-only, so it is not created)")
	if _, err := os.Stat(filepath.Join(ws, "data")); !os.IsNotExist(err) {
		t.Fatalf("a read-only grant was created: %v", err)
	}
	failed(t, call(t, tool, "", op{"op": "echo"}), armory.KindUnavailable, "this agent has no workspace")
	writeFiles(t, ws, map[string]string{"data": "a file"})
	failed(t, call(t, tool, ws, op{"op": "echo"}), armory.KindInvalid, "the granted folder data is not a folder")
}

// Each call gets a fresh instance, warm or not: nothing of one call's
// memory reaches the next.
func TestEveryCallIsAFreshInstance(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(probe(t)))
	for i := range 5 {
		if got := ok(t, call(t, tool, "", op{"op": "count"})); got != "1" {
			t.Fatalf("call %d: count = %q", i, got)
		}
	}
}

// A granted folder renamed after it was mounted is still the grant: its
// root follows it, and so does the check of where opened files are.
func TestGrantFollowsItsFolderRenamed(t *testing.T) {
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"data/x.txt": "x", "secret.txt": "s"})
	root, err := os.OpenRoot(filepath.Join(ws, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	g := &grantFS{}
	g.bind(root)
	if err := os.Rename(filepath.Join(ws, "data"), filepath.Join(ws, "moved")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".", "x.txt"} {
		f, e := g.OpenFile(p, experimentalsys.O_RDONLY, 0)
		if e != 0 {
			t.Fatalf("open %s: %v", p, e)
		}
		f.Close()
	}
	if _, e := g.OpenFile("../secret.txt", experimentalsys.O_RDONLY, 0); e == 0 {
		t.Fatal("opened a file out of the folder")
	}
}
