package process

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/sandbox"
)

// TestMain lets the sandbox re-execute this test binary as its helper
// (landlock and none backends).
func TestMain(m *testing.M) {
	sandbox.MaybeRunHelper()
	os.Exit(m.Run())
}

// procBackends are the backends the process tools are tested on;
// confiningBackends those that confine files and network.
var (
	procBackends      = []sandbox.Backend{sandbox.BackendBwrap, sandbox.BackendLandlock, sandbox.BackendNone}
	confiningBackends = []sandbox.Backend{sandbox.BackendBwrap, sandbox.BackendLandlock}
)

// needBackend skips (locally) or fails (CI) when backend b cannot run.
func needBackend(t testing.TB, b sandbox.Backend) {
	t.Helper()
	if b == sandbox.BackendBwrap {
		testenv.LookPath(t, "bwrap", "apt-get install bubblewrap")
	}
	if err := sandbox.Requirement(string(b)); err != nil {
		testenv.Missing(t, "sandbox backend "+string(b), err.Error())
	}
}

func forBackends(t *testing.T, bs []sandbox.Backend, f func(t *testing.T, b sandbox.Backend)) {
	for _, b := range bs {
		t.Run(string(b), func(t *testing.T) {
			needBackend(t, b)
			f(t, b)
		})
	}
}

// procAgent is an agent whose workspace is a fresh folder (not yet created:
// the tools create it).
func procAgent(t *testing.T, b sandbox.Backend) *armory.AgentEnv {
	return &armory.AgentEnv{ID: "a1", Workspace: filepath.Join(t.TempDir(), "ws"), Sandbox: armory.SandboxPolicy{Backend: string(b)}}
}

// hangGuard only turns a hung call into a failure instead of a go test
// timeout; it is far beyond every bound the tests set, not a speed check.
const hangGuard = 3 * time.Minute

// call runs tool with args (a JSON-encodable value) and returns the result
// and the progress messages.
func call(t *testing.T, tool armory.Tool, agent *armory.AgentEnv, args any) (armory.Result, []string) {
	t.Helper()
	return callCtx(t, context.Background(), tool, agent, args)
}

func callCtx(t *testing.T, ctx context.Context, tool armory.Tool, agent *armory.AgentEnv, args any) (armory.Result, []string) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var progress []string
	inv := armory.Invocation{Args: raw, Agent: agent, Progress: func(s string) {
		mu.Lock()
		progress = append(progress, s)
		mu.Unlock()
	}}
	done := make(chan armory.Result, 1)
	go func() { done <- tool.Execute(ctx, inv) }()
	select {
	case res := <-done:
		mu.Lock()
		defer mu.Unlock()
		return res, progress
	case <-time.After(hangGuard):
		t.Fatalf("%s did not return", tool.Spec().Name)
		return armory.Result{}, nil
	}
}

func value(t *testing.T, res armory.Result) Value {
	t.Helper()
	v, ok := res.Value.(Value)
	if !ok {
		t.Fatalf("Value is %T, want Value: %+v", res.Value, res)
	}
	return v
}

func TestCLISpecAndManifest(t *testing.T) {
	c := NewCLI(Options{})
	var s map[string]any
	if err := json.Unmarshal(c.Spec().InputSchema, &s); err != nil {
		t.Fatal(err)
	}
	props := s["properties"].(map[string]any)
	for _, k := range []string{"command", "cwd", "timeout_secs"} {
		if props[k] == nil {
			t.Errorf("schema lacks %s: %s", k, c.Spec().InputSchema)
		}
	}
	if max := props["timeout_secs"].(map[string]any)["maximum"]; max != float64(600) {
		t.Errorf("timeout_secs maximum %v, want 600", max)
	}
	if !json.Valid(c.Spec().OutputSchema) {
		t.Error("output schema is not JSON")
	}
	m := c.Manifest()
	if m.Danger != armory.DangerDangerous || m.Permission != armory.PermConfirm || m.Category != armory.CatTerminal ||
		!m.Has(armory.CapProcessExec) || !m.Has(armory.CapWriteFS) || len(m.Requires) != 1 || m.Requires[0].Kind != sandbox.RequirementKind {
		t.Errorf("manifest %+v", m)
	}
	p := NewPython(Options{}).Manifest()
	if len(p.Requires) != 2 || p.Requires[1] != (armory.Requirement{Kind: "binary", Name: "python3"}) {
		t.Errorf("python requirements %+v", p.Requires)
	}
}

