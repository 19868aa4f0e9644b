package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
)

func TestRunBasics(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		w := ws(t)
		if err := os.Mkdir(filepath.Join(w, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("ARMORY_TEST_SECRET", "leak")
		t.Setenv("ARMORY_TEST_PASS", "passed")
		p := Confinement{
			Backend: b, Workspace: w, Dir: "sub",
			Env:     map[string]string{"EXTRA": "x y"},
			PassEnv: []string{"ARMORY_TEST_PASS", "ARMORY_TEST_UNSET"},
		}
		out := run(t, p, nil, "sh", "-c", `pwd; echo err >&2; env | cut -d= -f1 | sort | tr '\n' ' '; echo; echo "$HOME|$TERM|$EXTRA|$ARMORY_TEST_PASS"; echo t > "$TMPDIR/t" && cat "$TMPDIR/t"; exit 7`)
		if out.ExitCode != 7 || out.Killed || out.TimedOut || out.Signal != "" || out.Backend != b {
			t.Fatalf("outcome %+v", out)
		}
		lines := strings.Split(string(out.Stdout), "\n")
		if lines[0] != filepath.Join(w, "sub") {
			t.Errorf("working dir %q, want %q", lines[0], filepath.Join(w, "sub"))
		}
		names := strings.Fields(lines[1])
		want := []string{"ARMORY_TEST_PASS", "EXTRA", "HOME", "LANG", "PATH", "PWD", "SHLVL", "TERM", "TMPDIR"}
		for _, n := range names {
			if !slices.Contains(want, n) && n != "_" && n != "OLDPWD" {
				t.Errorf("unexpected variable %s in the sandbox (have %v)", n, names)
			}
		}
		if lines[2] != w+"|dumb|x y|passed" {
			t.Errorf("env values %q", lines[2])
		}
		if lines[3] != "t" {
			t.Errorf("TMPDIR not writable: %q / %q", lines[3], out.Stderr)
		}
		if string(out.Stderr) != "err\n" || out.StderrTotal != 4 {
			t.Errorf("stderr %q total %d", out.Stderr, out.StderrTotal)
		}
		if out.StdoutTotal != int64(len(out.Stdout)) {
			t.Errorf("StdoutTotal %d != len %d", out.StdoutTotal, len(out.Stdout))
		}
		checkClean(t, "")
	})
}

