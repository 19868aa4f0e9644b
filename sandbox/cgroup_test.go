package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
)

// requirePidsCgroup skips (locally) or fails (CI) when runs cannot get a
// pids cgroup here.
func requirePidsCgroup(t *testing.T) {
	t.Helper()
	if d := Detect(); d.ProcessLimit != limitByCgroup {
		testenv.Missing(t, "a writable pids cgroup (root; cgroup v1 pids hierarchy, or cgroup v2 with pids delegated)",
			strings.Join(d.Reasons, "; "))
	}
}

// countProcs counts the processes visible in /proc (the whole machine, or
// the container's PID namespace).
func countProcs() int {
	f, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	n := 0
	for _, name := range names {
		if name[0] >= '0' && name[0] <= '9' {
			n++
		}
	}
	return n
}

// sampleProcs counts /proc every millisecond until the returned stop
// function is called; stop returns the highest count seen.
func sampleProcs() (stop func() int) {
	var max atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(countProcs()); n > max.Load() {
				max.Store(n)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int {
		close(done)
		<-finished
		return int(max.Load())
	}
}

// runGroups lists the run groups of this test process left below the
// armory parent group.
func runGroups(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(Detect().PidsCgroup)
	if err != nil {
		t.Fatalf("armory parent group: %v", err)
	}
	var out []string
	prefix := fmt.Sprintf("run-%d-", os.Getpid())
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// The slack allows for processes that other work on the (shared) machine
// starts during a bomb; an unbounded bomb reaches thousands.
const procSlack = 64

// Without a usable pids cgroup the watchdog still bounds a bomb (coarsely)
// and says so in the Report.
func TestWatchdogFallback(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		d := *Detect()
		d.pids = nil
		r, err := resolve(Confinement{Backend: b, Workspace: ws(t), Timeout: 20 * time.Second, Limits: Limits{Processes: 64}})
		if err != nil {
			t.Fatal(err)
		}
		m := "armory-forkbomb-" + testenv.Marker()
		argv := []string{"bash", "-c", "f(){ f | f & }; f; sleep 30", m}
		var out Report
		if b == BackendBwrap {
			out, err = runBwrap(t.Context(), r, &d, argv, &progressSink{})
		} else {
			out, err = runHelper(t.Context(), r, &d, b, argv, &progressSink{})
		}
		if err != nil {
			t.Fatal(err)
		}
		if !out.Killed || out.KillReason != "process limit" || out.ProcessLimit != limitByWatchdog || out.ProcessLimitHits != 0 {
			t.Errorf("outcome %+v", out)
		}
		if out.Lingering {
			// The bomb outgrew the watchdog on a loaded machine and took
			// longer than the teardown bound to reap: Run said so. Its
			// processes were all killed; wait (bounded) for the last ones.
			t.Logf("namespace still dying when Run returned (%d processes): Lingering set", len(testenv.PIDsWith(m, false)))
			for end := time.Now().Add(hangGuard); len(testenv.PIDsWith(m, false)) > 0 && time.Now().Before(end); {
				time.Sleep(50 * time.Millisecond)
			}
		}
		checkClean(t, m)
	})
}

// While bombs run, this process (and so the rest of the machine) can still
// fork: the bomb never exhausts the PIDs.
func TestForkBombLeavesPIDsForOthers(t *testing.T) {
	requirePidsCgroup(t)
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		var (
			wg    sync.WaitGroup
			stop  atomic.Bool
			mu    sync.Mutex
			errs  []error
			execs atomic.Int64
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if err := exec.Command("true").Run(); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				execs.Add(1)
			}
		}()
		p := Confinement{Backend: b, Workspace: ws(t), Timeout: 20 * time.Second, Limits: Limits{Processes: 64}}
		for range 5 {
			out := run(t, p, nil, "bash", "-c", "f(){ f | f & }; f; sleep 30")
			if out.KillReason != "process limit" {
				t.Errorf("bomb outcome %+v", out)
			}
		}
		stop.Store(true)
		wg.Wait()
		t.Logf("%d execs of true during 5 bombs", execs.Load())
		if len(errs) > 0 {
			t.Errorf("%d of %d execs failed during the bombs, first: %v", len(errs), execs.Load(), errs[0])
		}
	})
}

