package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
)

// withPool enables the warm pool for one test.
func withPool(t *testing.T, o PoolOptions) {
	t.Helper()
	requireBackend(t, BackendBwrap)
	noForcedWarm(t)
	EnablePool(o)
	t.Cleanup(ClosePool)
}

// noForcedWarm turns ARMORY_TEST_SANDBOX_WARM's forced warm runs off for
// one test (the pool tests count warm and cold runs themselves).
func noForcedWarm(t *testing.T) {
	old := forceWarm
	forceWarm = false
	t.Cleanup(func() { forceWarm = old })
}

// waitReady polls until n sandboxes are ready (bounded by hangGuard).
func waitReady(t *testing.T, n int) {
	t.Helper()
	end := time.Now().Add(hangGuard)
	for CurrentPoolStats().Ready != n {
		if time.Now().After(end) {
			t.Fatalf("pool never had %d ready sandboxes: %+v", n, CurrentPoolStats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// probe prints what a command can observe of its sandbox.
const probe = `echo "pid=$$ ppid=$PPID"; pwd; id -u; hostname; env | sort; ls -A /tmp; ` +
	`ls /proc/self/fd; ulimit -a; grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status; ` +
	`ls /proc | grep -c '^[0-9]'`

// TestPoolWarmRunMatchesCold: a warm sandbox is the cold one, as seen from
// inside (pid, environment, fds, limits, capabilities, /tmp, processes).
func TestPoolWarmRunMatchesCold(t *testing.T) {
	requireBackend(t, BackendBwrap)
	noForcedWarm(t)
	ws := t.TempDir()
	p := Confinement{Backend: BackendBwrap, Workspace: ws, Limits: Limits{Processes: 64, OpenFiles: 256}}
	cold := run(t, p, nil, "sh", "-c", probe)
	if cold.Warm || cold.ExitCode != 0 {
		t.Fatalf("cold run: %+v", cold)
	}
	withPool(t, PoolOptions{PerPolicy: 1})
	before := CurrentPoolStats()
	first := run(t, p, nil, "sh", "-c", probe) // cold, warms one for the next
	waitReady(t, 1)
	warm := run(t, p, nil, "sh", "-c", probe)
	if !warm.Warm || warm.ExitCode != 0 {
		t.Fatalf("second run was not warm: %+v", warm)
	}
	if first.Warm {
		t.Fatal("first run cannot have been warm")
	}
	if string(warm.Stdout) != string(cold.Stdout) || string(warm.Stderr) != string(cold.Stderr) {
		t.Fatalf("warm sandbox differs from cold:\n--- cold\n%s%s\n--- warm\n%s%s", cold.Stdout, cold.Stderr, warm.Stdout, warm.Stderr)
	}
	if st := CurrentPoolStats(); st.Warm-before.Warm != 1 || st.Cold-before.Cold != 1 {
		t.Fatalf("stats %+v (before %+v), want 1 more warm and 1 more cold", st, before)
	}
}

// TestPoolArgvQuoting: every argument reaches the command byte for byte,
// whatever shell syntax it holds (the trampoline quotes each word).
func TestPoolArgvQuoting(t *testing.T) {
	args := []string{"plain", "", "it's", `"double"`, "$(id -u)", "`id`", "a\nb", `back\slash`, "*", "; rm -rf /x", "$HOME", "'", "''", "-c", "tab\there", "ünï"}
	withPool(t, PoolOptions{PerPolicy: 1})
	p := Confinement{Backend: BackendBwrap, Workspace: t.TempDir()}
	argv := append([]string{"sh", "-c", `for a in "$@"; do printf '[%s]\n' "$a"; done`, "sh"}, args...)
	run(t, p, nil, argv...)
	waitReady(t, 1)
	out := run(t, p, nil, argv...)
	if !out.Warm {
		t.Fatalf("not warm: %+v", out)
	}
	var want strings.Builder
	for _, a := range args {
		want.WriteString("[" + a + "]\n")
	}
	if string(out.Stdout) != want.String() {
		t.Fatalf("argv changed on the way:\n got %q\nwant %q", out.Stdout, want.String())
	}
}

// TestPoolNothingCarriesOver: a call's /tmp files and background processes
// do not reach the next call of the same policy.
func TestPoolNothingCarriesOver(t *testing.T) {
	withPool(t, PoolOptions{PerPolicy: 2})
	ws := t.TempDir()
	p := Confinement{Backend: BackendBwrap, Workspace: ws}
	run(t, p, nil, "true")
	waitReady(t, 2)
	a := run(t, p, nil, "sh", "-c", `echo secret > /tmp/left; (sleep 1000 &); echo "$$" > `+filepath.Join(ws, "pid"))
	if !a.Warm || a.ExitCode != 0 {
		t.Fatalf("first warm run: %+v", a)
	}
	b := run(t, p, nil, "sh", "-c", `ls -A /tmp; ls /proc | grep -c '^[0-9]'`)
	if !b.Warm {
		t.Fatalf("second run not warm: %+v", b)
	}
	// Only the shell and ls/grep's processes: no sleep, no /tmp/left.
	if strings.Contains(string(b.Stdout), "left") {
		t.Fatalf("/tmp carried over: %q", b.Stdout)
	}
	lines := strings.Fields(string(b.Stdout))
	n, err := strconv.Atoi(lines[len(lines)-1])
	if err != nil || n > 4 {
		t.Fatalf("processes visible in the next sandbox: %q", b.Stdout)
	}
	if out, _ := os.ReadFile("/proc/" + strings.TrimSpace(testenv.ReadFile(t, filepath.Join(ws, "pid"))) + "/cmdline"); strings.Contains(string(out), "sleep") {
		t.Fatal("sleep escaped") // (the pid is namespace-local; this only guards an odd host collision)
	}
}

// TestPoolWorkspaceReplaced: a warm sandbox binds the workspace it saw; if
// the directory was replaced since, the sandbox is not used.
func TestPoolWorkspaceReplaced(t *testing.T) {
	withPool(t, PoolOptions{PerPolicy: 1})
	ws := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	p := Confinement{Backend: BackendBwrap, Workspace: ws}
	run(t, p, nil, "true")
	waitReady(t, 1)
	if err := os.Rename(ws, ws+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	out := run(t, p, nil, "sh", "-c", "echo new > note")
	if out.Warm || out.ExitCode != 0 {
		t.Fatalf("a sandbox of the replaced workspace served the call: %+v", out)
	}
	if got := testenv.ReadFile(t, filepath.Join(ws, "note")); got != "new\n" {
		t.Fatalf("write went elsewhere: %q", got)
	}
	if _, err := os.Stat(filepath.Join(ws+".old", "note")); err == nil {
		t.Fatal("write reached the old workspace")
	}
}

// TestPoolTimeoutCountsFromCall: the time a sandbox waited ready does not
// count against the call's timeout.
func TestPoolTimeoutCountsFromCall(t *testing.T) {
	withPool(t, PoolOptions{PerPolicy: 1})
	p := Confinement{Backend: BackendBwrap, Workspace: t.TempDir(), Timeout: 2 * time.Second}
	run(t, p, nil, "true")
	waitReady(t, 1)
	time.Sleep(2500 * time.Millisecond) // longer than the timeout
	out := run(t, p, nil, "true")
	if !out.Warm || out.TimedOut || out.ExitCode != 0 {
		t.Fatalf("warm run: %+v", out)
	}
	// The timeout still holds for the command itself.
	waitReady(t, 1)
	out = run(t, p, nil, "sleep", "1000")
	if !out.Warm || !out.TimedOut || !out.Killed {
		t.Fatalf("warm run past its timeout: %+v", out)
	}
}

// TestPoolIdleAndClose: ready sandboxes are torn down after Idle and by
// ClosePool, leaving no process and no cgroup behind.
func TestPoolIdleAndClose(t *testing.T) {
	requireBackend(t, BackendBwrap)
	noForcedWarm(t)
	t.Cleanup(ClosePool)
	before := bwrapChildren()
	EnablePool(PoolOptions{PerPolicy: 2, Idle: 200 * time.Millisecond})
	p := Confinement{Backend: BackendBwrap, Workspace: t.TempDir(), Limits: Limits{Processes: 32}}
	run(t, p, nil, "true")
	waitReady(t, 2)
	waitReady(t, 0) // expired
	run(t, Confinement{Backend: BackendBwrap, Workspace: t.TempDir()}, nil, "true")
	EnablePool(PoolOptions{PerPolicy: 3}) // replaces the pool: its sandboxes go
	run(t, p, nil, "true")
	waitReady(t, 3)
	ClosePool()
	if st := CurrentPoolStats(); st.Ready != 0 {
		t.Fatalf("stats after close: %+v", st)
	}
	if after := bwrapChildren(); after > before {
		t.Fatalf("%d bwrap processes left (before: %d)", after, before)
	}
	if d := Detect(); d.pids != nil {
		left, _ := filepath.Glob(filepath.Join(d.pids.parent, "run-"+strconv.Itoa(os.Getpid())+"-*"))
		if len(left) > 0 {
			t.Fatalf("cgroups left: %v", left)
		}
	}
}

// bwrapChildren counts this process's children running bwrap.
func bwrapChildren() int {
	n := 0
	for _, c := range children(os.Getpid()) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(c) + "/comm")
		if strings.TrimSpace(string(b)) == "bwrap" {
			n++
		}
	}
	return n
}

// TestPoolConcurrent: concurrent calls of one policy each get their own
// sandbox (warm or cold), and the pool stays within Max.
func TestPoolConcurrent(t *testing.T) {
	withPool(t, PoolOptions{PerPolicy: 2, Max: 3})
	ws := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 4; i++ {
				out, err := Run(context.Background(), Confinement{Backend: BackendBwrap, Workspace: ws},
					[]string{"sh", "-c", "test ! -e /tmp/x && touch /tmp/x && echo " + strconv.Itoa(g)}, nil)
				if err != nil || out.ExitCode != 0 || strings.TrimSpace(string(out.Stdout)) != strconv.Itoa(g) {
					errs <- strings.TrimSpace(string(out.Stdout) + string(out.Stderr))
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("call: %v", e)
	}
	if st := CurrentPoolStats(); st.Ready > 3 {
		t.Fatalf("pool over Max: %+v", st)
	}
}

func TestTrampolineScript(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"true"}, "exec 5<&-\nexec 'true'\n"},
		{[]string{"sh", "-c", "echo 'hi'"}, "exec 5<&-\nexec 'sh' '-c' 'echo '\\''hi'\\'''\n"},
		{[]string{"a", ""}, "exec 5<&-\nexec 'a' ''\n"},
	} {
		if got := trampolineScript(c.argv); got != c.want {
			t.Errorf("trampolineScript(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}

// TestPoolSandboxesAreIsolated: a command in a warm sandbox cannot see or
// reach the other sandboxes waiting in the pool (their trampolines, pipes,
// /tmp): killing everything it can, it leaves the next call unharmed.
func TestPoolSandboxesAreIsolated(t *testing.T) {
	withPool(t, PoolOptions{PerPolicy: 2})
	p := Confinement{Backend: BackendBwrap, Workspace: t.TempDir()}
	run(t, p, nil, "true")
	waitReady(t, 2)
	// kill -9 -1 signals every process the command may signal: in its PID
	// namespace that is nothing but its own init (which ignores it).
	a := run(t, p, nil, "sh", "-c", `ls /proc | grep -c '^[0-9]'; touch /tmp/left-by-a; kill -9 -1; echo done`)
	if !a.Warm {
		t.Fatalf("not warm: %+v", a)
	}
	lines := strings.Fields(string(a.Stdout))
	if len(lines) > 0 {
		if n, err := strconv.Atoi(lines[0]); err != nil || n > 4 {
			t.Fatalf("processes visible from a warm sandbox: %q", a.Stdout)
		}
	}
	b := run(t, p, nil, "sh", "-c", "echo alive; test -e /tmp/left-by-a && echo leaked")
	if !b.Warm || string(b.Stdout) != "alive\n" {
		t.Fatalf("the next warm call after kill -9 -1: %+v (%q)", b, b.Stdout)
	}
}
