package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The process limit is exact when every run lives in its own pids cgroup:
// the kernel then refuses a fork (EAGAIN) once the group holds pids.max
// tasks, whatever the uid. detectPids finds a writable pids hierarchy once;
// newRunCgroup makes one group per run below an "armory" parent group.

// errCgroup is wrapped by every failure to set up or join a run's cgroup.
var errCgroup = errors.New("pids cgroup")

// Process-limit mechanisms, as reported in Report.ProcessLimit.
const (
	limitByCgroup   = "pids cgroup"
	limitByWatchdog = "watchdog"
)

// pidsHierarchy is a usable pids controller: parent is the "armory" group
// (below this process's own cgroup) that holds one child group per run.
type pidsHierarchy struct {
	v2     bool
	parent string
}

// runCgroup is the pids cgroup of one run.
type runCgroup struct {
	dir string
	v2  bool
}

var cgroupSeq atomic.Uint64

// mountInfo is one line of /proc/self/mountinfo (the fields used here).
type mountInfo struct {
	root, point, fstype, superOpts string
}

// parseMountinfo parses /proc/self/mountinfo; malformed lines are skipped.
func parseMountinfo(data string) []mountInfo {
	var out []mountInfo
	for line := range strings.SplitSeq(data, "\n") {
		f := strings.Fields(line)
		sep := -1
		for i, x := range f {
			if x == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || len(f) < sep+4 {
			continue
		}
		out = append(out, mountInfo{
			root: unescapeMount(f[3]), point: unescapeMount(f[4]),
			fstype: f[sep+1], superOpts: f[sep+3],
		})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroups parses /proc/self/cgroup: the v2 path ("0::/x") and the path
// in the v1 hierarchy whose controller list names pids.
func ownCgroups(data string) (v2, v1pids string, hasV2, hasV1 bool) {
	for line := range strings.SplitSeq(data, "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, hasV2 = parts[2], true
			continue
		}
		for c := range strings.SplitSeq(parts[1], ",") {
			if c == "pids" {
				v1pids, hasV1 = parts[2], true
			}
		}
	}
	return
}

// cgroupDir maps this process's cgroup path onto a mount of its hierarchy.
// A path that is not absolute and clean is refused: the kernel shows a
// group outside the reader's cgroup namespace as "/../x", which no mount
// of the namespace reaches.
func cgroupDir(m mountInfo, own string) (string, bool) {
	if !strings.HasPrefix(own, "/") || filepath.Clean(own) != own || strings.Contains(own, "/..") ||
		!strings.HasPrefix(m.root, "/") || filepath.Clean(m.root) != m.root || !filepath.IsAbs(m.point) {
		return "", false
	}
	rel := own
	if m.root != "/" {
		r, ok := strings.CutPrefix(own, m.root)
		if !ok || r != "" && r[0] != '/' {
			return "", false
		}
		rel = r
	}
	return filepath.Join(m.point, rel), true
}

// detectPids finds a pids controller this process can use and creates (or
// reuses) the armory parent group. Pure cgroup v2 is preferred (the pids
// controller enabled in the own group's cgroup.subtree_control), then a
// cgroup v1 pids hierarchy. The error says why neither works.
func detectPids() (*pidsHierarchy, error) {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	ownV2, ownV1, hasV2, hasV1 := ownCgroups(string(cg))
	var why []string
	for _, m := range parseMountinfo(string(mi)) {
		var h *pidsHierarchy
		var err error
		switch {
		case m.fstype == "cgroup2" && hasV2:
			h, err = tryV2(m, ownV2)
		case m.fstype == "cgroup" && hasV1 && hasOpt(m.superOpts, "pids"):
			h, err = tryV1(m, ownV1)
		default:
			continue
		}
		if err == nil {
			return h, nil
		}
		why = append(why, err.Error())
	}
	if len(why) == 0 {
		return nil, errors.New("no cgroup v2 or v1 pids hierarchy mounted")
	}
	return nil, errors.New(strings.Join(why, "; "))
}

func hasOpt(opts, o string) bool {
	for x := range strings.SplitSeq(opts, ",") {
		if x == o {
			return true
		}
	}
	return false
}

func tryV1(m mountInfo, own string) (*pidsHierarchy, error) {
	dir, ok := cgroupDir(m, own)
	if !ok {
		return nil, fmt.Errorf("cgroup v1 pids at %s: own group %s is outside the mount", m.point, own)
	}
	parent := filepath.Join(dir, "armory")
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v1 pids: %w", err)
	}
	h := &pidsHierarchy{parent: parent}
	return h, h.probe()
}

func tryV2(m mountInfo, own string) (*pidsHierarchy, error) {
	dir, ok := cgroupDir(m, own)
	if !ok {
		return nil, fmt.Errorf("cgroup v2 at %s: own group %s is outside the mount", m.point, own)
	}
	ctrl, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("cgroup v2 at %s: %w", m.point, err)
	}
	if !hasWord(string(ctrl), "pids") {
		return nil, fmt.Errorf("cgroup v2 at %s: pids controller not available in %s", m.point, dir)
	}
	if err := enablePids(dir); err != nil {
		return nil, fmt.Errorf("cgroup v2: enable pids in %s (v2 forbids it while the group itself holds processes; run Armory in a delegated group with pids enabled): %w", dir, err)
	}
	parent := filepath.Join(dir, "armory")
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("cgroup v2: %w", err)
	}
	if err := enablePids(parent); err != nil {
		return nil, fmt.Errorf("cgroup v2: enable pids in %s: %w", parent, err)
	}
	h := &pidsHierarchy{v2: true, parent: parent}
	return h, h.probe()
}

