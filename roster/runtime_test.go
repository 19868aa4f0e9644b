package roster

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

// runTool is a tool registered at run time, with the origin it claims
// and the requirements it declares.
type runTool struct {
	name, origin string
	requires     []armory.Requirement
}

func (t *runTool) Spec() armory.Spec {
	return armory.Spec{Name: t.name, Description: "r", InputSchema: armory.EmptyObjectSchema}
}
func (t *runTool) Manifest() armory.Manifest {
	return armory.Manifest{Category: armory.CatOther, Requires: t.requires}
}
func (t *runTool) Execute(context.Context, armory.Invocation) armory.Result { return armory.OK("") }
func (t *runTool) Origin() string                                           { return t.origin }

// runTimeWorld: agent dev is in group writer (workspace.write,
// skill.secret), agent guest in none.
func runTimeWorld(t *testing.T) *Roster {
	t.Helper()
	dir := testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml":         "name: r\nagents:\n  - {id: dev}\n  - {id: guest}\ntool_privileges:\n  writer: [workspace.write, skill.secret]\n",
		"archetype/dev/config.md":   "## Tool Access\nprivilege_groups: writer\n",
		"archetype/guest/config.md": "## Tool Access\n",
	})
	h, err := Open(dir, Options{Sandbox: noSandboxCheck})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Register applies the policy to a run-time tool as to a catalog tool,
// and refuses a world tool's name — one the agent cannot see, a pipeline
// tool's reserved name — whatever the tool says of itself.
func TestRegisterRunTime(t *testing.T) {
	h := runTimeWorld(t)
	guest, _ := h.Agent("guest")
	dev, _ := h.Agent("dev")
	for _, tc := range []struct {
		what  string
		ag    *Agent
		tool  *runTool
		kind  armory.Kind
		wants []string
	}{
		{"a catalog tool's name it cannot see", guest, &runTool{name: "workspace.write", origin: "skill workspace"}, armory.KindConflict, []string{"the world defines a tool named workspace.write already"}},
		{"a catalog tool's name it sees", guest, &runTool{name: "workspace.read", origin: SourceBuiltin}, armory.KindConflict, nil},
		{"a pipeline tool no agent gets", dev, &runTool{name: "approval.decide", origin: "skill approval"}, armory.KindConflict, []string{"approval.decide"}},
		{"privileged, not granted", guest, &runTool{name: "skill.secret", origin: "skill skill"}, armory.KindPermission, []string{"agent guest may not have skill.secret", "not granted"}},
		{"requirement not met", dev, &runTool{name: "skill.needs", requires: []armory.Requirement{{Kind: "binary", Name: "armory-test-no-such-binary"}}}, armory.KindPermission, []string{`requirement not met: binary "armory-test-no-such-binary" not found on PATH`}},
		{"invalid name", dev, &runTool{name: "Skill.X"}, armory.KindInvalid, nil},
	} {
		_, err := h.Register(tc.ag, tc.tool)
		if armory.KindOf(err) != tc.kind {
			t.Errorf("%s: %v, want %v", tc.what, err, tc.kind)
			continue
		}
		for _, w := range tc.wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", tc.what, err, w)
			}
		}
		if tc.ag.Registry.RunTime(tc.tool.name) {
			t.Errorf("%s: registered", tc.what)
		}
	}
	if guest.Registry.Has("workspace.write") || h.Source(guest, "workspace.write") != SourceBuiltin {
		t.Fatal("a refused registration changed the catalog tool")
	}
	if !h.Taken("approval.list") || !h.Taken("workspace.write") || h.Taken("skill.secret") {
		t.Error("Taken")
	}

	// Granted: registered, with its origin as source; a second time is a
	// conflict; it is explained as registered at run time.
	d, err := h.Register(dev, &runTool{name: "skill.secret", origin: "skill skill"})
	if err != nil || !d.Visible {
		t.Fatalf("register: %+v %v", d, err)
	}
	if _, err := h.Register(dev, &runTool{name: "skill.secret"}); armory.KindOf(err) != armory.KindConflict {
		t.Fatalf("second register: %v", err)
	}
	if src := h.Source(dev, "skill.secret"); src != "skill skill" {
		t.Fatalf("source %q", src)
	}
	ex, _ := h.Explain("dev", "skill.secret")
	if all := strings.Join(ex.Reasons, "\n"); !ex.Visible || !strings.Contains(all, `granted by group "writer"`) || !strings.Contains(all, "registered at run time (source: skill skill)") {
		t.Fatalf("explain: %+v", ex)
	}
	// Unregister: a catalog tool is not removed this way.
	if err := h.Unregister(dev, "workspace.write"); armory.KindOf(err) != armory.KindConflict || !dev.Registry.Has("workspace.write") {
		t.Fatalf("unregister a catalog tool: %v", err)
	}
	if err := h.Unregister(dev, "skill.secret"); err != nil || dev.Registry.Has("skill.secret") {
		t.Fatalf("unregister: %v", err)
	}
	if err := h.Unregister(dev, "skill.secret"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("unregister twice: %v", err)
	}
	if ex, _ := h.Explain("dev", "skill.secret"); ex.Visible {
		t.Fatalf("explain after unregister: %+v", ex)
	}
}

