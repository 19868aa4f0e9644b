package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/armory-dev/armory/internal/testenv"
)

// binary is the armory command built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "armory-cli-test-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "armory")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
}

// armoryCmd runs the real binary with args and env additions.
func armoryCmd(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// worldValid is world check's line for the example world: its tool count
// grows with every service or built-in tool, which the tests that list an
// agent's tools check by name.
var worldValid = regexp.MustCompile(`^world "demo" is valid: 6 agents, [0-9]+ tools, [0-9]+ skills?, 1 warning\n$`)

// withoutServices drops the world services' tools (think, syscall.*,
// util.*) from names: most of them are public, so every agent of the
// example world sees them; TestCLIServicesInExampleWorld checks them.
func withoutServices(names []string) []string {
	var out []string
	for _, n := range names {
		if n == "think" || strings.HasPrefix(n, "syscall.") || strings.HasPrefix(n, "util.") {
			continue
		}
		out = append(out, n)
	}
	return out
}

// initWorld writes the example world with armory init and appends each
// of config to its world-config.yaml on a line of its own.
func initWorld(t *testing.T, config ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	r := armoryCmd(t, nil, "init", dir)
	if r.code != 0 || !strings.Contains(r.stdout, "wrote an example world") {
		t.Fatalf("init: %+v", r)
	}
	// A new world has no store yet: the first command that needs one makes it.
	if _, err := os.Stat(filepath.Join(dir, ".armory")); err == nil {
		t.Fatal("armory init wrote a .armory folder (a store) into the new world")
	}
	for _, c := range config {
		appendFile(t, filepath.Join(dir, "world-config.yaml"), "\n"+c+"\n")
	}
	return dir
}

func TestCLIEndToEnd(t *testing.T) {
	w := initWorld(t)

	r := armoryCmd(t, nil, "--world", w, "world", "check")
	if r.code != 0 || !worldValid.MatchString(r.stdout) || !strings.Contains(r.stderr, "archetype/intern/config.md:8: warning:") {
		t.Fatalf("world check: %+v", r)
	}

	// ARMORY_WORLD is the default for --world.
	r = armoryCmd(t, []string{"ARMORY_WORLD=" + w}, "tool", "list", "reviewer")
	var list []struct{ Name, Description string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("tool list: %+v", r)
	}
	var got []string
	for _, e := range list {
		got = append(got, e.Name)
		if e.Description == "" {
			t.Errorf("%s has no description", e.Name)
		}
	}
	if !slices.Equal(withoutServices(got), []string{"devtools.word-count", "workspace.read", "workspace.search"}) {
		t.Fatalf("reviewer tools = %v", got)
	}

	// tool brief: "- name: description", one tool per line, nothing else.
	r = armoryCmd(t, nil, "--world", w, "tool", "brief", "architect")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	var briefNames []string
	for _, l := range lines {
		n, _, _ := strings.Cut(strings.TrimPrefix(l, "- "), ":")
		briefNames = append(briefNames, n)
	}
	if r.code != 0 || len(withoutServices(briefNames)) != 12 || lines[0] != "- devtools.repo-git: Manage the git repository in the workspace folder repo/ (init, status, log, diff, add, commit)" {
		t.Fatalf("brief: %+v", r)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "- ") || !strings.Contains(l, ": ") {
			t.Errorf("brief line %q", l)
		}
	}
	// tool prompt: the <tools> block with the toolkits' policy text.
	r = armoryCmd(t, nil, "--world", w, "tool", "prompt", "architect")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "<tools>\n- devtools.repo-git: ") || !strings.Contains(r.stdout, "Toolkit inspect: List a folder") || !strings.HasSuffix(r.stdout, "</tools>\n") {
		t.Fatalf("prompt: %+v", r)
	}

	for _, f := range []string{"openai", "anthropic", "mcp"} {
		r = armoryCmd(t, nil, "--world", w, "tool", "specs", "architect", "--format", f)
		var v any
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
			t.Fatalf("specs %s: %+v", f, r)
		}
		switch f {
		case "openai":
			if !strings.Contains(r.stdout, `"name": "devtools__repo-git"`) || !strings.Contains(r.stdout, `"type": "function"`) {
				t.Errorf("openai: %s", r.stdout)
			}
		case "anthropic":
			if !strings.Contains(r.stdout, `"input_schema"`) {
				t.Errorf("anthropic: %s", r.stdout)
			}
		case "mcp":
			if !strings.Contains(r.stdout, `"inputSchema"`) || !strings.Contains(r.stdout, `"destructiveHint": true`) || !strings.Contains(r.stdout, `"name": "devtools.repo-git"`) {
				t.Errorf("mcp: %s", r.stdout)
			}
		}
	}

	r = armoryCmd(t, nil, "--world", w, "access", "show", "architect", "--json")
	var show map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &show) != nil {
		t.Fatalf("access show: %+v", r)
	}
	for _, k := range []string{"mode", "groups", "overrides", "granted_privileged"} {
		if _, ok := show[k]; !ok {
			t.Errorf("access show lacks %q: %s", k, r.stdout)
		}
	}
	if show["mode"] != "access" {
		t.Errorf("mode = %v", show["mode"])
	}

	for _, tc := range []struct {
		agent, tool string
		visible     bool
	}{{"reviewer", "devtools.word-count", true}, {"scribe", "devtools.word-count", false}, {"intern", "no.such", false}} {
		r = armoryCmd(t, nil, "--world", w, "access", "explain", tc.agent, tc.tool, "--json")
		var ex struct {
			Agent, Tool     string
			Visible, Public bool
			Reasons         []string
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ex) != nil {
			t.Fatalf("explain (exit 0 whether or not visible): %+v", r)
		}
		if ex.Agent != tc.agent || ex.Tool != tc.tool || ex.Visible != tc.visible || len(ex.Reasons) == 0 {
			t.Errorf("explain %s %s = %+v", tc.agent, tc.tool, ex)
		}
	}
	r = armoryCmd(t, nil, "--world", w, "access", "explain", "reviewer", "workspace.list")
	if r.code != 0 || !strings.Contains(r.stdout, "reviewer → workspace.list: not visible\n  - public") {
		t.Fatalf("explain text: %+v", r)
	}
}

