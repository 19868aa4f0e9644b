package registry

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/armory-dev/armory"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fake is a test tool: a name, a manifest, and an echo.
type fake struct {
	name string
	desc string
	man  armory.Manifest
}

func (f *fake) Spec() armory.Spec {
	return armory.Spec{Name: f.name, Description: f.desc, InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`)}
}
func (f *fake) Manifest() armory.Manifest { return f.man }
func (f *fake) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	return armory.OK(f.name)
}

func tools() []armory.Tool {
	return []armory.Tool{
		&fake{"workspace.write", "Write content to a file in the agent workspace.", armory.Manifest{Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapWriteFS}, Category: armory.CatFileWrite}},
		&fake{"workspace.read", "Read files from the agent workspace\nSecond line is not in the briefing.", armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapReadFS}, Category: armory.CatFileRead}},
		&fake{"tool.fetch", "HTTP fetch for URLs.", armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapNetwork}, Category: armory.CatWeb}},
		&fake{"tool.cli", "Run a shell command.", armory.Manifest{Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapProcessExec}, Category: armory.CatTerminal, Permission: armory.PermConfirm}},
		&fake{"syscall.task.list", "List tasks by owner and status.", armory.Manifest{Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState}}},
		&fake{"devtools.repo-git", "Manage the workspace git repository.", armory.Manifest{Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapProcessExec, armory.CapWriteFS}, Category: armory.CatGit}},
		&fake{"workspace.delete", "Delete a file.", armory.Manifest{Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapWriteFS}, Category: armory.CatFileDelete}},
	}
}

func newCat(t testing.TB) *Catalog {
	c, err := NewCatalog(tools())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run go test ./registry -update to create it)", err)
	}
	if string(want) != string(got) {
		t.Errorf("%s differs from the golden file (go test ./registry -update to accept):\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

func TestRenderersGolden(t *testing.T) {
	r := New(newCat(t), func(string) bool { return true })
	specs := r.Specs()
	brief := Briefing(specs, []ToolkitPrompt{
		{Toolkit: "web", Tools: []string{"tool.fetch", "tool.browser"}, Text: "Prefer tool.fetch; use tool.browser only for pages that need JavaScript."},
		{Toolkit: "self", Tools: []string{"skill.create"}, Text: "Never shown: no member is visible."},
	})
	golden(t, "briefing.golden", []byte(brief))
	oa, m, err := OpenAI(specs)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "openai.golden.json", oa)
	an, _, err := Anthropic(specs)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "anthropic.golden.json", an)
	mcp, err := MCP(r.Tools())
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "mcp.golden.json", mcp)
	// The OpenAI names round-trip to the real tools.
	var parsed []struct {
		Function struct{ Name string } `json:"function"`
	}
	if err := json.Unmarshal(oa, &parsed); err != nil {
		t.Fatal(err)
	}
	for _, p := range parsed {
		real, ok := m.Resolve(p.Function.Name)
		if !ok || !r.Has(real) {
			t.Errorf("%q does not resolve to a tool (got %q)", p.Function.Name, real)
		}
	}
}

func TestBriefingDeterministic(t *testing.T) {
	a := New(newCat(t), func(string) bool { return true })
	b := New(newCat(t), func(string) bool { return true })
	if Briefing(a.Specs(), nil) != Briefing(b.Specs(), nil) {
		t.Fatal("briefing depends on construction order")
	}
	specs := a.Specs()
	for i := 1; i < len(specs); i++ {
		if specs[i-1].Name >= specs[i].Name {
			t.Fatalf("specs not sorted: %s before %s", specs[i-1].Name, specs[i].Name)
		}
	}
}

func TestNameMap(t *testing.T) {
	long := strings.Repeat("a", 60) + ".tool." + strings.Repeat("b", 50)
	names := []string{"workspace.read", "devtools.repo-git", "tool.google_search", long}
	m, err := NewNameMap(names)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		api := m.API(n)
		if len(api) > 64 || strings.Trim(api, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			t.Errorf("API name %q of %q is not [A-Za-z0-9_-]{1,64}", api, n)
		}
		if back, ok := m.Resolve(api); !ok || back != n {
			t.Errorf("Resolve(%q) = %q, %v; want %q", api, back, ok, n)
		}
		if back, ok := m.Resolve(n); !ok || back != n {
			t.Errorf("the real name must resolve too: %q", n)
		}
	}
	if _, ok := m.Resolve("nope"); ok {
		t.Error("unknown name resolved")
	}
	// Collisions fail loudly, naming both tools.
	_, err = NewNameMap([]string{"a.b", "a__b"})
	if err == nil || armory.KindOf(err) != armory.KindConflict || !strings.Contains(err.Error(), `"a.b" and "a__b"`) {
		t.Fatalf("collision: %v", err)
	}
	if _, _, err := OpenAI([]armory.Spec{{Name: "a.b"}, {Name: "a__b"}}); err == nil {
		t.Fatal("OpenAI must refuse colliding names")
	}
}

func TestLookupRegisterUnregister(t *testing.T) {
	r := New(newCat(t), func(n string) bool { return n != "tool.cli" })
	if _, err := r.Lookup("tool.cli"); err == nil || err.Error() != "registry.Lookup: Unknown tool: tool.cli" || armory.Message(err) != "Unknown tool: tool.cli" || armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("invisible catalog tool: %v", err)
	}
	if _, err := r.Lookup("no.such"); armory.Message(err) != "Unknown tool: no.such" {
		t.Fatalf("unknown: %v", err)
	}
	n := r.Len()
	skill := &fake{name: "skill.pdf.extract", desc: "Extract text from a PDF."}
	if err := r.Register(skill); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(skill); armory.KindOf(err) != armory.KindConflict {
		t.Fatalf("double register: %v", err)
	}
	if err := r.Register(&fake{name: "workspace.read"}); armory.KindOf(err) != armory.KindConflict {
		t.Fatalf("shadowing a visible tool: %v", err)
	}
	if err := r.Register(&fake{name: "Bad Name"}); armory.KindOf(err) != armory.KindInvalid {
		t.Fatalf("bad name: %v", err)
	}
	if r.Len() != n+1 || !r.Has("skill.pdf.extract") {
		t.Fatal("registered tool missing")
	}
	specs := r.Specs()
	for i := 1; i < len(specs); i++ {
		if specs[i-1].Name >= specs[i].Name {
			t.Fatalf("specs not sorted after Register: %v", specs)
		}
	}
	if err := r.Unregister("skill.pdf.extract"); err != nil {
		t.Fatal(err)
	}
	if err := r.Unregister("workspace.read"); err != nil {
		t.Fatal(err)
	}
	if r.Has("workspace.read") || r.Len() != n-1 {
		t.Fatal("unregistered catalog tool still there")
	}
	if err := r.Unregister("workspace.read"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("double unregister: %v", err)
	}
	// Other agents sharing the catalog are unaffected.
	other := New(r.cat, func(string) bool { return true })
	if !other.Has("workspace.read") {
		t.Fatal("unregister leaked into another registry")
	}
}

func TestCatalogDuplicates(t *testing.T) {
	ts := append(tools(), &fake{name: "tool.cli"}, &fake{name: "workspace.read"}, &fake{name: "Bad..x"})
	_, err := NewCatalog(ts)
	if err == nil {
		t.Fatal("want duplicate error")
	}
	for _, want := range []string{"tool.cli", "workspace.read", `invalid tool name "Bad..x"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not list %q: %v", want, err)
		}
	}
}

