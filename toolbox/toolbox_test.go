package toolbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
)

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
	if New(def("git")).Manifest().Requires[0] != (armory.Requirement{Kind: "binary", Name: "git"}) {
		t.Fatal("binary requirement missing")
	}
}

func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tool.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func inv(t *testing.T, args string) armory.Invocation {
	return armory.Invocation{Args: json.RawMessage(args), Agent: &armory.AgentEnv{ID: "a1", Workspace: filepath.Join(t.TempDir(), "ws")}}
}

func TestExecuteRunsInWorkspaceWithReducedEnv(t *testing.T) {
	t.Setenv("ARMORY_SECRET_TOKEN", "hunter2")
	t.Setenv("PASS_ME", "yes")
	d := def(script(t, `echo "pwd=$(pwd) home=$HOME agent=$ARMORY_AGENT secret=${ARMORY_SECRET_TOKEN:-none} pass=${PASS_ME:-none} args=$*"; read x || echo "stdin closed"`), world.Arg{Name: "x", Type: world.ArgPositional})
	d.Env = []string{"PASS_ME"}
	in := inv(t, `{"x":"hello world"}`)
	res := New(d).Execute(context.Background(), in)
	ws := in.Agent.Workspace
	want := "pwd=" + ws + " home=" + ws + " agent=a1 secret=none pass=yes args=hello world\nstdin closed\n"
	if !res.Success || res.Text != want {
		t.Fatalf("result = %+v\nwant text %q", res, want)
	}
}

func TestExecuteExitCodeAndStderr(t *testing.T) {
	res := New(def(script(t, `echo out; echo oops >&2; exit 3`))).Execute(context.Background(), inv(t, `{}`))
	if res.Success || !strings.Contains(res.Text, "out\n") || !strings.Contains(res.Text, "[stderr]\noops") || !strings.Contains(res.Text, "[exit code 3]") {
		t.Fatalf("result = %+v", res)
	}
}

func TestExecuteOutputCap(t *testing.T) {
	// 1 MB of output against a 1 KiB cap: kept 1 KiB, the rest drained and counted.
	res := New(def(script(t, `head -c 1000000 /dev/zero | tr '\0' 'a'`))).Execute(context.Background(), inv(t, `{}`))
	if !res.Success {
		t.Fatalf("result = %+v", res)
	}
	if !strings.HasPrefix(res.Text, strings.Repeat("a", 1024)+"\n(1000000 bytes, truncated)") {
		t.Fatalf("text = %.80q…", res.Text)
	}
}

func TestExecuteTimeoutKillsProcessGroup(t *testing.T) {
	marker := "armory-test-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	// A background child holds the pipes open and would outlive its parent;
	// exec -a gives it a marker to look for afterwards.
	out := Run(context.Background(), RunSpec{Binary: "/bin/sh", Args: []string{"-c", "exec -a " + marker + " sleep 1000 & sleep 1000"}, Timeout: 300 * time.Millisecond, MaxOutput: 100})
	if !out.TimedOut {
		t.Fatalf("outcome = %+v", out)
	}
	res := out.Result("devtools.t")
	if res.Success || res.Kind != armory.KindTimeout || !strings.Contains(res.Text, "timed out") {
		t.Fatalf("result = %+v", res)
	}
	// Every process of the group is gone (give the kernel a moment to reap).
	deadline := time.Now().Add(5 * time.Second)
	for {
		if !processWithArg(marker) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a process of the tool survived the timeout")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestExecuteCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	out := Run(ctx, RunSpec{Binary: "/bin/sleep", Args: []string{"100"}, Timeout: time.Minute})
	if out.ExitCode == 0 || out.Duration > 30*time.Second {
		t.Fatalf("cancel did not stop the process: %+v", out)
	}
}

func TestExecuteMissingBinary(t *testing.T) {
	res := New(def("/nonexistent/tool")).Execute(context.Background(), inv(t, `{}`))
	if res.Success || res.Kind != armory.KindUnavailable || !strings.Contains(res.Text, "could not start") {
		t.Fatalf("result = %+v", res)
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
	fixture, err := filepath.Abs("compact/testdata/cursor_success.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(fixture); err != nil {
		t.Skip("fixture missing:", err)
	}
	d := def(script(t, `cat '`+fixture+`'`))
	d.Name = "cursor-agent"
	d.MaxOutput = 1024 // far smaller than the stream: the result event is past the cap
	var progress []string
	in := inv(t, `{}`)
	in.Progress = func(s string) { progress = append(progress, s) }
	res := New(d).Execute(context.Background(), in)
	if !res.Success || !strings.HasPrefix(res.Text, "Cursor agent completed successfully in ") || !strings.Contains(res.Text, "Result:\n") || strings.Contains(res.Text, "truncated") {
		t.Fatalf("result = %+v", res)
	}
	if len(progress) == 0 {
		t.Fatal("no live progress")
	}
	// Not NDJSON: the raw output is returned.
	d2 := def(script(t, `echo plain text output`))
	d2.Name = "claude-agent"
	if res := New(d2).Execute(context.Background(), inv(t, `{}`)); res.Text != "plain text output\n" {
		t.Fatalf("raw = %q", res.Text)
	}
}