func TestCLIErrors(t *testing.T) {
	w := initWorld(t)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown agent", []string{"--world", w, "tool", "list", "ghost"}, exitInvalid, `armory: unknown agent "ghost" (agents: architect, intern, researcher, reviewer, scribe, warden)` + "\n"},
		{"no world", []string{"--world", t.TempDir(), "tool", "list", "a"}, exitInvalid, "armory: no world-config.yaml in "},
		{"missing argument", []string{"--world", w, "tool", "list"}, exitUsage, "tool list takes 1 argument: AGENT (got 0)"},
		{"extra argument", []string{"--world", w, "access", "explain", "a"}, exitUsage, "takes 2 arguments: AGENT TOOL (got 1)"},
		{"unknown flag", []string{"--world", w, "tool", "list", "a", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"bad format", []string{"--world", w, "tool", "specs", "architect", "--format", "xml"}, exitUsage, "--format must be openai, anthropic or mcp"},
		{"audit: unknown status", []string{"--world", w, "audit", "--status", "succes"}, exitUsage, "--status must be running, pending, success"},
		{"audit: negative since", []string{"--world", w, "audit", "--since", "-1h"}, exitUsage, "--since: the duration \"-1h\" is negative"},
		{"db: unknown scheme", []string{"--world", w, "--db", "mysql://root:secret@db/x", "audit"}, exitUsage, "--db: a mysql:// URL is not a store; give a postgres:// URL or a SQLite file path"},
		{"call: negative wait", []string{"--world", w, "call", "architect", "workspace.list", "--wait", "-5s"}, exitUsage, "--wait cannot be negative, got -5s"},
		{"audit: limit 0", []string{"--world", w, "audit", "--limit", "0"}, exitUsage, "--limit must be a whole number 1..10000, got 0"},
		{"audit: limit over the maximum", []string{"--world", w, "audit", "--limit", "10001"}, exitUsage, "--limit must be a whole number 1..10000, got 10001"},
		{"audit: bad since", []string{"--world", w, "audit", "--since", "yesterday"}, exitUsage, "--since: must be RFC 3339"},
		{"init into a world", []string{"init", w}, exitInvalid, "already holds a world (world-config.yaml); use it with --world " + w},
		{"init into a non-empty folder", []string{"init", filepath.Dir(w)}, exitInvalid, "is not empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := armoryCmd(t, nil, tc.args...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
				t.Fatalf("got exit %d stderr %q stdout %q; want exit %d and %q", r.code, r.stderr, r.stdout, tc.code, tc.stderr)
			}
			if tc.code == exitInvalid && strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
				t.Errorf("want a one-line message, got %q", r.stderr)
			}
		})
	}
}

