package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Report is what a finished run produced. A non-zero exit, a signal, a
// timeout or a hit limit are all Reports, not errors.
type Report struct {
	// ExitCode is the command's exit status; 128+N when it died of signal N
	// (the shell convention, also what bwrap reports).
	ExitCode int
	// Stdout and Stderr hold the first MaxOutput bytes of each stream,
	// followed by "\n(N bytes, truncated)" when N more bytes were dropped.
	Stdout, Stderr []byte
	// StdoutTotal and StderrTotal count every byte the streams carried,
	// kept or dropped.
	StdoutTotal, StderrTotal int64
	// TimedOut is set when the timeout expired; the tree was then killed.
	TimedOut bool
	// Killed is set when Run killed the process tree before it finished on
	// its own: timeout, context cancellation or the process limit.
	Killed bool
	// KillReason says why Killed is set: "timeout", "canceled" or
	// "process limit".
	KillReason string
	// ProcessLimit says how Limits.Processes was enforced: "pids cgroup"
	// (the run had its own cgroup with pids.max = the limit: the kernel
	// refused every fork beyond it, and the run was ended at the first
	// refusal) or "watchdog" (no usable pids cgroup: the process tree was
	// counted every 5 ms and killed above the limit); "" when the policy
	// set no process limit.
	ProcessLimit string
	// ProcessLimitHits counts the forks (and thread creations) that the
	// run's pids cgroup refused (pids.events "max"); always 0 under the
	// watchdog.
	ProcessLimitHits int
	// Duration is the wall-clock time from the command's start to the end
	// of the run.
	Duration time.Duration
	// Backend is the backend that ran the command.
	Backend Backend
	// Warm is set when the command ran in a sandbox of the warm pool
	// (EnablePool), set up before the call.
	Warm bool
	// Lingering is set when the run's PID namespace had not finished dying
	// within the teardown bound (30 s) when Run returned: every process of
	// it had been sent SIGKILL (and the namespace takes no new ones), but a
	// huge tree — a fork bomb that the watchdog, without a pids cgroup,
	// caught late on a loaded machine — can take that long to reap. Those
	// processes are dying and the namespace can start no new one.
	Lingering bool
	// Signal names the signal that ended the command ("SIGKILL"), or "".
	// When the command ran in a PID namespace (bwrap, or the helper with a
	// namespace), its init reports signal N as status 128+N, and Signal is
	// inferred from that status.
	Signal string
}

// pipeGrace bounds how long Run waits for the output pipes to close after
// the command (and every process Run knows of) is dead: an escaped
// grandchild that keeps a pipe open cannot make Run hang.
const pipeGrace = 2 * time.Second

// watchInterval is how often the process watchdog counts the tree.
const watchInterval = 5 * time.Millisecond

// Run runs argv under policy p and returns its Report. progress, if not
// nil, receives output as it arrives (see ProgressFunc).
//
// The command's stdin is /dev/null. Its environment is the allow-list
// described in docs/sandbox.md plus p.PassEnv and p.Env. When Run returns,
// every process of the run has been killed and reaped (or, for the bwrap
// backend and the helper in a PID namespace, torn down with the
// namespace), and no goroutine started by Run is left, except, with the
// warm pool on (EnablePool), the background set-up of a sandbox for a
// later call.
//
// Run returns an error only when the command could not be started: an
// invalid policy (wrapping ErrPolicy), an unavailable backend (an
// *UnavailableError, matching ErrUnavailable), a command not found
// (wrapping exec.ErrNotFound), an already-done ctx, or a failure of the
// sandbox set-up. Run is safe for concurrent use.
func Run(ctx context.Context, p Confinement, argv []string, progress ProgressFunc) (Report, error) {
	if len(argv) == 0 || argv[0] == "" {
		return Report{}, policyErr("empty command")
	}
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return Report{}, policyErr("argument contains NUL")
		}
	}
	r, err := resolve(p)
	if err != nil {
		return Report{}, err
	}
	if err := ctx.Err(); err != nil {
		return Report{}, err
	}
	det := Detect()
	backend := r.Backend
	if backend == BackendAuto {
		backend = det.Best
		if backend == "" {
			return Report{}, det.unavailable(BackendAuto)
		}
	}
	if err := det.Check(backend); err != nil {
		return Report{}, err
	}
	if backend == BackendLandlock && len(r.readOnly) > 0 {
		for _, ro := range r.readOnly {
			for _, w := range append([]string{r.workspace}, r.writable...) {
				if within(w, ro) {
					return Report{}, policyErr("landlock cannot make %q read-only inside writable %q", ro, w)
				}
			}
		}
	}
	sink := &progressSink{fn: progress}
	switch backend {
	case BackendBwrap:
		return runBwrap(ctx, r, det, argv, sink)
	default:
		return runHelper(ctx, r, det, backend, argv, sink)
	}
}

