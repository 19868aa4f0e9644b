package world

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/armory-dev/armory"
)

// ToolboxFile is the name of a toolbox's definition file.
const ToolboxFile = "toolbox.yaml"

// ToolboxJSONFile is the name of a toolbox's definition written as a JSON
// manifest (as akh-medu skill packs describe CLI tools). It has the same
// fields, validation and errors as toolbox.yaml; a toolbox folder holds one
// or the other.
const ToolboxJSONFile = "toolbox.json"

// IsToolboxFile reports whether base is the name of a toolbox definition
// file (toolbox.yaml or toolbox.json).
func IsToolboxFile(base string) bool { return base == ToolboxFile || base == ToolboxJSONFile }

// toolboxFile returns which definition file the toolbox folder dir holds:
// toolbox.yaml or toolbox.json; fs.ErrNotExist when neither, an error when
// both.
func toolboxFile(dir string) (string, error) {
	_, ey := os.Stat(filepath.Join(dir, ToolboxFile))
	_, ej := os.Stat(filepath.Join(dir, ToolboxJSONFile))
	switch {
	case ey == nil && ej == nil:
		return "", fmt.Errorf("both %s and %s: keep one", ToolboxFile, ToolboxJSONFile)
	case ey == nil:
		return ToolboxFile, nil
	case ej == nil:
		return ToolboxJSONFile, nil
	}
	return "", fs.ErrNotExist
}

// jsonAsYAML checks that data is one JSON value and returns it ready for the
// YAML parser (JSON is YAML, but YAML refuses tabs where JSON allows them as
// white space; valid JSON has no raw tab inside a string, so every tab is
// white space). A syntax error is recorded at its line.
func jsonAsYAML(file string, data []byte, ds *Diagnostics) ([]byte, bool) {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		line := 0
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line = 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		}
		ds.Errorf(file, line, "not valid JSON: %v", err)
		return nil, false
	}
	return bytes.ReplaceAll(data, []byte("\t"), []byte(" ")), true
}

// Toolbox is a folder of external CLI tools, toolbox/<name>/toolbox.yaml.
type Toolbox struct {
	Name  string
	Dir   string // absolute
	File  string // relative to the world folder
	Tools []*ToolboxTool
}

// Tool returns the tool with short name, or nil.
func (tb *Toolbox) Tool(name string) *ToolboxTool {
	return named(tb.Tools, name, func(t *ToolboxTool) string { return t.Name })
}

// ToolNames returns the short names of the toolbox's tools, sorted.
func (tb *Toolbox) ToolNames() []string {
	out := names(tb.Tools, func(t *ToolboxTool) string { return t.Name })
	sort.Strings(out)
	return out
}

// ArgType says how a toolbox argument becomes argv.
type ArgType string

// Argument types.
const (
	ArgPositional ArgType = "positional" // the value, as one argv entry
	ArgFlag       ArgType = "flag"       // flag, then the value
	ArgFlagBool   ArgType = "flag_bool"  // the flag alone when true
)

// Arg is one declared argument of a toolbox tool.
type Arg struct {
	Name        string
	Type        ArgType
	Flag        string
	Required    bool
	Description string
	Enum        []string
	Line        int
}

// ToolboxTool is one tool of a toolbox. Its full name is Toolbox.Name + "." + Name.
type ToolboxTool struct {
	Toolbox     string
	Name        string
	File        string // relative to the world folder
	Line        int
	Description string
	// Binary is as written; BinaryPath is absolute when Binary names a file
	// relative to the toolbox folder (it contains a '/'), else the bare name
	// to find on PATH.
	Binary     string
	BinaryPath string
	Args       []Arg
	Manifest   armory.Manifest
	Timeout    time.Duration
	MaxOutput  int
	// Env lists names of environment variables passed through to the tool.
	Env []string
	// Wasm is set for a tool that runs a WebAssembly module (wasm:)
	// instead of a binary; nil otherwise.
	Wasm *WasmTool
}

// FullName is "<toolbox>.<tool>".
func (t *ToolboxTool) FullName() string { return t.Toolbox + "." + t.Name }

