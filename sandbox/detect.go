package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// ErrUnavailable is matched (errors.Is) by every *UnavailableError.
var ErrUnavailable = errors.New("sandbox: backend unavailable")

// UnavailableError reports that the requested backend (or, for
// BackendAuto, every backend) cannot run here. Reasons holds one line per
// backend saying why; a caller can show them as an unmet requirement.
type UnavailableError struct {
	Backend Backend
	Reasons []string
}

func (e *UnavailableError) Error() string {
	what := string(e.Backend)
	if what == "" {
		what = "no sandbox backend"
	}
	return fmt.Sprintf("sandbox: %s unavailable: %s", what, strings.Join(e.Reasons, "; "))
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Detection is the result of probing the host once: which backends work
// and why. It is immutable and safe for concurrent use.
type Detection struct {
	// Best is the backend Run uses for BackendAuto: BackendBwrap, else
	// BackendLandlock, else "" (none available; BackendNone is never chosen
	// implicitly).
	Best Backend
	// Reasons explains, one line per backend, what was found and why it was
	// accepted or rejected.
	Reasons []string
	// LandlockABI is the kernel's Landlock ABI version (0: none).
	LandlockABI int
	// HelperPIDNamespace reports that the helper (landlock and none
	// backends) runs in its own PID namespace, so escaped processes die
	// with the command.
	HelperPIDNamespace bool
	// ProcessLimit is how Limits.Processes is enforced here: "pids cgroup"
	// (each run in its own cgroup with pids.max; exact, forks beyond the
	// limit fail with EAGAIN) or "watchdog" (no usable pids cgroup: the
	// tree is counted every 5 ms and killed above the limit).
	ProcessLimit string
	// PidsCgroup is the parent group of the runs' pids cgroups ("" under
	// the watchdog), e.g. /sys/fs/cgroup/pids/armory.
	PidsCgroup string

	pids *pidsHierarchy

	bwrapPath string
	bwrapSize bool // bwrap supports --size
	bwrapErr  error

	helperExe    string
	helperErr    error
	helperPIDNS  bool
	helperUserNS bool
	landlockErr  error
}

var (
	detectOnce sync.Once
	detected   *Detection
)

// Detect probes the host once per process (later calls return the cached
// result): it runs bwrap's self-test (a real sandboxed `true` with the
// flags Run uses), reads the Landlock ABI, and runs the re-exec helper's
// self-test (which needs MaybeRunHelper to have been called). Safe for
// concurrent use.
func Detect() *Detection {
	detectOnce.Do(func() { detected = detect() })
	return detected
}

// Check returns nil when backend b can run, or an *UnavailableError.
func (d *Detection) Check(b Backend) error {
	var err error
	switch b {
	case BackendAuto:
		if d.Best == "" {
			return d.unavailable(BackendAuto)
		}
		return nil
	case BackendBwrap:
		err = d.bwrapErr
	case BackendLandlock:
		err = d.landlockErr
	case BackendNone:
		err = d.helperErr
	default:
		return policyErr("unknown backend %q", b)
	}
	if err != nil {
		return &UnavailableError{Backend: b, Reasons: []string{err.Error()}}
	}
	return nil
}

func (d *Detection) unavailable(b Backend) error {
	return &UnavailableError{Backend: b, Reasons: append([]string(nil), d.Reasons...)}
}

// helperAttr returns the SysProcAttr for a helper process: its own session
// (and so process group), and a PID namespace when the probe found one.
func (d *Detection) helperAttr() *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setsid: true}
	if d.helperPIDNS {
		// A mount namespace too, for the namespace's own /proc (runInit).
		a.Cloneflags = syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
		if d.helperUserNS {
			uid, gid := os.Getuid(), os.Getgid()
			a.Cloneflags |= syscall.CLONE_NEWUSER
			a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
			a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
			a.GidMappingsEnableSetgroups = false
		}
	}
	return a
}