// lookPath resolves argv0 against the sandbox PATH the way the sandboxed
// exec would (the file system outside the workspace and /tmp is the host's).
// Names with a slash are left to the backend.
func lookPath(argv0 string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		f := filepath.Join(dir, argv0)
		if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return argv0, nil
		}
	}
	return "", fmt.Errorf("sandbox: %q: %w", argv0, exec.ErrNotFound)
}

// launch describes one started process tree for the shared engine.
type launch struct {
	r       *resolved
	backend Backend
	cmd     *exec.Cmd
	// handshake runs after Start and before the command runs anything; it
	// returns the pid whose descendants the watchdog counts, whether that pid
	// itself counts, and a pidfd to kill (or -1). An error aborts the run.
	handshake func(deadline time.Time) (watchRoot int, watchSelf bool, killfd int, err error)
	// pidns is set when the sandbox has its own PID namespace (its
	// processes cannot escape the kill).
	pidns bool
	// cg is the run's pids cgroup, or nil (watchdog). The handshake (or the
	// helper itself) moves the sandbox's first process into it before that
	// process runs anything; execute kills its members and removes it.
	cg *runCgroup
	// own are the parent's ends of the handshake pipes, closed once the
	// handshake is over (or the start failed).
	own []*os.File
	// stdin, when set, gives the process a pipe as stdin (proc.inW) instead
	// of /dev/null (StartServer).
	stdin bool
}

// proc is a started process tree: everything the engine holds between
// the start (and handshake) of a launch and its end. The command may not
// have been released yet: a warm sandbox's trampoline waits for its
// command (pool.go).
type proc struct {
	l          *launch
	pid        int
	outR, errR *os.File
	// exited is closed when the direct child has exited; it is not reaped
	// yet, so its pid and process group id cannot be reused meanwhile.
	exited    chan struct{}
	killfd    int
	watchRoot int
	watchSelf bool
	stopped   bool
	lingering bool     // the namespace was not gone within nsTeardown (stop)
	inW       *os.File // write end of stdin, when launch.stdin
}

// startBound bounds the sandbox's own start — bwrap up to its handshake,
// the helper up to its exec of the command — apart from the command's
// Timeout: on a loaded machine the start of a re-executed helper can take
// longer than a short timeout, which would otherwise read as a sandbox
// that could not start (the command never ran) rather than a command that
// ran out of time.
var startBound = 10 * time.Second // a var for TestStartBound

// execute is the engine shared by every backend: pipes, start, handshake,
// wait with timeout / cancel / process watchdog, tree kill, bounded drain.
// The command's Timeout counts from the end of the handshake.
func execute(ctx context.Context, l *launch, sink *progressSink) (Report, error) {
	p, err := startLaunch(l, time.Now().Add(startBound))
	if err != nil {
		return Report{Backend: l.backend}, err
	}
	return p.supervise(ctx, l.r, sink, time.Now()), nil
}

