package sandbox

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
)

func TestMain(m *testing.M) {
	MaybeRunHelper()
	forceWarm = os.Getenv("ARMORY_TEST_SANDBOX_WARM") == "1"
	os.Exit(m.Run())
}

// confining are the backends that confine the file system.
var confining = []Backend{BackendBwrap, BackendLandlock}

// allBackends adds the unconfined backend, for tests of limits only.
var allBackends = []Backend{BackendBwrap, BackendLandlock, BackendNone}

// requireBackend skips (locally) or fails (CI) when b cannot run here.
func requireBackend(t *testing.T, b Backend) {
	t.Helper()
	switch b {
	case BackendBwrap:
		testenv.LookPath(t, "bwrap", "apt-get install bubblewrap")
		if err := Detect().Check(b); err != nil {
			testenv.Missing(t, "a working bwrap", err.Error())
		}
	case BackendLandlock:
		if err := Detect().Check(b); err != nil {
			testenv.Missing(t, "Landlock (kernel >= 5.13, landlock in lsm=)", err.Error())
		}
	default:
		if err := Detect().Check(b); err != nil {
			t.Fatalf("backend %s: %v", b, err)
		}
	}
}

// forEach runs f as a subtest per backend.
func forEach(t *testing.T, backends []Backend, f func(t *testing.T, b Backend)) {
	for _, b := range backends {
		t.Run(string(b), func(t *testing.T) {
			requireBackend(t, b)
			f(t, b)
		})
	}
}

// hangGuard is far beyond any bound a test sets: it only turns a hung Run
// into a failure instead of a go test timeout. It is not a speed check.
const hangGuard = 2 * time.Minute

// run calls Run and fails the test if Run errs or never returns.
func run(t *testing.T, p Confinement, progress ProgressFunc, argv ...string) Report {
	t.Helper()
	return runCtx(t, context.Background(), p, progress, argv...)
}

func runCtx(t *testing.T, ctx context.Context, p Confinement, progress ProgressFunc, argv ...string) Report {
	t.Helper()
	type res struct {
		out Report
		err error
	}
	ch := make(chan res, 1)
	go func() {
		out, err := Run(ctx, p, argv, progress)
		ch <- res{out, err}
	}()
	bound := p.Timeout
	if bound == 0 {
		bound = DefaultTimeout
	}
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Run(%q): %v", argv, r.err)
		}
		if forceWarm && r.out.Backend == BackendBwrap && !r.out.Warm {
			t.Fatalf("Run(%q): ARMORY_TEST_SANDBOX_WARM=1 but the run was cold (the warm-up failed)", argv)
		}
		return r.out
	case <-time.After(bound + pipeGrace + hangGuard):
		t.Fatalf("Run(%q) did not return within its bounds (timeout %v)", argv, bound)
		return Report{}
	}
}

// zombieChildren lists this process's children that are zombies (not
// reaped).
func zombieChildren() []int {
	var out []int
	for _, pid := range children(os.Getpid()) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i > 0 && strings.HasPrefix(s[i+1:], " Z") {
			out = append(out, pid)
		}
	}
	return out
}

// checkClean fails if processes with marker m survive, or if Run left a
// zombie child behind.
func checkClean(t *testing.T, m string) {
	t.Helper()
	if m != "" {
		if pids := testenv.PIDsWith(m, false); len(pids) > 0 {
			t.Errorf("processes with marker %s survived Run: %v", m, pids)
		}
	}
	if z := zombieChildren(); len(z) > 0 {
		t.Errorf("zombie children left behind: %v", z)
	}
}

func ws(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	// t.TempDir may be reached through a symlink on some systems.
	real, err := filepath.EvalSymlinks(d)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// goroutinesSettled returns the goroutine count once it is at most want,
// or after a bound of 2 s: a goroutine that has delivered its result may
// take a moment to exit (seen under -race), a leaked one never does.
func goroutinesSettled(want int) int {
	end := time.Now().Add(2 * time.Second)
	for {
		n := numGoroutine()
		if n <= want || time.Now().After(end) {
			return n
		}
		time.Sleep(time.Millisecond)
	}
}

func numGoroutine() int {
	for range 50 {
		runtime.Gosched()
	}
	return runtime.NumGoroutine()
}
