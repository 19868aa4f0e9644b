package process

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/sandbox"
)

func needPython(t *testing.T, b sandbox.Backend) {
	t.Helper()
	testenv.LookPath(t, "python3", "apt-get install python3")
	needBackend(t, b)
}

// snippets lists what is left in the workspace's .armory folder.
func snippets(t *testing.T, agent *armory.AgentEnv) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(agent.Workspace, PythonDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestPythonRuns(t *testing.T) {
	forBackends(t, procBackends, func(t *testing.T, b sandbox.Backend) {
		needPython(t, b)
		agent := procAgent(t, b)
		if err := os.MkdirAll(filepath.Join(agent.Workspace, "pkg"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(agent.Workspace, "pkg", "helper.py"), []byte("def greet(n):\n    return 'hi ' + n\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		code := "import os, sys\nimport helper\nprint(helper.greet(sys.argv[1]), sys.argv[2:])\nprint(os.getcwd())\nprint('quote \" and \\'', file=sys.stderr)\n"
		res, progress := call(t, NewPython(Options{}), agent, map[string]any{"code": code, "args": []string{"bob", "a b", "-x", "$HOME"}, "cwd": "pkg"})
		want := "hi bob ['a b', '-x', '$HOME']\n" + filepath.Join(agent.Workspace, "pkg") + "\n[stderr]\nquote \" and '\n"
		if !res.Success || res.Text != want {
			t.Fatalf("result %+v\nwant %q", res, want)
		}
		if len(progress) == 0 {
			t.Error("no progress")
		}
		if left := snippets(t, agent); len(left) != 0 {
			t.Errorf("snippets left behind: %v", left)
		}
	})
}

func TestPythonFailures(t *testing.T) {
	needPython(t, "")
	agent := procAgent(t, "")
	cases := []struct {
		name string
		args map[string]any
		kind armory.Kind
		text string
	}{
		{"exception", map[string]any{"code": "raise SystemExit('boom')"}, armory.KindOther, "[stderr]\nboom\n[exit code 1]"},
		{"traceback", map[string]any{"code": "1/0"}, armory.KindOther, "ZeroDivisionError"},
		{"syntax error", map[string]any{"code": "def ("}, armory.KindOther, "SyntaxError"},
		{"no code", map[string]any{}, armory.KindInvalid, "code is required"},
		{"code too big", map[string]any{"code": "#" + strings.Repeat("x", PythonMaxCode)}, armory.KindInvalid, "the limit is 262144"},
		{"args too big", map[string]any{"code": "pass", "args": []string{strings.Repeat("x", PythonMaxArgs)}}, armory.KindInvalid, "the limit is 65536"},
		{"args NUL", map[string]any{"code": "pass", "args": []string{"a\x00"}}, armory.KindInvalid, "NUL"},
		{"args not strings", map[string]any{"code": "pass", "args": []int{1}}, armory.KindInvalid, "args"},
		{"cwd outside", map[string]any{"code": "pass", "cwd": ".."}, armory.KindPermission, "outside"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, _ := call(t, NewPython(Options{}), agent, c.args)
			if res.Success || res.Kind != c.kind || !strings.Contains(res.Text, c.text) {
				t.Fatalf("result %+v, want kind %v and %q", res, c.kind, c.text)
			}
		})
	}
	t.Run("code at the limit", func(t *testing.T) {
		code := "print('ok')\n#" + strings.Repeat("x", PythonMaxCode-13)
		res, _ := call(t, NewPython(Options{}), agent, map[string]any{"code": code})
		if !res.Success || res.Text != "ok\n" {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("no python", func(t *testing.T) {
		res, _ := call(t, NewPython(Options{Python: "armory-no-such-python"}), agent, map[string]any{"code": "pass"})
		if res.Kind != armory.KindUnavailable || !strings.Contains(res.Text, "not installed") {
			t.Fatalf("%+v", res)
		}
	})
	if left := snippets(t, agent); len(left) != 0 {
		t.Errorf("snippets left behind: %v", left)
	}
}

// The snippet is removed whatever ends the run.
func TestPythonSnippetRemoved(t *testing.T) {
	forBackends(t, procBackends, func(t *testing.T, b sandbox.Backend) {
		needPython(t, b)
		cases := []struct {
			name string
			code string
			secs float64
			ctx  func() (context.Context, context.CancelFunc)
			kind armory.Kind
		}{
			{"normal", "import os, sys; print(os.path.exists(sys.argv[0]))", 30, nil, 0},
			{"timeout", "import time\nprint('started', flush=True)\ntime.sleep(1000)", 0.5, nil, armory.KindTimeout},
			{"canceled", "import time\ntime.sleep(1000)", 30, func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(300*time.Millisecond, cancel)
				return ctx, cancel
			}, armory.KindOther},
			{"killed by a signal", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", 30, nil, armory.KindOther},
			{"deletes itself", "import os, sys; os.remove(sys.argv[0]); print('gone')", 30, nil, 0},
			{"memory bomb", "x = bytearray(1 << 30); print('survived')", 30, nil, armory.KindOther},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				agent := procAgent(t, b)
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if c.ctx != nil {
					ctx, cancel = c.ctx()
				}
				defer cancel()
				py := NewPython(Options{Limits: sandbox.Limits{Memory: 256 << 20}})
				res, _ := callCtx(t, ctx, py, agent, map[string]any{"code": c.code, "timeout_secs": c.secs})
				if res.Kind != c.kind || res.Success != (c.name == "normal" || c.name == "deletes itself") {
					t.Fatalf("result %+v", res)
				}
				if c.name == "normal" && res.Text != "True\n" {
					t.Fatalf("the snippet was not where sys.argv[0] says: %+v", res)
				}
				if c.name == "memory bomb" && (strings.HasPrefix(res.Text, "survived") || !strings.Contains(res.Text, "MemoryError")) {
					t.Fatalf("1 GiB under a 256 MiB RLIMIT_AS: %+v", res)
				}
				if left := snippets(t, agent); len(left) != 0 {
					t.Errorf("snippets left behind: %v", left)
				}
			})
		}
	})
}

// A planted .armory never makes tool.python write outside the workspace.
func TestPythonPlantedArmory(t *testing.T) {
	needPython(t, "")
	cases := []struct {
		name  string
		plant func(t *testing.T, ws, outside string)
	}{
		{"symlink to outside", func(t *testing.T, ws, outside string) {
			if err := os.Symlink(outside, filepath.Join(ws, PythonDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"dangling symlink", func(t *testing.T, ws, outside string) {
			if err := os.Symlink(filepath.Join(outside, "new"), filepath.Join(ws, PythonDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"symlink inside", func(t *testing.T, ws, outside string) {
			if err := os.Mkdir(filepath.Join(ws, "elsewhere"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("elsewhere", filepath.Join(ws, PythonDir)); err != nil {
				t.Fatal(err)
			}
		}},
		{"file", func(t *testing.T, ws, outside string) {
			if err := os.WriteFile(filepath.Join(ws, PythonDir), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			agent := procAgent(t, "")
			if err := os.MkdirAll(agent.Workspace, 0o755); err != nil {
				t.Fatal(err)
			}
			outside := t.TempDir()
			c.plant(t, agent.Workspace, outside)
			before := testenv.Snapshot(t, outside)
			res, _ := call(t, NewPython(Options{}), agent, map[string]any{"code": "print('ran')"})
			if res.Success || res.Kind != armory.KindPermission || !strings.Contains(res.Text, ".armory") {
				t.Fatalf("result %+v", res)
			}
			if after := testenv.Snapshot(t, outside); after != before {
				t.Fatalf("outside changed:\n%s\nwas:\n%s", after, before)
			}
		})
	}
	// A snippet the model plants under a guessed name is never reused: the
	// file is created exclusively under a fresh random name.
	t.Run("planted snippet links", func(t *testing.T) {
		agent := procAgent(t, "")
		dir := filepath.Join(agent.Workspace, PythonDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		outside := t.TempDir()
		for _, n := range []string{"py-0.py", "snippet.py"} {
			if err := os.Symlink(filepath.Join(outside, n), filepath.Join(dir, n)); err != nil {
				t.Fatal(err)
			}
		}
		res, _ := call(t, NewPython(Options{}), agent, map[string]any{"code": "print('ran')"})
		if !res.Success || res.Text != "ran\n" {
			t.Fatalf("%+v", res)
		}
		if after := testenv.Snapshot(t, outside); after != "./" {
			t.Fatalf("outside changed: %s", after)
		}
		if left := snippets(t, agent); len(left) != 2 {
			t.Fatalf("planted links touched or snippet left: %v", left)
		}
	})
}

// The code cannot write outside the workspace or reach the network: the
// same sandbox as tool.cli.
func TestPythonConfined(t *testing.T) {
	forBackends(t, confiningBackends, func(t *testing.T, b sandbox.Backend) {
		needPython(t, b)
		agent := procAgent(t, b)
		target := "/etc/armory-python-test-" + testenv.Marker()
		t.Cleanup(func() { os.Remove(target) })
		res, _ := call(t, NewPython(Options{}), agent, map[string]any{"code": "import sys\nopen(sys.argv[1], 'w').write('x')", "args": []string{target}})
		if _, err := os.Stat(target); err == nil || res.Success {
			t.Fatalf("wrote %s: %+v", target, res)
		}
	})
}
