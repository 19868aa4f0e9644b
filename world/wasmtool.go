package world

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/google/jsonschema-go/jsonschema"
	yaml "go.yaml.in/yaml/v3"
)

// WasmTool is what a toolbox tool that runs a WebAssembly module declares
// instead of a binary (toolbox.yaml "wasm:"): the module (WASI preview 1),
// its input schema (arguments reach it as JSON on stdin), and what it may
// touch. Package wasm runs it; ToolboxTool.Wasm is nil for a binary tool.
type WasmTool struct {
	// Module is the .wasm file as written, relative to the toolbox folder;
	// ModulePath is its absolute path.
	Module     string
	ModulePath string
	// InputSchema is the tool's JSON Schema (type object). A tool that
	// declares none takes no arguments (armory.EmptyObjectSchema).
	InputSchema json.RawMessage
	// Memory caps the module's linear memory, in bytes: a whole number of
	// 64 KiB WebAssembly pages, from WasmPageSize to MaxWasmMemory
	// (default DefaultWasmMemory).
	Memory int64
	// Files are the folders of the calling agent's workspace the module
	// sees, each at /workspace/<path>; none by default.
	Files []WasmFile
	// Line is the line of "wasm:".
	Line int
}

// WasmFile is one workspace folder granted to a WASM tool.
type WasmFile struct {
	// Path is relative to the agent's workspace, cleaned and
	// slash-separated; "." is the whole workspace (read-only only).
	Path string
	// Write lets the module change the folder (the tool declares write_fs);
	// otherwise it is read-only (the tool declares read_fs).
	Write bool
	Line  int
}

// GuestPath is where the module sees the folder: /workspace/<path>.
func (f WasmFile) GuestPath() string { return path.Join(WasmWorkspace, f.Path) }

// WasmWorkspace is the folder under which a WASM module sees its granted
// workspace folders (and its working directory).
const WasmWorkspace = "/workspace"

// WASM tool defaults and limits.
const (
	WasmPageSize      = 64 << 10
	DefaultWasmMemory = 64 << 20
	MaxWasmMemory     = 1 << 30
	// MaxWasmFiles bounds the folders one tool may be granted.
	MaxWasmFiles = 16
	// maxWasmSchema bounds an input schema, in bytes of JSON.
	maxWasmSchema  = 64 << 10
	maxSchemaDepth = 64
)

// protectedGrant names the workspace folders no WASM tool may be granted,
// at any depth: a module that could write them could run code outside
// its sandbox (git hooks and config, ssh keys, armory's own state), and
// reading them hands out secrets.
var protectedGrant = []string{".git", ".ssh", ".armory"}

// IsProtectedName reports whether a path element is one a WASM tool may
// neither be granted nor write into (.git, .ssh, .armory, in any case).
func IsProtectedName(elem string) bool {
	for _, p := range protectedGrant {
		if strings.EqualFold(elem, p) {
			return true
		}
	}
	return false
}

// wasmFields is what parseToolboxTool collected for the wasm keys.
type wasmFields struct {
	module     *yamlNode
	schema     *yamlNode
	schemaLine int
	memory     *yamlNode
	files      *yamlNode
	capsSet    bool
	argsLine   int
	envLine    int
	binaryLine int
}

