package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
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
	if r.code != exitOK {
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
	if r.code != exitInvalid || !strings.Contains(r.stderr, `world "demo" has 4 warnings; --strict treats warnings as errors`) || r.stdout != "" {
		t.Errorf("check --strict: %+v", r)
	}

	// A misspelled world-config.yaml key or profile is an error naming the nearest.
	appendFile(t, filepath.Join(w, "world-config.yaml"), "sandbx: none\n")
	r = armoryCmd(t, nil, "--world", w, "world", "check")
	if r.code != exitInvalid || !strings.Contains(r.stderr, `unknown key "sandbx" (did you mean "sandbox"?)`) {
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

// One view of an agent's tools on the command line: the tools the pipeline
// adds are listed, briefed, rendered, shown and explained like any other,
// without a pipeline or store in the process.
func TestCLIToolsOneView(t *testing.T) {
	w := initWorld(t)
	run := func(args ...string) result {
		t.Helper()
		r := armoryCmd(t, nil, append([]string{"--world", w}, args...)...)
		if r.code != 0 {
			t.Fatalf("%v: %+v", args, r)
		}
		return r
	}
	want := []string{"approval.decide", "approval.list", "workspace.list", "workspace.read", "workspace.search"}

	var list []struct{ Name string }
	if err := json.Unmarshal([]byte(run("tool", "list", "warden").stdout), &list); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, x := range list {
		names = append(names, x.Name)
	}
	if !slices.Equal(withoutServices(names), want) {
		t.Errorf("tool list warden = %v, want %v and the public service tools", names, want)
	}
	if b := run("tool", "brief", "warden").stdout; !strings.HasPrefix(b, "- approval.decide: Approve, deny or escalate") || strings.Count(b, "\n") != len(names) {
		t.Errorf("tool brief warden:\n%s", b)
	}
	if p := run("tool", "prompt", "warden").stdout; !strings.Contains(p, "- approval.list: ") {
		t.Errorf("tool prompt warden:\n%s", p)
	}
	for _, f := range []string{"openai", "anthropic", "mcp"} {
		if s := run("tool", "specs", "warden", "--format", f).stdout; !strings.Contains(s, "approval") || !strings.Contains(s, "decide") {
			t.Errorf("tool specs --format %s lacks approval.decide:\n%s", f, s)
		}
	}
	var long []struct {
		Name, Danger, Permission, Source string
		Capabilities                     []string
	}
	if err := json.Unmarshal([]byte(run("tool", "list", "--long", "warden").stdout), &long); err != nil || len(long) != len(names) {
		t.Fatalf("tool list --long: %v %v", err, long)
	}
	if d := long[0]; d.Name != "approval.decide" || d.Source != "pipeline" || d.Danger != "cautious" || d.Permission != "auto" || !slices.Equal(d.Capabilities, []string{"write_state"}) {
		t.Errorf("long approval.decide = %+v", d)
	}
	if err := json.Unmarshal([]byte(run("tool", "list", "--long", "architect").stdout), &long); err != nil {
		t.Fatal(err)
	}
	for _, d := range long {
		if d.Name == "devtools.repo-git" && (d.Source != "toolbox devtools" || d.Permission != "confirm" || d.Danger != "dangerous") {
			t.Errorf("long devtools.repo-git = %+v", d)
		}
		if d.Name == "tool.python" && d.Permission != "always_confirm" {
			t.Errorf("long tool.python = %+v", d)
		}
	}

	ex := run("access", "explain", "warden", "approval.decide").stdout
	if !strings.Contains(ex, "warden → approval.decide: visible") || !strings.Contains(ex, "tool_approval capability") {
		t.Errorf("explain warden approval.decide:\n%s", ex)
	}
	ex = run("access", "explain", "scribe", "approval.decide").stdout
	if !strings.Contains(ex, "not visible") || !strings.Contains(ex, "this agent has none") || strings.Contains(ex, "not defined") {
		t.Errorf("explain scribe approval.decide:\n%s", ex)
	}
	var show struct {
		Tools         []string `json:"tools"`
		PipelineTools []string `json:"pipeline_tools"`
	}
	if err := json.Unmarshal([]byte(run("access", "show", "warden", "--json").stdout), &show); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(show.Tools, names) || !slices.Equal(show.PipelineTools, want[:2]) {
		t.Errorf("access show warden = %+v", show)
	}
}

// A call naming a tool by its provider name (as the OpenAI and Anthropic
// specs render it) runs that tool, and the audit trail names the tool.
func TestCLIProviderName(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	r := armoryCmd(t, env, "tool", "specs", "reviewer", "--format", "openai")
	if !strings.Contains(r.stdout, `"name": "devtools__word-count"`) {
		t.Fatalf("specs: %+v", r)
	}
	if err := os.MkdirAll(filepath.Join(w, "workspaces", "reviewer"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w, "workspaces", "reviewer", "a.txt"), []byte("one two\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = armoryCmd(t, env, "call", "reviewer", "devtools__word-count", "--args", `{"file":"a.txt","lines":true}`)
	o := callJSON(t, r)
	if r.code != 0 || o.Status != "success" || !strings.Contains(o.Result, "2 a.txt") || !slices.Contains(o.Reasons, `lookup: "devtools__word-count" is the provider name of devtools.word-count`) {
		t.Fatalf("call by provider name: %+v", r)
	}
	r = armoryCmd(t, env, "audit", "--json", "--agent", "reviewer")
	if !strings.Contains(r.stdout, `"tool": "devtools.word-count"`) || strings.Contains(r.stdout, `"tool": "devtools__word-count"`) {
		t.Errorf("audit names the provider name, not the tool: %s", r.stdout)
	}
	// explain accepts it too; a provider name of no tool is still unknown.
	if r := armoryCmd(t, env, "access", "explain", "reviewer", "devtools__word-count"); !strings.Contains(r.stdout, "reviewer → devtools.word-count: visible") {
		t.Errorf("explain by provider name: %+v", r)
	}
	if r := armoryCmd(t, env, "call", "reviewer", "devtools__nope", "--args", `{}`); r.code != exitInvalid {
		t.Errorf("unknown provider name: %+v", r)
	}
}

// devtoolsJSON is the example world's devtools toolbox written as a JSON
// manifest (tab-indented, as editors often write JSON).
const devtoolsJSON = `{
	"name": "devtools",
	"description": "Developer tools for the agents' workspaces",
	"tools": [
		{
			"name": "repo-git",
			"description": "Manage the git repository in the workspace folder repo/",
			"binary": "bin/repo-git",
			"args": [
				{"name": "command", "type": "positional", "required": true, "description": "git subcommand", "enum": ["init", "status", "log", "diff", "add", "commit"]},
				{"name": "message", "type": "flag", "flag": "--message"},
				{"name": "all", "type": "flag_bool", "flag": "--all"}
			],
			"danger": "dangerous",
			"capabilities": ["process_exec", "write_fs"],
			"category": "git",
			"permission": "confirm",
			"timeout": "30s",
			"max_output": 65536
		},
		{
			"name": "word-count",
			"description": "Count lines, words and bytes of a workspace file",
			"binary": "wc",
			"args": [
				{"name": "file", "type": "positional", "required": true},
				{"name": "lines", "type": "flag_bool", "flag": "-l"}
			],
			"danger": "safe",
			"capabilities": ["read_fs"],
			"category": "file_read",
			"permission": "auto",
			"timeout": "10s",
			"max_output": 4096
		}
	]
}
`

// A toolbox may be a JSON manifest: same tools, same validation, errors at
// toolbox.json:line.
func TestCLIToolboxJSONManifest(t *testing.T) {
	w := initWorld(t)
	tb := filepath.Join(w, "toolbox", "devtools")
	if err := os.Remove(filepath.Join(tb, "toolbox.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tb, "toolbox.json"), []byte(devtoolsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	r := armoryCmd(t, nil, "--world", w, "world", "check")
	if r.code != 0 || !worldValid.MatchString(r.stdout) {
		t.Fatalf("check with toolbox.json: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "tool", "list", "--long", "architect")
	if r.code != 0 || !strings.Contains(r.stdout, `"name": "devtools.repo-git"`) || !strings.Contains(r.stdout, `"source": "toolbox devtools"`) {
		t.Fatalf("tool list: %+v", r)
	}

	check := func(json, want string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tb, "toolbox.json"), []byte(json), 0o644); err != nil {
			t.Fatal(err)
		}
		r := armoryCmd(t, nil, "--world", w, "world", "check")
		if r.code != exitInvalid || !strings.Contains(r.stderr, want) {
			t.Errorf("want %q:\n%+v", want, r)
		}
	}
	check(strings.Replace(devtoolsJSON, `"danger": "safe"`, `"danger": "saf"`, 1), "toolbox/devtools/toolbox.json:29: tool word-count: danger: unknown danger \"saf\"")
	check(strings.Replace(devtoolsJSON, `"max_output": 4096`, `"max_outpt": 4096`, 1), `toolbox/devtools/toolbox.json:34: tool word-count: unknown key "max_outpt" (did you mean "max_output"?)`)
	check(strings.Replace(devtoolsJSON, `"binary": "wc",`, `"binary": "wc"`, 1), "toolbox/devtools/toolbox.json:25: not valid JSON")
	// Both files at once is an error, not a silent choice.
	if err := os.WriteFile(filepath.Join(tb, "toolbox.json"), []byte(devtoolsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tb, "toolbox.yaml"), []byte("name: devtools\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = armoryCmd(t, nil, "--world", w, "world", "check")
	if r.code != exitInvalid || !strings.Contains(r.stderr, "both toolbox.yaml and toolbox.json") {
		t.Errorf("both files: %+v", r)
	}
}

// A world opens the web tools deliberately: an address entry in an agent's
// "## Network" reaches a private server; an agent without it, or a world
// list naming only a public host, does not; explain shows the list.
func TestCLINetworkAllowList(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "INTRANET-PAGE") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	w := initWorld(t, "network:\n  allow: [docs.example.com, \"*.wikipedia.org:443\"]")
	env := []string{"ARMORY_WORLD=" + w}
	appendFile(t, filepath.Join(w, "archetype", "researcher", "config.md"), "\n## Network\n- 127.0.0.1:"+port+"\n- docs.example.com\n")
	url := `{"url":"http://127.0.0.1:` + port + `/"}`

	if r := armoryCmd(t, env, "world", "check", "--strict"); r.code != 2 || strings.Contains(r.stderr, "network") {
		// only the example's own warning (the intern's legacy list)
		t.Errorf("check: %+v", r)
	}
	r := armoryCmd(t, env, "call", "researcher", "tool.fetch", "--args", url)
	if o := callJSON(t, r); r.code != 0 || !strings.Contains(o.Result, "INTRANET-PAGE") {
		t.Fatalf("researcher (allowed 127.0.0.1:%s): %+v", port, r)
	}
	// architect has tool.fetch under the world's list, which names only public hosts.
	r = armoryCmd(t, env, "call", "architect", "tool.fetch", "--args", url)
	if o := callJSON(t, r); r.code != exitBlocked || strings.Contains(o.Result, "INTRANET-PAGE") || !strings.Contains(o.Result, "not in the network allow-list") {
		t.Fatalf("architect: %+v", r)
	}
	r = armoryCmd(t, env, "access", "explain", "researcher", "tool.fetch")
	if !strings.Contains(r.stdout, "network: only the allow-list at archetype/researcher/config.md:") || !strings.Contains(r.stdout, "127.0.0.1:"+port) {
		t.Errorf("explain researcher: %+v", r)
	}
	r = armoryCmd(t, env, "access", "explain", "architect", "tool.fetch")
	if !strings.Contains(r.stdout, "network: only the allow-list at world-config.yaml:") || !strings.Contains(r.stdout, "docs.example.com") {
		t.Errorf("explain architect: %+v", r)
	}

	// Without any list (default closed): loopback is refused, explain says so.
	w2 := initWorld(t)
	r = armoryCmd(t, nil, "--world", w2, "call", "architect", "tool.fetch", "--args", url)
	if o := callJSON(t, r); r.code != exitBlocked || strings.Contains(o.Result, "INTRANET-PAGE") || !strings.Contains(o.Result, "network allow-list") {
		t.Fatalf("default policy: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w2, "access", "explain", "architect", "tool.fetch"); !strings.Contains(r.stdout, "network: the default policy") {
		t.Errorf("explain default: %+v", r)
	}

	// Bad entries are errors at file:line.
	appendFile(t, filepath.Join(w2, "archetype", "researcher", "config.md"), "\n## Network\n- 10.0.0.1/8\n")
	r = armoryCmd(t, nil, "--world", w2, "world", "check")
	if r.code != exitInvalid || !strings.Contains(r.stderr, "archetype/researcher/config.md:13: network: \"10.0.0.1/8\" has host bits set") {
		t.Errorf("bad entry: %+v", r)
	}
}

// A call refused by a deny rule: explain, the call's outcome and its audit
// record name the config.md line of the rule; the model's text does not.
func TestCLIReasonsNameRuleSource(t *testing.T) {
	w := filepath.Join(t.TempDir(), "w")
	for p, c := range map[string]string{
		"world-config.yaml":       "name: src\nagents:\n  - {id: dev}\n",
		"archetype/dev/config.md": "# dev\n\n## Tool Access\n\n## Permissions\nworkspace.write: deny\n",
	} {
		full := filepath.Join(w, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"ARMORY_WORLD=" + w}
	const pos = `archetype/dev/config.md:6 "workspace.write: deny"`

	r := armoryCmd(t, env, "access", "explain", "dev", "workspace.write")
	if r.code != 0 || !strings.Contains(r.stdout, `permission: deny by the agent's permission rule "workspace.write" (`+pos+`)`) {
		t.Fatalf("explain: %+v", r)
	}

	r = armoryCmd(t, env, "call", "dev", "workspace.write", "--args", `{"path":"a.txt","content":"x"}`)
	o := callJSON(t, r)
	if r.code != 3 /* blocked or denied by policy */ || o.Status != "denied" || !strings.Contains(strings.Join(o.Reasons, "\n"), pos) {
		t.Fatalf("call: %+v", r)
	}
	if strings.Contains(o.Result, "config.md") {
		t.Errorf("the model's text names config.md: %q", o.Result)
	}

	r = armoryCmd(t, env, "audit", "--json", "--agent", "dev")
	var entries []struct {
		Status string `json:"status"`
		Stages []struct {
			Name    string   `json:"name"`
			Reasons []string `json:"reasons"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &entries); err != nil || len(entries) == 0 {
		t.Fatalf("audit: %v %+v", err, r)
	}
	found := false
	for _, e := range entries {
		for _, st := range e.Stages {
			if st.Name == "permission" && e.Status == "denied" && strings.Contains(strings.Join(st.Reasons, "\n"), pos) {
				found = true
			}
		}
	}
	if !found {
		t.Errorf("no denied audit record whose permission stage names %s: %s", pos, r.stdout)
	}
}

// What a newcomer reads is written as a person would: counts agree with
// their nouns ("1 warning", "1 record"), a command without arguments says
// so, an undecided approval in the audit list is not "by " nobody, and the
// README's promise that --strict exits 2 on the example world holds.
func TestCLINewcomerTexts(t *testing.T) {
	w := initWorld(t)
	r := armoryCmd(t, nil, "--world", w, "world", "check", "--strict")
	if r.code != exitInvalid || r.stdout != "" || !strings.HasSuffix(r.stderr, `world "demo" has 1 warning; --strict treats warnings as errors`+"\n") {
		t.Errorf("check --strict of the example world: %+v", r)
	}
	// The demo shows the world as world check does: the services' tools
	// are defined, so their privilege groups warn about nothing.
	if r := armoryCmd(t, nil, "demo"); r.code != 0 || !regexp.MustCompile(`^Armory demo: world "demo" \(6 agents, [0-9]+ tools\)`).MatchString(r.stdout) || strings.Count(r.stdout, "warning:") != 1 || !strings.Contains(r.stdout, "- syscall.task.create: ") {
		t.Errorf("demo: %+v", r)
	}

	// A fresh world's trail is empty, and the list says so.
	if r := armoryCmd(t, nil, "--world", w, "audit"); r.code != 0 || r.stdout != "no audit records\n" {
		t.Errorf("audit of an empty trail: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "audit", "--json"); r.code != 0 || strings.TrimSpace(r.stdout) != "[]" {
		t.Errorf("audit --json of an empty trail: %+v", r)
	}

	// An unknown tool is refused at lookup: the store holds one record.
	if r := armoryCmd(t, nil, "--world", w, "call", "architect", "no.such-tool"); r.code != exitInvalid {
		t.Fatalf("call of an unknown tool: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "audit", "verify")
	if r.code != 0 || !strings.Contains(r.stdout, "store: chain verified (1 record)\n") {
		t.Errorf("audit verify: %+v", r)
	}

	// A call waiting for a human: its start record has no decider yet.
	r = armoryCmd(t, nil, "--world", w, "call", "architect", "devtools.repo-git", "--args", `{"command":"init"}`)
	o := callJSON(t, r)
	if r.code != exitPending || o.ApprovalID == "" {
		t.Fatalf("call needing approval: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "audit", "--tool", "devtools.repo-git")
	if r.code != 0 || !strings.Contains(r.stdout, "[approval "+o.ApprovalID+"]") || strings.Contains(r.stdout, " by ]") {
		t.Errorf("audit list of a pending call: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "approvals", "approve", o.ApprovalID); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "call", "--resume", o.ApprovalID); r.code != 0 {
		t.Fatalf("resume: %+v", r)
	}
	r = armoryCmd(t, nil, "--world", w, "audit", "--tool", "devtools.repo-git", "--limit", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "[approval "+o.ApprovalID+" by human]") {
		t.Errorf("audit list of the approved call: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "audit", "--help"); !strings.Contains(r.stdout, "timeout or interrupted") || strings.Contains(r.stdout, "folder) (default") {
		t.Errorf("audit --help does not name every status, or says a default twice: %s", r.stdout)
	}

	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"world", "check", "extra"}, exitUsage, "armory world check takes no arguments (got 1)"},
		{[]string{"approvals", "approve"}, exitUsage, "armory approvals approve takes 1 argument: ID (got 0)"},
		// Unknown agents and sessions are named with the world's agents.
		{[]string{"mcp", "ghost"}, exitInvalid, `armory: unknown agent "ghost" (agents: architect, intern, researcher, reviewer, scribe, warden)`},
		{[]string{"session", "show", "ghost:default"}, exitInvalid, `armory: no session "ghost:default": a session is AGENT:NAME, AGENT one of the world's agents (architect, intern, researcher, reviewer, scribe, warden)`},
		{[]string{"session", "show", "default"}, exitInvalid, `no session "default"`},
		{[]string{"session", "extend", "ghost:x", "tool_invocations", "5"}, exitInvalid, `no session "ghost:x"`},
		{[]string{"session", "reset", "ghost:x"}, exitInvalid, `no session "ghost:x"`},
		{[]string{"approvals", "show", "no-such-id"}, exitInvalid, "armory: no approval no-such-id\n"},
		{[]string{"approvals", "approve", "no-such-id"}, exitInvalid, "armory: no approval no-such-id\n"},
		{[]string{"toolbox", "pins", "accept", "nosrv", "notool"}, exitInvalid, `armory: no pinned tool "notool" of server "nosrv" (armory toolbox pins list shows the pinned tools)`},
		{[]string{"token", "revoke", "no-such-id"}, exitInvalid, `armory: no token "no-such-id" (armory token list shows every token's ID)`},
	} {
		r := armoryCmd(t, nil, append([]string{"--world", w}, tc.args...)...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) || strings.Contains(r.stderr, "sqlite") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, r.code, r.stderr, tc.code, tc.stderr)
		}
	}
	// A --db URL of another scheme is refused before anything is opened,
	// without its password; no SQLite file is made of it.
	cwd := t.TempDir()
	cmd := exec.Command(binary, "--world", w, "--db", "mysql://root:secret@db/x", "audit")
	cmd.Dir = cwd
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitUsage || strings.Contains(string(out), "secret") {
		t.Errorf("--db mysql://…: %v %s", err, out)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Errorf("--db mysql://… made %v in the current folder", entries)
	}

	// A session the store has seen is shown even without an agent of the
	// world; a known agent's unused session is shown as unused.
	if r := armoryCmd(t, nil, "--world", w, "session", "show", "scribe:fresh"); r.code != 0 || !strings.Contains(r.stdout, `"state": "unused"`) {
		t.Errorf("an unused session of a known agent: %+v", r)
	}

	// Revoking twice says so, without the store's layers.
	r = armoryCmd(t, nil, "--world", w, "token", "create", "architect")
	if r.code != 0 {
		t.Fatalf("token create: %+v", r)
	}
	id := strings.Fields(r.stderr)[1]
	if r := armoryCmd(t, nil, "--world", w, "token", "revoke", id); r.code != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	if r := armoryCmd(t, nil, "--world", w, "token", "revoke", id); r.code != exitInvalid || r.stderr != "armory: token "+id+" is already revoked\n" {
		t.Errorf("second revoke: %+v", r)
	}
}

// call --progress prints one line a progress message, without the blank
// line a tool's output chunk would add.
func TestCLICallProgressLines(t *testing.T) {
	testenvBwrap(t)
	w := initWorld(t)
	r := armoryCmd(t, nil, "--world", w, "call", "architect", "tool.cli", "--progress", "--args", `{"command":"echo one; echo two"}`)
	if r.code != 0 {
		t.Fatalf("call: %+v", r)
	}
	if !strings.HasPrefix(r.stderr, "… one\n") || !strings.Contains(r.stderr, "two\n") || strings.Contains(r.stderr, "\n\n") {
		t.Errorf("progress on stderr: %q", r.stderr)
	}
}