func TestCLIBasics(t *testing.T) {
	forBackends(t, procBackends, func(t *testing.T, b sandbox.Backend) {
		agent := procAgent(t, b)
		t.Setenv("ARMORY_CLI_SECRET", "hunter2")
		res, progress := call(t, NewCLI(Options{}), agent, map[string]any{
			"command": `pwd; echo "home=$HOME secret=${ARMORY_CLI_SECRET:-none}"; echo oops >&2; exit 3`,
		})
		want := agent.Workspace + "\nhome=" + agent.Workspace + " secret=none\n[stderr]\noops\n[exit code 3]"
		if res.Success || res.Kind != armory.KindOther || res.Text != want {
			t.Fatalf("result %+v\nwant text %q", res, want)
		}
		v := value(t, res)
		if v.ExitCode != 3 || v.Backend != string(b) || v.TimedOut || v.Killed || v.StdoutBytes != int64(len(agent.Workspace)+len(" secret=none\nhome=\n")+len(agent.Workspace)) || v.StderrBytes != 5 || v.Truncated {
			t.Errorf("value %+v", v)
		}
		// The streams are drained apart: only the order within each holds.
		var outMsgs, errMsgs string
		for _, p := range progress {
			if e, ok := strings.CutPrefix(p, "[stderr] "); ok {
				errMsgs += e
			} else {
				outMsgs += p
			}
		}
		if outMsgs != agent.Workspace+"\nhome="+agent.Workspace+" secret=none\n" || errMsgs != "oops\n" {
			t.Errorf("progress %q", progress)
		}
		res, _ = call(t, NewCLI(Options{}), agent, map[string]any{"command": "true"})
		if !res.Success || res.Text != "(no output)" {
			t.Errorf("true: %+v", res)
		}
	})
}

