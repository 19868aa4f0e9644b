package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// helperMarker is argv[1] of a re-executed helper process.
const helperMarker = "__armory_sandbox_helper"

// helperRegistered records that MaybeRunHelper was called (and returned) in
// this process, so re-executing os.Executable() as a helper is safe.
var helperRegistered atomic.Bool

// helperConfig travels from Run to the helper as argv[2] (JSON). It holds
// no environment: the helper's own environment is the command's.
type helperConfig struct {
	Landlock bool     `json:"landlock,omitempty"`
	Writable []string `json:"rw,omitempty"`
	Network  bool     `json:"net,omitempty"`
	DropCaps bool     `json:"dropcaps,omitempty"`
	Rlimits  []rlimit `json:"rlimits,omitempty"`
	// Cgroup is the cgroup.procs file of the run's pids cgroup, which the
	// helper joins before anything else ("" when there is none).
	Cgroup string   `json:"cgroup,omitempty"`
	Argv   []string `json:"argv"`
}

// MaybeRunHelper must be called first thing in main (and in TestMain of
// tests that use the landlock or none backends). In a normal process it
// records that the helper is available and returns at once. In a process
// that Run started as its helper (argv[1] == "__armory_sandbox_helper") it
// confines itself (capabilities, Landlock, rlimits) and execs the target
// command; it never returns then: on a set-up failure it reports the error
// to Run and exits with status 126, and when the command cannot be executed
// it prints the reason on stderr and exits with status 127.
//
// Without the call, the landlock and none backends report themselves
// unavailable (the binary is not re-executed blindly).
func MaybeRunHelper() {
	if len(os.Args) < 3 || os.Args[1] != helperMarker {
		helperRegistered.Store(true)
		return
	}
	// Join the run's pids cgroup first, before this process forks anything
	// (the init below starts the helper again; the command inherits the
	// group). Joining again in that child is a no-op.
	var c helperConfig
	if json.Unmarshal([]byte(os.Args[2]), &c) == nil && c.Cgroup != "" {
		if err := joinCgroup(c.Cgroup); err != nil {
			if status := os.NewFile(3, "status"); status != nil {
				fmt.Fprintf(status, "%v", err)
			}
			os.Exit(126)
		}
	}
	if os.Getpid() == 1 {
		runInit() // never returns
	}
	runtime.LockOSThread()
	status := os.NewFile(3, "status")
	err := helperMain(os.Args[2])
	// helperMain returns only on failure.
	if status != nil {
		fmt.Fprintf(status, "%v", err)
	}
	os.Exit(126)
}

// runInit is the helper as pid 1 of its own PID namespace: it starts the
// helper again as its child (which confines itself and execs the command,
// so the command is not pid 1 and keeps normal signal semantics), reaps
// every orphan, and exits with the command's status (128+N for signal N).
// Its exit tears the namespace down: the kernel kills every process left.
// (go-landlock's all-threads syscalls also cannot run in a namespace init.)
func runInit() {
	status := os.NewFile(3, "status")
	// The namespace gets its own /proc (Run clones a mount namespace with
	// the PID namespace): the helper's own pid must be found there, as
	// psx (go-landlock's all-threads syscalls when built with cgo) reads
	// /proc/<getpid()>/task; the host's /proc would name other processes.
	// The mount stays private to the namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fmt.Fprintf(status, "helper init: make mounts private: %v", err)
		os.Exit(126)
	}
	if err := syscall.Mount("proc", "/proc", "proc", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, ""); err != nil {
		fmt.Fprintf(status, "helper init: mount /proc: %v", err)
		os.Exit(126)
	}
	p, err := os.StartProcess("/proc/self/exe", os.Args, &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, status},
	})
	if err != nil {
		fmt.Fprintf(status, "helper init: %v", err)
		os.Exit(126)
	}
	status.Close()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, 0, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			os.Exit(126)
		}
		if pid == p.Pid {
			if ws.Signaled() {
				os.Exit(128 + int(ws.Signal()))
			}
			os.Exit(ws.ExitStatus())
		}
	}
}