// parseWasm finishes a tool that declared wasm: (t.Wasm is set). Every
// problem is recorded at its line and sets *bad.
func parseWasm(r nodeReader, tb *Toolbox, t *ToolboxTool, f wasmFields, bad *bool) {
	fail := func(line int, format string, args ...any) {
		r.ds.Errorf(r.file, line, format, args...)
		*bad = true
	}
	line := f.module.Line
	wt := &WasmTool{Line: line, Memory: DefaultWasmMemory, InputSchema: armory.EmptyObjectSchema}
	what := "tool " + t.Name + ": "
	if f.binaryLine > 0 {
		fail(line, "tool %q has both binary and wasm: a tool runs one or the other", t.Name)
	}
	if f.argsLine > 0 {
		fail(f.argsLine, "%sargs are for binary tools; a wasm tool declares input_schema (its arguments reach the module as JSON on stdin)", what)
	}
	if f.envLine > 0 {
		fail(f.envLine, "%senv is for binary tools; a wasm module gets no host environment", what)
	}
	mod, ok := r.str(f.module, what+"wasm")
	switch {
	case !ok:
		fail(line, "%swasm must name a .wasm file", what)
	case mod == "":
		fail(line, "%swasm is empty: name the .wasm file, relative to the toolbox folder", what)
	case strings.ContainsRune(mod, 0):
		fail(line, "%swasm contains a NUL byte", what)
	case filepath.IsAbs(mod):
		fail(line, "%swasm %q must be relative to the toolbox folder", what, mod)
	case !strings.HasSuffix(mod, ".wasm"):
		fail(line, "%swasm %q must name a .wasm file", what, mod)
	default:
		p := filepath.Join(tb.Dir, filepath.FromSlash(mod))
		if rel, err := filepath.Rel(tb.Dir, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			fail(line, "%swasm %q leaves the toolbox folder", what, mod)
		}
		wt.Module, wt.ModulePath = mod, p
	}
	if f.schema != nil {
		if s, ok := wasmSchema(r, f.schema, f.schemaLine, what); ok {
			wt.InputSchema = s
		} else {
			*bad = true
		}
	}
	if f.memory != nil {
		if m, ok := wasmMemory(r, f.memory, what); ok {
			wt.Memory = m
		} else {
			*bad = true
		}
	}
	if f.files != nil {
		wt.Files = wasmFiles(r, f.files, what, fail, bad)
	}
	if !f.capsSet {
		// A module runs no process: the binary default does not apply.
		t.Manifest.Capabilities = nil
	}
	for _, g := range wt.Files {
		switch {
		case g.Write && !t.Manifest.Has(armory.CapWriteFS):
			fail(g.Line, "%sfiles: %q is granted for writing, so the tool must declare the %s capability", what, g.Path, armory.CapWriteFS)
		case !g.Write && !t.Manifest.Has(armory.CapReadFS):
			fail(g.Line, "%sfiles: %q is granted for reading, so the tool must declare the %s capability", what, g.Path, armory.CapReadFS)
		}
	}
	for _, c := range []armory.Capability{armory.CapNetwork, armory.CapProcessExec} {
		if t.Manifest.Has(c) {
			r.ds.Warnf(r.file, line, "%sa WASM module has no %s: the capability %s has no effect", what, map[armory.Capability]string{armory.CapNetwork: "network", armory.CapProcessExec: "processes"}[c], c)
		}
	}
	t.Wasm = wt
}

// wasmMemory reads a memory size: a whole number of bytes, or a number
// followed by KiB, MiB or GiB.
func wasmMemory(r nodeReader, n *yamlNode, what string) (int64, bool) {
	bad := func(format string, args ...any) (int64, bool) {
		r.ds.Errorf(r.file, n.Line, "%smemory "+format+" (a size such as 64MiB, from 64KiB to 1GiB; default 64MiB)", append([]any{what}, args...)...)
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return bad("must be a size, got %s", kindName(n))
	}
	s := strings.TrimSpace(n.Value)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(num), u.m
			break
		}
	}
	v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	if err != nil || v <= 0 || v > MaxWasmMemory/mult {
		if err == nil && v > 0 {
			return bad("is %q: above the maximum", n.Value)
		}
		return bad("is %q, not a size", n.Value)
	}
	b := v * mult
	switch {
	case b < WasmPageSize:
		return bad("is %q: below one 64KiB page", n.Value)
	case b%WasmPageSize != 0:
		return bad("is %q: not a whole number of 64KiB pages", n.Value)
	}
	return b, true
}

// wasmFiles reads the files: list. Each entry is {path, write} or a bare
// path (read-only).
func wasmFiles(r nodeReader, n *yamlNode, what string, fail func(int, string, ...any), bad *bool) []WasmFile {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		fail(n.Line, "%sfiles must be a list of {path, write}, got %s", what, kindName(n))
		return nil
	}
	if len(n.Content) > MaxWasmFiles {
		fail(n.Line, "%sfiles: %d folders; the limit is %d", what, len(n.Content), MaxWasmFiles)
		return nil
	}
	var out []WasmFile
	seen := map[string]int{}
	for _, en := range n.Content {
		g := WasmFile{Line: en.Line}
		if en.Kind == yaml.ScalarNode && en.Tag != "!!null" {
			g.Path = en.Value
		} else {
			pairs, ok := r.mapping(en, what+"files entry")
			if !ok {
				*bad = true
				continue
			}
			pathSet, pathBad := false, false
			for _, p := range pairs {
				switch p.key {
				case "path":
					var ok bool
					g.Path, ok = r.str(p.v, what+"files: path")
					pathSet, pathBad = true, !ok
				case "write":
					var ok bool
					if g.Write, ok = r.boolean(p.v, what+"files: write"); !ok {
						*bad = true
					}
				default:
					r.unknownKey(p, what+"files entry", []string{"path", "write"})
					*bad = true
				}
			}
			if pathBad {
				*bad = true
				continue
			}
			if !pathSet {
				fail(en.Line, "%sfiles: an entry has no path", what)
				continue
			}
		}
		p, why := cleanGrant(g.Path, g.Write)
		if why != "" {
			fail(en.Line, "%sfiles: %q %s", what, g.Path, why)
			continue
		}
		if prev, dup := seen[p]; dup {
			fail(en.Line, "%sfiles: %q is granted twice (first at line %d)", what, p, prev)
			continue
		}
		seen[p] = en.Line
		g.Path = p
		out = append(out, g)
	}
	return out
}