func TestRegistryConcurrent(t *testing.T) {
	r := New(newCat(t), func(string) bool { return true })
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				name := fmt.Sprintf("skill.g%d.t%d", g, i%5)
				_ = r.Register(&fake{name: name})
				r.Specs()
				r.Lookup("workspace.read")
				_ = r.Unregister(name)
			}
		}(g)
	}
	wg.Wait()
	if r.Len() != len(tools()) {
		t.Fatalf("len = %d", r.Len())
	}
}

// BenchmarkRegistryMemory builds 10,000 agents' registries over a catalog
// of 200 tools (each agent sees about half) and reports the heap bytes each
// costs. Target: ≤ 1,024 bytes/agent.
func BenchmarkRegistryMemory(b *testing.B) {
	var ts []armory.Tool
	for i := 0; i < 200; i++ {
		ts = append(ts, &fake{name: fmt.Sprintf("fam%d.tool%d", i%20, i), desc: "A tool."})
	}
	cat, err := NewCatalog(ts)
	if err != nil {
		b.Fatal(err)
	}
	const agents = 10_000
	var perAgent float64
	for i := 0; i < b.N; i++ {
		regs := make([]*Registry, agents)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for a := range regs {
			a := a
			regs[a] = New(cat, func(n string) bool { return (len(n)+a)%2 == 0 })
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perAgent = float64(after.HeapAlloc-before.HeapAlloc) / agents
		runtime.KeepAlive(regs)
	}
	b.ReportMetric(perAgent, "bytes/agent")
}

func TestOnChange(t *testing.T) {
	r := New(newCat(t), func(n string) bool { return n != "tool.cli" })
	type ev struct {
		name  string
		added bool
		has   bool // the registry already shows the change when fn runs
	}
	var got []ev
	remove := r.OnChange(func(name string, added bool) { got = append(got, ev{name, added, r.Has(name)}) })
	skill := &fake{name: "skill.pdf.extract"}
	r.Register(skill)
	r.Register(skill)                   // conflict: no event
	r.Register(&fake{name: "Bad Name"}) // invalid: no event
	r.Unregister("skill.pdf.extract")
	r.Unregister("no.such") // unknown: no event
	r.Unregister("workspace.read")
	want := []ev{{"skill.pdf.extract", true, true}, {"skill.pdf.extract", false, false}, {"workspace.read", false, false}}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	remove()
	r.Register(skill)
	if len(got) != len(want) {
		t.Fatalf("removed watcher still called: %v", got)
	}
}

// A tool named by its provider name (what OpenAI and Anthropic renderings
// show the model) resolves to the tool; a name two tools render to
// resolves to neither; tools the agent does not see stay unknown.
func TestLookupProviderName(t *testing.T) {
	r := New(newCat(t), func(n string) bool { return n != "workspace.delete" })
	for api, real := range map[string]string{"devtools__repo-git": "devtools.repo-git", "syscall__task__list": "syscall.task.list", "workspace.read": "workspace.read"} {
		tl, err := r.Lookup(api)
		if err != nil || tl.Spec().Name != real {
			t.Errorf("Lookup(%q) = %v, %v; want %s", api, tl, err, real)
		}
		if got, ok := r.Resolve(api); !ok || got != real {
			t.Errorf("Resolve(%q) = %q %v", api, got, ok)
		}
	}
	if r.Has("devtools__repo-git") {
		t.Error("Has resolves provider names; it must answer for real names only")
	}
	for _, bad := range []string{"workspace__delete", "devtools__repo_git", "devtools.repo__git", "", "devtools__"} {
		if _, err := r.Lookup(bad); armory.KindOf(err) != armory.KindNotFound {
			t.Errorf("Lookup(%q) = %v, want not found", bad, err)
		}
	}
	// Run-time tools resolve too; two tools with one API name resolve to neither.
	if err := r.Register(&fake{name: "skill.a__b"}); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Resolve("skill__a__b"); !ok || got != "skill.a__b" {
		t.Errorf("run-time tool: %q %v", got, ok)
	}
	if err := r.Register(&fake{name: "skill__a.b"}); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.Resolve("skill__a__b"); ok {
		t.Errorf("ambiguous provider name resolved to %q", got)
	}
}
