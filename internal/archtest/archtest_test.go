package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/armory-dev/armory"

// pkg is what the rules read of one package of the module.
type pkg struct {
	ImportPath   string
	Imports      []string // of the package's own files
	TestImports  []string // of its _test.go files in the package
	XTestImports []string // of its external _test package
}

// rooms are the packages where the next capabilities land (docs/design.md,
// "Where the next capabilities go").
var rooms = []string{"services", "skills", "wasm", "runner", "console", "catalog", "containers"}

// surfaces serve humans and clients; nothing below them imports them.
var surfaces = []string{"server", "cmd/armory", "console"}

var backends = []string{"store/sqlite", "store/postgres"}

// layers are the module's packages from the bottom up (docs/design.md,
// "Shape"): a package imports only packages of its layer or below (tests
// may import anything the other rules allow). A package in no layer is an
// error, so a new package is placed on purpose. internal/ holds test
// support and is free.
var layers = [][]string{
	{""},
	{"audit", "screen", "sandbox", "netguard", "compact", "example", "toolargs"},
	{"world"},
	{"access", "registry"},
	{"store"},
	{"builtin", "toolbox"},
	{"roster"},
	{"upstream", "audit/trail", "pipeline"},
	{"engine"},
	rooms,
	{"server"},
	{"cmd/armory"},
}

// layer returns p's layer, the one of the longest entry p is under.
func layer(p string) (int, bool) {
	best, n := -1, -1
	for i, l := range layers {
		for _, e := range l {
			if (e == "" && p == "") || (e != "" && under(p, e)) {
				if len(e) > n {
					best, n = i, len(e)
				}
			}
		}
	}
	return best, best >= 0
}

// rel is p relative to the module ("" for the root package), or p itself
// for a package outside the module.
func rel(p string) (string, bool) {
	if p == module {
		return "", true
	}
	if r, ok := strings.CutPrefix(p, module+"/"); ok {
		return r, true
	}
	return p, false
}

// under reports whether p is dir or a package below it.
func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func isRoom(p string) bool {
	return slices.ContainsFunc(rooms, func(r string) bool { return under(p, r) })
}

// check returns every violation of the import rules in pkgs, one line each.
func check(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		fromLayer, placed := layer(from)
		if !placed && !under(from, "internal") {
			bad = append(bad, from+": in no layer (add it to layers and to docs/design.md, \"Shape\")")
		}
		test := append(slices.Clone(p.TestImports), p.XTestImports...)
		for _, imp := range append(slices.Clone(p.Imports), test...) {
			to, ok := rel(imp)
			if !ok {
				continue
			}
			inTest := !slices.Contains(p.Imports, imp)
			why := ""
			switch {
			case from == "" && !inTest:
				why = "the root package imports no other package of the module"
			case under(to, "server") && from != "cmd/armory" && from != "server":
				why = "only cmd/armory imports server"
			case under(to, "cmd"):
				why = "nothing imports cmd"
			case slices.ContainsFunc(backends, func(b string) bool { return under(to, b) }) && !inTest &&
				from != "engine" && !under(from, "store"):
				why = "only engine opens a store backend"
			case isRoom(from) && slices.ContainsFunc(surfaces, func(s string) bool { return under(to, s) }) && !under(to, from):
				why = "a room never imports a surface"
			case under(from, "console") && !inTest && to != "" && !under(to, "console"):
				why = "console reaches the runtime over the REST API only"
			case isRoom(to) && !isRoom(from) && from != "server" && from != "cmd/armory" && !inTest:
				why = "the core never imports a room (rooms plug into the engine)"
			}
			if toLayer, ok := layer(to); why == "" && placed && ok && !inTest && toLayer > fromLayer {
				why = "a package imports only its layer or below"
			}
			if why != "" {
				bad = append(bad, from+" imports "+to+": "+why)
			}
		}
	}
	return bad
}

// list runs go list over the whole module.
func list(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// The module keeps its import rules.
func TestImportRules(t *testing.T) {
	pkgs := list(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		r, _ := rel(p.ImportPath)
		seen[r] = true
	}
	// The rules are about these packages: a rename must update them.
	for _, p := range append(append([]string{"", "engine", "server", "cmd/armory", "pipeline"}, rooms...), backends...) {
		if !seen[p] {
			t.Errorf("package %q not found: update the rules", p)
		}
	}
	for _, v := range check(pkgs) {
		t.Error(v)
	}
}

// Each rule catches its violation.
func TestRulesCatchViolations(t *testing.T) {
	m := func(p string) string {
		if p == "" {
			return module
		}
		return module + "/" + p
	}
	for _, tc := range []struct {
		name string
		p    pkg
		want string
	}{
		{"root imports audit", pkg{ImportPath: m(""), Imports: []string{m("audit")}}, "the root package"},
		{"pipeline imports server", pkg{ImportPath: m("pipeline"), Imports: []string{m("server")}}, "only cmd/armory imports server"},
		{"a test of upstream imports server", pkg{ImportPath: m("upstream"), XTestImports: []string{m("server")}}, "only cmd/armory imports server"},
		{"services imports server", pkg{ImportPath: m("services"), Imports: []string{m("server")}}, "only cmd/armory imports server"},
		{"cmd/armory opens sqlite", pkg{ImportPath: m("cmd/armory"), Imports: []string{m("store/sqlite")}}, "only engine opens a store backend"},
		{"pipeline opens postgres", pkg{ImportPath: m("pipeline"), Imports: []string{m("store/postgres")}}, "only engine opens a store backend"},
		{"skills imports console", pkg{ImportPath: m("skills"), Imports: []string{m("console")}}, "a room never imports a surface"},
		{"console imports the pipeline", pkg{ImportPath: m("console"), Imports: []string{m("pipeline")}}, "console reaches the runtime"},
		{"engine imports services", pkg{ImportPath: m("engine"), Imports: []string{m("services")}}, "the core never imports a room"},
		{"something imports cmd", pkg{ImportPath: m("engine"), Imports: []string{m("cmd/armory/internal")}}, "nothing imports cmd"},
		{"roster imports the pipeline", pkg{ImportPath: m("roster"), Imports: []string{m("pipeline")}}, "its layer or below"},
		{"world imports the store", pkg{ImportPath: m("world"), Imports: []string{m("store")}}, "its layer or below"},
		{"a package in no layer", pkg{ImportPath: m("newthing")}, "in no layer"},
	} {
		got := check([]pkg{tc.p})
		if len(got) != 1 || !strings.Contains(got[0], tc.want) {
			t.Errorf("%s: got %q, want one violation %q", tc.name, got, tc.want)
		}
	}
	// What the rules allow.
	ok := []pkg{
		{ImportPath: m("cmd/armory"), Imports: []string{m("server"), m("engine")}},
		{ImportPath: m("server"), Imports: []string{m("engine"), m("console")}, XTestImports: []string{m("server"), m("store/sqlite")}},
		{ImportPath: m("engine"), Imports: []string{m("store/sqlite"), m("store/postgres"), m("upstream")}},
		{ImportPath: m("skills"), Imports: []string{m("engine"), m("pipeline"), m("wasm"), m("store")}},
		{ImportPath: m("store/storetest"), TestImports: []string{m("store/sqlite")}},
		{ImportPath: m(""), XTestImports: []string{m("builtin")}},
	}
	if got := check(ok); len(got) > 0 {
		t.Errorf("allowed imports refused: %q", got)
	}
}