func TestCLIArguments(t *testing.T) {
	needBackend(t, "")
	agent := procAgent(t, "")
	if err := os.MkdirAll(filepath.Join(agent.Workspace, "sub", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(agent.Workspace, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/deeper", filepath.Join(agent.Workspace, "in")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(agent.Workspace, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	realWS, _ := filepath.EvalSymlinks(agent.Workspace)
	cases := []struct {
		name string
		args map[string]any
		kind armory.Kind
		text string // expected text, or a substring of the failure
	}{
		{"cwd", map[string]any{"command": "pwd", "cwd": "sub"}, 0, realWS + "/sub\n"},
		{"cwd @me", map[string]any{"command": "pwd", "cwd": "@me/sub/deeper"}, 0, realWS + "/sub/deeper\n"},
		{"cwd link inside", map[string]any{"command": "pwd", "cwd": "in"}, 0, realWS + "/sub/deeper\n"},
		{"cwd dot", map[string]any{"command": "pwd", "cwd": "."}, 0, agent.Workspace + "\n"},
		{"cwd dotdot", map[string]any{"command": "pwd", "cwd": "../"}, armory.KindPermission, "outside your workspace"},
		{"cwd sneaky dotdot", map[string]any{"command": "pwd", "cwd": "sub/../../x"}, armory.KindPermission, "outside your workspace"},
		{"cwd absolute", map[string]any{"command": "pwd", "cwd": "/etc"}, armory.KindInvalid, "relative to your workspace"},
		{"cwd link outside", map[string]any{"command": "pwd", "cwd": "out"}, armory.KindPermission, "symbolic link"},
		{"cwd missing", map[string]any{"command": "pwd", "cwd": "nope"}, armory.KindNotFound, "does not exist"},
		{"cwd file", map[string]any{"command": "pwd", "cwd": "file"}, armory.KindInvalid, "not a folder"},
		{"cwd other root", map[string]any{"command": "pwd", "cwd": "@org:x/y"}, armory.KindInvalid, "relative"},
		{"no command", map[string]any{}, armory.KindInvalid, "command is required"},
		{"blank command", map[string]any{"command": " \n"}, armory.KindInvalid, "command is required"},
		{"NUL", map[string]any{"command": "echo a\x00b"}, armory.KindInvalid, "NUL"},
		{"command too long", map[string]any{"command": "#" + strings.Repeat("x", CLIMaxCommand)}, armory.KindInvalid, "the limit is 65536"},
		{"command at the limit", map[string]any{"command": "echo ok #" + strings.Repeat("x", CLIMaxCommand-9)}, 0, "ok\n"},
		{"negative timeout", map[string]any{"command": "true", "timeout_secs": -1}, armory.KindInvalid, "timeout_secs"},
		{"unknown argument", map[string]any{"command": "true", "shell": "bash"}, armory.KindInvalid, "unknown argument"},
		{"wrong type", map[string]any{"command": 42}, armory.KindInvalid, "must be a string"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, _ := call(t, NewCLI(Options{}), agent, c.args)
			if c.kind == 0 {
				if !res.Success || res.Text != c.text {
					t.Fatalf("result %+v, want text %q", res, c.text)
				}
				return
			}
			if res.Success || res.Kind != c.kind || !strings.Contains(res.Text, c.text) {
				t.Fatalf("result %+v, want kind %v and %q", res, c.kind, c.text)
			}
		})
	}
	t.Run("no workspace", func(t *testing.T) {
		res, _ := call(t, NewCLI(Options{}), nil, map[string]any{"command": "true"})
		if res.Kind != armory.KindUnavailable {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("unknown backend", func(t *testing.T) {
		a := procAgent(t, "chroot")
		res, _ := call(t, NewCLI(Options{}), a, map[string]any{"command": "true"})
		if res.Kind != armory.KindInvalid || !strings.Contains(res.Text, "unknown backend") {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("missing shell", func(t *testing.T) {
		res, _ := call(t, NewCLI(Options{Shell: "armory-no-such-shell"}), agent, map[string]any{"command": "true"})
		if res.Kind != armory.KindUnavailable || !strings.Contains(res.Text, "not installed") {
			t.Fatalf("%+v", res)
		}
	})
}

// The per-call timeout, its default and its cap hold: each case would run
// for 30 s without them, and then succeed.
func TestCLITimeouts(t *testing.T) {
	needBackend(t, "")
	cases := []struct {
		name string
		opts Options
		args map[string]any
	}{
		{"per call", Options{}, map[string]any{"command": "sleep 30; echo finished", "timeout_secs": 0.3}},
		{"default", Options{Timeout: 300 * time.Millisecond}, map[string]any{"command": "sleep 30; echo finished"}},
		{"capped", Options{Timeout: 100 * time.Millisecond, MaxTimeout: 300 * time.Millisecond}, map[string]any{"command": "sleep 30; echo finished", "timeout_secs": 3600}},
		{"sleep 1e9", Options{}, map[string]any{"command": "echo before; sleep 1e9", "timeout_secs": 0.3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, _ := call(t, NewCLI(c.opts), procAgent(t, ""), c.args)
			v := value(t, res)
			if res.Success || res.Kind != armory.KindTimeout || !v.TimedOut || !v.Killed || strings.Contains(res.Text, "finished") ||
				!strings.Contains(res.Text, "[timed out after ") {
				t.Fatalf("result %+v", res)
			}
		})
	}
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		go func() { time.Sleep(200 * time.Millisecond); cancel() }()
		res, _ := callCtx(t, ctx, NewCLI(Options{}), procAgent(t, ""), map[string]any{"command": "sleep 30; echo finished"})
		if v := value(t, res); res.Success || !v.Killed || v.KillReason != "canceled" || !strings.Contains(res.Text, "[canceled") {
			t.Fatalf("result %+v", res)
		}
	})
	// Canceled before the command started: a cancel, as once it runs, not
	// an internal failure.
	t.Run("canceled before start", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, _ := callCtx(t, ctx, NewCLI(Options{}), procAgent(t, ""), map[string]any{"command": "echo ran"})
		if res.Success || res.Kind != armory.KindOther || !strings.Contains(res.Text, "canceled before the command started") {
			t.Fatalf("result %+v", res)
		}
	})
}

// Attacks on the bounds, through the tool.
func TestCLIAttacks(t *testing.T) {
	cases := []struct {
		name    string
		opts    Options
		command string
		timeout float64
		check   func(t *testing.T, res armory.Result, v Value, progress []string)
	}{
		{"yes", Options{}, "yes", 0.5, floodCheck},
		{"urandom", Options{MaxOutput: 1000}, "cat /dev/urandom", 0.5, floodCheck},
		{"urandom on stderr", Options{MaxOutput: 4096}, "cat /dev/urandom >&2", 0.5, func(t *testing.T, res armory.Result, v Value, progress []string) {
			if !v.Truncated || v.StderrBytes <= 4096 || !strings.Contains(res.Text, "[stderr]\n") || !strings.Contains(res.Text, fmt.Sprintf("\n(%d bytes, truncated)", v.StderrBytes-4096)) {
				t.Errorf("stderr flood: %+v", v)
			}
		}},
		{"stdin", Options{}, `cat; read x; echo "read=$?"`, 30, func(t *testing.T, res armory.Result, v Value, _ []string) {
			if !res.Success || res.Text != "read=1\n" {
				t.Errorf("stdin is not empty: %+v", res)
			}
		}},
		{"fork bomb", Options{Limits: sandbox.Limits{Processes: 64}}, "f(){ f | f & }; f; sleep 30", 20, func(t *testing.T, res armory.Result, v Value, _ []string) {
			// Root: the watchdog kills the run; non-root: forks fail (EAGAIN).
			if res.Success || !v.Killed && !strings.Contains(res.Text, "fork") {
				t.Errorf("fork bomb not bounded: %+v", res)
			}
			if v.Killed && v.KillReason != "process limit" && v.KillReason != "timeout" {
				t.Errorf("kill reason %q", v.KillReason)
			}
		}},
		{"memory bomb", Options{Limits: sandbox.Limits{Memory: 256 << 20}}, `x=$(head -c 400000000 /dev/zero | tr '\0' a); echo survived ${#x}`, 60, func(t *testing.T, res armory.Result, v Value, _ []string) {
			if res.Success || strings.Contains(res.Text, "survived 400000000") {
				t.Errorf("400 MB string under a 256 MiB RLIMIT_AS: %+v", res)
			}
		}},
		{"memory control", Options{Limits: sandbox.Limits{Memory: 256 << 20}}, `x=$(head -c 10000000 /dev/zero | tr '\0' a); echo survived ${#x}`, 60, func(t *testing.T, res armory.Result, v Value, _ []string) {
			if !res.Success || res.Text != "survived 10000000\n" {
				t.Errorf("a 10 MB string under 256 MiB failed: %+v", res)
			}
		}},
		{"disk fill", Options{Limits: sandbox.Limits{FileSize: 8 << 20}}, "dd if=/dev/zero of=big bs=1M count=64 2>&1", 60, func(t *testing.T, res armory.Result, v Value, _ []string) {
			if res.Success || v.ExitCode == 0 || (v.Signal != "SIGXFSZ" && !strings.Contains(res.Text, "too large")) {
				t.Errorf("dd past RLIMIT_FSIZE: %+v", res)
			}
		}},
		{"tmp fill", Options{Limits: sandbox.Limits{FileSize: 8 << 20}}, `dd if=/dev/zero of="$TMPDIR/big" bs=1M count=64 2>&1`, 60, func(t *testing.T, res armory.Result, v Value, _ []string) {
			if res.Success {
				t.Errorf("64 MB in TMPDIR past RLIMIT_FSIZE: %+v", res)
			}
		}},
	}
	forBackends(t, procBackends, func(t *testing.T, b sandbox.Backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if c.name == "fork bomb" {
					testenv.LookPath(t, "bash", "apt-get install bash")
					c.opts.Shell = "bash"
				}
				agent := procAgent(t, b)
				res, progress := call(t, NewCLI(c.opts), agent, map[string]any{"command": c.command, "timeout_secs": c.timeout})
				c.check(t, res, value(t, res), progress)
				if c.name == "disk fill" {
					if fi, err := os.Stat(filepath.Join(agent.Workspace, "big")); err != nil || fi.Size() > 8<<20 {
						t.Errorf("big: %v", err)
					}
				}
			})
		}
	})
}

// floodCheck: endless output is cut at the cap, the run ends at the
// timeout, and progress saw no more than the kept bytes.
func floodCheck(t *testing.T, res armory.Result, v Value, progress []string) {
	t.Helper()
	if res.Kind != armory.KindTimeout || !v.Truncated || v.StdoutBytes <= MaxOutput/64 {
		t.Errorf("flood: kind %v value %+v", res.Kind, v)
	}
	if len(res.Text) > MaxOutput*3+200 { // invalid UTF-8 may become 3-byte U+FFFD
		t.Errorf("result text %d bytes", len(res.Text))
	}
	seen := 0
	for _, p := range progress {
		seen += len(p)
	}
	if seen == 0 || seen > MaxOutput*3+200 {
		t.Errorf("progress carried %d bytes", seen)
	}
}

// A 1 GB line without a newline is drained to the end, not kept.
func TestCLIGigabyteLine(t *testing.T) {
	needBackend(t, "")
	res, progress := call(t, NewCLI(Options{}), procAgent(t, ""), map[string]any{"command": "head -c 1000000000 /dev/zero", "timeout_secs": 120})
	v := value(t, res)
	if !res.Success || v.StdoutBytes != 1e9 || !v.Truncated || !strings.HasSuffix(res.Text, fmt.Sprintf("\n(%d bytes, truncated)", int64(1e9)-MaxOutput)) {
		t.Fatalf("value %+v, text ends %q", v, res.Text[max(0, len(res.Text)-60):])
	}
	seen := 0
	for _, p := range progress {
		seen += len(p)
		if len(p) > sandbox.LineHold+32<<10 {
			t.Errorf("a progress message of %d bytes", len(p))
		}
	}
	if seen > MaxOutput+100 {
		t.Errorf("progress carried %d bytes", seen)
	}
}

// Processes that try to outlive the command are killed, and the call does
// not wait for them although they hold the output pipe.
func TestCLIEscapes(t *testing.T) {
	cases := []struct {
		name, script string
		timeout      float64
	}{
		{"background holds pipe", "(sleep 100 %s &); echo done", 30},
		{"setsid", "setsid sleep 100 %s & echo done", 30},
		{"double fork setsid", "(setsid sleep 100 %s &); echo done", 30},
		{"setsid then timeout", "setsid sleep 100 %s & echo done; sleep 1e9", 0.3},
	}
	forBackends(t, procBackends, func(t *testing.T, b sandbox.Backend) {
		if b != sandbox.BackendBwrap && !sandbox.Detect().HelperPIDNamespace {
			t.Skip("the helper has no PID namespace here: double-forked escapes survive (documented)")
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := testenv.Marker()
				res, _ := call(t, NewCLI(Options{}), procAgent(t, b), map[string]any{"command": fmt.Sprintf(c.script, m), "timeout_secs": c.timeout})
				if !strings.HasPrefix(res.Text, "done\n") || (c.timeout > 1) != res.Success {
					t.Errorf("result %+v", res)
				}
				if pids := testenv.PIDsWith(m, true); len(pids) > 0 {
					t.Errorf("escaped processes survived the call: %v", pids)
				}
			})
		}
	})
}