func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// enablePids adds pids to dir's cgroup.subtree_control unless present.
func enablePids(dir string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(f)
	if err != nil {
		return err
	}
	if hasWord(string(b), "pids") {
		return nil
	}
	return os.WriteFile(f, []byte("+pids"), 0)
}

// probe creates and removes a group with a pids limit, and removes the
// empty groups that runs of dead Armory processes left behind (only empty
// ones: rmdir fails on a group that still holds processes).
func (h *pidsHierarchy) probe() error {
	if ents, err := os.ReadDir(h.parent); err == nil {
		for _, e := range ents {
			if !e.IsDir() || !strings.HasPrefix(e.Name(), "run-") {
				continue
			}
			pid, err := strconv.Atoi(strings.SplitN(strings.TrimPrefix(e.Name(), "run-"), "-", 2)[0])
			if err == nil && unix.Kill(pid, 0) == unix.ESRCH {
				_ = os.Remove(filepath.Join(h.parent, e.Name()))
			}
		}
	}
	g, err := h.newRun(1)
	if err != nil {
		return err
	}
	if _, err := g.limitHits(); err != nil {
		g.destroy(time.Second)
		return err
	}
	return g.destroy(time.Second)
}

// newRun creates the group of one run with pids.max = limit ("max" when
// limit <= 0). The caller must destroy it.
func (h *pidsHierarchy) newRun(limit int) (*runCgroup, error) {
	name := fmt.Sprintf("run-%d-%d", os.Getpid(), cgroupSeq.Add(1))
	g := &runCgroup{dir: filepath.Join(h.parent, name), v2: h.v2}
	if err := os.Mkdir(g.dir, 0o755); err != nil {
		return nil, fmt.Errorf("sandbox: %w: create group: %w", errCgroup, err)
	}
	max := "max"
	if limit > 0 {
		max = strconv.Itoa(limit)
	}
	if err := os.WriteFile(filepath.Join(g.dir, "pids.max"), []byte(max), 0); err != nil {
		_ = os.Remove(g.dir)
		return nil, fmt.Errorf("sandbox: %w: set pids.max: %w", errCgroup, err)
	}
	return g, nil
}

// procsFile is the file a pid is written to in order to move it into g.
func (g *runCgroup) procsFile() string { return filepath.Join(g.dir, "cgroup.procs") }

// add moves process pid (with all its threads) into g.
func (g *runCgroup) add(pid int) error {
	if err := os.WriteFile(g.procsFile(), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("sandbox: %w: move pid %d into %s: %w", errCgroup, pid, g.dir, err)
	}
	return nil
}

// joinCgroup moves the calling process into the group whose cgroup.procs
// is procs ("0" names the writer in both cgroup versions, whatever its PID
// namespace).
func joinCgroup(procs string) error {
	if err := os.WriteFile(procs, []byte("0"), 0); err != nil {
		return fmt.Errorf("join %s: %w", errCgroup, err)
	}
	return nil
}

// limitHits returns how many forks the group's pids.max refused (the "max"
// line of pids.events).
func (g *runCgroup) limitHits() (int, error) {
	b, err := os.ReadFile(filepath.Join(g.dir, "pids.events"))
	if err != nil {
		return 0, fmt.Errorf("sandbox: %w: %w", errCgroup, err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "max "); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, nil
}

// procs lists the pids in g (in this process's PID namespace).
func (g *runCgroup) procs() []int {
	b, err := os.ReadFile(g.procsFile())
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if p, err := strconv.Atoi(f); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// killAll sends SIGKILL to every process in g: cgroup.kill on cgroup v2
// (one atomic write, races no fork), otherwise each pid listed in
// cgroup.procs (a pidfd is taken first and membership checked again, so a
// pid reused by an unrelated process after the listing is never hit).
// The pids limit bounds how many processes can appear between two rounds.
func (g *runCgroup) killAll() {
	if g.v2 {
		if err := os.WriteFile(filepath.Join(g.dir, "cgroup.kill"), []byte("1"), 0); err == nil {
			return
		}
	}
	for _, pid := range g.procs() {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		if g.holds(pid) {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
}

// holds reports whether pid is (still) a member of g.
func (g *runCgroup) holds(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	base := "/" + filepath.Base(g.dir)
	for line := range strings.SplitSeq(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if (g.v2 && parts[0] == "0" && parts[1] == "") || (!g.v2 && hasOpt(parts[1], "pids")) {
			return strings.HasSuffix(parts[2], "/armory"+base)
		}
	}
	return false
}

// destroy kills every process in g, waits (up to bound) until the group is
// empty and removes it. It returns an error when the group could not be
// removed; the group is then left for a later Detect of another process
// (or an operator) to clean up.
func (g *runCgroup) destroy(bound time.Duration) error {
	end := time.Now().Add(bound)
	delay := 100 * time.Microsecond
	for {
		g.killAll()
		err := os.Remove(g.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("sandbox: %w: remove %s: %w", errCgroup, g.dir, err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 10*time.Millisecond)
	}
}
