package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
)

// checkCapped verifies the per-stream cap: exactly max bytes kept, the
// marker counting the dropped bytes, and the progress callback having seen
// exactly the kept bytes plus the marker.
func checkCapped(t *testing.T, got []byte, total int64, max int, seen []byte) {
	t.Helper()
	if total <= int64(max) {
		t.Fatalf("total %d not above the cap %d: attack did not produce output", total, max)
	}
	want := fmt.Sprintf("\n(%d bytes, truncated)", total-int64(max))
	if len(got) != max+len(want) || string(got[max:]) != want {
		t.Errorf("kept %d bytes ending %q, want %d + %q", len(got), got[max:], max, want)
	}
	if string(seen) != string(got) {
		t.Errorf("progress saw %d bytes, Report has %d", len(seen), len(got))
	}
}

type recorder struct {
	mu     sync.Mutex
	stdout []byte
	stderr []byte
}

func (r *recorder) fn(stream string, chunk []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if stream == "stdout" {
		r.stdout = append(r.stdout, chunk...)
	} else {
		r.stderr = append(r.stderr, chunk...)
	}
}

func TestOutputFlood(t *testing.T) {
	cases := []struct {
		name    string
		argv    []string
		timeout time.Duration
		max     int
		stderr  bool
	}{
		{"yes", []string{"yes"}, time.Second, 0, false},
		{"urandom", []string{"cat", "/dev/urandom"}, time.Second, 1000, false},
		{"urandom on stderr", []string{"sh", "-c", "cat /dev/urandom >&2"}, time.Second, 4096, true},
		// A 1 GB line without a newline: drained to the end, not kept.
		{"1GB line", []string{"head", "-c", "1000000000", "/dev/zero"}, 2 * time.Minute, 0, false},
	}
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				rec := &recorder{}
				p := Confinement{Backend: b, Workspace: ws(t), Timeout: c.timeout, MaxOutput: c.max}
				out := run(t, p, rec.fn, c.argv...)
				max := c.max
				if max == 0 {
					max = DefaultMaxOutput
				}
				if c.stderr {
					checkCapped(t, out.Stderr, out.StderrTotal, max, rec.stderr)
				} else {
					checkCapped(t, out.Stdout, out.StdoutTotal, max, rec.stdout)
				}
				if c.name == "1GB line" && !out.TimedOut && (out.ExitCode != 0 || out.StdoutTotal != 1e9) {
					t.Errorf("1 GB line: exit %d, total %d (drain must not stop early)", out.ExitCode, out.StdoutTotal)
				}
				if c.name != "1GB line" && !out.TimedOut {
					t.Errorf("endless output ended without the timeout: %+v", out)
				}
				checkClean(t, "")
			})
		}
	})
}

func TestTimeoutKillsTree(t *testing.T) {
	cases := []struct {
		name   string
		script string // %s is the marker
	}{
		{"sleep", "sleep 1e9 %s"},
		{"background holds pipe", "(sleep 1000 %s &); sleep 1e9"},
		{"setsid escape", "setsid sleep 1000 %s & sleep 1e9"},
		{"double fork setsid", "(setsid sleep 1000 %s &) ; sleep 1e9"},
	}
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := testenv.Marker()
				out := run(t, Confinement{Backend: b, Workspace: ws(t), Timeout: 300 * time.Millisecond}, nil,
					"sh", "-c", fmt.Sprintf(c.script, m))
				if !out.TimedOut || !out.Killed || out.KillReason != "timeout" || out.Signal != "SIGKILL" {
					t.Errorf("outcome %+v", out)
				}
				checkClean(t, m)
			})
		}
	})
}

// Escapes that outlive a command which exits on its own: Run must not wait
// for them (they hold the pipes) and must kill them.
func TestExitKillsLeftovers(t *testing.T) {
	cases := []struct {
		name   string
		script string
	}{
		{"background holds pipe", "(sleep 100 %s &); echo done"},
		{"setsid escape", "setsid sleep 1000 %s & echo done; exit 0"},
		{"double fork setsid", "(setsid sleep 1000 %s &); echo done"},
	}
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		if b == BackendNone || b == BackendLandlock {
			if !Detect().HelperPIDNamespace {
				t.Skip("helper has no PID namespace here: double-forked escapes survive (documented)")
			}
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				m := testenv.Marker()
				out := run(t, Confinement{Backend: b, Workspace: ws(t), Timeout: time.Minute}, nil,
					"sh", "-c", fmt.Sprintf(c.script, m))
				if out.ExitCode != 0 || out.Killed || string(out.Stdout) != "done\n" {
					t.Errorf("outcome %+v stdout %q stderr %q", out, out.Stdout, out.Stderr)
				}
				checkClean(t, m)
			})
		}
	})
}

