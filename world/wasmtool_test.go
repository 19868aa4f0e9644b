package world

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
)

const wasmToolbox = `name: texttools
tools:
  - name: wordstats
    description: Count lines, words and characters
    wasm: wasm/wordstats.wasm
    input_schema:
      type: object
      properties:
        text: {type: string, description: "the text"}
        top: {type: integer, minimum: 0, maximum: 100}
      required: [text]
      additionalProperties: false
    memory: 32MiB
    timeout: 5s
    max_output: 4096
    files:
      - {path: data, write: false}
      - path: out/reports
        write: true
      - notes
    danger: safe
    capabilities: [read_fs, write_fs]
    permission: auto
`

func wasmWorld(tb string) map[string]string {
	files := goodFiles()
	files["world-config.yaml"] = strings.Replace(goodConfig, "toolboxes: [devtools]", "toolboxes: [devtools, texttools]", 1)
	files["toolbox/texttools/toolbox.yaml"] = tb
	return files
}

func TestLoadWasmTool(t *testing.T) {
	w, err := Load(writeWorld(t, wasmWorld(wasmToolbox)))
	if err != nil {
		t.Fatal(err)
	}
	tool := w.Toolboxes["texttools"].Tool("wordstats")
	if tool == nil || tool.Wasm == nil {
		t.Fatalf("tool = %+v", tool)
	}
	wt := tool.Wasm
	if wt.Module != "wasm/wordstats.wasm" || wt.ModulePath != filepath.Join(w.Dir, "toolbox/texttools/wasm/wordstats.wasm") || wt.Line != 5 {
		t.Fatalf("module = %q %q line %d", wt.Module, wt.ModulePath, wt.Line)
	}
	if wt.Memory != 32<<20 || tool.Timeout.String() != "5s" || tool.MaxOutput != 4096 {
		t.Fatalf("limits = %d %s %d", wt.Memory, tool.Timeout, tool.MaxOutput)
	}
	want := []WasmFile{{Path: "data", Line: 17}, {Path: "out/reports", Write: true, Line: 18}, {Path: "notes", Line: 20}}
	if len(wt.Files) != len(want) {
		t.Fatalf("files = %+v", wt.Files)
	}
	for i := range want {
		if wt.Files[i] != want[i] {
			t.Fatalf("file %d = %+v, want %+v", i, wt.Files[i], want[i])
		}
	}
	if g := wt.Files[1].GuestPath(); g != "/workspace/out/reports" {
		t.Fatalf("guest path %q", g)
	}
	// The schema keeps its key order and is JSON.
	if s := string(wt.InputSchema); !strings.HasPrefix(s, `{"type":"object","properties":{"text":{"type":"string"`) || !json.Valid(wt.InputSchema) {
		t.Fatalf("schema = %s", s)
	}
	if tool.Binary != "" || tool.BinaryPath != "" || tool.Manifest.Danger != armory.DangerSafe || tool.Manifest.Permission != armory.PermAuto {
		t.Fatalf("tool = %+v", tool)
	}
}

// The same tool written as toolbox.json, and the defaults of a tool that
// says nothing but its module.
func TestLoadWasmToolJSONAndDefaults(t *testing.T) {
	files := wasmWorld("")
	delete(files, "toolbox/texttools/toolbox.yaml")
	files["toolbox/texttools/toolbox.json"] = `{
	"name": "texttools",
	"tools": [
		{"name": "wordstats", "description": "Count words", "wasm": "wasm/wordstats.wasm",
		 "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}}},
		{"name": "noargs", "description": "Takes nothing", "wasm": "m.wasm"},
		{"name": "asstring", "description": "Schema as a JSON string", "wasm": "m.wasm",
		 "input_schema": "{\"type\": \"object\"}"}
	]
}`
	w, err := Load(writeWorld(t, files))
	if err != nil {
		t.Fatal(err)
	}
	tb := w.Toolboxes["texttools"]
	ws := tb.Tool("wordstats").Wasm
	if string(ws.InputSchema) != `{"type":"object","properties":{"text":{"type":"string"}}}` {
		t.Fatalf("schema = %s", ws.InputSchema)
	}
	na := tb.Tool("noargs")
	if string(na.Wasm.InputSchema) != string(armory.EmptyObjectSchema) || na.Wasm.Memory != DefaultWasmMemory || len(na.Wasm.Files) != 0 {
		t.Fatalf("defaults = %+v", na.Wasm)
	}
	if na.Timeout != DefaultToolTimeout || na.MaxOutput != DefaultToolMaxOutput || na.Manifest.Danger != armory.DangerDangerous || na.Manifest.Permission != armory.PermConfirm {
		t.Fatalf("defaults = %+v", na)
	}
	if len(na.Manifest.Capabilities) != 0 {
		t.Fatalf("a wasm tool runs no process: capabilities %v", na.Manifest.Capabilities)
	}
	if string(tb.Tool("asstring").Wasm.InputSchema) != `{"type":"object"}` {
		t.Fatalf("schema = %s", tb.Tool("asstring").Wasm.InputSchema)
	}
}