// The limit from the Confinement is what holds: a tree that fits runs, one that
// does not is refused and ended.
func TestProcessLimitFromPolicy(t *testing.T) {
	requirePidsCgroup(t)
	cases := []struct {
		name   string
		limit  int
		sleeps int
		ok     bool
	}{
		{"10 under 64", 64, 10, true},
		{"100 under 64", 64, 100, false},
		{"40 under 50", 50, 40, true},
		{"60 under 50", 50, 60, false},
		{"10 under default", 0, 10, true},
		{"300 under default", 0, 300, false},
		{"10 under 8", 8, 10, false},
	}
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				p := Confinement{Backend: b, Workspace: ws(t), Timeout: time.Minute, Limits: Limits{Processes: c.limit}}
				// The sleeps outlast any spawn rate (a loaded machine took over
				// 2 s to start 300, and the first ones ended before the tree
				// reached the limit); the script ends them itself once all run.
				script := fmt.Sprintf("for i in $(seq %d); do sleep 60 & done; kill $(jobs -p) 2>/dev/null; wait; echo ok", c.sleeps)
				out := run(t, p, nil, "bash", "-c", script)
				if out.ProcessLimit != limitByCgroup {
					t.Errorf("ProcessLimit %q", out.ProcessLimit)
				}
				if c.ok {
					if out.Killed || out.ExitCode != 0 || string(out.Stdout) != "ok\n" || out.ProcessLimitHits != 0 {
						t.Errorf("%d sleeps under a limit of %d: %+v %q", c.sleeps, c.limit, out, out.Stderr)
					}
				} else if !out.Killed || out.KillReason != "process limit" || out.ProcessLimitHits == 0 {
					t.Errorf("%d sleeps under a limit of %d not stopped: exit %d killed %v reason %q hits %d stderr %.300q",
						c.sleeps, c.limit, out.ExitCode, out.Killed, out.KillReason, out.ProcessLimitHits, out.Stderr)
				}
				if g := runGroups(t); len(g) > 0 {
					t.Errorf("run groups left behind: %v", g)
				}
			})
		}
	})
}

// Every way a run ends removes its group.
func TestCgroupRemovedAfterRun(t *testing.T) {
	requirePidsCgroup(t)
	cases := []struct {
		name    string
		argv    []string
		timeout time.Duration
	}{
		{"exit", []string{"true"}, time.Minute},
		{"failure", []string{"sh", "-c", "exit 3"}, time.Minute},
		{"timeout", []string{"sleep", "1000"}, 200 * time.Millisecond},
		{"background left", []string{"sh", "-c", "sleep 1000 & echo x"}, time.Minute},
		{"exec failure", []string{"/nonexistent/armory-test"}, time.Minute},
	}
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, _ = Run(t.Context(), Confinement{Backend: b, Workspace: ws(t), Timeout: c.timeout}, c.argv, nil)
				if g := runGroups(t); len(g) > 0 {
					t.Errorf("run groups left behind: %v", g)
				}
			})
		}
	})
}

// The command cannot raise its own limit or leave its group.
func TestCgroupEscape(t *testing.T) {
	requirePidsCgroup(t)
	parent := Detect().PidsCgroup
	// Armory's own group (the parent of "armory"): joining it would leave
	// the limit behind.
	own := filepath.Dir(parent)
	script := fmt.Sprintf(`
for f in %[1]s/run-*/pids.max; do echo max > "$f"; done
echo $$ > %[2]s/cgroup.procs
echo $$ > %[1]s/cgroup.procs
echo 0 > %[2]s/cgroup.procs
mkdir %[1]s/escape-$$
for i in $(seq 100); do sleep 2 & done; wait; echo survived`, parent, own)
	forEach(t, confining, func(t *testing.T, b Backend) {
		p := Confinement{Backend: b, Workspace: ws(t), Timeout: time.Minute, Limits: Limits{Processes: 64}}
		out := run(t, p, nil, "bash", "-c", script)
		t.Logf("stderr %.400q", out.Stderr)
		if strings.Contains(string(out.Stdout), "survived") || out.KillReason != "process limit" {
			t.Errorf("escape attempt: %+v stdout %q stderr %.500q", out, out.Stdout, out.Stderr)
		}
		if ents, _ := filepath.Glob(filepath.Join(parent, "escape-*")); len(ents) > 0 {
			t.Errorf("the sandbox created groups: %v", ents)
			for _, e := range ents {
				os.Remove(e)
			}
		}
	})
}

