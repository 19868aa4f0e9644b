package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/upstream"
	"github.com/armory-dev/armory/world"
)

func jsonUnmarshal(raw json.RawMessage, v any) error { return json.Unmarshal(raw, v) }

// worldDir writes a world with agents alice and bob and the given
// mcp_servers block; extra files are added as given.
func worldDir(t testing.TB, servers string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{
		"world-config.yaml":         "name: up\nagents:\n  - id: alice\n  - id: bob\n" + servers,
		"archetype/alice/config.md": "## Tool Access\n",
		"archetype/bob/config.md":   "## Tool Access\n",
	}
	maps.Copy(all, files)
	return testenv.WriteTree(t, dir, all)
}

// selfServer is the mcp_servers entry of the test binary as an upstream.
func selfServer(name string, env map[string]string) string {
	self, _ := os.Executable()
	var b strings.Builder
	fmt.Fprintf(&b, "  %s:\n    command: [%q]\n    env:\n      %s: \"1\"\n", name, self, "ARMORY_UPSTREAM_TEST_SERVER")
	for k, v := range env {
		fmt.Fprintf(&b, "      %s: %q\n", k, v)
	}
	return b.String()
}

func openStore(t testing.TB, dir string) store.Store {
	t.Helper()
	st, err := sqlite.OpenWith(filepath.Join(dir, ".armory", "armory.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// start loads the world at dir and starts its upstreams with opts (Pins
// defaulting to st); it closes the set when t ends.
func start(t testing.TB, dir string, st store.Store, opts upstream.Options) (*upstream.Set, *roster.Roster) {
	t.Helper()
	w, err := world.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Pins == nil {
		opts.Pins = st
	}
	set, err := upstream.Start(context.Background(), w, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	h, err := roster.Open(dir, roster.Options{Modules: []roster.ModuleTools{{Source: roster.SourceUpstream, Tools: set.Tools()}}, Unavailable: set.Unavailable()})
	if err != nil {
		t.Fatal(err)
	}
	return set, h
}

func tool(t testing.TB, set *upstream.Set, name string) armory.Tool {
	t.Helper()
	for _, tt := range set.Tools() {
		if tt.Spec().Name == name {
			return tt
		}
	}
	t.Fatalf("no tool %s in %v", name, names(set))
	return nil
}

func names(set *upstream.Set) []string {
	var out []string
	for _, t := range set.Tools() {
		out = append(out, t.Spec().Name)
	}
	return out
}

func call(t testing.TB, tl armory.Tool, args string) armory.Result {
	t.Helper()
	return tl.Execute(context.Background(), armory.Invocation{Args: json.RawMessage(args), Agent: &armory.AgentEnv{ID: "alice"}})
}

func explain(t *testing.T, h *roster.Roster, agent, tool string) roster.Explanation {
	t.Helper()
	e, err := h.Explain(agent, tool)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestMapName(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"read_file", "read_file", true},
		{"get-sum", "get-sum", true},
		{"getWeather", "get_weather", true},
		{"ReadFile", "read_file", true},
		{"HTTPGet", "httpget", true},
		{"v2Fetch", "v2_fetch", true},
		{"files.read", "files.read", true},
		{"x..y", "", false},
		{"_private", "", false},
		{"-x", "", false},
		{"has space", "", false},
		{"ünicode", "", false},
		{"", "", false},
		{strings.Repeat("a", 129), "", false},
	} {
		got, ok := upstream.MapName(tc.in)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("MapName(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func FuzzMapName(f *testing.F) {
	for _, s := range []string{"getWeather", "a.b", "A", "x-Y_z9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, ok := upstream.MapName(s)
		if ok && !armory.ValidToolName(m) {
			t.Fatalf("MapName(%q) = %q: not a valid name", s, m)
		}
		if ok && strings.ToLower(s) == s && m != s {
			t.Fatalf("MapName changed a lower-case name %q to %q", s, m)
		}
	})
}

func TestBackoffBounded(t *testing.T) {
	min, max := 100*time.Millisecond, 3*time.Second
	want := []time.Duration{100, 200, 400, 800, 1600, 3000, 3000}
	for n, w := range want {
		if got := upstream.Backoff(n, min, max); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) = %v, want %v", n, got, w*time.Millisecond)
		}
	}
	if got := upstream.Backoff(1<<30, min, max); got != max {
		t.Errorf("Backoff(huge) = %v, want the bound %v", got, max)
	}
}

func TestManifestHintsNeverGrant(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name   string
		stdio  bool
		ann    *mcpAnn
		danger armory.Danger
	}{
		{"stdio no hints", true, nil, armory.DangerDangerous},
		{"read-only hint does not lower", true, &mcpAnn{readOnly: true, destructive: &no, openWorld: &no}, armory.DangerDangerous},
		{"destructive hint raises", true, &mcpAnn{destructive: &yes}, armory.DangerCritical},
		{"http read-only", false, &mcpAnn{readOnly: true}, armory.DangerDangerous},
	} {
		m := upstream.Manifest(tc.stdio, tc.ann.sdk())
		if m.Permission != armory.PermConfirm || m.Category != armory.CatMCP || m.Danger != tc.danger {
			t.Errorf("%s: %+v", tc.name, m)
		}
		if !m.Has(armory.CapNetwork) || m.Has(armory.CapProcessExec) != tc.stdio || m.Has(armory.CapWriteFS) != tc.stdio {
			t.Errorf("%s: capabilities %v", tc.name, m.Capabilities)
		}
	}
}

func TestStartFailuresDoNotFailTheWorld(t *testing.T) {
	dir := worldDir(t, "mcp_servers:\n"+
		selfServer("good", nil)+
		selfServer("crashy", map[string]string{"ARMORY_UPSTREAM_TEST_MODE": "exit"})+
		selfServer("hangs", map[string]string{"ARMORY_UPSTREAM_TEST_MODE": "hang"})+
		"  missing:\n    command: [/nonexistent/mcp-server]\n"+
		"  refused:\n    url: http://127.0.0.1:1/mcp\n", nil)
	st := openStore(t, dir)
	set, h := start(t, dir, st, upstream.Options{StartTimeout: 3 * time.Second})
	un := set.Unavailable()
	for name, want := range map[string]string{
		"mcp.crashy":  "cannot open the database: permission denied", // its stderr, in the reason
		"mcp.hangs":   "no answer within 3s",
		"mcp.missing": "unavailable",
		"mcp.refused": "unavailable",
	} {
		if !strings.Contains(un[name], want) {
			t.Errorf("Unavailable[%s] = %q, want it to contain %q", name, un[name], want)
		}
		e := explain(t, h, "alice", name+".echo")
		if e.Visible || !strings.Contains(strings.Join(e.Reasons, "; "), "is unavailable") {
			t.Errorf("explain %s.echo: %+v", name, e)
		}
	}
	if e := explain(t, h, "alice", "mcp.good.echo"); !e.Visible {
		t.Errorf("mcp.good.echo: %+v", e)
	}
	if len(set.Warnings()) < 4 {
		t.Errorf("warnings: %v", set.Warnings())
	}
	for _, s := range set.Status() {
		if (s.Name == "good") != (s.State == "up") {
			t.Errorf("status %+v", s)
		}
	}
}

func TestNamesMappedOrRefused(t *testing.T) {
	dir := worldDir(t, "mcp_servers:\n"+selfServer("odd", map[string]string{"ARMORY_UPSTREAM_TEST_MODE": "badnames"}), nil)
	set, h := start(t, dir, openStore(t, dir), upstream.Options{})
	got := strings.Join(names(set), " ")
	for _, want := range []string{"mcp.odd.read_file", "mcp.odd.dotted.name", "mcp.odd.echo"} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s in %s", want, got)
		}
	}
	if strings.Contains(got, "get_weather") || strings.Contains(got, "leading") {
		t.Errorf("refused tools offered: %s", got)
	}
	// The mapping is reversed exactly: the call reaches "ReadFile".
	tl := tool(t, set, "mcp.odd.read_file")
	if r := call(t, tl, `{}`); !r.Success || r.Text != "ReadFile" {
		t.Errorf("call: %+v", r)
	}
	e := explain(t, h, "alice", "mcp.odd.get_weather")
	if e.Visible || !strings.Contains(strings.Join(e.Reasons, " "), `"getWeather", "get_weather"`) {
		t.Errorf("collision explained: %+v", e)
	}
	warns := fmt.Sprint(set.Warnings())
	if !strings.Contains(warns, `"_leading" is refused`) || !strings.Contains(warns, "world-config.yaml:6") {
		t.Errorf("warnings: %s", warns)
	}
}

