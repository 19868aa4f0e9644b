package wasm

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/armory-dev/armory/world"
)

// The example world's WASM tools, built from example/wasm as
// scripts/build-wasm builds them, run as their toolbox declares.
func TestExampleTools(t *testing.T) {
	var ds world.Diagnostics
	src := filepath.Join("..", "example", "world", "toolbox", "jsonpick")
	data, err := os.ReadFile(filepath.Join(src, world.ToolboxFile))
	if err != nil {
		t.Fatal(err)
	}
	tb := world.ParseToolbox("toolbox/jsonpick/toolbox.yaml", src, data, &ds)
	if tb == nil || len(ds.Errors()) > 0 || tb.Tool("pick") == nil || tb.Tool("pick").Wasm == nil {
		t.Fatalf("jsonpick toolbox: %v", ds)
	}
	pickDef := tb.Tool("pick")
	pickDef.Wasm.ModulePath = goWasm(t, "../example/wasm/jsonpick")

	r := newRuntime(t, Options{})
	pick := mustTool(t, r, pickDef)
	ws := t.TempDir()
	writeFiles(t, ws, map[string]string{"data/report.json": `{"items":[{"id":1,"name":"a"},{"id":2,"name":"b"}]}`, ".ssh/id": "KEY"})
	got := ok(t, call(t, pick, ws, map[string]any{"file": "data/report.json", "paths": []string{"items.*.name", "items.-1.id", "nope"}}))
	if got != `{"missing":["nope"],"picked":{"items.*.name":["a","b"],"items.-1.id":2}}`+"\n" {
		t.Fatalf("pick = %s", got)
	}
	got = ok(t, call(t, pick, ws, map[string]any{"json": map[string]any{"a": []int{5}}, "paths": []string{"a.0"}}))
	if got != `{"missing":[],"picked":{"a.0":5}}`+"\n" {
		t.Fatalf("pick inline = %s", got)
	}
	res := call(t, pick, ws, map[string]any{"file": ".ssh/id", "paths": []string{"x"}})
	if res.Success {
		t.Fatalf("read .ssh: %s", res.Text)
	}

	stats := mustTool(t, r, def(goWasm(t, "../example/wasm/wordstats"), grants(world.WasmFile{Path: "notes"})))
	writeFiles(t, ws, map[string]string{"notes/a.txt": "to be or not to be\nthat is the question\n"})
	var a struct {
		Lines, Words, Chars int
		Top                 []struct {
			Word  string
			Count int
		}
	}
	if err := json.Unmarshal([]byte(ok(t, call(t, stats, ws, map[string]any{"file": "notes/a.txt", "top": 2}))), &a); err != nil {
		t.Fatal(err)
	}
	if a.Lines != 2 || a.Words != 10 || a.Chars != 40 || len(a.Top) != 2 || a.Top[0].Word != "be" || a.Top[0].Count != 2 {
		t.Fatalf("wordstats = %+v", a)
	}
}