func TestParseMountinfo(t *testing.T) {
	data := `22 28 0:20 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
30 22 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
35 30 0:31 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
36 30 0:32 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw shared:16 - cgroup cgroup rw,cpu,cpuacct
37 30 0:33 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate
38 28 0:34 / /mnt/with\040space rw - tmpfs tmpfs rw
broken line
39 28 0:35 / /x rw opt:1 opt:2 - ext4 /dev/sda1 rw,errors=remount-ro
`
	got := parseMountinfo(data)
	want := []mountInfo{
		{"/", "/sys", "sysfs", "rw"},
		{"/", "/sys/fs/cgroup", "tmpfs", "ro,mode=755"},
		{"/", "/sys/fs/cgroup/pids", "cgroup", "rw,pids"},
		{"/docker/abc", "/sys/fs/cgroup/cpu,cpuacct", "cgroup", "rw,cpu,cpuacct"},
		{"/", "/sys/fs/cgroup/unified", "cgroup2", "rw,nsdelegate"},
		{"/", "/mnt/with space", "tmpfs", "rw"},
		{"/", "/x", "ext4", "rw,errors=remount-ro"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parseMountinfo:\n got %v\nwant %v", got, want)
	}
}

func TestOwnCgroups(t *testing.T) {
	cases := []struct {
		name, data   string
		v2, v1       string
		hasV2, hasV1 bool
	}{
		{"hybrid", "9:name=systemd:/\n8:pids:/a/b\n4:memory:/x\n0::/\n", "/", "/a/b", true, true},
		{"pure v2", "0::/user.slice/session-1.scope\n", "/user.slice/session-1.scope", "", true, false},
		{"v1 combined", "3:cpu,pids,cpuacct:/docker/1\n", "", "/docker/1", false, true},
		{"path with colon", "0::/a:b\n", "/a:b", "", true, false},
		{"empty", "", "", "", false, false},
		{"pidsx is not pids", "2:pidsx:/no\n", "", "", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v2, v1, h2, h1 := ownCgroups(c.data)
			if v2 != c.v2 || v1 != c.v1 || h2 != c.hasV2 || h1 != c.hasV1 {
				t.Errorf("got %q %q %v %v", v2, v1, h2, h1)
			}
		})
	}
}

func TestCgroupDir(t *testing.T) {
	cases := []struct {
		root, point, own, want string
		ok                     bool
	}{
		{"/", "/sys/fs/cgroup", "/a/b", "/sys/fs/cgroup/a/b", true},
		{"/", "/sys/fs/cgroup/pids", "/", "/sys/fs/cgroup/pids", true},
		{"/docker/1", "/sys/fs/cgroup/pids", "/docker/1/x", "/sys/fs/cgroup/pids/x", true},
		{"/docker/1", "/sys/fs/cgroup/pids", "/docker/1", "/sys/fs/cgroup/pids", true},
		{"/docker/1", "/sys/fs/cgroup/pids", "/docker/12", "", false},
		{"/docker/1", "/sys/fs/cgroup/pids", "/other", "", false},
		{"/", "/sys/fs/cgroup", "/../../outside", "", false},
		{"/", "/sys/fs/cgroup", "relative", "", false},
		{"/", "/sys/fs/cgroup", "/a/../b", "", false},
		{"/", "relative", "/a", "", false},
	}
	for _, c := range cases {
		got, ok := cgroupDir(mountInfo{root: c.root, point: c.point}, c.own)
		if got != c.want || ok != c.ok {
			t.Errorf("cgroupDir(%q, %q, %q) = %q, %v; want %q, %v", c.root, c.point, c.own, got, ok, c.want, c.ok)
		}
	}
}

func FuzzCgroupParsers(f *testing.F) {
	f.Add("35 30 0:31 / /sys/fs/cgroup/pids rw shared:15 - cgroup cgroup rw,pids\n", "8:pids:/a\n0::/b\n")
	f.Add(`1 2 3:4 /a\040b /c\134d rw - cgroup2 x rw`, "0::/\n")
	f.Add("- - - - - - - - - -", ":::\n0::\n")
	f.Fuzz(func(t *testing.T, mountinfo, cgroup string) {
		for _, m := range parseMountinfo(mountinfo) {
			if m.fstype == "" || strings.ContainsAny(m.fstype, " \n") {
				t.Errorf("bad fstype %q", m.fstype)
			}
			v2, v1, _, _ := ownCgroups(cgroup)
			for _, own := range []string{v2, v1} {
				if d, ok := cgroupDir(m, own); ok && !within(filepath.Clean(m.point), d) {
					t.Errorf("cgroupDir(%+v, %q) = %q escapes the mount", m, own, d)
				}
			}
		}
	})
}

// Detect removes empty groups of dead Armory processes.
func TestStaleGroupsRemoved(t *testing.T) {
	requirePidsCgroup(t)
	// A pid that is certainly dead: a reaped child.
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(Detect().PidsCgroup, "run-"+strconv.Itoa(c.Process.Pid)+"-1")
	if err := os.Mkdir(stale, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(stale) })
	if err := Detect().pids.probe(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("stale empty group %s of a dead process was not removed", stale)
	}
}