func TestCallsLimitsAndEnvironment(t *testing.T) {
	t.Setenv("ARMORY_TEST_SECRET", "hunter2")
	dir := worldDir(t, "mcp_servers:\n"+selfServer("t", map[string]string{"EXTRA": "yes"}), nil)
	set, _ := start(t, dir, openStore(t, dir), upstream.Options{MaxOutput: 1000, CallTimeout: time.Second})

	if r := call(t, tool(t, set, "mcp.t.echo"), `{"text":"hi"}`); !r.Success || r.Text != "echo: hi" {
		t.Errorf("echo: %+v", r)
	}
	for _, tc := range []struct {
		name, tool, args string
		ok               bool
		kind             armory.Kind
		want             string
	}{
		{"output under the cap", "mcp.t.big", `{"n":"1000"}`, true, 0, strings.Repeat("x", 1000)},
		{"output over the cap", "mcp.t.big", `{"n":"5000"}`, true, 0, "[output truncated at 1000 bytes]"},
		{"call timeout", "mcp.t.slow", `{}`, false, armory.KindTimeout, "did not answer within 1s"},
		{"tool error", "mcp.t.fail", `{}`, false, armory.KindOther, "frobnicator is jammed"},
		{"no arguments", "mcp.t.echo", ``, true, 0, "echo: "},
	} {
		r := call(t, tool(t, set, tc.tool), tc.args)
		if r.Success != tc.ok || r.Kind != tc.kind || !strings.Contains(r.Text, tc.want) {
			t.Errorf("%s: %+v", tc.name, r)
		}
		if len(r.Text) > 1000+64 {
			t.Errorf("%s: %d bytes of text, cap 1000", tc.name, len(r.Text))
		}
	}
	// The server still works after a timed-out call.
	if r := call(t, tool(t, set, "mcp.t.echo"), `{"text":"again"}`); !r.Success {
		t.Errorf("after timeout: %+v", r)
	}
	// Reduced environment: PATH, HOME, LANG and the configured env only.
	r := call(t, tool(t, set, "mcp.t.env"), `{}`)
	env := map[string]bool{}
	for _, kv := range strings.Split(r.Text, "\n") {
		k, _, _ := strings.Cut(kv, "=")
		env[k] = true
	}
	if env["ARMORY_TEST_SECRET"] || !env["EXTRA"] || !env["ARMORY_UPSTREAM_TEST_SERVER"] {
		t.Errorf("environment: %v", r.Text)
	}
	for k := range env {
		switch k {
		case "PATH", "HOME", "LANG", "EXTRA", "ARMORY_UPSTREAM_TEST_SERVER":
		default:
			t.Errorf("unexpected variable %s in the upstream's environment", k)
		}
	}
}

