package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// bwrapArgs builds the bwrap command line (without the leading "bwrap").
// fd 3 is bwrap's --info-fd, fd 4 its --block-fd.
func bwrapArgs(r *resolved, det *Detection, argv []string) []string {
	a := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
	}
	if det.bwrapSize {
		a = append(a, "--size", strconv.FormatInt(r.Limits.TmpSize, 10))
	}
	a = append(a, "--tmpfs", "/dev/shm", "--remount-ro", "/dev",
		"--proc", "/proc")
	if det.bwrapSize {
		a = append(a, "--size", strconv.FormatInt(r.Limits.TmpSize, 10))
	}
	a = append(a, "--tmpfs", "/tmp",
		// Hide host daemons' unix sockets (docker, containerd, dbus...):
		// a network namespace does not isolate path-based sockets.
		"--tmpfs", "/run")
	if r.Network {
		// Keep systemd-resolved's stub resolv.conf reachable for DNS.
		a = append(a, "--ro-bind-try", "/run/systemd/resolve", "/run/systemd/resolve")
	}
	a = append(a,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--hostname", "armory-sandbox",
		"--die-with-parent", "--new-session")
	if !r.Network {
		a = append(a, "--unshare-net")
	}
	if os.Geteuid() == 0 {
		// Privileged bwrap keeps every capability unless told otherwise.
		a = append(a, "--cap-drop", "ALL")
	} else {
		a = append(a, "--unshare-user")
	}
	a = append(a, "--bind", r.workspace, r.workspace)
	for _, w := range r.writable {
		a = append(a, "--bind", w, w)
	}
	for _, ro := range r.readOnly {
		a = append(a, "--ro-bind", ro, ro)
	}
	a = append(a, "--chdir", r.dir, "--info-fd", "3", "--block-fd", "4", "--")
	return append(a, argv...)
}

func runBwrap(ctx context.Context, r *resolved, det *Detection, argv []string, sink *progressSink) (Report, error) {
	env := r.environment("/tmp")
	if _, err := lookPath(argv[0], env); err != nil {
		return Report{}, err
	}
	if forceWarm {
		if w := startWarm("", r, det, env); w != nil {
			return w.run(ctx, r, argv, sink), nil
		}
	}
	if pl := activePool(); pl != nil {
		key := poolKey(r, det, env)
		if w := pl.take(key, r); w != nil {
			// Warm the replacement after the call, so that its set-up does
			// not compete with the command the caller waits for.
			out := w.run(ctx, r, argv, sink)
			pl.refill(key, r, det, env)
			return out, nil
		}
		// None ready: this call sets up its own; start warming for the next.
		pl.refill(key, r, det, env)
	}
	l, err := newBwrapLaunch(r, det, env, argv, nil)
	if err != nil {
		return Report{}, err
	}
	return execute(ctx, l, sink)
}

// newBwrapLaunch prepares bwrap for argv under r. extra, if not nil, is
// passed to the sandbox as fd 5 (a warm sandbox's script pipe).
func newBwrapLaunch(r *resolved, det *Detection, env, argv []string, extra *os.File) (*launch, error) {
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoR.Close()
		infoW.Close()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	cg, err := det.newRunCgroup(r.Limits.Processes)
	if err != nil {
		infoR.Close()
		infoW.Close()
		blockR.Close()
		blockW.Close()
		return nil, err
	}
	files := []*os.File{infoW, blockR}
	if extra != nil {
		files = append(files, extra)
	}
	cmd := &exec.Cmd{
		Path:        det.bwrapPath,
		Args:        append([]string{"bwrap"}, bwrapArgs(r, det, argv)...),
		Env:         env,
		Dir:         "/",
		ExtraFiles:  files,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	l := &launch{r: r, backend: BackendBwrap, cmd: cmd, pidns: true, cg: cg, own: []*os.File{infoR, blockW}}
	l.handshake = func(deadline time.Time) (int, bool, int, error) {
		// bwrap writes {"child-pid": N, ...} once the sandbox's pid 1 exists;
		// that process then blocks reading fd 4 before it forks the command.
		b, rerr := readAllDeadline(infoR, deadline, 64<<10)
		var info struct {
			ChildPid int `json:"child-pid"`
		}
		if rerr != nil || json.Unmarshal(b, &info) != nil || info.ChildPid <= 0 {
			return 0, false, -1, fmt.Errorf("sandbox: bwrap did not start the sandbox (info %q, %v)", b, rerr)
		}
		fd, err := unix.PidfdOpen(info.ChildPid, 0)
		if err != nil {
			return 0, false, -1, fmt.Errorf("sandbox: pidfd_open %d: %w", info.ChildPid, err)
		}
		// The sandbox's pid 1 is still single-threaded and blocked: moved
		// now, it and everything it forks count against pids.max.
		err = applyRlimits(info.ChildPid, r.Limits)
		if err == nil && cg != nil {
			err = cg.add(info.ChildPid)
		}
		if err != nil {
			// Kill before releasing the block so nothing runs unlimited.
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			return 0, false, fd, err
		}
		if _, err := blockW.Write([]byte{1}); err != nil {
			return 0, false, fd, fmt.Errorf("sandbox: release bwrap: %w", err)
		}
		return info.ChildPid, false, fd, nil
	}
	return l, nil
}

// rlimit is one resource limit to apply.
type rlimit struct {
	Resource int    `json:"r"`
	Cur      uint64 `json:"c"`
	Max      uint64 `json:"m"`
}

// rlimitList turns Limits into rlimits, skipping negative (unset) fields and
// clamping to this process's hard limits (raising a hard limit needs
// CAP_SYS_RESOURCE).
func rlimitList(l Limits) []rlimit {
	var out []rlimit
	add := func(res int, cur, max uint64) {
		var self unix.Rlimit
		if err := unix.Getrlimit(res, &self); err == nil {
			cur, max = min(cur, self.Max), min(max, self.Max)
		}
		out = append(out, rlimit{Resource: res, Cur: cur, Max: max})
	}
	if l.CPU > 0 {
		s := uint64(math.Ceil(l.CPU.Seconds()))
		add(unix.RLIMIT_CPU, s, s+1)
	}
	if l.Memory > 0 {
		add(unix.RLIMIT_AS, uint64(l.Memory), uint64(l.Memory))
	}
	if l.FileSize > 0 {
		add(unix.RLIMIT_FSIZE, uint64(l.FileSize), uint64(l.FileSize))
	}
	if l.Processes > 0 {
		add(unix.RLIMIT_NPROC, uint64(l.Processes), uint64(l.Processes))
	}
	if l.OpenFiles > 0 {
		add(unix.RLIMIT_NOFILE, uint64(l.OpenFiles), uint64(l.OpenFiles))
	}
	return out
}

// applyRlimits sets l on another process (prlimit(2)).
func applyRlimits(pid int, l Limits) error {
	for _, rl := range rlimitList(l) {
		lim := unix.Rlimit{Cur: rl.Cur, Max: rl.Max}
		if err := unix.Prlimit(pid, rl.Resource, &lim, nil); err != nil {
			return fmt.Errorf("sandbox: prlimit %d resource %d: %w", pid, rl.Resource, err)
		}
	}
	return nil
}