// startLaunch starts l's process, watches for its exit and runs the
// handshake (bounded by deadline). On an error nothing of the launch is
// left: its processes are killed and reaped, its pipes closed and its
// cgroup removed.
func startLaunch(l *launch, deadline time.Time) (*proc, error) {
	defer func() {
		for _, f := range l.own {
			f.Close()
		}
	}()
	outR, outW, err := os.Pipe()
	if err != nil {
		l.closeExtra()
		l.destroyCgroup()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		l.closeExtra()
		l.destroyCgroup()
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	l.cmd.Stdin = nil // /dev/null
	var inR, inW *os.File
	if l.stdin {
		if inR, inW, err = os.Pipe(); err != nil {
			outR.Close()
			outW.Close()
			errR.Close()
			errW.Close()
			l.closeExtra()
			l.destroyCgroup()
			return nil, fmt.Errorf("sandbox: pipe: %w", err)
		}
		l.cmd.Stdin = inR
	}
	l.cmd.Stdout, l.cmd.Stderr = outW, errW
	startErr := l.cmd.Start()
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
	}
	l.closeExtra()
	if startErr != nil {
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		l.destroyCgroup()
		return nil, fmt.Errorf("sandbox: start %s: %w", l.backend, startErr)
	}
	p := &proc{l: l, pid: l.cmd.Process.Pid, outR: outR, errR: errR, inW: inW, exited: make(chan struct{}), killfd: -1}
	go func() {
		defer close(p.exited)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()
	watchRoot, watchSelf, kfd, herr := l.handshake(deadline)
	p.killfd, p.watchRoot, p.watchSelf = kfd, watchRoot, watchSelf
	if herr != nil {
		p.discard()
		return nil, herr
	}
	return p, nil
}

// closeExtra closes the parent's copies of the files passed to the child.
func (l *launch) closeExtra() {
	for _, f := range l.cmd.ExtraFiles {
		f.Close()
	}
}

// destroyCgroup kills what is left in the launch's pids cgroup and removes
// it. A group that cannot be removed (a process stuck in the kernel past
// the bound) is left for a later Detect to clean up.
func (l *launch) destroyCgroup() {
	if l.cg != nil {
		_ = l.cg.destroy(nsTeardown)
	}
}

// kill sends SIGKILL to the whole tree.
func (p *proc) kill() {
	if p.killfd >= 0 {
		_ = unix.PidfdSendSignal(p.killfd, unix.SIGKILL, nil, 0)
	}
	_ = unix.Kill(-p.pid, unix.SIGKILL) // the process group (Setpgid/Setsid)
	if !p.l.pidns {
		// Without a PID namespace, also reach descendants that left the
		// process group (setsid) while their parents still live.
		for _, d := range descendants(p.pid) {
			_ = unix.Kill(d, unix.SIGKILL)
		}
	}
	if p.l.cg != nil {
		p.l.cg.killAll()
	}
}

// stop kills what is left and reaps the child; for a PID namespace it
// waits (bounded) until the namespace is gone. It runs once.
func (p *proc) stop() {
	if p.stopped {
		return
	}
	p.stopped = true
	p.kill()
	<-p.exited
	_ = p.l.cmd.Wait()
	if p.killfd >= 0 {
		// The namespace's pid 1 reports its exit only once the kernel has
		// killed and reaped every other process of the namespace.
		p.lingering = !waitPidfd(p.killfd, nsTeardown)
		unix.Close(p.killfd)
		p.killfd = -1
	}
}

// discard ends a proc that was never supervised: kill, reap, close, remove
// its cgroup.
func (p *proc) discard() {
	p.stop()
	p.outR.Close()
	p.errR.Close()
	if p.inW != nil {
		p.inW.Close()
	}
	p.l.destroyCgroup()
}

// supervise drains p's output and waits for it under r's timeout (counted
// from start), ctx and process limit, then kills what is left and returns
// the Report. r is the policy of the call (its timeout, output limits and
// tee); p may have been started for an equal policy before the call.
func (p *proc) supervise(ctx context.Context, r *resolved, sink *progressSink, start time.Time) (out Report) {
	l := p.l
	out.Backend = l.backend
	// Whatever happens below, the group's processes die and the group goes
	// away.
	defer l.destroyCgroup()
	if r.Limits.Processes > 0 {
		out.ProcessLimit = limitByWatchdog
		if l.cg != nil {
			out.ProcessLimit = limitByCgroup
		}
	}
	stdout := newCapture("stdout", r.MaxOutput, sink)
	stdout.tee = r.StdoutTee
	stderr := newCapture("stderr", r.MaxOutput, sink)
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); stdout.drain(p.outR) }()
	go func() { defer readers.Done(); stderr.drain(p.errR) }()

	// finish kills what is left, reaps the child and collects the output.
	finish := func() {
		p.stop()
		readersDone := make(chan struct{})
		go func() { readers.Wait(); close(readersDone) }()
		grace := time.NewTimer(pipeGrace)
		select {
		case <-readersDone:
		case <-grace.C:
			p.outR.Close()
			p.errR.Close()
			<-readersDone
		}
		grace.Stop()
		p.outR.Close()
		p.errR.Close()
	}

	timer := time.NewTimer(time.Until(start.Add(r.Timeout)))
	defer timer.Stop()
	var tick <-chan time.Time
	// With a pids cgroup the kernel enforces the limit; the ticker then only
	// reads pids.events to end the run at the first refused fork.
	if r.Limits.Processes > 0 {
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		tick = t.C
	}
	exitedFirst := false // the command ended on its own (no SIGKILL from Run)