func TestPolicyErrors(t *testing.T) {
	w := ws(t)
	file := filepath.Join(w, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	cases := []struct {
		name string
		p    Confinement
		argv []string
		want error
	}{
		{"no workspace", Confinement{}, []string{"true"}, ErrPolicy},
		{"relative workspace", Confinement{Workspace: "rel"}, []string{"true"}, ErrPolicy},
		{"missing workspace", Confinement{Workspace: filepath.Join(w, "nope")}, []string{"true"}, ErrPolicy},
		{"workspace is a file", Confinement{Workspace: file}, []string{"true"}, ErrPolicy},
		{"root workspace", Confinement{Workspace: "/"}, []string{"true"}, ErrPolicy},
		{"dir outside", Confinement{Workspace: w, Dir: outside}, []string{"true"}, ErrPolicy},
		{"dir escapes", Confinement{Workspace: w, Dir: "../"}, []string{"true"}, ErrPolicy},
		{"relative bind", Confinement{Workspace: w, ReadOnly: []string{"etc"}}, []string{"true"}, ErrPolicy},
		{"missing bind", Confinement{Workspace: w, Writable: []string{filepath.Join(w, "nope")}}, []string{"true"}, ErrPolicy},
		{"negative timeout", Confinement{Workspace: w, Timeout: -1}, []string{"true"}, ErrPolicy},
		{"negative output", Confinement{Workspace: w, MaxOutput: -1}, []string{"true"}, ErrPolicy},
		{"bad env name", Confinement{Workspace: w, Env: map[string]string{"A=B": "x"}}, []string{"true"}, ErrPolicy},
		{"NUL env value", Confinement{Workspace: w, Env: map[string]string{"A": "x\x00"}}, []string{"true"}, ErrPolicy},
		{"bad passenv", Confinement{Workspace: w, PassEnv: []string{""}}, []string{"true"}, ErrPolicy},
		{"unknown backend", Confinement{Workspace: w, Backend: "chroot"}, []string{"true"}, ErrPolicy},
		{"empty argv", Confinement{Workspace: w}, nil, ErrPolicy},
		{"NUL argument", Confinement{Workspace: w}, []string{"echo", "a\x00b"}, ErrPolicy},
		{"not found", Confinement{Workspace: w, Backend: BackendNone}, []string{"armory-no-such-command"}, exec.ErrNotFound},
		{"landlock read-only inside workspace", Confinement{Workspace: w, Backend: BackendLandlock, ReadOnly: []string{w}}, []string{"true"}, ErrPolicy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.p.Backend == BackendLandlock {
				requireBackend(t, BackendLandlock)
			}
			_, err := Run(context.Background(), c.p, c.argv, nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
	t.Run("done context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Run(ctx, Confinement{Workspace: w, Backend: BackendNone}, []string{"true"}, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestDetect(t *testing.T) {
	d := Detect()
	if d != Detect() {
		t.Fatal("Detect is not cached")
	}
	if len(d.Reasons) < 3 {
		t.Errorf("want one reason per backend, got %q", d.Reasons)
	}
	if _, err := exec.LookPath("bwrap"); err == nil && d.Check(BackendBwrap) == nil && d.Best != BackendBwrap {
		t.Errorf("bwrap works but Best = %q", d.Best)
	}
	if d.Best == BackendNone {
		t.Error("none must never be chosen implicitly")
	}
	if err := d.Check(BackendNone); err != nil {
		t.Errorf("helper registered by TestMain, yet: %v", err)
	}
	// An unavailable error carries reasons and matches ErrUnavailable.
	e := (&Detection{Reasons: []string{"a: x", "b: y"}}).Check(BackendAuto)
	var ue *UnavailableError
	if !errors.As(e, &ue) || !errors.Is(e, ErrUnavailable) || len(ue.Reasons) != 2 || !strings.Contains(e.Error(), "b: y") {
		t.Errorf("unavailable error %v", e)
	}
	e = (&Detection{landlockErr: errors.New("landlock: nope")}).Check(BackendLandlock)
	if !errors.Is(e, ErrUnavailable) || !strings.Contains(e.Error(), "landlock: nope") {
		t.Errorf("landlock unavailable error %v", e)
	}
}

func TestExitStatusAndSignal(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		out := run(t, Confinement{Backend: b, Workspace: ws(t)}, nil, "sh", "-c", "kill -TERM $$")
		if out.ExitCode != 128+15 || out.Signal != "SIGTERM" || out.Killed {
			t.Fatalf("outcome %+v", out)
		}
	})
}

func TestCancel(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		m := testenv.Marker()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		progress := func(stream string, chunk []byte) {
			if strings.Contains(string(chunk), "ready") {
				cancel()
			}
		}
		out := runCtx(t, ctx, Confinement{Backend: b, Workspace: ws(t)}, progress, "sh", "-c", "echo ready; sleep 1000 "+m)
		if !out.Killed || out.KillReason != "canceled" || out.TimedOut {
			t.Fatalf("outcome %+v", out)
		}
		checkClean(t, m)
	})
}

func TestNoLeaks(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		w := ws(t)
		run(t, Confinement{Backend: b, Workspace: w}, nil, "true") // warm up pools and timers
		before := numGoroutine()
		for range 5 {
			run(t, Confinement{Backend: b, Workspace: w, Timeout: 200 * time.Millisecond}, nil, "sh", "-c", "(sleep 100 &); yes")
			run(t, Confinement{Backend: b, Workspace: w}, nil, "sh", "-c", "echo hi")
		}
		if after := goroutinesSettled(before); after > before {
			t.Errorf("goroutines: %d before, %d after", before, after)
		}
		checkClean(t, "")
	})
}

// TestTimeoutCountsFromTheCommandsStart: the sandbox's own start is not
// charged to the command's timeout. With a timeout far below any start
// (1 ns), the command is started and then timed out — a timeout the
// caller can read — instead of Run failing as a sandbox that did not start
// (which a loaded machine made of every short timeout).
func TestTimeoutCountsFromTheCommandsStart(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		out := run(t, Confinement{Backend: b, Workspace: ws(t), Timeout: time.Nanosecond}, nil, "sleep", "5")
		if !out.TimedOut || !out.Killed || out.KillReason != "timeout" {
			t.Fatalf("outcome %+v", out)
		}
	})
}

// TestStartBound: a sandbox whose start never completes (its handshake
// never answers) is given up at startBound, apart from the command's own
// Timeout, and nothing of it is left running.
func TestStartBound(t *testing.T) {
	defer func(b time.Duration) { startBound = b }(startBound)
	startBound = 100 * time.Millisecond
	m := "armory-start-bound-" + testenv.Marker()
	r, err := resolve(Confinement{Backend: BackendNone, Workspace: ws(t), Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	hr, hw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer hw.Close()
	cmd := exec.Command("sleep", "60", m)
	l := &launch{r: r, backend: BackendNone, cmd: cmd, own: []*os.File{hr}}
	l.handshake = func(deadline time.Time) (int, bool, int, error) {
		b, err := readAllDeadline(hr, deadline, 1) // nobody writes: waits for the deadline
		return 0, false, -1, fmt.Errorf("no handshake (%q): %w", b, err)
	}
	// Returning at all is the bound: the command's Timeout is an hour.
	_, err = execute(context.Background(), l, &progressSink{})
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("execute = %v, want the start given up at its deadline", err)
	}
	checkClean(t, m)
}
