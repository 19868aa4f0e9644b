package toolbox

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/world"
)

func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper()
	os.Exit(m.Run())
}

// needSandbox skips (locally) or fails (CI) when no sandbox backend works.
func needSandbox(t *testing.T) {
	t.Helper()
	if err := sandbox.Requirement(""); err != nil {
		testenv.Missing(t, "a process sandbox (bwrap or Landlock)", err.Error())
	}
}

func def(binary string, args ...world.Arg) *world.ToolboxTool {
	return &world.ToolboxTool{Toolbox: "devtools", Name: "t", Binary: binary, BinaryPath: binary, Args: args,
		Timeout: 5 * time.Second, MaxOutput: 1024, Manifest: armory.Manifest{Danger: armory.DangerDangerous}}
}

var gitArgs = []world.Arg{
	{Name: "command", Type: world.ArgPositional, Required: true, Description: "git subcommand"},
	{Name: "message", Type: world.ArgFlag, Flag: "--message"},
	{Name: "all", Type: world.ArgFlagBool, Flag: "--all"},
	{Name: "mode", Type: world.ArgFlag, Flag: "--mode", Enum: []string{"fast", "slow"}},
}

func TestArgv(t *testing.T) {
	tool := New(def("git", gitArgs...))
	tests := []struct {
		args    string
		want    []string
		wantErr string
	}{
		{`{"command":"commit","message":"fix: x","all":true}`, []string{"commit", "--message", "fix: x", "--all"}, ""},
		{`{"all":false,"command":"status"}`, []string{"status"}, ""},
		{`{"command":"log","message":"-rf /"}`, []string{"log", "--message", "-rf /"}, ""}, // a flag's value is safe
		{`{"command":"log","mode":"fast"}`, []string{"log", "--mode", "fast"}, ""},
		{`{"command":42}`, []string{"42"}, ""},
		{`{}`, nil, `missing required argument "command" (git subcommand)`},
		{`{"command":null}`, nil, `missing required argument "command"`},
		{`{"command":"x","bogus":1}`, nil, "unknown argument(s) bogus (this tool takes: command, message, all, mode)"},
		{`{"command":"--upload-pack=evil"}`, nil, `may not start with "-"`},
		{`{"command":"x","all":"yes"}`, nil, `argument "all" must be true or false`},
		{`{"command":["a"]}`, nil, `argument "command" must be a string`},
		{`{"command":"x","mode":"turbo"}`, nil, `must be one of fast, slow, got "turbo"`},
		{`{"command":"a\u0000b"}`, nil, "NUL byte"},
		{`[1,2]`, nil, "arguments must be a JSON object"},
	}
	for _, tc := range tests {
		got, err := tool.Argv(json.RawMessage(tc.args))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || armory.KindOf(err) != armory.KindInvalid {
				t.Errorf("%s: err = %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: argv = %q, %v; want %q", tc.args, got, err, tc.want)
		}
	}
}

func TestSchemaFromArgs(t *testing.T) {
	s := New(def("git", gitArgs...)).Spec()
	var sch struct {
		Properties map[string]struct {
			Type string   `json:"type"`
			Enum []string `json:"enum"`
		} `json:"properties"`
		Required   []string `json:"required"`
		Additional bool     `json:"additionalProperties"`
	}
	if err := json.Unmarshal(s.InputSchema, &sch); err != nil {
		t.Fatal(err)
	}
	if s.Name != "devtools.t" || sch.Properties["all"].Type != "boolean" || sch.Properties["command"].Type != "string" || !slices.Equal(sch.Required, []string{"command"}) || sch.Additional || len(sch.Properties["mode"].Enum) != 2 {
		t.Fatalf("schema = %s", s.InputSchema)
	}
	req := New(def("git")).Manifest().Requires
	if len(req) != 2 || req[0] != (armory.Requirement{Kind: "binary", Name: "git"}) || req[1].Kind != sandbox.RequirementKind {
		t.Fatalf("requirements = %v", req)
	}
}

