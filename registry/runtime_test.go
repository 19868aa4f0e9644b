package registry

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/armory-dev/armory"
)

// valueTool is a tool used by value; extra decides whether that value
// can be compared (a slice or map in it cannot).
type valueTool struct {
	name  string
	extra any
}

func (t valueTool) Spec() armory.Spec {
	return armory.Spec{Name: t.name, Description: "v", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (t valueTool) Manifest() armory.Manifest                                { return armory.Manifest{} }
func (t valueTool) Execute(context.Context, armory.Invocation) armory.Result { return armory.OK("") }

// A tool registered at run time never takes a catalog tool's name,
// whether the agent sees that tool or not; only the catalog tool itself
// comes back under it. Whatever the tool's value, the check compares
// without panicking.
func TestRegisterNeverTakesACatalogName(t *testing.T) {
	cat := newCat(t)
	r := New(cat, func(n string) bool { return n != "tool.cli" && n != "workspace.write" })
	for _, tc := range []struct {
		what string
		tool armory.Tool
	}{
		{"a fake of a tool it cannot see", &fake{name: "tool.cli"}},
		{"a fake of another tool it cannot see", &fake{name: "workspace.write"}},
		{"a fake of a tool it sees", &fake{name: "workspace.read"}},
		{"a value fake", valueTool{name: "tool.cli"}},
		{"a value fake holding a slice", valueTool{name: "tool.cli", extra: []string{"x"}}},
		{"a value fake holding a map", valueTool{name: "workspace.write", extra: map[string]int{}}},
	} {
		if err := r.Register(tc.tool); armory.KindOf(err) != armory.KindConflict {
			t.Errorf("%s: Register = %v, want KindConflict", tc.what, err)
		}
	}
	if r.Has("tool.cli") || r.Has("workspace.write") || r.RunTime("tool.cli") {
		t.Fatal("a refused tool is in the registry")
	}
	// The catalog's own tool re-enables it (a library user's switch).
	real, _ := cat.Lookup("tool.cli")
	if err := r.Register(real); err != nil || !r.Has("tool.cli") || r.RunTime("tool.cli") {
		t.Fatalf("re-enabling the catalog tool: %v (has %v, run time %v)", err, r.Has("tool.cli"), r.RunTime("tool.cli"))
	}
}

func TestSameTool(t *testing.T) {
	p := &fake{name: "a.b"}
	for _, tc := range []struct {
		what string
		a, b armory.Tool
		want bool
	}{
		{"one pointer", p, p, true},
		{"two pointers", p, &fake{name: "a.b"}, false},
		{"equal comparable values", valueTool{name: "a.b"}, valueTool{name: "a.b"}, true},
		{"different types", valueTool{name: "a.b"}, p, false},
		{"values holding a slice", valueTool{name: "a.b", extra: []int{1}}, valueTool{name: "a.b", extra: []int{1}}, false},
		{"a slice against a comparable value", valueTool{name: "a.b", extra: 1}, valueTool{name: "a.b", extra: []int{1}}, false},
		{"values holding a func", valueTool{name: "a.b", extra: func() {}}, valueTool{name: "a.b", extra: 1}, false},
		{"nil", nil, nil, true},
		{"nil and a tool", nil, p, false},
	} {
		if got := SameTool(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: SameTool = %v, want %v", tc.what, got, tc.want)
		}
	}
}
