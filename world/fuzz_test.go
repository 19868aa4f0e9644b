package world

import (
	"encoding/json"
	"path"
	"strings"
	"testing"
)

// FuzzParseConfigMD: config.md parsing never panics, and every diagnostic
// names the file and a line inside it.
func FuzzParseConfigMD(f *testing.F) {
	f.Add([]byte(architectMD))
	f.Add([]byte("## Tool Access\nprivilege_groups: a,,b\n- x\n## Toolbox\n- early\nsource: toolbox/x\n## Toolkits\nweb: true\n- bad\n## Tools\nk: v\n"))
	f.Add([]byte("```\n## Tool Access\n"))
	f.Add([]byte("## Toolkits\nweb: maybe\n###\n#\n- \n*\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds Diagnostics
		cfg := ParseConfigMD("config.md", data, &ds)
		if cfg == nil {
			t.Fatal("nil config")
		}
		lines := strings.Count(string(data), "\n") + 1
		for _, d := range ds {
			if d.File != "config.md" || d.Line < 0 || d.Line > lines+1 {
				t.Fatalf("diagnostic out of range (%d lines): %v", lines, d)
			}
		}
	})
}

// FuzzParseToolbox: toolbox.yaml parsing never panics; every parsed tool
// has a valid name, a binary or a WASM module (never both) and bounded
// limits; a WASM tool's module stays in the toolbox folder, its schema is
// a JSON object of type object, its memory is whole pages within the
// bounds and its grants stay in the workspace, clear of protected folders.
func FuzzParseToolbox(f *testing.F) {
	f.Add([]byte(goodToolbox))
	f.Add([]byte(wasmToolbox))
	f.Add([]byte("name: x\ntools:\n  - name: a\n    binary: b\n    args: [{name: q, type: flag}]\n"))
	f.Add([]byte("name: x\ntools:\n  - name: a\n    wasm: m.wasm\n    memory: 1GiB\n    files: [., {path: o, write: true}]\n    capabilities: [read_fs, write_fs]\n    input_schema: '{\"type\":\"object\"}'\n"))
	f.Add([]byte("name: x\ntools:\n  - name: a\n    wasm: ../m.wasm\n    input_schema: {type: object, properties: {a: [1, 0x10, 1e3, .inf, ~, yes]}}\n"))
	f.Add([]byte("name: x\ntools: {a: 1}\n"))
	f.Add([]byte("&a [*a]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds Diagnostics
		tb := ParseToolbox("toolbox.yaml", "/tb", data, &ds)
		if tb == nil {
			return
		}
		for _, tool := range tb.Tools {
			if tool.Name == "" || tool.Timeout <= 0 || tool.Timeout > MaxToolTimeout || tool.MaxOutput <= 0 || tool.MaxOutput > MaxToolMaxOutput {
				t.Fatalf("bad tool accepted: %+v", tool)
			}
			w := tool.Wasm
			if w == nil {
				if tool.BinaryPath == "" {
					t.Fatalf("a tool with neither binary nor module: %+v", tool)
				}
				continue
			}
			if tool.Binary != "" || len(tool.Args) > 0 || len(tool.Env) > 0 {
				t.Fatalf("a wasm tool with binary, args or env: %+v", tool)
			}
			if !strings.HasPrefix(w.ModulePath, "/tb/") || !strings.HasSuffix(w.ModulePath, ".wasm") || strings.Contains(w.ModulePath, "/../") {
				t.Fatalf("module outside the toolbox: %q", w.ModulePath)
			}
			var schema map[string]json.RawMessage
			if err := json.Unmarshal(w.InputSchema, &schema); err != nil || string(schema["type"]) != `"object"` {
				t.Fatalf("schema %s: %v", w.InputSchema, err)
			}
			if w.Memory < WasmPageSize || w.Memory > MaxWasmMemory || w.Memory%WasmPageSize != 0 {
				t.Fatalf("memory %d", w.Memory)
			}
			for _, g := range w.Files {
				c := path.Clean(g.Path)
				if c != g.Path || c == ".." || strings.HasPrefix(c, "../") || strings.HasPrefix(c, "/") || (c == "." && g.Write) {
					t.Fatalf("grant %+v", g)
				}
				for _, e := range strings.Split(c, "/") {
					if IsProtectedName(e) {
						t.Fatalf("protected grant %+v", g)
					}
				}
			}
		}
	})
}

// FuzzWorldConfig: world-config.yaml parsing never panics.
func FuzzWorldConfig(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte("name: x\nagents: [{id: a}, {id: a}, 3]\ntool_privileges: {g: x}\ntoolkits: {k: {tools: 1}}\n"))
	f.Add([]byte("- a\n- b\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds Diagnostics
		w := &World{Dir: "/w", Toolboxes: map[string]*Toolbox{}, Policy: Policy{Limits: map[string]Limit{}}}
		w.parseConfig(data, &ds)
		seen := map[string]bool{}
		for _, a := range w.Agents {
			if seen[a.ID] || a.ID == "" {
				t.Fatalf("duplicate or empty agent accepted: %q", a.ID)
			}
			seen[a.ID] = true
		}
	})
}
