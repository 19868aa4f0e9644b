package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
)

func appendFile(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// A newcomer's typos are warned about at file:line with the nearest known
// name, and --strict makes them errors.
func TestCLIWorldCheckTypos(t *testing.T) {
	w := initWorld(t)
	scribe := filepath.Join(w, "archetype", "scribe", "config.md")
	b, err := os.ReadFile(scribe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(scribe, []byte(strings.Replace(string(b), "## Tool Access", "## Tool Acess", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	appendFile(t, filepath.Join(w, "archetype", "reviewer", "config.md"), "\n## Permissions\nworkspace.writ: deny\nprofile: standard\n\n## Limits\ntool_invocatons: 5\n")
	appendFile(t, filepath.Join(w, "world-config.yaml"), "\nlimits:\n  tool_invocations: 50\n")

	r := armoryCmd(t, nil, "--world", w, "world", "check")
	if r.code != armory.ExitOK {
		t.Fatalf("check: %+v", r)
	}
	for _, want := range []string{
		`archetype/scribe/config.md:3: warning: unknown section "Tool Acess" (did you mean "Tool Access"?)`,
		`archetype/reviewer/config.md:15: warning: permissions: no tool or family "workspace.writ" is defined (did you mean "workspace.write"?)`,
		`archetype/reviewer/config.md:19: warning: limits: unknown limit "tool_invocatons" (did you mean "tool_invocations"?)`,
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("world check does not warn %q:\n%s", want, r.stderr)
		}
	}
	if !strings.Contains(r.stdout, "4 warnings") {
		t.Errorf("warning count: %s", r.stdout)
	}
	r = armoryCmd(t, nil, "--world", w, "world", "check", "--strict")
	if r.code != armory.ExitInvalid || !strings.Contains(r.stderr, "--strict treats them as errors") || r.stdout != "" {
		t.Errorf("check --strict: %+v", r)
	}

	// A misspelled world-config.yaml key or profile is an error naming the nearest.
	appendFile(t, filepath.Join(w, "world-config.yaml"), "sandbx: none\n")
	r = armoryCmd(t, nil, "--world", w, "world", "check")
	if r.code != armory.ExitInvalid || !strings.Contains(r.stderr, `unknown key "sandbx" (did you mean "sandbox"?)`) {
		t.Errorf("unknown world key: %+v", r)
	}
}

// The example world is clean under --strict but for the warning it exists
// to show (the intern's ignored legacy list).
func TestCLIWorldCheckStrictExample(t *testing.T) {
	w := initWorld(t)
	if err := os.WriteFile(filepath.Join(w, "archetype", "intern", "config.md"), []byte("# intern\n\n## Tool Access\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := armoryCmd(t, nil, "--world", w, "world", "check", "--strict"); r.code != 0 || !strings.Contains(r.stdout, "0 warnings") {
		t.Errorf("strict check of a clean world: %+v", r)
	}
}
