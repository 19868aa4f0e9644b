package workspace

import (
	"path"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
)

// FuzzParseTarget checks the path parser's invariants on any input: an
// accepted path is clean, relative, never climbs above its root, has no
// NUL byte and routes only to a granted root; the protected-path verdict
// does not depend on ASCII case or on a detour through "x/..".
func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"", "a", "@me/x", "@project:web/a/../b", "../x", "/etc/passwd", "a/../../b",
		".git/hooks/x", ".GIT/Config", "@org:acme/.ssh/k", "@x/y", "a\x00b", "./.bashrc", ".git./hooks", "@me//a"} {
		f.Add(s)
	}
	env := &armory.AgentEnv{Workspace: "/srv/ws", Roots: map[string]string{"project:web": "/srv/web"}}
	f.Fuzz(func(t *testing.T, p string) {
		tg, err := parseTarget("fuzz", env, p)
		if err != nil {
			if armory.KindOf(err) == armory.KindInternal {
				t.Fatalf("internal error for %q: %v", p, err)
			}
			return
		}
		rel := tg.rel
		switch {
		case rel == "":
			t.Fatalf("%q: empty rel", p)
		case strings.IndexByte(rel, 0) >= 0:
			t.Fatalf("%q: NUL in %q", p, rel)
		case strings.HasPrefix(rel, "/"):
			t.Fatalf("%q: absolute %q", p, rel)
		case rel == ".." || strings.HasPrefix(rel, "../"):
			t.Fatalf("%q: climbs: %q", p, rel)
		case path.Clean(rel) != rel:
			t.Fatalf("%q: not clean: %q", p, rel)
		case tg.prefix != "" && tg.prefix != "project:web":
			t.Fatalf("%q: ungranted prefix %q", p, tg.prefix)
		}
		for _, part := range strings.Split(rel, "/") {
			if part == ".." {
				t.Fatalf("%q: .. in %q", p, rel)
			}
		}
		why := protectedReason(rel) != ""
		if (protectedReason(swapASCIICase(rel)) != "") != why {
			t.Fatalf("%q: protection depends on case", rel)
		}
		if rel != "." {
			if tg2, err := parseTarget("fuzz", env, "zz/../"+rel); err == nil && (protectedReason(tg2.rel) != "") != why {
				t.Fatalf("%q: protection depends on a detour", rel)
			}
		}
	})
}

func swapASCIICase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 32
		case c >= 'A' && c <= 'Z':
			b[i] = c + 32
		}
	}
	return string(b)
}

// FuzzCompileSearch checks that glob and pattern parsing never panics and
// that the folder a walk starts in is always relative and never climbs.
func FuzzCompileSearch(f *testing.F) {
	for _, s := range [][2]string{{"**/*.go", "func"}, {"src/{a,b}/*", ""}, {"../x", "a"}, {"[", "("}, {"a/**/b", "(?i)x"}, {"", ""}, {`\*/x`, "a|b"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, pattern string) {
		a := searchArgs{Glob: glob, Pattern: pattern}
		g, base, _, err := compileSearch(&a)
		if err != nil {
			return
		}
		if strings.HasPrefix(base, "/") || base == ".." || strings.HasPrefix(base, "../") || strings.Contains(base, "/../") || strings.HasSuffix(base, "/..") {
			t.Fatalf("glob %q: walk would start at %q", glob, base)
		}
		if !strings.Contains(g, "/") && g != "**" {
			t.Fatalf("glob %q became %q", glob, g)
		}
	})
}