func TestLoadWasmToolErrors(t *testing.T) {
	const file = "toolbox/texttools/toolbox.yaml"
	r := func(pairs ...string) string { return strings.NewReplacer(pairs...).Replace(wasmToolbox) }
	tests := []struct {
		name string
		tb   string
		want []string
	}{
		{"binary and wasm", r("    wasm: wasm/", "    binary: bin/x\n    wasm: wasm/"),
			[]string{file + `:6: tool "wordstats" has both binary and wasm`}},
		{"args with wasm", r("    memory: 32MiB\n", "    memory: 32MiB\n    args: [{name: q}]\n"),
			[]string{file + `:14: tool wordstats: args are for binary tools; a wasm tool declares input_schema`}},
		{"env with wasm", r("    memory: 32MiB\n", "    memory: 32MiB\n    env: [HOME]\n"),
			[]string{file + `:14: tool wordstats: env is for binary tools`}},
		{"wasm-only keys on a binary tool", r("    wasm: wasm/wordstats.wasm", "    binary: wc"),
			[]string{file + `:6: tool wordstats: input_schema is for a wasm tool`, file + `:13: tool wordstats: memory is for a wasm tool`, file + `:16: tool wordstats: files is for a wasm tool`}},
		{"module leaves the toolbox", r("wasm/wordstats.wasm", "../../x.wasm"),
			[]string{file + `:5: tool wordstats: wasm "../../x.wasm" leaves the toolbox folder`}},
		{"module is absolute", r("wasm/wordstats.wasm", "/opt/x.wasm"),
			[]string{file + `:5: tool wordstats: wasm "/opt/x.wasm" must be relative to the toolbox folder`}},
		{"module is not .wasm", r("wasm/wordstats.wasm", "wasm/wordstats"),
			[]string{file + `:5: tool wordstats: wasm "wasm/wordstats" must name a .wasm file`}},
		{"module is a list", r("wasm/wordstats.wasm", "[a.wasm]"),
			[]string{file + `:5: tool wordstats: wasm must be a string`}},
		{"schema not an object type", r("      type: object\n      properties", "      type: array\n      properties"),
			[]string{file + `:6: tool wordstats: input_schema must have type: object`}},
		{"schema is a list", r("    input_schema:\n      type: object", "    input_schema: [1]\n    x_schema:\n      type: object"),
			[]string{file + `:6: tool wordstats: input_schema must be a JSON Schema object`}},
		{"schema is a string that is not JSON", r("    input_schema:\n      type: object", "    input_schema: 'type: object'\n    x_schema:\n      type: object"),
			[]string{file + `:6: tool wordstats: input_schema is a string that is not JSON`}},
		{"schema is not a JSON Schema", r("top: {type: integer", "top: {type: 7"),
			[]string{file + `:6: tool wordstats: input_schema is not a JSON Schema`}},
		{"schema with an alias", r("        text: {type: string, description: \"the text\"}", "        text: &t {type: string}\n        other: *t"),
			[]string{`: tool wordstats: input_schema uses a YAML alias (*name): write the schema out`}},
		{"memory too large", r("memory: 32MiB", "memory: 2GiB"),
			[]string{file + `:13: tool wordstats: memory is "2GiB": above the maximum (a size such as 64MiB, from 64KiB to 1GiB; default 64MiB)`}},
		{"memory not a size", r("memory: 32MiB", "memory: lots"),
			[]string{file + `:13: tool wordstats: memory is "lots", not a size`}},
		{"memory not whole pages", r("memory: 32MiB", "memory: 100000"),
			[]string{file + `:13: tool wordstats: memory is "100000": not a whole number of 64KiB pages`}},
		{"grant leaves the workspace", r("{path: data, write: false}", "{path: ../other, write: false}"),
			[]string{file + `:17: tool wordstats: files: "../other" leaves the agent's workspace`}},
		{"grant is absolute", r("{path: data, write: false}", "{path: /etc, write: false}"),
			[]string{file + `:17: tool wordstats: files: "/etc" must be relative to the agent's workspace`}},
		{"grant of .git", r("{path: data, write: false}", "{path: repo/.git/hooks, write: false}"),
			[]string{file + `:17: tool wordstats: files: "repo/.git/hooks" is or is inside .git`}},
		{"whole workspace for writing", r("{path: data, write: false}", "{path: ., write: true}"),
			[]string{file + `:17: tool wordstats: files: "." is the whole workspace: a module may not write all of it`}},
		{"grant twice", r("      - notes\n", "      - notes\n      - ./notes/\n"),
			[]string{file + `:21: tool wordstats: files: "notes" is granted twice (first at line 20)`}},
		{"grant unknown key", r("{path: data, write: false}", "{path: data, writable: true}"),
			[]string{file + `:17: tool wordstats: files entry: unknown key "writable" (known keys: path, write)`}},
		{"write grant without write_fs", r("capabilities: [read_fs, write_fs]", "capabilities: [read_fs]"),
			[]string{file + `:18: tool wordstats: files: "out/reports" is granted for writing, so the tool must declare the write_fs capability`}},
		{"read grant without read_fs", r("capabilities: [read_fs, write_fs]", "capabilities: [write_fs]"),
			[]string{file + `:17: tool wordstats: files: "data" is granted for reading, so the tool must declare the read_fs capability`}},
		{"files not a list", r("    files:\n      - {path: data, write: false}\n      - path: out/reports\n        write: true\n      - notes\n", "    files: data\n"),
			[]string{file + `:16: tool wordstats: files must be a list of {path, write}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tb == wasmToolbox {
				t.Fatal("the replacement did not apply")
			}
			_, err := Load(writeWorld(t, wasmWorld(tc.tb)))
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("want an *InvalidError, got %v", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("errors lack %q:\n%s", want, err)
				}
			}
		})
	}
}

func TestWasmToolWarnings(t *testing.T) {
	tb := strings.Replace(wasmToolbox, "capabilities: [read_fs, write_fs]", "capabilities: [read_fs, write_fs, network]", 1)
	w, err := Load(writeWorld(t, wasmWorld(tb)))
	if err != nil {
		t.Fatal(err)
	}
	if !hasDiag(w.Diagnostics, `toolbox/texttools/toolbox.yaml:5: warning: tool wordstats: a WASM module has no network: the capability network has no effect`) {
		t.Fatalf("warnings: %v", w.Diagnostics)
	}
}
