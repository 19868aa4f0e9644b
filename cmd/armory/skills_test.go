package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/internal/testenv"
)

// toolNames is `armory tool list AGENT` (a command of its own, so a
// process that read the state from the store afresh).
func toolNames(t *testing.T, w, agent string) []string {
	t.Helper()
	r := armoryCmd(t, nil, "--world", w, "tool", "list", agent)
	var list []struct{ Name string }
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil {
		t.Fatalf("tool list %s: %+v", agent, r)
	}
	var names []string
	for _, x := range list {
		names = append(names, x.Name)
	}
	return names
}

// armory skills list|show|install|acquire|drop|remove on the example
// world, each a process of its own: what one command changes, the next
// one reads from the store (a restart keeps it); every change is in the
// audit trail as the human's, via cli.
func TestCLISkills(t *testing.T) {
	w := initWorld(t)
	run := func(args ...string) result {
		t.Helper()
		return armoryCmd(t, nil, append([]string{"--world", w}, args...)...)
	}

	r := run("skills", "list")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "SKILL SCOPE TOOLS HOLDERS DESCRIPTION" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "text-tools world text-tools.grep,text-tools.wordstats - Search and measure text") {
		t.Fatalf("skills list: %+v", r)
	}
	type summary struct {
		Name, Scope, Description string
		Tools, Holders           []string
	}
	var all []summary
	if r = run("skills", "list", "--json"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &all) != nil ||
		len(all) != 1 || all[0].Name != "text-tools" || all[0].Scope != "world" || !slices.Equal(all[0].Tools, []string{"text-tools.grep", "text-tools.wordstats"}) || all[0].Holders == nil {
		t.Fatalf("skills list --json: %+v", r)
	}
	if r = run("skills", "list", "--agent", "architect"); r.code != 0 || !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "text-tools no no text-tools.grep,text-tools.wordstats") {
		t.Fatalf("skills list --agent: %+v", r)
	}
	r = run("skills", "show", "text-tools")
	for _, want := range []string{"text-tools (world, skills/text-tools/SKILL.md)\n", "license: Apache-2.0\n", "tools: text-tools.grep, text-tools.wordstats\n",
		"files: references/patterns.md\n", "holders: none\n", "\n# Text tools\n"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("skills show: no %q in %+v", want, r)
		}
	}
	if r = run("skills", "show", "nope"); r.code != exitInvalid || !strings.Contains(r.stderr, `no skill "nope" (skills: text-tools)`) {
		t.Fatalf("skills show nope: %+v", r)
	}

	// Install: exactly one source, else a usage error before anything opens.
	for _, bad := range [][]string{
		{"skills", "install"},
		{"skills", "install", "--builtin", "python", "--url", "https://example.com/s.zip"},
		{"skills", "install", "--folder", "x", "--builtin", "python"},
		{"skills", "install", "--folder", "x", "--url", "https://example.com/s.zip"},
		{"skills", "install", "--builtin", "python", "extra"},
	} {
		if r := run(bad...); r.code != exitUsage || !strings.Contains(r.stderr, "armory: ") {
			t.Errorf("%v: %+v", bad, r)
		}
	}
	if r := armoryCmd(t, nil, "--world", filepath.Join(t.TempDir(), "none"), "skills", "install"); r.code != exitUsage || !strings.Contains(r.stderr, "built-in skills: python, web-research") {
		t.Errorf("install with no source and no world: %+v", r)
	}
	if r = run("skills", "install", "--builtin", "python"); r.code != 0 || !strings.Contains(r.stdout, "installed skill python in skills/python") {
		t.Fatalf("install --builtin python: %+v", r)
	}
	if r = run("skills", "list", "--json"); json.Unmarshal([]byte(r.stdout), &all) != nil || len(all) != 2 || all[0].Name != "python" {
		t.Fatalf("list after the install: %+v", r)
	}
	if r = run("skills", "install", "--builtin", "python"); r.code != exitInvalid || !strings.Contains(r.stderr, `has a skill "python" already`) {
		t.Fatalf("second install: %+v", r)
	}
	if r = run("skills", "install", "--builtin", "cobol"); r.code != exitInvalid || !strings.Contains(r.stderr, `no built-in skill "cobol"`) {
		t.Fatalf("unknown built-in: %+v", r)
	}

	// Acquire in one process; the next command (a new process) lists the tool.
	if slices.Contains(toolNames(t, w, "architect"), "text-tools.grep") {
		t.Fatal("listed before the skill is acquired")
	}
	if r = run("skills", "acquire", "architect", "text-tools"); r.code != 0 || !strings.HasPrefix(r.stdout, "architect: skill text-tools acquired; tools: text-tools.grep") {
		t.Fatalf("acquire: %+v", r)
	}
	if !slices.Contains(toolNames(t, w, "architect"), "text-tools.grep") {
		t.Fatal("a new process does not list the acquired skill's tool")
	}
	if r = run("tool", "list", "--long", "architect"); r.code != 0 || !strings.Contains(r.stdout, `"source": "skill text-tools"`) {
		t.Fatalf("tool list --long: %+v", r)
	}
	if r = run("skills", "acquire", "architect", "text-tools"); r.code != 0 || !strings.Contains(r.stdout, "skill text-tools held already") {
		t.Fatalf("second acquire: %+v", r)
	}
	// The policy still decides: researcher acquires the skill, not its
	// privileged tool, and access explain says why and where it comes from.
	if r = run("skills", "acquire", "researcher", "text-tools"); r.code != 0 || !strings.Contains(r.stdout, "\n  withheld text-tools.grep: ") || !strings.Contains(r.stdout, "devops") {
		t.Fatalf("researcher's acquire: %+v", r)
	}
	r = run("access", "explain", "researcher", "text-tools.grep")
	for _, want := range []string{"researcher → text-tools.grep: not visible", "from skill text-tools (skills/text-tools/toolbox.yaml:4): the agent has acquired it",
		"privileged: in group(s) devops", "not granted: the agent's groups (researcher) do not include devops"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("access explain researcher: no %q in %+v", want, r)
		}
	}
	if slices.Contains(toolNames(t, w, "researcher"), "text-tools.grep") {
		t.Fatal("researcher lists a tool its policy withholds")
	}
	if r = run("access", "explain", "architect", "text-tools.grep"); !strings.Contains(r.stdout, "architect → text-tools.grep: visible") || !strings.Contains(r.stdout, "registered at run time (source: skill text-tools)") {
		t.Fatalf("access explain architect: %+v", r)
	}
	if r = run("skills", "show", "text-tools"); !strings.Contains(r.stdout, "holders: architect, researcher\n") {
		t.Fatalf("holders: %+v", r)
	}
	if r = run("skills", "acquire", "architect", "nope"); r.code != exitInvalid || !strings.Contains(r.stderr, `no skill "nope"`) {
		t.Fatalf("acquire nope: %+v", r)
	}
	if r = run("skills", "acquire", "ghost", "text-tools"); r.code != exitInvalid {
		t.Fatalf("acquire for ghost: %+v", r)
	}
	if r = run("skills", "acquire", "architect"); r.code != exitUsage {
		t.Fatalf("acquire with one argument: %+v", r)
	}

	// The tool runs in the sandbox, in another process again.
	if _, err := osexec.LookPath("bwrap"); err != nil && !testenv.Strict() {
		t.Log("bwrap is not installed (apt-get install bubblewrap): text-tools.grep is not called")
	} else {
		run("call", "architect", "workspace.write", "--args", `{"path":"notes.txt","content":"alpha\nbeta\n"}`)
		r = run("call", "architect", "text-tools.grep", "--args", `{"pattern":"^b","file":"notes.txt"}`)
		if o := callJSON(t, r); r.code != 0 || o.Result != "2:beta\n" {
			t.Fatalf("call text-tools.grep: %+v", r)
		}
	}

	// Drop; the next process no longer lists it.
	if r = run("skills", "drop", "architect", "text-tools"); r.code != 0 || r.stdout != "architect: skill text-tools dropped\n" {
		t.Fatalf("drop: %+v", r)
	}
	if slices.Contains(toolNames(t, w, "architect"), "text-tools.grep") {
		t.Fatal("listed after the drop")
	}
	if r = run("skills", "drop", "architect", "text-tools"); r.code != exitInvalid || !strings.Contains(r.stderr, "nothing to drop") {
		t.Fatalf("second drop: %+v", r)
	}

	// Remove a skill someone holds: its folder goes, and every hold on it.
	if r = run("skills", "acquire", "scribe", "python"); r.code != 0 {
		t.Fatalf("acquire python: %+v", r)
	}
	if r = run("skills", "remove", "python"); r.code != 0 || r.stdout != "removed skill python (it was held by: scribe)\n" {
		t.Fatalf("remove: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(w, "skills", "python")); err == nil {
		t.Fatal("the removed skill's folder is still there")
	}
	if r = run("skills", "remove", "python"); r.code != exitInvalid || !strings.Contains(r.stderr, `no skill "python"`) {
		t.Fatalf("second remove: %+v", r)
	}
	if r = run("skills", "list", "--agent", "scribe", "--json"); r.code != 0 || strings.Contains(r.stdout, "python") {
		t.Fatalf("scribe's skills after the removal: %+v", r)
	}

	for _, tool := range []string{"skills.install", "skills.acquire", "skills.drop", "skills.remove"} {
		inTrail(t, w, tool)
	}
	if r = run("audit", "--tool", "skills.remove"); r.code != 0 || !strings.Contains(r.stdout, "skill python removed by human via cli (held by: scribe)") {
		t.Fatalf("audit of the removal: %+v", r)
	}
	if r = run("audit", "verify"); r.code != 0 {
		t.Fatalf("audit verify: %+v", r)
	}
}