func helperMain(arg string) error {
	unix.CloseOnExec(3)
	var c helperConfig
	if err := json.Unmarshal([]byte(arg), &c); err != nil {
		return fmt.Errorf("helper config: %w", err)
	}
	if len(c.Argv) == 0 {
		return errors.New("helper: empty command")
	}
	path, err := exec.LookPath(c.Argv[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "armory-sandbox: %v\n", err)
		os.Exit(127)
	}
	// Everything the last step needs is built now, while the runtime may
	// still allocate: once RLIMIT_AS is lowered, a Go allocation that needs
	// fresh address space kills the helper ("fatal error: runtime: cannot
	// allocate memory"), which would read as the command's failure.
	plan, err := newExecPlan(path, c.Argv, os.Environ(), c.Rlimits)
	if err != nil {
		return err
	}
	if c.DropCaps {
		if err := dropCapabilities(); err != nil {
			return err
		}
	}
	if c.Landlock {
		if err := applyLandlock(c.Writable, c.Network); err != nil {
			return err
		}
	}
	// No collection may be under way while the limits drop (a mark phase
	// can need fresh work buffers): SetGCPercent(-1) waits for one to end
	// and starts no other.
	debug.SetGCPercent(-1)
	plan.run() // never returns
	return nil
}

// execPlan is the helper's last step, built in advance: set the rlimits,
// then execve the command. run makes raw system calls only and allocates
// nothing, so a memory limit below what the helper's Go runtime has
// already reserved cannot starve the helper between the two (the limit
// then applies to the command's fresh address space after execve). See
// TestHelperLastStepAllocatesNothing.
type execPlan struct {
	path   *byte
	argv   []*byte
	envv   []*byte
	limits []rawLimit
	// Messages for run's failures, formatted before anything is lowered.
	execFailed string // "armory-sandbox: exec ARGV0: " (stderr, exit 127)
}

// rawLimit is one rlimit for prlimit64(2), with its failure message.
type rawLimit struct {
	resource uintptr
	lim      unix.Rlimit
	failed   string // "setrlimit RESOURCE: "
}

func newExecPlan(path string, argv, env []string, rls []rlimit) (*execPlan, error) {
	p := &execPlan{execFailed: "armory-sandbox: exec " + argv[0] + ": "}
	var err error
	if p.path, err = syscall.BytePtrFromString(path); err != nil {
		return nil, fmt.Errorf("helper: command path: %w", err)
	}
	if p.argv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return nil, fmt.Errorf("helper: arguments: %w", err)
	}
	if p.envv, err = syscall.SlicePtrFromStrings(env); err != nil {
		return nil, fmt.Errorf("helper: environment: %w", err)
	}
	for _, rl := range rls {
		p.limits = append(p.limits, rawLimit{
			resource: uintptr(rl.Resource),
			lim:      unix.Rlimit{Cur: rl.Cur, Max: rl.Max},
			failed:   fmt.Sprintf("setrlimit %s: ", rlimitName(rl.Resource)),
		})
	}
	return p, nil
}

// run sets the limits and execs the command. It never returns: on failure
// it writes a message prepared in advance and exits, 126 for a set-up
// failure (reported on the status pipe) and 127 when execve fails as
// exec(3) would (on stderr).
func (p *execPlan) run() {
	step, errno := p.limitAndExec()
	if step < len(p.limits) {
		rawWrite(3, p.limits[step].failed)
		rawWrite(3, errno.Error())
		syscall.Exit(126)
	}
	rawWrite(2, p.execFailed)
	rawWrite(2, errno.Error())
	rawWrite(2, "\n")
	syscall.Exit(127)
}

// limitAndExec is run's system calls: prlimit64 for each limit, then
// execve. It returns only on failure: the index of the limit that failed
// (len(p.limits) when execve did) and the errno. It must not allocate
// (TestHelperLastStepAllocatesNothing).
//
// Unlike syscall.Exec it neither takes the runtime's exec lock (which only
// orders execve against the creation of threads: by now the helper runs
// no goroutine of its own and collection is off, so nothing asks for a
// thread) nor restores the soft RLIMIT_NOFILE the Go runtime raised at
// start (see Limits.OpenFiles).
func (p *execPlan) limitAndExec() (int, unix.Errno) {
	for i := range p.limits {
		l := &p.limits[i]
		if _, _, e := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, l.resource, uintptr(unsafe.Pointer(&l.lim)), 0, 0, 0); e != 0 {
			return i, e
		}
	}
	_, _, e := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(p.path)),
		uintptr(unsafe.Pointer(&p.argv[0])), uintptr(unsafe.Pointer(&p.envv[0])))
	return len(p.limits), e
}

// rawWrite writes s to fd with one write(2), allocating nothing (best
// effort: it is only used to report a failure before exiting).
func rawWrite(fd int, s string) {
	if len(s) == 0 {
		return
	}
	unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.StringData(s))), uintptr(len(s)))
}

// rlimitName names a resource in messages.
func rlimitName(res int) string {
	switch res {
	case unix.RLIMIT_AS:
		return "RLIMIT_AS"
	case unix.RLIMIT_CPU:
		return "RLIMIT_CPU"
	case unix.RLIMIT_FSIZE:
		return "RLIMIT_FSIZE"
	case unix.RLIMIT_NPROC:
		return "RLIMIT_NPROC"
	case unix.RLIMIT_NOFILE:
		return "RLIMIT_NOFILE"
	}
	return "resource " + strconv.Itoa(res)
}