// A fork bomb never raises the machine's process count by more than the
// limit (plus slack for the rest of the machine): with a pids cgroup the
// kernel refuses the forks and the run ends at the first refusal. Under the
// watchdog fallback (no usable cgroup: skipped locally, a failure in CI)
// the bomb is only bounded coarsely.
func TestForkBomb(t *testing.T) {
	const limit = 64
	bombs := []string{"f(){ f | f & }; f; sleep 30", ":(){ :|:& };:; wait"}
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		for _, bomb := range bombs {
			t.Run(bomb, func(t *testing.T) {
				m := "armory-forkbomb-" + testenv.Marker()
				p := Confinement{Backend: b, Workspace: ws(t), Timeout: 20 * time.Second, Limits: Limits{Processes: limit}}
				baseline := countProcs()
				stop := sampleProcs()
				out := run(t, p, nil, "bash", "-c", bomb, m)
				peak := stop()
				t.Logf("baseline %d peak %d; exit %d killed %v reason %q by %s hits %d stderr %.100q",
					baseline, peak, out.ExitCode, out.Killed, out.KillReason, out.ProcessLimit, out.ProcessLimitHits, out.Stderr)
				checkClean(t, m)
				if out.ProcessLimit != limitByCgroup {
					// Watchdog: killed (root) or forks failed (non-root).
					if !out.Killed && !strings.Contains(string(out.Stderr), "fork") {
						t.Errorf("fork bomb not bounded: %+v stderr %q", out, out.Stderr)
					}
					if out.Killed && out.KillReason != "process limit" && out.KillReason != "timeout" {
						t.Errorf("kill reason %q", out.KillReason)
					}
					requirePidsCgroup(t)
					return
				}
				if peak > baseline+limit+procSlack {
					t.Errorf("process count rose from %d to %d under a limit of %d", baseline, peak, limit)
				}
				// The bomb either hits the limit (the run ends at the first refused
				// fork) or, as ":(){ :|:& };:; wait" can, its shell exits before
				// the tree reaches the limit and Run kills the orphans it left in
				// the group (checkClean above). Either way the peak stays bounded.
				if out.Killed && (out.KillReason != "process limit" || out.ProcessLimitHits == 0) {
					t.Errorf("outcome %+v", out)
				}
				if !out.Killed && out.ExitCode != 0 && out.ProcessLimitHits == 0 {
					t.Errorf("the bomb failed without hitting the limit: %+v", out)
				}
				if g := runGroups(t); len(g) > 0 {
					t.Errorf("run groups left behind: %v", g)
				}
			})
		}
	})
}

func TestProcessLimitAllowsSmallTrees(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		p := Confinement{Backend: b, Workspace: ws(t), Limits: Limits{Processes: 64}}
		out := run(t, p, nil, "sh", "-c", "for i in 1 2 3 4 5 6 7 8; do sleep 0.3 & done; wait; echo ok")
		if out.Killed || string(out.Stdout) != "ok\n" {
			t.Errorf("8 processes under a limit of 64 were stopped: %+v", out)
		}
	})
}

func TestMemoryBomb(t *testing.T) {
	const limit = 256 << 20
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		t.Run("shell variable", func(t *testing.T) {
			p := Confinement{Backend: b, Workspace: ws(t), Limits: Limits{Memory: limit}}
			out := run(t, p, nil, "bash", "-c", `x=$(head -c 400000000 /dev/zero | tr '\0' a); echo survived ${#x}`)
			if strings.Contains(string(out.Stdout), "survived 400000000") {
				t.Fatalf("400 MB string held under a %d byte RLIMIT_AS: %+v", limit, out)
			}
			// The same script with a smaller string fits: the limit, not the
			// script, is what stops the bomb.
			out = run(t, p, nil, "bash", "-c", `x=$(head -c 10000000 /dev/zero | tr '\0' a); echo survived ${#x}`)
			if string(out.Stdout) != "survived 10000000\n" {
				t.Fatalf("control run failed: %+v %q", out, out.Stderr)
			}
		})
		t.Run("python", func(t *testing.T) {
			testenv.LookPath(t, "python3", "apt-get install python3")
			p := Confinement{Backend: b, Workspace: ws(t), Limits: Limits{Memory: limit}}
			out := run(t, p, nil, "python3", "-c", "x = bytearray(1 << 30); print('survived')")
			if out.ExitCode == 0 || strings.Contains(string(out.Stdout), "survived") || !strings.Contains(string(out.Stderr), "MemoryError") {
				t.Fatalf("1 GiB allocation under a 256 MiB RLIMIT_AS: %+v %q", out, out.Stderr)
			}
		})
	})
}