// A person's `armory skills acquire` beside a running `armory serve` on
// the same store (SQLite, Postgres) reaches the server's MCP client of the
// agent: notifications/tools/list_changed, then the tool in its next
// tools/list; `armory skills drop` takes it out again.
func TestCLISkillsReachTheServer(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testCLISkillsReachTheServer(t, "") })
	t.Run("postgres", func(t *testing.T) { testCLISkillsReachTheServer(t, replicaDB(t)) })
}

func testCLISkillsReachTheServer(t *testing.T, db string) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	var serveArgs []string
	if db != "" {
		env = append(env, "ARMORY_DB="+db)
		serveArgs = []string{"--db", db}
	}
	r := armoryCmd(t, env, "token", "create", "architect")
	if r.code != 0 {
		t.Fatalf("token: %+v", r)
	}
	token := strings.TrimSpace(r.stdout)
	s := startServe(t, w, serveArgs...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	changed := make(chan struct{}, 16)
	c := mcp.NewClient(&mcp.Implementation{Name: "armory-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.url + "/agents/architect/mcp", HTTPClient: &http.Client{Transport: bearerRT(token)}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	expect := func(has bool, what string) {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("%s: no notifications/tools/list_changed", what)
		}
		_, names := testenv.MCPTools(t, ctx, cs)
		if slices.Contains(names, "text-tools.grep") != has {
			t.Fatalf("%s: the tools/list after list_changed: %v", what, names)
		}
	}
	if _, names := testenv.MCPTools(t, ctx, cs); slices.Contains(names, "text-tools.grep") {
		t.Fatal("listed before the skill is acquired")
	}
	if r := armoryCmd(t, env, "skills", "acquire", "architect", "text-tools"); r.code != 0 {
		t.Fatalf("acquire: %+v", r)
	}
	expect(true, "after the CLI's acquire")
	if r := armoryCmd(t, env, "skills", "drop", "architect", "text-tools"); r.code != 0 {
		t.Fatalf("drop: %+v", r)
	}
	expect(false, "after the CLI's drop")
}