// script writes a toolbox folder (under t.TempDir, which the bwrap
// sandbox hides behind its private /tmp unless the tool mounts it) holding
// tool.sh, and returns a definition that names it "./tool.sh" as a
// toolbox.yaml would.
func scriptDef(t *testing.T, body string, args ...world.Arg) *world.ToolboxTool {
	t.Helper()
	needSandbox(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "tool.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	d := def(p, args...)
	d.Binary = "./tool.sh"
	return d
}

func inv(t *testing.T, args string) armory.Invocation {
	return armory.Invocation{Args: json.RawMessage(args), Agent: &armory.AgentEnv{ID: "a1", Workspace: filepath.Join(t.TempDir(), "ws")}}
}

// backends are the sandbox backends a toolbox tool may run under.
var backends = []sandbox.Backend{sandbox.BackendBwrap, sandbox.BackendLandlock, sandbox.BackendNone}

func forEachBackend(t *testing.T, f func(t *testing.T, b sandbox.Backend)) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			if err := sandbox.Requirement(string(b)); err != nil {
				if b == sandbox.BackendBwrap {
					testenv.LookPath(t, "bwrap", "apt-get install bubblewrap")
				}
				testenv.Missing(t, "sandbox backend "+string(b), err.Error())
			}
			f(t, b)
		})
	}
}

func invOn(t *testing.T, b sandbox.Backend, args string) armory.Invocation {
	in := inv(t, args)
	in.Agent.Sandbox.Backend = string(b)
	return in
}

func TestExecuteRunsInWorkspaceWithReducedEnv(t *testing.T) {
	t.Setenv("ARMORY_SECRET_TOKEN", "hunter2")
	t.Setenv("PASS_ME", "yes")
	forEachBackend(t, func(t *testing.T, b sandbox.Backend) {
		d := scriptDef(t, `echo "pwd=$(pwd) home=$HOME ws=$AGENT_WORKSPACE agent=$ARMORY_AGENT secret=${ARMORY_SECRET_TOKEN:-none} pass=${PASS_ME:-none} lang=$LANG args=$*"; read x || echo "stdin closed"`, world.Arg{Name: "x", Type: world.ArgPositional})
		d.Env = []string{"PASS_ME"}
		in := invOn(t, b, `{"x":"hello world"}`)
		res := New(d).Execute(context.Background(), in)
		ws := in.Agent.Workspace
		want := "pwd=" + ws + " home=" + ws + " ws=" + ws + " agent=a1 secret=none pass=yes lang=C.UTF-8 args=hello world\nstdin closed\n"
		if !res.Success || res.Text != want {
			t.Fatalf("result = %+v\nwant text %q", res, want)
		}
		if v := res.Value.(map[string]any); v["backend"] != string(b) || v["exit_code"] != 0 || v["truncated"] != false {
			t.Fatalf("value = %v", v)
		}
	})
}

func TestExecuteExitCodeAndStderr(t *testing.T) {
	res := New(scriptDef(t, `echo out; echo oops >&2; exit 3`)).Execute(context.Background(), inv(t, `{}`))
	if res.Success || res.Kind != armory.KindOther || res.Text != "out\n[stderr]\noops\n[exit code 3]" {
		t.Fatalf("result = %+v", res)
	}
}

