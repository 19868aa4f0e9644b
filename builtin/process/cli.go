// Package process holds the tools that run programs in the process
// sandbox: tool.cli (a shell command) and tool.python (a snippet), in the
// agent's workspace with time and output limits.
package process

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/sandbox"
	args "github.com/armory-dev/armory/toolargs"
)

// Defaults of the process tools (tool.cli, tool.python).
const (
	// DefaultTimeout is a call's time limit when timeout_secs is
	// not given.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxTimeout is the largest timeout_secs a call may ask for.
	DefaultMaxTimeout = 10 * time.Minute
	// MaxOutput is how many bytes of each stream (stdout, stderr) a
	// process tool keeps; the rest is read, counted and dropped.
	MaxOutput = 64 << 10
	// CLIMaxCommand bounds tool.cli's command (Linux refuses a single
	// argument over 128 KiB anyway).
	CLIMaxCommand = 64 << 10
	// PythonMaxCode bounds tool.python's code.
	PythonMaxCode = 256 << 10
	// PythonMaxArgs bounds the total size of tool.python's args.
	PythonMaxArgs = 64 << 10
	// DefaultShell runs tool.cli's command as `/bin/sh -c COMMAND`.
	DefaultShell = "/bin/sh"
	// DefaultPython is the interpreter of tool.python, looked up on PATH.
	DefaultPython = "python3"
)

// Options configure tool.cli and tool.python. The zero value gives
// the defaults above; the constructors copy it.
type Options struct {
	// Timeout is a call's time limit when it gives no timeout_secs (zero:
	// 30 s). MaxTimeout caps timeout_secs (zero: 10 min; never below
	// Timeout).
	Timeout    time.Duration
	MaxTimeout time.Duration
	// MaxOutput is how many bytes of each stream are kept (zero: 64 KiB).
	MaxOutput int
	// Limits are the per-process resource limits (zero fields: the
	// sandbox defaults, see sandbox.Limits).
	Limits sandbox.Limits
	// Shell is the shell of tool.cli (zero: /bin/sh). It is run as
	// `Shell -c COMMAND`.
	Shell string
	// Python is the interpreter of tool.python (zero: python3 on PATH).
	Python string
}

func (o Options) withDefaults() Options {
	t := o.timeouts().WithDefaults(DefaultTimeout, DefaultMaxTimeout)
	o.Timeout, o.MaxTimeout = t.Default, t.Max
	if o.MaxOutput <= 0 {
		o.MaxOutput = MaxOutput
	}
	if o.Shell == "" {
		o.Shell = DefaultShell
	}
	if o.Python == "" {
		o.Python = DefaultPython
	}
	return o
}

func (o Options) timeouts() args.Timeouts {
	return args.Timeouts{Default: o.Timeout, Max: o.MaxTimeout}
}

// sandboxRequirement is the requirement of every process tool: a working
// sandbox backend (or the world's explicit "sandbox: none"); check it with
// sandbox.Requirement(world sandbox setting).
var sandboxRequirement = armory.Requirement{Kind: sandbox.RequirementKind, Name: "process sandbox (bwrap or landlock)"}

// Value is the structured result (Result.Value) of tool.cli and
// tool.python.
type Value struct {
	ExitCode   int    `json:"exit_code"`
	DurationMS int64  `json:"duration_ms"`
	Backend    string `json:"backend"`
	TimedOut   bool   `json:"timed_out"`
	// Killed is set when the run was stopped before it ended on its own;
	// KillReason is then "timeout", "canceled" or "process limit".
	Killed     bool   `json:"killed"`
	KillReason string `json:"kill_reason,omitempty"`
	Signal     string `json:"signal,omitempty"`
	// StdoutBytes and StderrBytes count every byte the streams carried.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// Truncated is set when either stream was longer than what is shown.
	Truncated bool `json:"truncated"`
}

var processOutputSchema = []byte(`{"type":"object","properties":{` +
	`"exit_code":{"type":"integer","description":"Exit status; 128+N when the process died of signal N"},` +
	`"duration_ms":{"type":"integer"},"backend":{"type":"string","description":"bwrap, landlock or none"},` +
	`"timed_out":{"type":"boolean"},"killed":{"type":"boolean"},"kill_reason":{"type":"string"},"signal":{"type":"string"},` +
	`"stdout_bytes":{"type":"integer"},"stderr_bytes":{"type":"integer"},"truncated":{"type":"boolean"}},` +
	`"required":["exit_code","duration_ms","backend","timed_out","killed","stdout_bytes","stderr_bytes","truncated"]}`)

// CLI is tool.cli: it runs a shell command (`/bin/sh -c COMMAND`) in the
// agent's workspace inside the process sandbox (package sandbox), with a
// time limit, rlimits, per-stream output caps, stdin closed, a reduced
// environment and no network unless the agent's sandbox policy grants it.
// Output is streamed to Invocation.Progress as it arrives. Screening of the
// command happens before, in the guarded pipeline; the sandbox is the
// second wall. Safe for concurrent use.
type CLI struct {
	opts Options
}

var _ armory.Tool = (*CLI)(nil)