func TestCLIWorldCheckListsEveryError(t *testing.T) {
	w := initWorld(t)
	cfg := filepath.Join(w, "world-config.yaml")
	b, _ := os.ReadFile(cfg)
	broken := strings.Replace(string(b), "id: reviewer ", "id: architect ", 1)
	broken = strings.Replace(broken, "default: true", "default: often", 1)
	oftenLine := 1 + strings.Count(broken[:strings.Index(broken, "default: often")], "\n")
	os.WriteFile(cfg, []byte(broken), 0o644)
	os.WriteFile(filepath.Join(w, "archetype/scribe/config.md"), []byte("## Tool Access\nprivilege_groups: writers\n"), 0o644)
	r := armoryCmd(t, nil, "--world", w, "world", "check")
	if r.code != exitInvalid {
		t.Fatalf("exit %d: %+v", r.code, r)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	var errs []string
	for _, l := range lines {
		if !strings.Contains(l, "warning:") {
			errs = append(errs, l)
		}
	}
	want := []string{
		`archetype/scribe/config.md:2: unknown privilege group "writers" (groups: admin, communicator, devops, manager, researcher, writer)`,
		`world-config.yaml:7: duplicate agent id "architect" (first at line 5)`,
		fmt.Sprintf(`world-config.yaml:%d: toolkits.inspect.default must be true or false, got the value "often"`, oftenLine),
	}
	if !slices.Equal(errs, want) {
		t.Fatalf("errors, one per line, sorted by file:\n%s\nwant:\n%s", strings.Join(errs, "\n"), strings.Join(want, "\n"))
	}
}

func TestCLIDemo(t *testing.T) {
	r := armoryCmd(t, nil, "demo")
	if r.code != 0 || !strings.Contains(r.stdout, "== agent architect") || !strings.Contains(r.stdout, "why can't scribe use devtools.word-count?") {
		t.Fatalf("demo: %+v", r)
	}
}

func TestCLIScreen(t *testing.T) {
	for _, tc := range []struct{ cmd, verdict string }{
		{"sudo rm -rf --no-preserve-root /", "block"},
		{"ls -la | grep go", "allow"},
		{"npm test", "confirm"},
	} {
		r := armoryCmd(t, nil, "screen", "--json", tc.cmd)
		var out struct {
			Verdict  string     `json:"verdict"`
			Commands [][]string `json:"commands"`
			Reasons  []string   `json:"reasons"`
		}
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Verdict != tc.verdict || len(out.Commands) == 0 {
			t.Errorf("screen %q: %+v", tc.cmd, r)
		}
	}
	r := armoryCmd(t, nil, "screen", "rm -rf ~")
	if r.code != 0 || !strings.Contains(r.stdout, "Blocked catastrophic command: rm -rf ~") {
		t.Errorf("screen text: %+v", r)
	}
}

func testenvBwrap(t *testing.T) {
	testenv.LookPath(t, "bwrap", "apt-get install bubblewrap")
	testenv.LookPath(t, "python3", "apt-get install python3")
}

// TestCLIUsageBeforeOpening: a bad flag value is a usage error (exit 64)
// found before the command opens anything: it does not depend on the world
// or the store being there, and it neither creates the store nor starts the
// world's upstream servers.
func TestCLIUsageBeforeOpening(t *testing.T) {
	w := initWorld(t)
	cases := [][]string{
		{"tool", "specs", "architect", "--format", "xml"},
		{"audit", "--status", "succes"},
		{"audit", "--since", "yesterday"},
		{"approvals", "list", "--status", "bogus"},
	}
	for _, args := range cases {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := armoryCmd(t, nil, append([]string{"--world", filepath.Join(t.TempDir(), "none")}, args...)...)
			if r.code != exitUsage {
				t.Errorf("without a world: exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
			}
			r = armoryCmd(t, nil, append([]string{"--world", w, "--db", "postgres://nobody@127.0.0.1:1/none"}, args...)...)
			if r.code != exitUsage {
				t.Errorf("with a store that cannot be opened: exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
			}
			r = armoryCmd(t, nil, append([]string{"--world", w}, args...)...)
			if r.code != exitUsage {
				t.Errorf("exit %d, stderr %q; want %d", r.code, r.stderr, exitUsage)
			}
			if _, err := os.Stat(filepath.Join(w, ".armory", "armory.db")); err == nil {
				t.Errorf("a usage error created the store")
			}
		})
	}
}
