package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store/sqlite"
)

// Tools registered at run time (a skill's): whatever they say of
// themselves, Armory does not ship their code.

// claimingTool is an effect-free run-time tool whose Origin claims one
// of the sources Armory gives its own tools.
type claimingTool struct {
	*testTool
	origin string
}

func (t *claimingTool) Origin() string { return t.origin }

var _ roster.Origin = (*claimingTool)(nil)

// A run-time tool whose Origin claims "built-in" (or a toolbox) is shown
// as run time, and — effect-free by its manifest or not — is admitted
// before it runs: a call the session's cap refuses does not run it. A
// shipped effect-free tool, admitted after it ran, is the contrast.
func TestRunTimeToolClaimingBuiltinIsAdmittedFirst(t *testing.T) {
	f := newFixture(t)
	ag, err := f.h.Agent("plain") // tool_invocations: 3
	if err != nil {
		t.Fatal(err)
	}
	for i, origin := range []string{roster.SourceBuiltin, "builtin", roster.SourcePipeline, "toolbox devtools", roster.SourceUpstream, ""} {
		name := fmt.Sprintf("fake.t%d", i)
		tool := &claimingTool{testTool: &testTool{name: name, man: armory.Manifest{Category: armory.CatOther}}, origin: origin}
		if _, err := f.h.Register(ag, tool); err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
		if src := f.h.Source(ag, name); src != roster.SourceRunTime {
			t.Errorf("origin %q: source %q, want %q", origin, src, roster.SourceRunTime)
		}
	}
	claims := &claimingTool{testTool: &testTool{name: "fake.builtin", man: armory.Manifest{Category: armory.CatOther}}, origin: roster.SourceBuiltin}
	if _, err := f.h.Register(ag, claims); err != nil {
		t.Fatal(err)
	}
	for _, ti := range f.h.Tools(ag) {
		if ti.Name == "fake.builtin" && ti.Source != roster.SourceRunTime {
			t.Errorf("tool list shows source %q", ti.Source)
		}
	}
	ex, err := f.h.Explain("plain", "fake.builtin")
	if err != nil || !ex.Visible || !strings.Contains(strings.Join(ex.Reasons, "\n"), "registered at run time (source: run time)") {
		t.Errorf("explain: %+v %v", ex, err)
	}

	// Admitted before it runs: the start record is a commit of its own.
	st := f.st.(*sqlite.Store)
	c0 := st.CommitCounts()
	if o := f.p.Execute(context.Background(), Call{Agent: "plain", Tool: "fake.builtin", Session: "commits", Args: json.RawMessage(`{}`)}); o.Status != audit.StatusSuccess {
		t.Fatalf("call: %+v", o)
	}
	if c := st.CommitCounts(); c.Relaxed-c0.Relaxed != 1 || c.Durable-c0.Durable != 1 {
		t.Errorf("commits %+v → %+v: want the admission (relaxed) before the run, then the finish", c0, c)
	}

	// At the cap: the refused call did not run.
	runs := func(tool string, tt *testTool) (int64, []audit.Status) {
		sess := "cap-" + tool
		var statuses []audit.Status
		for i := range 4 {
			o := f.p.Execute(context.Background(), Call{Agent: "plain", Tool: tool, Session: sess, Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			statuses = append(statuses, o.Status)
		}
		return tt.runs.Load(), statuses
	}
	before := claims.runs.Load()
	n, statuses := runs("fake.builtin", claims.testTool)
	if n-before != 3 || statuses[3] != audit.StatusBlocked {
		t.Fatalf("run-time tool at the cap of 3: ran %d times, statuses %v", n-before, statuses)
	}
	// (A shipped effect-free tool runs before its admission: the fourth
	// call ran and its result was discarded.)
	if n, statuses := runs("test.noop", f.tools["test.noop"]); n != 4 || statuses[3] != audit.StatusBlocked {
		t.Fatalf("built-in at the cap: ran %d times, statuses %v (the contrast no longer holds)", n, statuses)
	}
}

// sliceTool is a tool whose dynamic type is not comparable (a struct
// value with a slice): it cannot key a map.
type sliceTool struct {
	name string
	tags []string
	runs *atomic.Int64
}

func (t sliceTool) Spec() armory.Spec {
	return armory.Spec{Name: t.name, Description: "a value tool", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`)}
}
func (t sliceTool) Manifest() armory.Manifest { return armory.Manifest{Category: armory.CatOther} }
func (t sliceTool) Execute(context.Context, armory.Invocation) armory.Result {
	t.runs.Add(1)
	return armory.OK("ran")
}

// anyTool is a comparable struct type whose value may not be: an
// interface field holding a slice makes == panic at run time.
type anyTool struct {
	name  string
	extra any
}

func (t anyTool) Spec() armory.Spec {
	return armory.Spec{Name: t.name, Description: "a value tool", InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`)}
}
func (t anyTool) Manifest() armory.Manifest                                { return armory.Manifest{Category: armory.CatOther} }
func (t anyTool) Execute(context.Context, armory.Invocation) armory.Result { return armory.OK("ran") }

// schemaEntries counts the compiled schemas the pipeline keeps.
func schemaEntries(p *Pipeline) int {
	n := 0
	p.schemas.Range(func(any, any) bool { n++; return true })
	return n
}

// Tools whose values cannot key the schema cache still work — their
// schema compiled on each call, never kept — whether their type is not
// comparable or only their value is; comparable tools fill the cache at
// most to maxSchemas.
func TestSchemaCacheBound(t *testing.T) {
	f := newFixture(t)
	ag, err := f.h.Agent("dev")
	if err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int64
	tools := []armory.Tool{
		sliceTool{name: "value.slice", tags: []string{"a"}, runs: &runs},
		anyTool{name: "value.any", extra: []string{"not", "hashable"}},
		anyTool{name: "value.anymap", extra: map[string]int{"x": 1}},
	}
	for _, tool := range tools {
		if _, err := f.h.Register(ag, tool); err != nil {
			t.Fatal(err)
		}
	}
	base := schemaEntries(f.p)
	for _, tool := range tools {
		name := tool.Spec().Name
		for i := range 3 {
			o := f.call("dev", name, fmt.Sprintf(`{"n":%d}`, i))
			if o.Status != audit.StatusSuccess {
				t.Fatalf("%s: %+v", name, o)
			}
		}
		o := f.call("dev", name, `{"n":"x"}`)
		if o.Status != audit.StatusError || !strings.HasPrefix(o.Result, "Invalid arguments for "+name) {
			t.Fatalf("%s with bad arguments: %+v", name, o)
		}
	}
	if runs.Load() != 3 {
		t.Fatalf("value.slice ran %d times", runs.Load())
	}
	if n := schemaEntries(f.p); n != base {
		t.Fatalf("the cache grew by %d entries for tools it cannot key", n-base)
	}
	// The registry compares them without panicking either.
	if registry.SameTool(tools[1], tools[1]) || registry.SameTool(tools[0], tools[0]) {
		t.Error("SameTool says a value that cannot be compared is the same tool")
	}

	// Comparable tools, more than the bound: the cache never holds more.
	for i := range maxSchemas + 500 {
		f.p.schema(&testTool{name: fmt.Sprintf("many.t%d", i)})
		if i%1000 == 0 || i > maxSchemas-2 {
			if n := schemaEntries(f.p); n > maxSchemas {
				t.Fatalf("after %d tools the cache holds %d schemas; the bound is %d", i+1, n, maxSchemas)
			}
		}
	}
}

// A run-time tool can change between a call's approval request and its
// resume (a skill replaced, registered again): the resumed call is
// checked against the tool that would run, so arguments it does not take
// are refused, and it does not run.
func TestResumeValidatesAgainstTheToolNow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	ag, err := f.h.Agent("dev")
	if err != nil {
		t.Fatal(err)
	}
	man := armory.Manifest{Category: armory.CatOther, Permission: armory.PermConfirm}
	v1 := &testTool{name: "skill.tool", man: man, schema: `{"type":"object","properties":{"path":{"type":"string"}},"required":["path"],"additionalProperties":false}`}
	if _, err := f.h.Register(ag, v1); err != nil {
		t.Fatal(err)
	}
	o := f.call("dev", "skill.tool", `{"path":"a"}`)
	if o.Status != audit.StatusPending {
		t.Fatalf("call: %+v", o)
	}
	// The tool is replaced while the approval waits.
	v2 := &testTool{name: "skill.tool", man: man, schema: `{"type":"object","properties":{"lines":{"type":"boolean"}},"additionalProperties":false}`}
	if err := f.h.Unregister(ag, "skill.tool"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.h.Register(ag, v2); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Decide(ctx, ApprovalDecision{ID: o.ApprovalID, Status: "approved", Reason: "ok", Via: ViaCLI}); err != nil {
		t.Fatal(err)
	}
	r := f.p.Execute(ctx, Call{Agent: "dev", Tool: "skill.tool", Resume: o.ApprovalID})
	if r.Status == audit.StatusSuccess || !strings.HasPrefix(r.Result, "Invalid arguments for skill.tool") {
		t.Fatalf("resume: %+v", r)
	}
	if v1.runs.Load() != 0 || v2.runs.Load() != 0 {
		t.Fatalf("ran: v1 %d, v2 %d", v1.runs.Load(), v2.runs.Load())
	}
}