// NewCLI returns tool.cli configured by o (zero fields take defaults).
func NewCLI(o Options) *CLI { return &CLI{opts: o.withDefaults()} }

func (t *CLI) Spec() armory.Spec {
	return armory.Spec{
		Name: "tool.cli",
		Description: fmt.Sprintf("Run a shell command (%s -c) in your workspace inside a sandbox: the file system is read-only except your workspace and a private /tmp, "+
			"there is no network unless your sandbox policy grants it, stdin is empty. Each of stdout and stderr is cut at %d KB. Default time limit %s, at most %s; "+
			"the whole process tree is killed at the limit.", t.opts.Shell, t.opts.MaxOutput>>10, t.opts.Timeout, t.opts.MaxTimeout),
		InputSchema: args.Schema([]string{"command"},
			fmt.Sprintf(`"command":{"type":"string","maxLength":%d,"description":"Shell command line, for example \"ls -la && git status\""},`, CLIMaxCommand)+
				cwdProp+","+t.opts.timeouts().Prop("Time limit in seconds")),
		OutputSchema: processOutputSchema,
	}
}

func (t *CLI) Manifest() armory.Manifest {
	return processManifest()
}

func processManifest(extra ...armory.Requirement) armory.Manifest {
	return armory.Manifest{
		Danger:       armory.DangerDangerous,
		Capabilities: []armory.Capability{armory.CapProcessExec, armory.CapWriteFS},
		Permission:   armory.PermConfirm,
		Category:     armory.CatTerminal,
		Requires:     append([]armory.Requirement{sandboxRequirement}, extra...),
	}
}

const cwdProp = `"cwd":{"type":"string","description":"Working directory relative to your workspace (default: the workspace itself); it must exist and stay inside the workspace"}`