func TestStderrIsBounded(t *testing.T) {
	// A server that fails writes to stderr; only the last MaxStderr bytes
	// are kept and the reason quotes a bounded part of them.
	dir := worldDir(t, "mcp_servers:\n"+selfServer("bad", map[string]string{"ARMORY_UPSTREAM_TEST_MODE": "exit"}), nil)
	set, _ := start(t, dir, openStore(t, dir), upstream.Options{MaxStderr: 16})
	st := set.Status()[0]
	if len(st.Stderr) != 16 || !strings.HasSuffix(st.Stderr, "denied\n") {
		t.Errorf("stderr tail %q", st.Stderr)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for i := 0; i < 600; i++ {
		if cond() {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s", what)
}

func TestCrashRestartsWithBackoff(t *testing.T) {
	starts := filepath.Join(t.TempDir(), "starts")
	dir := worldDir(t, "mcp_servers:\n"+selfServer("t", map[string]string{
		"ARMORY_UPSTREAM_TEST_STARTS": starts,
		"ARMORY_UPSTREAM_TEST_FAILAT": "2,3", // the first two restarts fail
	}), nil)
	set, _ := start(t, dir, openStore(t, dir), upstream.Options{BackoffMin: 200 * time.Millisecond, BackoffMax: time.Second})
	pid0 := set.Status()[0].PID
	echo := tool(t, set, "mcp.t.echo")
	if r := call(t, tool(t, set, "mcp.t.crash"), `{}`); r.Success || r.Kind != armory.KindUnavailable {
		t.Fatalf("crash call: %+v", r)
	}
	// Meanwhile calls fail cleanly, saying why.
	r := call(t, echo, `{"text":"x"}`)
	if !r.Success && (r.Kind != armory.KindUnavailable || !strings.Contains(r.Text, `"t"`)) {
		t.Fatalf("call while restarting: %+v", r)
	}
	waitFor(t, "the restart", func() bool { s := set.Status()[0]; return s.State == "up" && s.Restarts > 0 })
	s := set.Status()[0]
	if s.Restarts != 1 || s.PID == pid0 || s.PID == 0 {
		t.Fatalf("status after restart: %+v", s)
	}
	if b, _ := os.ReadFile(starts); strings.TrimSpace(string(b)) != "4" {
		t.Fatalf("starts = %s, want 4 (first, two failed restarts, success)", b)
	}
	if r := call(t, echo, `{"text":"back"}`); !r.Success || r.Text != "echo: back" {
		t.Fatalf("after restart: %+v", r)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid0)); err == nil {
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid0)); !strings.Contains(string(b), ") Z") {
			t.Errorf("the crashed server %d is still alive", pid0)
		}
	}
}

