package wasm_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/wasm"
)

const labToolbox = `name: lab
description: WebAssembly tools
tools:
  - name: probe
    description: The test probe
    wasm: wasm/probe.wasm
    input_schema: {type: object, properties: {op: {type: string}, text: {type: string}, path: {type: string}}, required: [op]}
    files: [{path: data}]
    danger: safe
    capabilities: [read_fs]
    permission: auto
    timeout: 20s
  - name: ghost
    description: Not built yet
    wasm: wasm/ghost.wasm
    danger: safe
    permission: auto
  - name: broken
    description: Not WebAssembly
    wasm: wasm/broken.wasm
  - name: wc
    description: A binary tool beside them
    binary: wc
    args: [{name: file, required: true}]
`

// buildProbe builds testdata/probe into dst.
func buildProbe(t *testing.T, dst string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", dst, "./testdata/probe")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// The module contributes a world's WASM tools; an agent's "## Toolbox"
// grants them; a module not built is unavailable with how to build it.
func TestModuleInAnEngine(t *testing.T) {
	dir := testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml":            "name: w\nagents: [{id: a, archetype: a}, {id: b, archetype: b}]\ntoolboxes: [lab]\n",
		"archetype/a/config.md":        "## Tool Access\n## Toolbox\nsource: toolbox/lab/toolbox.yaml\n- probe\n- ghost\n",
		"archetype/b/config.md":        "## Tool Access\n",
		"toolbox/lab/toolbox.yaml":     labToolbox,
		"toolbox/lab/wasm/broken.wasm": "not webassembly",
	})
	buildProbe(t, filepath.Join(dir, "toolbox/lab/wasm/probe.wasm"))
	mod := wasm.New(wasm.Options{})
	e, err := engine.Open(context.Background(), engine.Options{World: dir, Skip: engine.Trail, Modules: []engine.Module{mod}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if mod.Runtime() == nil {
		t.Fatal("no runtime after Provision")
	}
	if fi, err := os.Stat(filepath.Join(dir, ".armory", "wasm-cache")); err != nil || !fi.IsDir() {
		t.Fatalf("compilation cache: %v", err)
	}
	h := e.Roster()
	a, _ := h.Agent("a")
	b, _ := h.Agent("b")
	if !a.Registry.Has("lab.probe") || b.Registry.Has("lab.probe") {
		t.Fatalf("lab.probe: a sees %v, b sees %v (only a's ## Toolbox lists it)", a.Registry.Has("lab.probe"), b.Registry.Has("lab.probe"))
	}
	if src := h.Source(a, "lab.probe"); src != "toolbox lab" {
		t.Fatalf("source = %q", src)
	}
	ex, _ := h.Explain("b", "lab.probe")
	if ex.Visible || !strings.Contains(strings.Join(ex.Reasons, "\n"), `the agent's "## Toolbox" does not list "probe" from toolbox "lab"`) {
		t.Fatalf("explain b: %+v", ex)
	}
	ex, _ = h.Explain("a", "lab.ghost")
	if ex.Visible || !strings.Contains(strings.Join(ex.Reasons, "\n"), "its WebAssembly module toolbox/lab/wasm/ghost.wasm is not built: build it to that path (for a Go program: GOOS=wasip1 GOARCH=wasm go build -o") {
		t.Fatalf("explain ghost: %+v", ex)
	}
	var warned bool
	for _, d := range h.Warnings {
		warned = warned || strings.Contains(d.String(), "toolbox/lab/toolbox.yaml:20: warning: tool lab.broken is unavailable: module wasm/broken.wasm is not a WebAssembly module (no \\0asm header)")
	}
	if !warned {
		t.Fatalf("no warning for the broken module: %v", h.Warnings)
	}
	if !h.Catalog.Has("lab.wc") {
		t.Fatal("the binary tool beside them is gone")
	}

	// A call through the pipeline, audited as any.
	ws := filepath.Join(dir, "workspaces", "a")
	testenv.WriteTree(t, ws, map[string]string{"data/note.txt": "from the workspace"})
	args, _ := json.Marshal(map[string]string{"op": "read", "path": "data/note.txt"})
	out := e.Pipeline().Execute(context.Background(), pipeline.Call{Agent: "a", Tool: "lab.probe", Args: args})
	if out.Status != audit.StatusSuccess || out.Result != "from the workspace" {
		t.Fatalf("outcome = %+v", out)
	}
	// The schema is enforced before the module runs.
	out = e.Pipeline().Execute(context.Background(), pipeline.Call{Agent: "a", Tool: "lab.probe", Args: json.RawMessage(`{"text":"x"}`)})
	if out.Status == audit.StatusSuccess || !strings.Contains(out.Result, "op") {
		t.Fatalf("outcome = %+v", out)
	}
}