// Execute runs the command. Failures: KindInvalid (bad arguments, an empty
// or oversized command, a cwd outside the workspace), KindNotFound (cwd
// missing), KindUnavailable (no workspace, no working sandbox),
// KindTimeout (the time limit passed: the tree was killed; the output so
// far is in the text), KindOther (the command exited non-zero or was
// killed by the process limit). A failed run still carries its output and
// Value (a Value).
func (t *CLI) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "tool.cli"
	var a struct {
		Command     string  `json:"command"`
		Cwd         string  `json:"cwd"`
		TimeoutSecs float64 `json:"timeout_secs"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	switch {
	case strings.TrimSpace(a.Command) == "":
		return armory.Failf(armory.KindInvalid, "command is required")
	case len(a.Command) > CLIMaxCommand:
		return armory.Failf(armory.KindInvalid, "command is %d bytes; the limit is %d: write a script to a workspace file and run that", len(a.Command), CLIMaxCommand)
	case strings.IndexByte(a.Command, 0) >= 0:
		return armory.Failf(armory.KindInvalid, "command contains a NUL byte")
	}
	p, err := processPolicy(op, inv, a.Cwd, t.opts, a.TimeoutSecs)
	if err != nil {
		return armory.FailErr(err)
	}
	return runProcess(ctx, op, inv, p, []string{t.opts.Shell, "-c", a.Command})
}

// processPolicy builds the sandbox policy of one call: the agent's
// workspace (created if missing) and sandbox settings, cwd checked to stay
// inside the workspace.
func processPolicy(op string, inv armory.Invocation, cwd string, o Options, timeoutSecs float64) (sandbox.Confinement, error) {
	timeout, err := o.timeouts().Call(op, timeoutSecs)
	if err != nil {
		return sandbox.Confinement{}, err
	}
	if inv.Agent == nil || inv.Agent.Workspace == "" {
		return sandbox.Confinement{}, armory.E(op, armory.KindUnavailable, "this agent has no workspace to run commands in")
	}
	ws := inv.Agent.Workspace
	if !filepath.IsAbs(ws) {
		return sandbox.Confinement{}, armory.E(op, armory.KindInternal, fmt.Sprintf("workspace %q is not absolute", ws))
	}
	if err := os.MkdirAll(ws, 0o750); err != nil {
		return sandbox.Confinement{}, armory.E(op, armory.KindUnavailable, "cannot create the workspace", err)
	}
	dir, err := resolveCwd(op, ws, cwd)
	if err != nil {
		return sandbox.Confinement{}, err
	}
	return sandbox.Confinement{
		Backend:   sandbox.Backend(inv.Agent.Sandbox.Backend),
		Workspace: ws,
		Dir:       dir,
		Network:   inv.Agent.Sandbox.Network,
		Timeout:   timeout,
		MaxOutput: o.MaxOutput,
		Limits:    o.Limits,
	}, nil
}

// resolveCwd checks a cwd argument: relative (an "@me/" prefix is
// accepted), no ".." above the workspace, and, with symbolic links
// resolved, an existing folder inside the workspace. It returns the
// absolute resolved folder ("" for the workspace itself). The sandbox
// checks the resolved folder again; a link swapped in between can only
// point at a read-only place, since only the workspace is writable inside.
func resolveCwd(op, ws, cwd string) (string, error) {
	c := strings.TrimPrefix(strings.TrimPrefix(cwd, "@me/"), "@me")
	if c == "" || c == "." {
		return "", nil
	}
	if strings.IndexByte(c, 0) >= 0 {
		return "", armory.E(op, armory.KindInvalid, "cwd contains a NUL byte")
	}
	if filepath.IsAbs(c) || strings.HasPrefix(c, "@") {
		return "", armory.E(op, armory.KindInvalid, fmt.Sprintf("cwd %q must be a folder relative to your workspace", cwd))
	}
	rel := filepath.Clean(c)
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", armory.E(op, armory.KindPermission, fmt.Sprintf("cwd %q leads outside your workspace", cwd))
	}
	realWS, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return "", armory.E(op, armory.KindUnavailable, "cannot resolve the workspace", err)
	}
	real, err := filepath.EvalSymlinks(filepath.Join(realWS, rel))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", armory.E(op, armory.KindNotFound, fmt.Sprintf("cwd %q does not exist in your workspace", cwd))
		}
		return "", armory.E(op, armory.KindInvalid, fmt.Sprintf("cwd %q", cwd), err)
	}
	if r, err := filepath.Rel(realWS, real); err != nil || r == ".." || strings.HasPrefix(r, "../") {
		return "", armory.E(op, armory.KindPermission, fmt.Sprintf("cwd %q leads outside your workspace (through a symbolic link)", cwd))
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", armory.E(op, armory.KindInvalid, fmt.Sprintf("cwd %q is not a folder", cwd))
	}
	return real, nil
}

// runProcess runs argv under p, streams its output to inv.Progress in
// line-sized pieces, and turns the outcome into the result.
func runProcess(ctx context.Context, op string, inv armory.Invocation, p sandbox.Confinement, argv []string) armory.Result {
	progress, flush := sandbox.LineProgress(inv.Progress)
	out, err := sandbox.Run(ctx, p, argv, progress)
	flush()
	if err != nil {
		return runFailure(op, argv[0], err)
	}
	return processResult(out, p.MaxOutput)
}

// runFailure is the result of a call whose sandbox.Run failed (nothing
// ran). A cancel is KindOther, as for a command canceled while it runs
// (armory.E cannot carry KindOther: KindOf reads it as unset).
func runFailure(op, argv0 string, err error) armory.Result {
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		return armory.FailErr(armory.E(op, armory.KindUnavailable, "no working process sandbox on this machine (an administrator can install bubblewrap or enable Landlock)", err))
	case errors.Is(err, exec.ErrNotFound):
		return armory.Failf(armory.KindUnavailable, "%s is not installed on this machine", argv0)
	case errors.Is(err, sandbox.ErrPolicy):
		return armory.FailErr(armory.E(op, armory.KindInvalid, "cannot run here", err))
	case errors.Is(err, context.DeadlineExceeded):
		return armory.Failf(armory.KindTimeout, "the call's time ran out before the command started")
	case errors.Is(err, context.Canceled):
		return armory.Failf(armory.KindOther, "the call was canceled before the command started")
	}
	return armory.FailErr(armory.E(op, armory.KindInternal, "could not start the sandbox", err))
}

// processResult renders an outcome for the model: stdout, then a
// "[stderr]" section, then a status line when the run failed.
func processResult(out sandbox.Report, maxOutput int) armory.Result {
	v := Value{
		ExitCode: out.ExitCode, DurationMS: out.Duration.Milliseconds(), Backend: string(out.Backend),
		TimedOut: out.TimedOut, Killed: out.Killed, KillReason: out.KillReason, Signal: out.Signal,
		StdoutBytes: out.StdoutTotal, StderrBytes: out.StderrTotal,
		Truncated: out.StdoutTotal > int64(maxOutput) || out.StderrTotal > int64(maxOutput),
	}
	var b strings.Builder
	b.Grow(len(out.Stdout) + len(out.Stderr) + 96)
	b.WriteString(strings.ToValidUTF8(string(out.Stdout), "\uFFFD"))
	if len(out.Stderr) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString("[stderr]\n")
		b.WriteString(strings.ToValidUTF8(string(out.Stderr), "\uFFFD"))
	}
	status := func(s string) {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
		b.WriteString(s)
	}
	res := armory.Result{Success: true, Value: v}
	switch {
	case out.TimedOut:
		status(fmt.Sprintf("[timed out after %s; the process tree was killed]", out.Duration.Round(time.Millisecond)))
		res.Success, res.Kind = false, armory.KindTimeout
	case out.Killed && out.KillReason == "canceled":
		status("[canceled; the process tree was killed]")
		res.Success, res.Kind = false, armory.KindOther
	case out.Killed:
		status(fmt.Sprintf("[killed: %s exceeded; the process tree was killed]", out.KillReason))
		res.Success, res.Kind = false, armory.KindOther
	case out.ExitCode != 0:
		s := fmt.Sprintf("[exit code %d", out.ExitCode)
		if out.Signal != "" {
			s += ", " + out.Signal
		}
		status(s + "]")
		res.Success, res.Kind = false, armory.KindOther
	case b.Len() == 0:
		b.WriteString("(no output)")
	}
	res.Text = b.String()
	return res
}