// Toolbox defaults and limits.
const (
	DefaultToolTimeout   = 30 * time.Second
	MaxToolTimeout       = 30 * time.Minute
	DefaultToolMaxOutput = 64 << 10
	MaxToolMaxOutput     = 16 << 20
	maxToolArgs          = 64
)

var toolboxKeys = []string{"name", "description", "tools"}
var toolKeys = []string{"name", "description", "binary", "wasm", "args", "input_schema", "danger", "capabilities", "permission", "category", "timeout", "max_output", "memory", "files", "env"}
var argKeys = []string{"name", "type", "flag", "required", "description", "enum"}

// loadToolboxes discovers toolbox/*/toolbox.yaml and toolbox.json ("drop a
// file in, it is found") and loads those in the allow-list.
func (w *World) loadToolboxes(ds *Diagnostics) {
	for _, name := range Discover(w.Dir) {
		if !w.allowed(name) {
			file, _ := toolboxFile(filepath.Join(w.Dir, "toolbox", name))
			if file == "" {
				file = ToolboxFile
			}
			ds.Warnf(filepath.ToSlash(filepath.Join("toolbox", name, file)), 0,
				"toolbox %q is not in the world's toolboxes allow-list, so its tools are not loaded", name)
		}
	}
	for _, it := range w.ToolboxAllow {
		dir := filepath.Join(w.Dir, "toolbox", it.Value)
		file, err := toolboxFile(dir)
		if errors.Is(err, fs.ErrNotExist) {
			rel := filepath.ToSlash(filepath.Join("toolbox", it.Value, ToolboxFile))
			ds.Errorf(ConfigFile, it.Line, "toolboxes: %q has no %s or %s (toolboxes here: %s)", it.Value, rel, ToolboxJSONFile, listDirs(filepath.Join(w.Dir, "toolbox")))
			continue
		}
		if err != nil {
			ds.Errorf(filepath.ToSlash(filepath.Join("toolbox", it.Value)), 0, "%v", err)
			continue
		}
		rel := filepath.ToSlash(filepath.Join("toolbox", it.Value, file))
		data, err := ReadLimited(filepath.Join(dir, file), maxYAMLSize)
		if err != nil {
			ds.Errorf(rel, 0, "%v", err)
			continue
		}
		if file == ToolboxJSONFile {
			var ok bool
			if data, ok = jsonAsYAML(rel, data, ds); !ok {
				continue
			}
		}
		tb := ParseToolbox(rel, dir, data, ds)
		if tb == nil {
			continue
		}
		if tb.Name != it.Value {
			ds.Errorf(rel, 0, "toolbox name %q does not match its folder toolbox/%s/", tb.Name, it.Value)
			continue
		}
		w.Toolboxes[tb.Name] = tb
	}
}

// ParseToolbox parses toolbox.yaml content. file names it in diagnostics;
// dir is the toolbox folder, against which relative binaries resolve. It
// returns nil when the file cannot be used at all. It never panics.
func ParseToolbox(file, dir string, data []byte, ds *Diagnostics) *Toolbox {
	r := nodeReader{file: file, ds: ds}
	root := parseYAML(file, data, ds)
	if root == nil {
		return nil
	}
	tb := &Toolbox{Dir: dir, File: file}
	pairs, _ := r.mapping(root, "toolbox")
	var toolsNode *yamlNode
	for _, p := range pairs {
		switch p.key {
		case "name":
			tb.Name, _ = r.str(p.v, "name")
		case "description":
			r.str(p.v, "description")
		case "tools":
			toolsNode = p.v
		default:
			r.unknownKey(p, "toolbox", toolboxKeys)
		}
	}
	if !nameRE.MatchString(tb.Name) {
		ds.Errorf(file, root.Line, "toolbox name %q is missing or not valid ([a-z0-9][a-z0-9_-]*)", tb.Name)
		return nil
	}
	if toolsNode == nil {
		ds.Warnf(file, root.Line, "toolbox %q has no tools", tb.Name)
		return tb
	}
	if toolsNode.Kind != yamlSequence {
		ds.Errorf(file, toolsNode.Line, "tools must be a list, got %s", kindName(toolsNode))
		return tb
	}
	seen := map[string]int{}
	for _, tn := range toolsNode.Content {
		t := parseToolboxTool(r, tb, tn)
		if t == nil {
			continue
		}
		if prev, dup := seen[t.Name]; dup {
			ds.Errorf(file, t.Line, "duplicate tool %q in toolbox %q (first at line %d)", t.Name, tb.Name, prev)
			continue
		}
		seen[t.Name] = t.Line
		tb.Tools = append(tb.Tools, t)
	}
	return tb
}