// mib renders a byte count in MiB for messages.
func mib(n int64) string {
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', -1, 64) + " MiB"
}

// dropCapabilities empties the bounding, ambient and inheritable sets of
// every thread, so that the exec'd command, although uid 0, holds no
// capability (no CAP_DAC_OVERRIDE, CAP_SYS_ADMIN, CAP_KILL...).
func dropCapabilities() error {
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	if err := llsys.AllThreadsPrctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for c := 0; c <= last; c++ {
		if err := llsys.AllThreadsPrctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// landlockDevices are device files a confined command may open for
// writing (shells redirect to /dev/null all the time).
var landlockDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"}

// applyLandlock confines every thread: read (and execute) everywhere,
// write only below writable, TCP bind/connect denied unless network
// (ABI >= 4), signals and abstract unix sockets scoped to the sandbox
// (ABI >= 6). It sets no_new_privs.
func applyLandlock(writable []string, network bool) error {
	cfg := landlock.V7.BestEffort()
	err := cfg.RestrictPaths(
		landlock.RODirs("/"),
		landlock.RWDirs(writable...),
		landlock.RWFiles(landlockDevices...).IgnoreIfMissing(),
	)
	if err != nil {
		return fmt.Errorf("landlock file system: %w", err)
	}
	if !network {
		if err := cfg.RestrictNet(); err != nil {
			return fmt.Errorf("landlock network: %w", err)
		}
	}
	if err := cfg.RestrictScoped(); err != nil {
		return fmt.Errorf("landlock scope: %w", err)
	}
	return nil
}

// runHelper runs argv through the re-executed helper (landlock or none).
func runHelper(ctx context.Context, r *resolved, det *Detection, backend Backend, argv []string, sink *progressSink) (Report, error) {
	tmp, err := os.MkdirTemp("", "armory-sandbox-")
	if err != nil {
		return Report{}, fmt.Errorf("sandbox: private temp dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	l, err := newHelperLaunch(r, det, backend, argv, tmp)
	if err != nil {
		return Report{}, err
	}
	return execute(ctx, l, sink)
}

// newHelperLaunch prepares the re-executed helper (landlock or none) for
// argv under r, with tmp as the command's private temp dir.
func newHelperLaunch(r *resolved, det *Detection, backend Backend, argv []string, tmp string) (*launch, error) {
	env := r.environment(tmp)
	if _, err := lookPath(argv[0], env); err != nil {
		return nil, err
	}
	cg, err := det.newRunCgroup(r.Limits.Processes)
	if err != nil {
		return nil, err
	}
	c := helperConfig{
		Landlock: backend == BackendLandlock,
		Writable: append([]string{r.workspace, tmp}, r.writable...),
		Network:  r.Network,
		DropCaps: backend == BackendLandlock && os.Geteuid() == 0,
		Rlimits:  rlimitList(r.Limits),
		Argv:     argv,
	}
	if cg != nil {
		c.Cgroup = cg.procsFile()
	}
	js, err := json.Marshal(c)
	if err != nil {
		if cg != nil {
			_ = cg.destroy(nsTeardown)
		}
		return nil, fmt.Errorf("sandbox: helper config: %w", err)
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		if cg != nil {
			_ = cg.destroy(nsTeardown)
		}
		return nil, fmt.Errorf("sandbox: pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        det.helperExe,
		Args:        []string{det.helperExe, helperMarker, string(js)},
		Env:         env,
		Dir:         r.dir,
		ExtraFiles:  []*os.File{statusW},
		SysProcAttr: det.helperAttr(),
	}
	l := &launch{r: r, backend: backend, cmd: cmd, pidns: det.helperPIDNS, cg: cg, own: []*os.File{statusR}}
	l.handshake = func(deadline time.Time) (int, bool, int, error) {
		// The status pipe closes on exec (success) or carries the error.
		b, rerr := readAllDeadline(statusR, deadline, 64<<10)
		if rerr != nil {
			return 0, false, -1, fmt.Errorf("sandbox: helper did not start: %w", rerr)
		}
		if len(b) > 0 {
			if strings.HasPrefix(string(b), "join "+errCgroup.Error()) {
				return 0, false, -1, fmt.Errorf("sandbox: %s helper: %w: %s", backend, errCgroup, b)
			}
			return 0, false, -1, fmt.Errorf("sandbox: %s helper: %s", backend, b)
		}
		return cmd.Process.Pid, true, -1, nil
	}
	return l, nil
}