func TestExecuteOutputCap(t *testing.T) {
	// 1 MB of output against a 1 KiB cap: kept 1 KiB, the rest drained and
	// counted; stderr is capped on its own.
	var progress []string
	in := inv(t, `{}`)
	in.Progress = func(s string) { progress = append(progress, s) }
	res := New(scriptDef(t, `head -c 1000000 /dev/zero | tr '\0' 'a'; head -c 5000 /dev/zero | tr '\0' 'e' >&2`)).Execute(context.Background(), in)
	want := strings.Repeat("a", 1024) + "\n(998976 bytes, truncated)\n[stderr]\n" + strings.Repeat("e", 1024) + "\n(3976 bytes, truncated)"
	if !res.Success || res.Text != want {
		t.Fatalf("text = %.80q… (%d bytes)", res.Text, len(res.Text))
	}
	if v := res.Value.(map[string]any); v["truncated"] != true {
		t.Fatalf("value = %v", v)
	}
	// Progress saw the kept bytes (and the markers), never the whole flood.
	seen := 0
	for _, p := range progress {
		seen += len(p)
	}
	if seen == 0 || seen > 2*1024+200 {
		t.Fatalf("progress carried %d bytes in %d messages", seen, len(progress))
	}
}

func TestExecuteTimeoutKillsProcessTree(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b sandbox.Backend) {
		// A unique extra argument for GNU sleep ("0.000NNN" seconds) marks
		// the processes to look for afterwards.
		marker := fmt.Sprintf("0.000%09d", time.Now().UnixNano()%1e9)
		// A background child holds the pipes open and would outlive its
		// parent, and another leaves the session.
		d := scriptDef(t, "(sleep 1000 "+marker+" &); setsid sleep 1000 "+marker+" & echo started; sleep 1000")
		d.Timeout = 300 * time.Millisecond
		res := New(d).Execute(context.Background(), invOn(t, b, `{}`))
		if res.Success || res.Kind != armory.KindTimeout || !strings.HasPrefix(res.Text, "started\n[timed out after ") {
			t.Fatalf("result = %+v", res)
		}
		if b != sandbox.BackendBwrap && !sandbox.Detect().HelperPIDNamespace {
			return // documented: without a PID namespace a setsid escape survives
		}
		// Run returns only once the tree is gone.
		if processWithArg(marker) {
			t.Fatal("a process of the tool survived the timeout")
		}
	})
}

func TestExecuteCancel(t *testing.T) {
	needSandbox(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	out := Run(ctx, RunSpec{Binary: "/bin/sleep", Args: []string{"100"}, Workspace: t.TempDir(), Timeout: time.Minute})
	if out.StartErr != nil || !out.Killed || out.KillReason != "canceled" || out.ExitCode == 0 {
		t.Fatalf("cancel did not stop the process: %+v", out)
	}
}

func TestExecuteMissingBinary(t *testing.T) {
	needSandbox(t)
	for _, bin := range []string{"/nonexistent/tool", "armory-no-such-binary"} {
		res := New(def(bin)).Execute(context.Background(), inv(t, `{}`))
		if res.Success || res.Kind != armory.KindUnavailable || !strings.Contains(res.Text, "could not start") {
			t.Fatalf("%s: result = %+v", bin, res)
		}
	}
	if res := New(def("/bin/true")).Execute(context.Background(), armory.Invocation{Args: json.RawMessage(`{}`)}); res.Kind != armory.KindUnavailable {
		t.Fatalf("no workspace: %+v", res)
	}
}

// A toolbox tool is confined like tool.cli: it writes only its workspace,
// not its own toolbox folder, not the host, and reaches the network only
// when the agent's sandbox policy grants it.
func TestExecuteConfined(t *testing.T) {
	port := testenv.HelloServer(t).Port
	testenv.LookPath(t, "bash", "apt-get install bash")
	for _, b := range []sandbox.Backend{sandbox.BackendBwrap, sandbox.BackendLandlock} {
		t.Run(string(b), func(t *testing.T) {
			if err := sandbox.Requirement(string(b)); err != nil {
				testenv.Missing(t, "sandbox backend "+string(b), err.Error())
			}
			outside := filepath.Join(t.TempDir(), "outside")
			d := scriptDef(t, `echo in > "$HOME/inside"; echo x > "$1" 2>/dev/null; echo x > "$(dirname "$0")/tool.sh" 2>/dev/null; exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/`+strconv.Itoa(port)+` && head -n1 <&3' 2>/dev/null`,
				world.Arg{Name: "path", Type: world.ArgPositional})
			before, _ := os.ReadFile(d.BinaryPath)
			for _, network := range []bool{false, true} {
				if network && b == sandbox.BackendLandlock && sandbox.Detect().LandlockABI < 4 {
					continue
				}
				in := invOn(t, b, `{"path":"`+outside+`"}`)
				in.Agent.Sandbox.Network = network
				res := New(d).Execute(context.Background(), in)
				if _, err := os.Stat(outside); err == nil {
					t.Fatal("the tool wrote outside its workspace")
				}
				if after, _ := os.ReadFile(d.BinaryPath); string(after) != string(before) {
					t.Fatal("the tool rewrote its own toolbox file")
				}
				if got, _ := os.ReadFile(filepath.Join(in.Agent.Workspace, "inside")); string(got) != "in\n" {
					t.Fatalf("workspace not writable: %+v", res)
				}
				if reached := strings.Contains(res.Text, "hello"); reached != network {
					t.Fatalf("network %v: reached the listener %v: %+v", network, reached, res)
				}
			}
		})
	}
}

// processWithArg reports whether a live (non-zombie) process has arg in
// its command line.
func processWithArg(arg string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), arg) {
			continue
		}
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if fields := strings.Fields(string(st)); len(fields) > 2 && fields[2] == "Z" {
			continue
		}
		return true
	}
	return false
}