func TestCLIWriteOutsideWorkspace(t *testing.T) {
	forBackends(t, confiningBackends, func(t *testing.T, b sandbox.Backend) {
		agent := procAgent(t, b)
		parent := filepath.Dir(agent.Workspace)
		etc := "/etc/armory-cli-test-" + testenv.Marker()
		t.Cleanup(func() { os.Remove(etc) })
		for _, target := range []string{etc, filepath.Join(parent, "escape"), "/var/tmp/armory-cli-test-" + testenv.Marker(), "/usr/bin/armory-cli-test"} {
			t.Cleanup(func() { os.Remove(target) })
			res, _ := call(t, NewCLI(Options{}), agent, map[string]any{"command": fmt.Sprintf(`echo x > %q`, target)})
			// Under bwrap /tmp is a private tmpfs: a write there may succeed
			// but never reaches the host.
			privateTmp := b == sandbox.BackendBwrap && strings.HasPrefix(target, "/tmp/")
			if _, err := os.Stat(target); err == nil || res.Success && !privateTmp {
				t.Errorf("wrote %s: %+v", target, res)
			}
		}
		res, _ := call(t, NewCLI(Options{}), agent, map[string]any{"command": `echo x > "$HOME/../escape2"; echo in > inside; cat inside`})
		if _, err := os.Stat(filepath.Join(parent, "escape2")); err == nil || !strings.HasPrefix(res.Text, "in\n") {
			t.Errorf("workspace parent writable or workspace not: %+v", res)
		}
	})
}

