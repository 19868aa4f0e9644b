package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Backend names a confinement mechanism.
type Backend string

const (
	// BackendAuto (the empty string) picks the best available backend with
	// Detect: bwrap, else landlock.
	BackendAuto Backend = ""
	// BackendBwrap runs the command under bubblewrap: read-only root,
	// writable workspace, private /tmp, new PID/IPC/UTS/network namespaces.
	BackendBwrap Backend = "bwrap"
	// BackendLandlock runs the command through a re-executed helper that
	// confines the file system (and TCP, Landlock ABI >= 4) with Landlock.
	BackendLandlock Backend = "landlock"
	// BackendNone runs the command unconfined, still with every limit
	// (timeout, rlimits, output caps, process-tree kill). It is used only
	// when a Confinement names it explicitly.
	BackendNone Backend = "none"
)

// Defaults applied by Run to zero-valued Confinement and Limits fields.
const (
	DefaultTimeout   = 30 * time.Second
	DefaultMaxOutput = 64 << 10  // bytes kept per stream
	DefaultMemory    = 2 << 30   // RLIMIT_AS, bytes
	DefaultFileSize  = 1 << 30   // RLIMIT_FSIZE, bytes
	DefaultProcesses = 256       // pids.max (or the watchdog) and RLIMIT_NPROC
	DefaultOpenFiles = 1024      // RLIMIT_NOFILE
	DefaultTmpSize   = 256 << 20 // size of bwrap's private /tmp tmpfs, bytes
	// MinMemory is the smallest Limits.Memory Run accepts: below it the
	// sandbox's own machinery (bwrap, or the warm pool's trampoline shell)
	// cannot start a command. A command needs its own room on top.
	MinMemory = 8 << 20
)

// Limits bounds the resources of one run. A zero field takes its default
// (see the Default* constants; CPU defaults to twice the timeout, rounded up
// to whole seconds). A negative field means "do not set this limit" (the
// inherited value stays).
type Limits struct {
	// CPU is RLIMIT_CPU per process (seconds, rounded up). The process gets
	// SIGXCPU at the limit and SIGKILL one second later.
	CPU time.Duration
	// Memory is RLIMIT_AS (virtual address space) per process, in bytes.
	// Runtimes that reserve large address ranges (Go, V8, the JVM) need more.
	Memory int64
	// FileSize is RLIMIT_FSIZE: the largest file a process may write, in
	// bytes. Writing past it raises SIGXFSZ.
	FileSize int64
	// Processes bounds the number of processes of the run. Where a pids
	// cgroup is usable (Detection.ProcessLimit), the run gets its own group
	// with pids.max = Processes: the kernel refuses every fork (and thread)
	// beyond it with EAGAIN, whatever the uid, and Run ends the run at the
	// first refusal (KillReason "process limit"). Threads count as tasks
	// there, and under the landlock and none backends so do the helper's
	// own Go threads until it execs the command. Otherwise a watchdog
	// counts the process tree every 5 ms and kills the run above the
	// limit. It is also set as RLIMIT_NPROC (which the kernel does not
	// enforce for root).
	Processes int
	// OpenFiles is RLIMIT_NOFILE. Left unset (negative), the command
	// inherits the soft limit of the process that starts it: bwrap's, or
	// under the landlock and none backends the helper's, which the Go
	// runtime raises to the hard limit.
	OpenFiles int
	// TmpSize is the size of the private /tmp tmpfs under bwrap, in bytes
	// (used when the installed bwrap supports --size).
	TmpSize int64
}

// Confinement says how one command runs. The zero value is not usable:
// Workspace is required.
type Confinement struct {
	// Backend selects the confinement; "" picks the best available one
	// (Detect); BackendNone must be named explicitly to run unconfined.
	Backend Backend
	// Workspace is an absolute path to an existing directory. It is the only
	// writable place besides the private temp dir and Writable, the default
	// working directory, and HOME.
	Workspace string
	// Dir is the working directory: absolute or relative to Workspace, and
	// inside Workspace. Default Workspace.
	Dir string
	// ReadOnly lists extra absolute paths mounted read-only (bwrap binds them
	// after the writable ones, so a ReadOnly path inside Workspace becomes
	// read-only). Landlock cannot take rights away below a writable path:
	// such a policy is rejected for the landlock backend.
	ReadOnly []string
	// Writable lists extra absolute paths that the command may write.
	Writable []string
	// Network grants network access. Without it bwrap runs in an empty
	// network namespace, and Landlock (ABI >= 4) denies TCP bind/connect.
	Network bool
	// Env holds extra environment variables (already filtered by the
	// caller). They are applied after the base allow-list and may override
	// PATH or LANG.
	Env map[string]string
	// PassEnv names variables copied from this process's environment when
	// set (for example GITHUB_TOKEN). Env wins over PassEnv.
	PassEnv []string
	// Timeout bounds the command's wall-clock time; default
	// DefaultTimeout. It counts from the moment the sandbox has started
	// the command: the sandbox's own start is bounded apart (10 s), so a
	// loaded machine that is slow to start the sandbox does not eat a short
	// timeout. When it expires the whole process tree is killed.
	Timeout time.Duration
	// MaxOutput is the number of bytes kept per stream; default
	// DefaultMaxOutput. The rest is read and discarded.
	MaxOutput int
	// Limits are the per-process resource limits.
	Limits Limits
	// StdoutTee, when not nil, receives every byte of stdout as it is read,
	// kept or dropped (MaxOutput does not apply to it), for example to parse
	// a long NDJSON stream whose last line matters. It is called on the
	// goroutine that drains the pipe, never concurrently with itself and
	// only before Run returns; it must not block or retain p, and its
	// errors are ignored.
	StdoutTee io.Writer
}