func TestDiskFill(t *testing.T) {
	const limit = 8 << 20
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		w := ws(t)
		p := Confinement{Backend: b, Workspace: w, Limits: Limits{FileSize: limit}}
		out := run(t, p, nil, "dd", "if=/dev/zero", "of=big", "bs=1M", "count=64")
		if out.ExitCode == 0 || out.Signal != "SIGXFSZ" && !strings.Contains(string(out.Stderr), "too large") {
			t.Errorf("dd past RLIMIT_FSIZE: %+v %q", out, out.Stderr)
		}
		fi, err := os.Stat(filepath.Join(w, "big"))
		if err != nil || fi.Size() > limit {
			t.Errorf("big: %v, size %d > %d", err, fi.Size(), limit)
		}
	})
}

func TestCPULimit(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		p := Confinement{Backend: b, Workspace: ws(t), Timeout: time.Minute, Limits: Limits{CPU: time.Second}}
		out := run(t, p, nil, "sh", "-c", "while :; do :; done")
		if out.TimedOut || (out.Signal != "SIGXCPU" && out.Signal != "SIGKILL") {
			t.Errorf("busy loop under RLIMIT_CPU=1s: %+v", out)
		}
	})
}

// The rlimits reach the command, and only the command.
func TestRlimitsApplied(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		self := func() string {
			o, _ := exec.Command("bash", "-c", "ulimit -v -f -u -t -n").Output()
			return string(o)
		}
		before := self()
		p := Confinement{Backend: b, Workspace: ws(t), Limits: Limits{
			Memory: 300 << 20, FileSize: 5 << 20, Processes: 50, CPU: 7 * time.Second, OpenFiles: 99,
		}}
		out := run(t, p, nil, "bash", "-c", "ulimit -v; ulimit -f; ulimit -u; ulimit -t; ulimit -n")
		want := fmt.Sprintf("%d\n%d\n50\n7\n99\n", 300<<10, 5<<10)
		if string(out.Stdout) != want {
			t.Errorf("limits in the sandbox:\n%s\nwant:\n%s(stderr %q)", out.Stdout, want, out.Stderr)
		}
		if after := self(); after != before {
			t.Errorf("the parent's limits changed: %q -> %q", before, after)
		}
	})
}

func TestStdinClosed(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		out := run(t, Confinement{Backend: b, Workspace: ws(t), Timeout: time.Minute}, nil,
			"sh", "-c", `cat; read x; echo "read=$?"`)
		if out.TimedOut || string(out.Stdout) != "read=1\n" {
			t.Errorf("stdin: %+v %q", out, out.Stdout)
		}
	})
}