wait:
	for {
		select {
		case <-p.exited:
			// A fork refused since the last tick still ends the run as
			// "process limit" (whatever is left of the tree is killed).
			if l.cg != nil && r.Limits.Processes > 0 {
				if n, _ := l.cg.limitHits(); n > 0 {
					out.Killed, out.KillReason, exitedFirst = true, "process limit", true
				}
			}
			break wait
		case <-timer.C:
			out.TimedOut, out.Killed, out.KillReason = true, true, "timeout"
			break wait
		case <-ctx.Done():
			out.Killed, out.KillReason = true, "canceled"
			break wait
		case <-tick:
			if l.cg != nil {
				if n, _ := l.cg.limitHits(); n > 0 {
					out.Killed, out.KillReason = true, "process limit"
					break wait
				}
			} else if countTree(p.watchRoot, p.watchSelf) > r.Limits.Processes {
				out.Killed, out.KillReason = true, "process limit"
				break wait
			}
		}
	}
	finish()
	if l.cg != nil {
		out.ProcessLimitHits, _ = l.cg.limitHits()
	}
	out.Lingering = p.lingering
	out.Duration = time.Since(start)

	ws := l.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ws.Signaled():
		out.ExitCode = 128 + int(ws.Signal())
		out.Signal = unix.SignalName(ws.Signal())
	default:
		out.ExitCode = ws.ExitStatus()
		if l.pidns && out.ExitCode > 128 && out.ExitCode <= 128+64 {
			out.Signal = unix.SignalName(syscall.Signal(out.ExitCode - 128))
		}
	}
	if out.Killed && out.Signal == "" && !exitedFirst {
		out.Signal = "SIGKILL"
	}
	out.Stdout, out.StdoutTotal = stdout.result(), stdout.total
	out.Stderr, out.StderrTotal = stderr.result(), stderr.total
	return out
}

// nsTeardown bounds the wait for a killed PID namespace to be torn down
// (a fork bomb of thousands of processes takes a while to reap).
const nsTeardown = 30 * time.Second

// waitPidfd waits until the process behind fd has exited, or d passed; it
// reports whether the process is known to have exited.
func waitPidfd(fd int, d time.Duration) bool {
	end := time.Now().Add(d)
	for {
		ms := int(time.Until(end) / time.Millisecond)
		if ms <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n > 0 {
			return true
		}
	}
}

// readAllDeadline reads f until EOF or the deadline.
func readAllDeadline(f *os.File, deadline time.Time, limit int) ([]byte, error) {
	if err := f.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	var b []byte
	buf := make([]byte, 512)
	for len(b) < limit {
		n, err := f.Read(buf)
		b = append(b, buf[:n]...)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return b, err
			}
			return b, nil // EOF or closed
		}
	}
	return b, nil
}