// selfTest runs `true` with backend b on det (which may be partial).
func selfTest(det *Detection, b Backend) error {
	ws, err := os.MkdirTemp("", "armory-sandbox-selftest-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	r, err := resolve(Confinement{Backend: b, Workspace: ws, Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	var out Report
	if b == BackendBwrap {
		out, err = runBwrap(context.Background(), r, det, []string{"true"}, nil)
	} else {
		out, err = runHelper(context.Background(), r, det, b, []string{"true"}, nil)
	}
	if err != nil {
		return err
	}
	if out.ExitCode != 0 {
		return fmt.Errorf("self-test `true` exited %d: %s", out.ExitCode, strings.TrimSpace(string(out.Stderr)))
	}
	return nil
}

// newRunCgroup creates the pids cgroup of one run (pids.max = limit, or
// "max" when limit <= 0), or returns nil when the watchdog is in force.
func (d *Detection) newRunCgroup(limit int) (*runCgroup, error) {
	if d.pids == nil {
		return nil, nil
	}
	return d.pids.newRun(limit)
}

func detect() *Detection {
	d := &Detection{}

	// The process limit: a pids cgroup per run, else the watchdog. The
	// backends' self-tests below run with it; if moving a process into the
	// group fails there, the watchdog takes over and the self-test is
	// repeated.
	var pidsErr error
	d.pids, pidsErr = detectPids()
	testBackend := func(det *Detection, b Backend) error {
		err := selfTest(det, b)
		if err != nil && errors.Is(err, errCgroup) && det.pids != nil {
			pidsErr, det.pids = err, nil
			err = selfTest(det, b)
		}
		return err
	}

	// bwrap.
	if p, err := exec.LookPath("bwrap"); err != nil {
		d.bwrapErr = errors.New("bwrap: not found in PATH (install the bubblewrap package)")
	} else {
		d.bwrapPath = p
		help, _ := exec.Command(p, "--help").Output()
		d.bwrapSize = strings.Contains(string(help), "--size")
		version, _ := exec.Command(p, "--version").Output()
		if err := testBackend(d, BackendBwrap); err != nil {
			d.bwrapErr = fmt.Errorf("bwrap: %s failed its self-test: %v", p, err)
		} else {
			d.Reasons = append(d.Reasons, fmt.Sprintf("bwrap: %s (%s) passed its self-test", p, strings.TrimSpace(string(version))))
		}
	}
	if d.bwrapErr != nil {
		d.Reasons = append(d.Reasons, d.bwrapErr.Error())
	}

	// The re-exec helper (landlock and none).
	if !helperRegistered.Load() {
		d.helperErr = errors.New("helper: MaybeRunHelper was not called by main or TestMain")
	} else if exe, err := os.Executable(); err != nil {
		d.helperErr = fmt.Errorf("helper: cannot find own executable: %v", err)
	} else {
		d.helperExe = exe
		var errs []string
		for _, v := range []struct{ pidns, userns bool }{{true, os.Geteuid() != 0}, {false, false}} {
			d.helperPIDNS, d.helperUserNS = v.pidns, v.userns
			err := testBackend(d, BackendNone)
			if err == nil {
				d.helperErr = nil
				break
			}
			d.helperErr = fmt.Errorf("helper: %s failed its self-test: %v", exe, err)
			errs = append(errs, err.Error())
		}
		if d.helperErr == nil {
			ns := "own PID namespace"
			if !d.helperPIDNS {
				ns = "no PID namespace (" + strings.Join(errs, "; ") + "): double-forked setsid escapes survive"
			}
			d.HelperPIDNamespace = d.helperPIDNS
			d.Reasons = append(d.Reasons, fmt.Sprintf("none: helper %s passed its self-test, %s", exe, ns))
		}
	}
	if d.helperErr != nil {
		d.Reasons = append(d.Reasons, d.helperErr.Error())
	}

	// Landlock.
	abi, err := llsys.LandlockGetABIVersion()
	switch {
	case err != nil || abi < 1:
		d.landlockErr = fmt.Errorf("landlock: not supported by this kernel (%v); needs Linux >= 5.13 with landlock in the lsm= list", err)
	case d.helperErr != nil:
		d.LandlockABI = abi
		d.landlockErr = fmt.Errorf("landlock: ABI %d, but %v", abi, d.helperErr)
	default:
		d.LandlockABI = abi
		if err := testBackend(d, BackendLandlock); err != nil {
			d.landlockErr = fmt.Errorf("landlock: ABI %d failed its self-test: %v", abi, err)
		} else {
			net := "TCP bind/connect confined"
			if abi < 4 {
				net = "network NOT confined (needs ABI 4)"
			}
			d.Reasons = append(d.Reasons, fmt.Sprintf("landlock: ABI %d passed its self-test; %s", abi, net))
		}
	}
	if d.landlockErr != nil {
		d.Reasons = append(d.Reasons, d.landlockErr.Error())
	}

	if d.pids != nil {
		d.ProcessLimit, d.PidsCgroup = limitByCgroup, d.pids.parent
		v := "v1"
		if d.pids.v2 {
			v = "v2"
		}
		d.Reasons = append(d.Reasons, fmt.Sprintf("process limit: pids cgroup (%s) per run below %s: exact, forks beyond it fail with EAGAIN", v, d.pids.parent))
	} else {
		d.ProcessLimit = limitByWatchdog
		d.Reasons = append(d.Reasons, fmt.Sprintf("process limit: watchdog counting the tree every %v (no usable pids cgroup: %v); as root a fork bomb can briefly exceed the limit", watchInterval, pidsErr))
	}

	switch {
	case d.bwrapErr == nil:
		d.Best = BackendBwrap
	case d.landlockErr == nil:
		d.Best = BackendLandlock
	}
	return d
}