func parseToolboxTool(r nodeReader, tb *Toolbox, n *yamlNode) *ToolboxTool {
	pairs, ok := r.mapping(n, "tool")
	if !ok {
		return nil
	}
	t := &ToolboxTool{
		Toolbox: tb.Name, File: r.file, Line: n.Line,
		Timeout: DefaultToolTimeout, MaxOutput: DefaultToolMaxOutput,
		Manifest: armory.Manifest{
			Danger:       armory.DangerDangerous,
			Capabilities: []armory.Capability{armory.CapProcessExec},
			Permission:   armory.PermConfirm,
			Category:     armory.CatOther,
		},
	}
	bad := false
	fail := func(line int, format string, args ...any) {
		r.ds.Errorf(r.file, line, format, args...)
		bad = true
	}
	var wf wasmFields
	var wasmOnly []pair
	for _, p := range pairs {
		what := "tool " + t.Name + ": " + p.key
		switch p.key {
		case "name":
			t.Name, _ = r.str(p.v, "tool name")
		case "description":
			t.Description, _ = r.str(p.v, what)
		case "binary":
			t.Binary, _ = r.str(p.v, what)
			wf.binaryLine = p.k.Line
		case "args":
			t.Args = parseArgs(r, p.v, t.Name, &bad)
			wf.argsLine = p.k.Line
		case "wasm":
			wf.module = p.v
		case "input_schema":
			wf.schema, wf.schemaLine, wasmOnly = p.v, p.k.Line, append(wasmOnly, p)
		case "memory":
			wf.memory, wasmOnly = p.v, append(wasmOnly, p)
		case "files":
			wf.files, wasmOnly = p.v, append(wasmOnly, p)
		case "danger":
			if d, ok := parsed(r, p.v, what, armory.ParseDanger, &bad); ok {
				t.Manifest.Danger = d
			}
		case "capabilities":
			t.Manifest.Capabilities = parsedList(r, p.v, what, armory.ParseCapability, &bad)
			wf.capsSet = true
		case "permission":
			if pm, ok := parsed(r, p.v, what, armory.ParsePermission, &bad); ok {
				t.Manifest.Permission = pm
			}
		case "category":
			if c, ok := parsed(r, p.v, what, armory.ParseCategory, &bad); ok {
				t.Manifest.Category = c
			}
		case "timeout":
			if d, ok := r.duration(p.v, what, MaxToolTimeout); ok {
				t.Timeout = d
			} else {
				bad = true
			}
		case "max_output":
			if v, ok := r.integer(p.v, what, 1, MaxToolMaxOutput); ok {
				t.MaxOutput = int(v)
			} else {
				bad = true
			}
		case "env":
			wf.envLine = p.k.Line
			items, _ := r.strList(p.v, what)
			for _, it := range items {
				if !envNameRE.MatchString(it.Value) {
					fail(it.Line, "%s: %q is not an environment variable name", what, it.Value)
					continue
				}
				t.Env = append(t.Env, it.Value)
			}
		default:
			r.unknownKey(p, "tool "+t.Name, toolKeys)
		}
	}
	switch {
	case t.Name == "":
		fail(n.Line, "tool has no name")
	case !armory.ValidToolName(t.Name) || strings.Contains(t.Name, "."):
		fail(n.Line, "tool name %q is not valid (a lower-case name such as repo-git, without dots)", t.Name)
	}
	if strings.TrimSpace(t.Description) == "" && t.Name != "" {
		r.ds.Warnf(r.file, n.Line, "tool %q has no description: models will not know what it does", t.Name)
	}
	if wf.module != nil {
		parseWasm(r, tb, t, wf, &bad)
		if bad {
			return nil
		}
		return t
	}
	for _, p := range wasmOnly {
		fail(p.k.Line, "tool %s: %s is for a wasm tool; a binary tool declares args", t.Name, p.key)
	}
	switch {
	case t.Binary == "":
		fail(n.Line, "tool %q has no binary (or wasm module)", t.Name)
	case strings.ContainsRune(t.Binary, 0):
		fail(n.Line, "tool %q: binary contains a NUL byte", t.Name)
	case filepath.IsAbs(t.Binary):
		t.BinaryPath = filepath.Clean(t.Binary)
	case strings.Contains(t.Binary, "/"):
		p := filepath.Join(tb.Dir, t.Binary)
		if rel, err := filepath.Rel(tb.Dir, p); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			fail(n.Line, "tool %q: binary %q leaves the toolbox folder", t.Name, t.Binary)
		}
		t.BinaryPath = p
	default:
		t.BinaryPath = t.Binary
	}
	if bad {
		return nil
	}
	return t
}