// cleanGrant returns the cleaned workspace-relative folder of a grant, or
// why it cannot be granted.
func cleanGrant(p string, write bool) (string, string) {
	switch {
	case strings.TrimSpace(p) == "":
		return "", "is empty: name a folder of the workspace (data, out/reports, or . for all of it, read-only)"
	case strings.ContainsRune(p, 0) || strings.ContainsRune(p, '\\'):
		return "", "contains a NUL byte or a backslash"
	case strings.HasPrefix(p, "/"):
		return "", "must be relative to the agent's workspace"
	}
	c := path.Clean(p)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", "leaves the agent's workspace"
	}
	if c == "." {
		if write {
			return "", "is the whole workspace: a module may not write all of it (it holds .git, .ssh and the shell's start-up files); grant a folder such as out"
		}
		return c, ""
	}
	for _, e := range strings.Split(c, "/") {
		if IsProtectedName(e) {
			return "", fmt.Sprintf("is or is inside %s, which no WASM tool may be granted (%s)", e, strings.Join(protectedGrant, ", "))
		}
	}
	return c, ""
}

// wasmSchema reads input_schema: a YAML mapping (JSON is YAML) or a string
// holding a JSON object. It must be a JSON Schema of type object.
func wasmSchema(r nodeReader, n *yamlNode, keyLine int, what string) (json.RawMessage, bool) {
	bad := func(line int, format string, args ...any) (json.RawMessage, bool) {
		r.ds.Errorf(r.file, line, "%sinput_schema "+format, append([]any{what}, args...)...)
		return nil, false
	}
	var raw []byte
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str":
		raw = []byte(n.Value)
		if !json.Valid(raw) {
			return bad(keyLine, "is a string that is not JSON: write the schema as a mapping, or as a JSON object")
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return bad(keyLine, "is not valid JSON: %v", err)
		}
		raw = c.Bytes()
	case n.Kind == yaml.MappingNode:
		var b bytes.Buffer
		if line, err := nodeJSON(&b, n, 0); err != nil {
			return bad(line, "%v", err)
		}
		raw = b.Bytes()
	default:
		return bad(keyLine, "must be a JSON Schema object such as {type: object, properties: {...}}, got %s", kindName(n))
	}
	if len(raw) > maxWasmSchema {
		return bad(keyLine, "is %d bytes of JSON; the limit is %d", len(raw), maxWasmSchema)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return bad(keyLine, "must be a JSON object: %v", err)
	}
	if typ, ok := top["type"]; !ok || string(typ) != `"object"` {
		return bad(keyLine, "must have type: object (the arguments are one JSON object)")
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(raw, &sch); err != nil {
		return bad(keyLine, "is not a JSON Schema: %v", err)
	}
	if _, err := sch.Resolve(nil); err != nil {
		return bad(keyLine, "is not a usable JSON Schema: %v", err)
	}
	return json.RawMessage(raw), true
}

// nodeJSON writes the YAML node as JSON, keeping the order of mapping
// keys (schemas are read by people). Aliases are refused, depth and size
// are bounded; on error it returns the line of the offending node.
func nodeJSON(b *bytes.Buffer, n *yamlNode, depth int) (int, error) {
	if depth > maxSchemaDepth {
		return n.Line, fmt.Errorf("is nested more than %d levels deep", maxSchemaDepth)
	}
	if b.Len() > maxWasmSchema {
		return n.Line, fmt.Errorf("is larger than %d bytes of JSON", maxWasmSchema)
	}
	str := func(s string) {
		enc, _ := json.Marshal(s)
		b.Write(enc)
	}
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return k.Line, fmt.Errorf("has a key that is not a name")
			}
			if seen[k.Value] {
				return k.Line, fmt.Errorf("repeats the key %q", k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				b.WriteByte(',')
			}
			str(k.Value)
			b.WriteByte(':')
			if line, err := nodeJSON(b, v, depth+1); err != nil {
				return line, err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if line, err := nodeJSON(b, c, depth+1); err != nil {
				return line, err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			v, err := strconv.ParseBool(strings.ToLower(n.Value))
			if err != nil {
				return n.Line, fmt.Errorf("has %q, not true or false", n.Value)
			}
			b.WriteString(strconv.FormatBool(v))
		case "!!int":
			v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
			if err != nil {
				return n.Line, fmt.Errorf("has the number %q, which JSON cannot hold", n.Value)
			}
			b.WriteString(strconv.FormatInt(v, 10))
		case "!!float":
			v, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
			if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
				return n.Line, fmt.Errorf("has the number %q, which JSON cannot hold", n.Value)
			}
			b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
		default:
			str(n.Value)
		}
	case yaml.AliasNode:
		return n.Line, fmt.Errorf("uses a YAML alias (*name): write the schema out")
	default:
		return n.Line, fmt.Errorf("has %s where a value belongs", kindName(n))
	}
	return 0, nil
}