// A coding-agent tool returns the compact summary, even when the raw stream
// is far larger than max_output, and streams progress while it runs.
func TestCodingAgentCompaction(t *testing.T) {
	// The fixture is copied into the workspace: the sandbox shows the tool its
	// workspace, not this repository (which may sit under a private /tmp).
	stream, err := os.ReadFile("../compact/testdata/cursor_success.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	d := scriptDef(t, `cat stream.ndjson`)
	d.Name = "cursor-agent"
	d.MaxOutput = 1024 // far smaller than the stream: the result event is past the cap
	var progress []string
	in := inv(t, `{}`)
	os.MkdirAll(in.Agent.Workspace, 0o755)
	if err := os.WriteFile(filepath.Join(in.Agent.Workspace, "stream.ndjson"), stream, 0o644); err != nil {
		t.Fatal(err)
	}
	in.Progress = func(s string) { progress = append(progress, s) }
	res := New(d).Execute(context.Background(), in)
	if !res.Success || !strings.HasPrefix(res.Text, "Cursor agent completed successfully in ") || !strings.Contains(res.Text, "Result:\n") || strings.Contains(res.Text, "truncated") {
		t.Fatalf("result = %+v", res)
	}
	if len(progress) == 0 {
		t.Fatal("no live progress")
	}
	// Not NDJSON: the raw output is returned.
	d2 := scriptDef(t, `echo plain text output`)
	d2.Name = "claude-agent"
	if res := New(d2).Execute(context.Background(), inv(t, `{}`)); res.Text != "plain text output\n" {
		t.Fatalf("raw = %q", res.Text)
	}
}

// A toolbox tool that runs a WebAssembly module is package wasm's:
// FromWorld builds only the binary tools.
func TestFromWorldLeavesWasmTools(t *testing.T) {
	dir := testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml":     "name: w\nagents: [{id: a, archetype: a}]\ntoolboxes: [box]\n",
		"archetype/a/config.md": "## Tools\n",
		"toolbox/box/toolbox.yaml": "name: box\ntools:\n" +
			"  - {name: bin, description: d, binary: wc}\n" +
			"  - {name: mod, description: d, wasm: m.wasm}\n",
	})
	w, err := world.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tools := FromWorld(w)
	if len(tools) != 1 || tools[0].Spec().Name != "box.bin" {
		t.Fatalf("tools = %v", tools)
	}
}