func parseArgs(r nodeReader, n *yamlNode, tool string, bad *bool) []Arg {
	if n.Kind != yamlSequence {
		r.ds.Errorf(r.file, n.Line, "tool %s: args must be a list, got %s", tool, kindName(n))
		*bad = true
		return nil
	}
	if len(n.Content) > maxToolArgs {
		r.ds.Errorf(r.file, n.Line, "tool %s: %d args; the limit is %d", tool, len(n.Content), maxToolArgs)
		*bad = true
		return nil
	}
	var out []Arg
	seen := map[string]bool{}
	for _, an := range n.Content {
		pairs, ok := r.mapping(an, "tool "+tool+": arg")
		if !ok {
			*bad = true
			continue
		}
		a := Arg{Line: an.Line}
		for _, p := range pairs {
			what := fmt.Sprintf("tool %s: arg %s: %s", tool, a.Name, p.key)
			switch p.key {
			case "name":
				a.Name, _ = r.str(p.v, what)
			case "type":
				s, _ := r.str(p.v, what)
				a.Type = ArgType(s)
			case "flag":
				a.Flag, _ = r.str(p.v, what)
			case "required":
				a.Required, _ = r.boolean(p.v, what)
			case "description":
				a.Description, _ = r.str(p.v, what)
			case "enum":
				items, _ := r.strList(p.v, what)
				a.Enum = itemValues(items)
			default:
				r.unknownKey(p, "tool "+tool+": arg", argKeys)
			}
		}
		fail := func(format string, args ...any) {
			r.ds.Errorf(r.file, an.Line, "tool %s: arg %q: "+format, append([]any{tool, a.Name}, args...)...)
			*bad = true
		}
		if !argNameRE.MatchString(a.Name) {
			fail("name must match [a-z_][a-z0-9_]*")
			continue
		}
		if seen[a.Name] {
			fail("declared twice")
			continue
		}
		seen[a.Name] = true
		switch a.Type {
		case "":
			a.Type = ArgPositional
		case ArgPositional, ArgFlag, ArgFlagBool:
		default:
			fail("unknown type %q (want positional, flag or flag_bool)", a.Type)
			continue
		}
		if a.Type != ArgPositional && !strings.HasPrefix(a.Flag, "-") {
			fail("type %s needs a flag such as --%s", a.Type, strings.ReplaceAll(a.Name, "_", "-"))
			continue
		}
		if a.Type == ArgPositional && a.Flag != "" {
			fail("a positional argument has no flag")
			continue
		}
		if a.Type == ArgFlagBool && len(a.Enum) > 0 {
			fail("a flag_bool argument takes no enum")
			continue
		}
		out = append(out, a)
	}
	return out
}

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
var argNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// Discover lists the toolbox folders under <dir>/toolbox that hold a
// toolbox.yaml or toolbox.json, whether or not the world allows them.
func Discover(dir string) []string {
	ents, err := os.ReadDir(filepath.Join(dir, "toolbox"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := toolboxFile(filepath.Join(dir, "toolbox", e.Name())); !errors.Is(err, fs.ErrNotExist) {
				out = append(out, e.Name())
			}
		}
	}
	return out
}