func TestWriteOutsideWorkspace(t *testing.T) {
	forEach(t, confining, func(t *testing.T, b Backend) {
		parent := t.TempDir()
		w := filepath.Join(parent, "ws")
		extraRW := filepath.Join(parent, "rw")
		for _, d := range []string{w, extraRW} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		etc := "/etc/armory-sandbox-test-" + testenv.Marker()
		varTmp := "/var/tmp/armory-sandbox-test-" + testenv.Marker()
		t.Cleanup(func() { os.Remove(etc); os.Remove(varTmp) })
		cases := []struct {
			name, path string
			ok         bool
		}{
			{"etc", etc, false},
			{"var tmp", varTmp, false},
			{"workspace parent", filepath.Join(w, "..", "escape"), false},
			{"usr bin", "/usr/bin/armory-sandbox-test", false},
			{"workspace", filepath.Join(w, "inside"), true},
			{"extra writable", filepath.Join(extraRW, "x"), true},
		}
		p := Confinement{Backend: b, Workspace: w, Writable: []string{extraRW}}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				out := run(t, p, nil, "sh", "-c", `echo x > "$1"`, "sh", c.path)
				_, statErr := os.Stat(c.path)
				// Under bwrap, /tmp is a private tmpfs: a write there may
				// succeed but never reaches the host.
				privateTmp := b == BackendBwrap && strings.HasPrefix(filepath.Clean(c.path), "/tmp/")
				if c.ok != (statErr == nil) || (!privateTmp || c.ok) && c.ok != (out.ExitCode == 0) {
					t.Errorf("write %s: exit %d, exists %v, want allowed=%v (%q)", c.path, out.ExitCode, statErr == nil, c.ok, out.Stderr)
				}
			})
		}
		t.Run("home dotdot", func(t *testing.T) {
			out := run(t, p, nil, "sh", "-c", `touch "$HOME/../x"`)
			_, err := os.Stat(filepath.Join(parent, "x"))
			if err == nil || out.ExitCode == 0 && b != BackendBwrap {
				t.Errorf("touch $HOME/../x succeeded: %+v", out)
			}
		})
		t.Run("private tmp", func(t *testing.T) {
			name := "armory-sandbox-private-" + testenv.Marker()
			out := run(t, p, nil, "sh", "-c", `echo x > "$TMPDIR/$1" && cat "$TMPDIR/$1"`, "sh", name)
			if string(out.Stdout) != "x\n" {
				t.Fatalf("TMPDIR not writable: %+v %q", out, out.Stderr)
			}
			if _, err := os.Stat(filepath.Join(os.TempDir(), name)); err == nil {
				t.Errorf("the sandbox's temp file leaked to the host's %s", os.TempDir())
			}
		})
		if b == BackendBwrap {
			t.Run("read-only inside workspace", func(t *testing.T) {
				ro := filepath.Join(w, "ro")
				if err := os.Mkdir(ro, 0o755); err != nil {
					t.Fatal(err)
				}
				p := p
				p.ReadOnly = []string{ro}
				out := run(t, p, nil, "sh", "-c", "touch ro/x")
				if _, err := os.Stat(filepath.Join(ro, "x")); out.ExitCode == 0 || err == nil {
					t.Errorf("wrote into a read-only bind: %+v", out)
				}
			})
			t.Run("host sockets hidden", func(t *testing.T) {
				out := run(t, p, nil, "sh", "-c", "ls -A /run | wc -l")
				if strings.TrimSpace(string(out.Stdout)) != "0" {
					t.Errorf("/run not empty in the sandbox: %q", out.Stdout)
				}
			})
		}
	})
}

func TestNetwork(t *testing.T) {
	testenv.LookPath(t, "bash", "apt-get install bash")
	port := testenv.HelloServer(t).Port
	script := fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && head -n1 <&3`, port)
	forEach(t, confining, func(t *testing.T, b Backend) {
		if b == BackendLandlock && Detect().LandlockABI < 4 {
			t.Skip("Landlock ABI < 4 cannot restrict TCP (documented)")
		}
		denied := run(t, Confinement{Backend: b, Workspace: ws(t)}, nil, "bash", "-c", script)
		if denied.ExitCode == 0 || strings.Contains(string(denied.Stdout), "hello") {
			t.Errorf("reached the parent's listener without Network: %+v %q", denied, denied.Stdout)
		}
		granted := run(t, Confinement{Backend: b, Workspace: ws(t), Network: true}, nil, "bash", "-c", script)
		if granted.ExitCode != 0 || string(granted.Stdout) != "hello\n" {
			t.Errorf("Network: true could not connect: %+v %q", granted, granted.Stderr)
		}
	})
}

// The bwrap sandbox has no capabilities even though we may be root.
func TestNoCapabilities(t *testing.T) {
	forEach(t, confining, func(t *testing.T, b Backend) {
		out := run(t, Confinement{Backend: b, Workspace: ws(t)}, nil, "grep", "^CapEff", "/proc/self/status")
		if !strings.Contains(string(out.Stdout), "0000000000000000") {
			t.Errorf("capabilities in the sandbox: %q", out.Stdout)
		}
	})
}

// A process inside cannot see or signal processes outside.
func TestCannotKillOutside(t *testing.T) {
	forEach(t, confining, func(t *testing.T, b Backend) {
		m := testenv.Marker()
		victim := exec.Command("sleep", "1000", m)
		if err := victim.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { victim.Process.Kill(); victim.Wait() }()
		out := run(t, Confinement{Backend: b, Workspace: ws(t)}, nil, "sh", "-c", fmt.Sprintf("kill -9 %d", victim.Process.Pid))
		if out.ExitCode == 0 {
			t.Errorf("kill of an outside pid succeeded: %+v", out)
		}
		if len(testenv.PIDsWith(m, false)) != 1 {
			t.Errorf("victim killed from inside the sandbox")
		}
	})
}