// A run-time tool's source is what its Origin says, unless that is one
// of the sources Armory gives its own tools: then it is "run time".
func TestRunTimeSourceCannotBeArmorys(t *testing.T) {
	h := runTimeWorld(t)
	dev, _ := h.Agent("dev")
	for i, tc := range []struct{ origin, want string }{
		{"skill notes", "skill notes"},
		{SourceBuiltin, SourceRunTime},
		{"builtin", SourceRunTime},
		{SourceToolbox, SourceRunTime},
		{"toolbox devtools", SourceRunTime},
		{SourcePipeline, SourceRunTime},
		{SourceUpstream, SourceRunTime},
		{"", SourceRunTime},
	} {
		name := "fake.o" + string(rune('a'+i))
		if _, err := h.Register(dev, &runTool{name: name, origin: tc.origin}); err != nil {
			t.Fatal(err)
		}
		if got := h.Source(dev, name); got != tc.want {
			t.Errorf("origin %q: source %q, want %q", tc.origin, got, tc.want)
		}
	}
}

// fakeSource defines run-time tools for explain: one it can give, one
// that is unavailable in this process.
type fakeSource struct{ tool *runTool }

func (s fakeSource) About(ag *Agent, name string) (armory.Tool, []string, bool) {
	switch name {
	case s.tool.name:
		return s.tool, []string{"from skill fake: the agent has not acquired it"}, true
	case "fake.wasm":
		return nil, []string{"from skill fake: unavailable: this process runs no WebAssembly runtime"}, true
	}
	return nil, nil, false
}

// Explain of a run-time tool the agent does not hold says what defines
// it and what the policy would do; of one that is unavailable, why.
func TestExplainRunTimeSource(t *testing.T) {
	h := runTimeWorld(t)
	h.SetRunTimeSource(fakeSource{tool: &runTool{name: "skill.secret", origin: "skill fake"}})
	for _, tc := range []struct {
		agent, tool string
		wants       []string
	}{
		{"dev", "skill.secret", []string{"from skill fake: the agent has not acquired it", "the policy would let the agent have it once registered"}},
		{"guest", "skill.secret", []string{"from skill fake: the agent has not acquired it", "not granted"}},
		{"dev", "fake.wasm", []string{"from skill fake: unavailable: this process runs no WebAssembly runtime"}},
		{"dev", "fake.nothing", []string{"no tool named fake.nothing is defined"}},
	} {
		ex, err := h.Explain(tc.agent, tc.tool)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(ex.Reasons, "\n")
		if ex.Visible {
			t.Errorf("%s %s visible: %s", tc.agent, tc.tool, all)
		}
		for _, w := range tc.wants {
			if !strings.Contains(all, w) {
				t.Errorf("explain %s %s lacks %q:\n%s", tc.agent, tc.tool, w, all)
			}
		}
		if tc.agent == "guest" && strings.Contains(all, "would let") {
			t.Errorf("explain %s %s:\n%s", tc.agent, tc.tool, all)
		}
	}
	var ie *armory.Error
	if _, err := h.Explain("nobody", "skill.secret"); !errors.As(err, &ie) {
		t.Fatalf("unknown agent: %v", err)
	}
}