func TestCLINetwork(t *testing.T) {
	testenv.LookPath(t, "bash", "apt-get install bash")
	cmd := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && head -n1 <&3`, testenv.HelloServer(t).Port)
	cli := NewCLI(Options{Shell: "bash"})
	forBackends(t, confiningBackends, func(t *testing.T, b sandbox.Backend) {
		if b == sandbox.BackendLandlock && sandbox.Detect().LandlockABI < 4 {
			t.Skip("Landlock ABI < 4 cannot restrict TCP (documented)")
		}
		agent := procAgent(t, b)
		res, _ := call(t, cli, agent, map[string]any{"command": cmd})
		if res.Success || strings.Contains(res.Text, "hello") {
			t.Errorf("reached the listener without a network grant: %+v", res)
		}
		agent.Sandbox.Network = true
		res, _ = call(t, cli, agent, map[string]any{"command": cmd})
		if !res.Success || res.Text != "hello\n" {
			t.Errorf("could not reach the listener with a network grant: %+v", res)
		}
	})
}

// The tool is safe for concurrent use: parallel calls keep their outputs
// and workspaces apart.
func TestCLIConcurrent(t *testing.T) {
	needBackend(t, "")
	cli := NewCLI(Options{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := procAgent(t, "")
			res, _ := call(t, cli, agent, map[string]any{"command": fmt.Sprintf("echo %d > f; cat f; pwd", i)})
			if want := fmt.Sprintf("%d\n%s\n", i, agent.Workspace); res.Text != want {
				t.Errorf("call %d: %q, want %q", i, res.Text, want)
			}
		}()
	}
	wg.Wait()
}

func TestLineProgressThroughTool(t *testing.T) {
	needBackend(t, "")
	res, progress := call(t, NewCLI(Options{}), procAgent(t, ""), map[string]any{"command": `printf 'a\nb'; sleep 0.1; printf 'c\n'; printf 'e\n' >&2; head -c 10000 /dev/zero | tr '\0' x`})
	if !res.Success {
		t.Fatalf("%+v", res)
	}
	all := strings.Join(progress, "")
	if !strings.HasPrefix(all, "a\n") || !strings.Contains(all, "bc\n") || !strings.Contains(all, "[stderr] e\n") || strings.Count(all, "x") != 10000 {
		t.Errorf("progress %q", progress)
	}
	for _, p := range progress {
		if len(p) > sandbox.LineHold+32<<10 {
			t.Errorf("progress message of %d bytes", len(p))
		}
	}
}

// FuzzResolveCwd: whatever the cwd argument, the result is an error or an
// existing folder inside the workspace.
func FuzzResolveCwd(f *testing.F) {
	for _, s := range []string{"", ".", "sub", "@me/sub", "../x", "sub/../..", "/etc", "out", "in", "@org:x", "sub//deeper/", "a\x00b", "…", "sub/./deeper/.."} {
		f.Add(s)
	}
	ws := f.TempDir()
	for _, d := range []string{"sub/deeper"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	_ = os.Symlink(f.TempDir(), filepath.Join(ws, "out"))
	_ = os.Symlink("sub", filepath.Join(ws, "in"))
	realWS, _ := filepath.EvalSymlinks(ws)
	f.Fuzz(func(t *testing.T, cwd string) {
		dir, err := resolveCwd("tool.cli", ws, cwd)
		if err != nil {
			if k := armory.KindOf(err); k != armory.KindInvalid && k != armory.KindPermission && k != armory.KindNotFound {
				t.Fatalf("%q: error kind %v: %v", cwd, k, err)
			}
			return
		}
		if dir == "" {
			return
		}
		rel, rerr := filepath.Rel(realWS, dir)
		if rerr != nil || rel == ".." || strings.HasPrefix(rel, "../") || !filepath.IsAbs(dir) {
			t.Fatalf("%q resolved to %q, outside %q", cwd, dir, realWS)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("%q resolved to %q: not a folder", cwd, dir)
		}
	})
}

// TestCLIMemoryLimitTooLow: a memory limit too low for the sandbox to start
// a command is an invalid call that names the limit and the minimum, not a
// crash in the command's stderr; a limit at the minimum runs the command.
func TestCLIMemoryLimitTooLow(t *testing.T) {
	forBackends(t, procBackends, func(t *testing.T, b sandbox.Backend) {
		agent := procAgent(t, b)
		res, _ := call(t, NewCLI(Options{Limits: sandbox.Limits{Memory: 4 << 20}}), agent, map[string]any{"command": "echo ran"})
		if res.Success || res.Kind != armory.KindInvalid || !strings.Contains(res.Text, "4194304 bytes (4 MiB)") || !strings.Contains(res.Text, "minimum of 8388608 bytes (8 MiB)") {
			t.Fatalf("tool.cli under a 4 MiB limit: %+v", res)
		}
		res, _ = call(t, NewCLI(Options{Limits: sandbox.Limits{Memory: sandbox.MinMemory}}), agent, map[string]any{"command": "echo ran"})
		if !res.Success || res.Text != "ran\n" {
			t.Fatalf("tool.cli under the minimum limit: %+v", res)
		}
	})
}
