package roster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/world"
)

type extraTool struct{ name string }

func (t extraTool) Spec() armory.Spec {
	return armory.Spec{Name: t.name, Description: "x", InputSchema: armory.EmptyObjectSchema}
}
func (t extraTool) Manifest() armory.Manifest {
	return armory.Manifest{Category: armory.CatMCP, Permission: armory.PermConfirm}
}
func (t extraTool) Execute(context.Context, armory.Invocation) armory.Result { return armory.OK("") }

func extraWorld(t *testing.T) string {
	return testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml":     "name: x\nagents:\n  - id: a\n  - id: b\ntool_privileges:\n  files: [mcp.fs]\n  down: [mcp.gone]\n",
		"archetype/a/config.md": "## Tool Access\nprivilege_groups: files\n",
		"archetype/b/config.md": "## Tool Access\n",
	})
}

func TestExtraToolsAndUnavailable(t *testing.T) {
	dir := extraWorld(t)
	h, err := Open(dir, Options{
		Modules:     []ModuleTools{{Source: SourceUpstream, Tools: []armory.Tool{extraTool{"mcp.fs.read"}, extraTool{"mcp.misc.echo"}}}},
		Unavailable: map[string]string{"mcp.gone": "server gone is unavailable: boom", "mcp.fs.write": "withheld: changed", "mcp.fs": "never used: a tool entry is more specific"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		agent, tool string
		visible     bool
		reason      string
	}{
		{"a", "mcp.fs.read", true, "granted"},
		{"b", "mcp.fs.read", false, "not granted"},
		{"b", "mcp.misc.echo", true, "public"},
		{"a", "mcp.gone.x", false, "server gone is unavailable: boom"},
		{"a", "mcp.fs.write", false, "withheld: changed"},
	} {
		e, err := h.Explain(tc.agent, tc.tool)
		if err != nil {
			t.Fatal(err)
		}
		if e.Visible != tc.visible || !strings.Contains(strings.Join(e.Reasons, "; "), tc.reason) {
			t.Errorf("%s %s: %+v", tc.agent, tc.tool, e)
		}
	}
	// A missing tool's first reason says why it is missing, once; the
	// policy reasons after it say they are about a tool that is not there.
	for tool, want := range map[string][2]string{
		"mcp.fs.write": {"withheld: changed", "if it were available: "},
		"no.such":      {"no tool named no.such is defined in this world", "if it were defined: "},
	} {
		e, err := h.Explain("a", tool)
		if err != nil || e.Visible || len(e.Reasons) < 2 || e.Reasons[0] != want[0] {
			t.Fatalf("explain %s: %+v %v", tool, e, err)
		}
		for _, r := range e.Reasons[1:] {
			if !strings.HasPrefix(r, want[1]) || strings.Contains(r, "is defined in this world") {
				t.Errorf("explain %s: reason %q", tool, r)
			}
		}
	}
	// A group naming an unavailable family is not warned about as undefined.
	if strings.Contains(fmtDiags(h.Warnings), "mcp.gone") {
		t.Errorf("warnings: %v", h.Warnings)
	}
}

func fmtDiags(ds world.Diagnostics) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.String() + "\n")
	}
	return b.String()
}

func TestExtraToolDuplicateIsAnError(t *testing.T) {
	_, err := Open(extraWorld(t), Options{Modules: []ModuleTools{{Source: "notes", Tools: []armory.Tool{extraTool{"workspace.read"}}}}})
	var ie *world.InvalidError
	if !errors.As(err, &ie) || !strings.Contains(err.Error(), `duplicate tool name "workspace.read"`) {
		t.Fatalf("got %v", err)
	}
}

// Every source shows in the one view: a module's (upstream, and another
// module under its own name), built-in, and a tool registered at run
// time, which explain also reports.
func TestToolSources(t *testing.T) {
	h, err := Open(extraWorld(t), Options{Modules: []ModuleTools{
		{Source: SourceUpstream, Tools: []armory.Tool{extraTool{"mcp.fs.read"}}},
		{Source: "services", Tools: []armory.Tool{extraTool{"world.clock"}}},
	}, Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := h.Agent("a")
	if err := ag.Registry.Register(extraTool{"skill.notes.add"}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ti := range h.Tools(ag) {
		got[ti.Name] = ti.Source
	}
	for name, want := range map[string]string{"mcp.fs.read": SourceUpstream, "world.clock": "services", "workspace.read": SourceBuiltin, "skill.notes.add": SourceRunTime} {
		if got[name] != want {
			t.Errorf("source of %s = %q, want %q (all: %v)", name, got[name], want, got)
		}
	}
	ex, err := h.Explain("a", "skill.notes.add")
	if err != nil || !ex.Visible || !strings.Contains(strings.Join(ex.Reasons, "; "), "registered at run time") {
		t.Errorf("explain run-time tool: %+v %v", ex, err)
	}
	if s := h.AccessSummary(ag); !strings.Contains(strings.Join(s.Tools, ","), "skill.notes.add") {
		t.Errorf("access summary lacks the run-time tool: %v", s.Tools)
	}
}

// A module cannot give its tools one of the sources Armory gives its own:
// those decide what runs before admission (built-in) and which network
// policy a web tool dials under, so a module claiming one is refused, and
// so is a source that is not a plain name.
func TestModuleCannotClaimArmorysSources(t *testing.T) {
	for _, src := range []string{SourceBuiltin, "builtin", SourceToolbox, SourcePipeline, SourceRunTime, "", "Upstream", "toolbox devtools", "a/b", strings.Repeat("x", 33)} {
		_, err := Open(extraWorld(t), Options{Modules: []ModuleTools{{Source: src, Tools: []armory.Tool{extraTool{"mcp.fs.read"}}}}, Sandbox: noSandboxCheck})
		if armory.KindOf(err) != armory.KindInvalid || !strings.Contains(err.Error(), "module source") {
			t.Errorf("source %q: got %v, want a KindInvalid module source error", src, err)
		}
	}
}