func TestRugPullAtRestartIsRefused(t *testing.T) {
	starts := filepath.Join(t.TempDir(), "starts")
	dir := worldDir(t, "mcp_servers:\n"+selfServer("t", map[string]string{"ARMORY_UPSTREAM_TEST_STARTS": starts}), nil)
	st := openStore(t, dir)
	set, _ := start(t, dir, st, upstream.Options{BackoffMin: 50 * time.Millisecond})
	echo := tool(t, set, "mcp.t.echo")
	// The next start describes echo differently: a rug pull while armory
	// runs. The changed tool must refuse calls.
	setDescFromStart(t, starts)
	call(t, tool(t, set, "mcp.t.crash"), `{}`)
	waitFor(t, "the restart", func() bool { s := set.Status()[0]; return s.State == "up" && s.Restarts > 0 })
	r := call(t, echo, `{"text":"x"}`)
	if r.Success || r.Kind != armory.KindPermission || !strings.Contains(r.Text, "changed since it was pinned") {
		t.Fatalf("changed tool called: %+v", r)
	}
	if r := call(t, tool(t, set, "mcp.t.big"), `{"n":"3"}`); !r.Success {
		t.Fatalf("unchanged tool: %+v", r)
	}
}

// setDescFromStart makes later starts of the test server use another echo
// description, by bumping the starts counter past a threshold that the
// server reads: starts ≥ 1000 describe echo as "Echo, changed.".
func setDescFromStart(t *testing.T, starts string) {
	t.Helper()
	if err := os.WriteFile(starts, []byte("1000"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCloseKillsProcessGroup(t *testing.T) {
	dir := worldDir(t, "mcp_servers:\n"+selfServer("t", nil), nil)
	set, _ := start(t, dir, openStore(t, dir), upstream.Options{})
	pid := set.Status()[0].PID
	r := call(t, tool(t, set, "mcp.t.spawn"), `{}`)
	child, err := strconv.Atoi(r.Text)
	if err != nil || !alive(child) || !alive(pid) {
		t.Fatalf("spawn: %+v (server %d alive %v)", r, pid, alive(pid))
	}
	set.Close()
	waitFor(t, "the processes to go", func() bool { return !alive(pid) && !alive(child) })
	if s := set.Status()[0]; s.State != "closed" {
		t.Errorf("status %+v", s)
	}
	if r := call(t, tool(t, set, "mcp.t.echo"), `{}`); r.Success || !strings.Contains(r.Text, "stopped") {
		t.Errorf("call after close: %+v", r)
	}
	set.Close() // idempotent
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z")
}

func TestPinsRequired(t *testing.T) {
	dir := worldDir(t, "mcp_servers:\n"+selfServer("t", nil), nil)
	w, err := world.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := upstream.Start(context.Background(), w, upstream.Options{}); armory.KindOf(err) != armory.KindInvalid {
		t.Fatalf("start without pins: %v", err)
	}
}

type mcpAnn struct {
	readOnly               bool
	destructive, openWorld *bool
}

// TestEnvExpansion: ${NAME} in env (stdio) and headers (HTTP) is taken from
// armory's environment when the server starts; an unset variable makes the
// server unavailable with a reason that names it and shows no value.
func TestEnvExpansion(t *testing.T) {
	t.Setenv("ARMORY_TEST_UP_TOKEN", "tok-123")
	var gotAuth atomic.Value
	up := mcp.NewServer(&mcp.Implementation{Name: "h", Version: "1"}, nil)
	up.AddTool(&mcp.Tool{Name: "echo", Description: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	mh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth.Store(r.Header.Get("Authorization"))
		mh.ServeHTTP(w, r)
	}))
	defer hs.Close()
	dir := worldDir(t, "mcp_servers:\n"+
		selfServer("t", map[string]string{"TOKEN": "${ARMORY_TEST_UP_TOKEN}", "LITERAL": "$${NOT_EXPANDED}"})+
		"  h:\n    url: "+hs.URL+"\n    headers: {Authorization: \"Bearer ${ARMORY_TEST_UP_TOKEN}\"}\n"+
		selfServer("unset", map[string]string{"X": "${ARMORY_TEST_UNSET_VAR}"}), nil)
	set, _ := start(t, dir, openStore(t, dir), upstream.Options{StartTimeout: 10 * time.Second})

	r := call(t, tool(t, set, "mcp.t.env"), `{}`)
	lines := strings.Split(r.Text, "\n")
	if !slices.Contains(lines, "TOKEN=tok-123") || !slices.Contains(lines, "LITERAL=${NOT_EXPANDED}") {
		t.Errorf("stdio env not expanded: %q", r.Text)
	}
	if u := set.Unavailable()["mcp.h"]; u != "" {
		t.Fatalf("http upstream unavailable: %s", u)
	}
	if r := call(t, tool(t, set, "mcp.h.echo"), `{}`); !r.Success {
		t.Fatalf("http upstream: %+v", r)
	}
	if a, _ := gotAuth.Load().(string); a != "Bearer tok-123" {
		t.Errorf("Authorization header %q", a)
	}
	why := set.Unavailable()["mcp.unset"]
	if !strings.Contains(why, "${ARMORY_TEST_UNSET_VAR} is not set") {
		t.Errorf("unset variable: %q", why)
	}
	for _, w := range set.Warnings() {
		if strings.Contains(w.String(), "tok-123") {
			t.Errorf("a warning reveals the value: %v", w)
		}
	}
}

// TestSandboxedStdioServer: with "sandbox:", a stdio server runs confined:
// it writes only its state folder (and what the world grants), reaches the
// network only when granted, and its tools lose the network capability.
func TestSandboxedStdioServer(t *testing.T) {
	testenv.LookPath(t, "bwrap", "apt-get install bubblewrap")
	if err := sandbox.Detect().Check(sandbox.BackendBwrap); err != nil {
		testenv.Missing(t, "a working bwrap", err.Error())
	}
	self, _ := os.Executable()
	shared := t.TempDir()
	peer := testenv.HelloServer(t).String()
	// A directory outside /tmp (where a bwrap sandbox has a tmpfs of its own).
	outside, err := os.MkdirTemp("/var/tmp", "armory-upstream-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	probe := map[string]string{"ARMORY_UPSTREAM_TEST_MODE": "probe"}
	cfg := "mcp_servers:\n" +
		selfServer("boxed", probe) + "    sandbox: {read_only: [" + filepath.Dir(self) + "], writable: [" + shared + "]}\n" +
		selfServer("netted", probe) + "    sandbox: {network: true, read_only: [" + filepath.Dir(self) + "]}\n" +
		selfServer("free", probe)
	dir := worldDir(t, cfg, nil)
	set, _ := start(t, dir, openStore(t, dir), upstream.Options{StartTimeout: 20 * time.Second})
	if u := set.Unavailable(); len(u) > 0 {
		t.Fatalf("unavailable: %v", u)
	}
	state := filepath.Join(dir, ".armory", "upstreams", "boxed")
	for _, tc := range []struct {
		server, tool, args, want string
	}{
		{"boxed", "write", `{"path":"` + filepath.Join(state, "cache") + `"}`, "written"},
		{"boxed", "write", `{"path":"` + filepath.Join(shared, "out") + `"}`, "written"},
		// (The world is under /tmp here, where the sandbox has its own
		// tmpfs: its write lands there; the real file is checked below.)
		{"boxed", "write", `{"path":"` + filepath.Join(dir, "world-config.yaml") + `"}`, ""},
		{"boxed", "write", `{"path":"` + filepath.Join(outside, "x") + `"}`, "error:"},
		{"boxed", "dial", `{"addr":"` + peer + `"}`, "error:"},
		{"netted", "dial", `{"addr":"` + peer + `"}`, "connected"},
		{"free", "dial", `{"addr":"` + peer + `"}`, "connected"},
		{"free", "write", `{"path":"` + filepath.Join(outside, "free") + `"}`, "written"},
	} {
		r := call(t, tool(t, set, "mcp."+tc.server+"."+tc.tool), tc.args)
		if !strings.HasPrefix(r.Text, tc.want) {
			t.Errorf("%s.%s %s = %q, want %q…", tc.server, tc.tool, tc.args, r.Text, tc.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "world-config.yaml")); err != nil || string(b) == "x" {
		t.Fatal("the sandboxed server overwrote the world config")
	}
	r := call(t, tool(t, set, "mcp.boxed.env"), `{}`)
	if !strings.Contains(r.Text, "HOME="+state+"\n") {
		t.Errorf("HOME of a sandboxed server: %q", r.Text)
	}
	if slices.Contains(tool(t, set, "mcp.boxed.echo").Manifest().Capabilities, armory.CapNetwork) ||
		!slices.Contains(tool(t, set, "mcp.netted.echo").Manifest().Capabilities, armory.CapNetwork) {
		t.Error("network capability does not follow the sandbox")
	}
	// A crash restarts it, still sandboxed; Close leaves nothing behind.
	pid0 := 0
	for _, s := range set.Status() {
		if s.Name == "boxed" {
			pid0 = s.PID
		}
	}
	call(t, tool(t, set, "mcp.boxed.crash"), `{}`)
	end := time.Now().Add(30 * time.Second)
	for {
		r := call(t, tool(t, set, "mcp.boxed.write"), `{"path":"`+filepath.Join(outside, "y")+`"}`)
		if strings.HasPrefix(r.Text, "error:") {
			break // restarted and confined again
		}
		if r.Text == "written" {
			t.Fatal("restarted unconfined")
		}
		if time.Now().After(end) {
			t.Fatalf("no restart: %+v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, s := range set.Status() {
		if s.Name == "boxed" && (s.PID == pid0 || s.Restarts != 1) {
			t.Errorf("status after restart: %+v (pid before %d)", s, pid0)
		}
	}
	set.Close()
	for _, s := range set.Status() {
		if s.PID != 0 {
			t.Errorf("still running after Close: %+v", s)
		}
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid0)); err == nil {
		t.Errorf("first sandbox (pid %d) still alive", pid0)
	}
}