// ErrPolicy is wrapped by every error that reports an invalid Confinement.
var ErrPolicy = errors.New("sandbox: invalid policy")

func policyErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrPolicy, fmt.Sprintf(format, args...))
}

// resolved is a validated Confinement with defaults applied and paths resolved.
type resolved struct {
	Confinement
	workspace string   // symlinks resolved
	dir       string   // symlinks resolved
	readOnly  []string // symlinks resolved
	writable  []string // symlinks resolved
}

// resolve validates p and applies defaults. It never touches p's slices.
func resolve(p Confinement) (*resolved, error) {
	r := &resolved{Confinement: p}
	switch p.Backend {
	case BackendAuto, BackendBwrap, BackendLandlock, BackendNone:
	default:
		return nil, policyErr("unknown backend %q", p.Backend)
	}
	ws, err := existingDir(p.Workspace, "workspace")
	if err != nil {
		return nil, err
	}
	if ws == "/" {
		return nil, policyErr("workspace must not be the root directory")
	}
	r.workspace = ws
	dir := p.Dir
	if dir == "" {
		dir = ws
	} else if !filepath.IsAbs(dir) {
		dir = filepath.Join(ws, dir)
	}
	if r.dir, err = existingDir(dir, "dir"); err != nil {
		return nil, err
	}
	if !within(ws, r.dir) {
		return nil, policyErr("dir %q is outside workspace %q", p.Dir, ws)
	}
	for _, l := range []struct {
		in   []string
		out  *[]string
		what string
	}{{p.ReadOnly, &r.readOnly, "read-only path"}, {p.Writable, &r.writable, "writable path"}} {
		for _, path := range l.in {
			if !filepath.IsAbs(path) {
				return nil, policyErr("%s %q is not absolute", l.what, path)
			}
			real, err := filepath.EvalSymlinks(path)
			if err != nil {
				return nil, policyErr("%s %q: %v", l.what, path, err)
			}
			*l.out = append(*l.out, real)
		}
	}
	if p.Timeout < 0 {
		return nil, policyErr("negative timeout %v", p.Timeout)
	}
	if r.Timeout == 0 {
		r.Timeout = DefaultTimeout
	}
	if p.MaxOutput < 0 {
		return nil, policyErr("negative MaxOutput %d", p.MaxOutput)
	}
	if r.MaxOutput == 0 {
		r.MaxOutput = DefaultMaxOutput
	}
	for k, v := range p.Env {
		if err := checkEnvName(k); err != nil {
			return nil, err
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, policyErr("environment value of %q contains NUL", k)
		}
	}
	for _, k := range p.PassEnv {
		if err := checkEnvName(k); err != nil {
			return nil, err
		}
	}
	l := &r.Limits
	if l.CPU == 0 {
		l.CPU = 2 * r.Timeout
	}
	if l.Memory == 0 {
		l.Memory = DefaultMemory
	}
	if l.Memory > 0 && l.Memory < MinMemory {
		return nil, policyErr("the memory limit (RLIMIT_AS) of %d bytes (%s) is below the minimum of %d bytes (%s) the sandbox needs to start a command",
			l.Memory, mib(l.Memory), int64(MinMemory), mib(MinMemory))
	}
	if l.FileSize == 0 {
		l.FileSize = DefaultFileSize
	}
	if l.Processes == 0 {
		l.Processes = DefaultProcesses
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	if l.TmpSize == 0 {
		l.TmpSize = DefaultTmpSize
	}
	return r, nil
}

func checkEnvName(k string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") {
		return policyErr("bad environment variable name %q", k)
	}
	return nil
}

func existingDir(path, what string) (string, error) {
	if path == "" {
		return "", policyErr("%s is required", what)
	}
	if !filepath.IsAbs(path) {
		return "", policyErr("%s %q is not absolute", what, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", policyErr("%s %q: %v", what, path, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", policyErr("%s %q: %v", what, path, err)
	}
	if !fi.IsDir() {
		return "", policyErr("%s %q is not a directory", what, path)
	}
	return real, nil
}

// within reports whether path is root or below it (both clean and absolute).
func within(root, path string) bool {
	if root == path {
		return true
	}
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// environment builds the child's environment: the allow-list, then PassEnv,
// then Env, sorted by name for determinism.
func (r *resolved) environment(tmp string) []string {
	m := map[string]string{
		"PATH":   os.Getenv("PATH"),
		"HOME":   r.workspace,
		"LANG":   os.Getenv("LANG"),
		"TERM":   "dumb",
		"TMPDIR": tmp,
	}
	if m["PATH"] == "" {
		m["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	if m["LANG"] == "" {
		m["LANG"] = "C.UTF-8"
	}
	for _, k := range r.PassEnv {
		if v, ok := os.LookupEnv(k); ok && strings.IndexByte(v, 0) < 0 {
			m[k] = v
		}
	}
	for k, v := range r.Env {
		m[k] = v
	}
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return env
}
