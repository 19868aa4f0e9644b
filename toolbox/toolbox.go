// Package toolbox turns the CLI tools declared in a world's
// toolbox/<name>/toolbox.yaml into armory.Tools. A toolbox tool runs its
// binary directly (no shell) inside the process sandbox (package sandbox):
// declared arguments become argv entries, a missing required argument is a
// tool error, and the timeout, output cap and rlimits are enforced. The
// whole process tree is killed when the run ends.
package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/compact"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/world"
)

// Tool is a toolbox tool. Safe for concurrent use.
type Tool struct {
	def  *world.ToolboxTool
	dir  string // folder of the binary's files, mounted read-only; or ""
	spec armory.Spec
	man  armory.Manifest
}

var _ armory.Tool = (*Tool)(nil)

// New builds the tool for def.
func New(def *world.ToolboxTool) *Tool {
	t := &Tool{def: def, dir: binaryDir(def), man: def.Manifest}
	t.man.Requires = append(slices.Clone(t.man.Requires),
		armory.Requirement{Kind: "binary", Name: def.BinaryPath},
		armory.Requirement{Kind: sandbox.RequirementKind, Name: "process sandbox (bwrap or landlock)"})
	t.spec = armory.Spec{Name: def.FullName(), Description: def.Description, InputSchema: inputSchema(def.Args)}
	return t
}

// binaryDir is the folder a tool's binary needs: the toolbox folder for a
// binary given relative to it, the binary's own folder for an absolute
// one, "" for a name found on PATH.
func binaryDir(def *world.ToolboxTool) string {
	switch {
	case filepath.IsAbs(def.Binary):
		return filepath.Dir(def.BinaryPath)
	case strings.Contains(def.Binary, "/"):
		if d, ok := strings.CutSuffix(def.BinaryPath, "/"+filepath.Clean(def.Binary)); ok && d != "" {
			return d
		}
		return filepath.Dir(def.BinaryPath)
	}
	return ""
}

// FromWorld returns the binary tools of every toolbox the world allows, in
// no particular order. Tools that run a WebAssembly module (Wasm set) are
// left to package wasm.
func FromWorld(w *world.World) []armory.Tool {
	var names []string
	for n := range w.Toolboxes {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []armory.Tool
	for _, n := range names {
		for _, d := range w.Toolboxes[n].Tools {
			if d.Wasm != nil {
				continue
			}
			out = append(out, New(d))
		}
	}
	return out
}

// Def returns the tool's definition.
func (t *Tool) Def() *world.ToolboxTool { return t.def }

func (t *Tool) Spec() armory.Spec         { return t.spec }
func (t *Tool) Manifest() armory.Manifest { return t.man }

func inputSchema(args []world.Arg) json.RawMessage {
	type prop struct {
		Type        string   `json:"type"`
		Description string   `json:"description,omitempty"`
		Enum        []string `json:"enum,omitempty"`
	}
	props := map[string]prop{}
	required := []string{}
	for _, a := range args {
		p := prop{Type: "string", Description: a.Description, Enum: a.Enum}
		if a.Type == world.ArgFlagBool {
			p.Type = "boolean"
		}
		props[a.Name] = p
		if a.Required {
			required = append(required, a.Name)
		}
	}
	b, _ := json.Marshal(struct {
		Type       string          `json:"type"`
		Properties map[string]prop `json:"properties"`
		Required   []string        `json:"required"`
		Additional bool            `json:"additionalProperties"`
	}{"object", props, required, false})
	return b
}

// Argv maps JSON arguments to the argv of the tool's binary (without the
// binary itself), in declaration order. It returns a KindInvalid error a
// model can act on for unknown or missing arguments, wrong types, values
// outside an enum, and positional values that start with "-" (they would be
// read as options: an argument-injection risk).
func (t *Tool) Argv(raw json.RawMessage) ([]string, error) {
	op := t.spec.Name
	vals := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(raw)) > 0 && string(bytes.TrimSpace(raw)) != "null" {
		if err := json.Unmarshal(raw, &vals); err != nil {
			return nil, armory.E(op, armory.KindInvalid, "arguments must be a JSON object")
		}
	}
	known := map[string]bool{}
	for _, a := range t.def.Args {
		known[a.Name] = true
	}
	var unknown []string
	for k := range vals {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("unknown argument(s) %s (this tool takes: %s)", strings.Join(unknown, ", "), strings.Join(argNames(t.def.Args), ", ")))
	}
	var argv []string
	for _, a := range t.def.Args {
		v, ok := vals[a.Name]
		if !ok || string(v) == "null" {
			if a.Required {
				return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("missing required argument %q (%s)", a.Name, a.Description))
			}
			continue
		}
		if a.Type == world.ArgFlagBool {
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("argument %q must be true or false", a.Name))
			}
			if b {
				argv = append(argv, a.Flag)
			}
			continue
		}
		s, err := scalar(v)
		if err != nil {
			return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("argument %q must be a string", a.Name))
		}
		if strings.ContainsRune(s, 0) {
			return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("argument %q contains a NUL byte", a.Name))
		}
		if len(a.Enum) > 0 && !contains(a.Enum, s) {
			return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("argument %q must be one of %s, got %q", a.Name, strings.Join(a.Enum, ", "), s))
		}
		switch a.Type {
		case world.ArgFlag:
			argv = append(argv, a.Flag, s)
		default:
			if strings.HasPrefix(s, "-") {
				return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("argument %q may not start with \"-\" (it would be read as an option): %q", a.Name, s))
			}
			argv = append(argv, s)
		}
	}
	return argv, nil
}

func scalar(v json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, nil
	}
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&n); err == nil {
		return n.String(), nil
	}
	return "", errors.New("not a string")
}

func argNames(args []world.Arg) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a.Name
	}
	if len(out) == 0 {
		return []string{"no arguments"}
	}
	return out
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// Execute runs the binary with the mapped argv in the agent's workspace,
// inside the process sandbox (see Run). Failures: KindInvalid (arguments),
// KindUnavailable (no workspace, no working sandbox, binary missing),
// KindTimeout (the tree was killed at the tool's timeout), KindOther (a
// non-zero exit or the process limit); failed runs keep their output.
func (t *Tool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	argv, err := t.Argv(inv.Args)
	if err != nil {
		return armory.FailErr(err)
	}
	if inv.Agent == nil || inv.Agent.Workspace == "" {
		return armory.Failf(armory.KindUnavailable, "%s: this agent has no workspace to run tools in", t.spec.Name)
	}
	if err := os.MkdirAll(inv.Agent.Workspace, 0o750); err != nil {
		return armory.Failf(armory.KindUnavailable, "cannot create workspace: %v", err)
	}
	spec := RunSpec{
		Binary: t.def.BinaryPath, Args: argv,
		Workspace: inv.Agent.Workspace, Sandbox: inv.Agent.Sandbox,
		Env: BaseEnv(inv.Agent), PassEnv: t.def.Env,
		Timeout: t.def.Timeout, MaxOutput: t.def.MaxOutput,
		Limits: sandbox.Limits{Memory: Memory},
	}
	if t.dir != "" {
		// Readable even where the sandbox hides the host's folder (a world
		// under /tmp); bound read-only, so the tool cannot change itself.
		spec.ReadOnly = []string{t.dir}
	}
	var stream *compact.Stream
	if compact.IsCodingAgent(t.spec.Name) {
		// Coding agents (the ghost world): the whole NDJSON stream is parsed as it
		// arrives — not just the capped part — so the result event at its end
		// is never lost; live progress goes to the caller.
		stream = compact.NewStream(t.spec.Name)
		if inv.Progress != nil {
			stream.OnProgress(inv.Progress)
		}
		spec.StdoutTee = stream
	} else {
		spec.Progress = inv.Progress
	}
	out := Run(ctx, spec)
	if stream != nil && out.StartErr == nil {
		if summary, ok := stream.Summary(); ok {
			out.Stdout, out.StdoutTotal = []byte(summary), int64(len(summary))
			out.Truncated = out.StderrTotal > int64(t.def.MaxOutput)
		}
	}
	return out.Result(t.spec.Name)
}

// Memory is the address-space limit (RLIMIT_AS) of toolbox processes. It is
// above the sandbox default because the runtimes of typical toolbox
// binaries (Node's V8, the JVM, Go) reserve large address ranges up front.
const Memory = 8 << 30

// BaseEnv is what a toolbox process gets on top of the sandbox's
// allow-list (PATH, HOME = the workspace, TERM=dumb, TMPDIR; see package
// sandbox): LANG=C.UTF-8, AGENT_WORKSPACE (the workspace) and ARMORY_AGENT
// (the agent id). Nothing else of armory's own environment leaks through;
// the variables a tool declares under env: are copied by name.
func BaseEnv(agent *armory.AgentEnv) map[string]string {
	env := map[string]string{"LANG": "C.UTF-8"}
	if agent != nil {
		env["AGENT_WORKSPACE"] = agent.Workspace
		env["ARMORY_AGENT"] = agent.ID
	}
	return env
}

// RunSpec is one sandboxed process run.
type RunSpec struct {
	// Binary is an absolute path or a name looked up on the sandbox's PATH.
	Binary string
	Args   []string
	// Workspace is the writable folder (required, must exist) and the
	// default working directory; Dir is an optional working directory
	// inside it.
	Workspace string
	Dir       string
	// ReadOnly lists extra absolute folders mounted read-only (the
	// toolbox folder).
	ReadOnly []string
	// Sandbox selects the backend and grants the network (see
	// armory.SandboxPolicy).
	Sandbox armory.SandboxPolicy
	// Env is applied over the sandbox's base environment; PassEnv names
	// variables copied from armory's environment when set.
	Env     map[string]string
	PassEnv []string
	// Timeout (default world.DefaultToolTimeout) and MaxOutput per stream
	// (default world.DefaultToolMaxOutput).
	Timeout   time.Duration
	MaxOutput int
	// Limits are the rlimits (zero fields: the sandbox defaults).
	Limits sandbox.Limits
	// StdoutTee, when set, also receives every byte of stdout (not just
	// the kept part). It must not block.
	StdoutTee io.Writer
	// Progress, when set, receives the kept output in line-sized pieces
	// (stderr prefixed "[stderr] ").
	Progress func(msg string)
}

// Report is what a run produced.
type Report struct {
	ExitCode int
	// Stdout and Stderr are the kept bytes, followed by the sandbox's
	// "\n(N bytes, truncated)" marker (N dropped bytes) when cut.
	Stdout, Stderr []byte
	StdoutTotal    int64
	StderrTotal    int64
	TimedOut       bool
	// Killed and KillReason ("timeout", "canceled", "process limit") say
	// whether the sandbox stopped the run.
	Killed     bool
	KillReason string
	Signal     string
	Backend    sandbox.Backend
	// Truncated is set when a stream carried more than MaxOutput bytes.
	Truncated bool
	// StartErr is set when nothing ran (invalid spec, no sandbox, binary
	// not found); the other fields are then zero.
	StartErr error
	Duration time.Duration
}

// Run runs spec's binary with sandbox.Run: confined by the backend of
// spec.Sandbox, stdin closed, the reduced environment, rlimits, and the
// whole process tree killed at the timeout or when ctx ends. Output beyond
// MaxOutput per stream is drained and counted, not kept. It never returns
// before every process of the run is gone. Safe for concurrent use.
func Run(ctx context.Context, spec RunSpec) Report {
	if spec.Timeout <= 0 {
		spec.Timeout = world.DefaultToolTimeout
	}
	if spec.MaxOutput <= 0 {
		spec.MaxOutput = world.DefaultToolMaxOutput
	}
	if filepath.IsAbs(spec.Binary) {
		// bwrap would report a missing binary as an exit status; say it
		// plainly instead.
		fi, err := os.Stat(spec.Binary)
		if err == nil && (fi.IsDir() || fi.Mode()&0o111 == 0) {
			err = fmt.Errorf("%s is not an executable file", spec.Binary)
		}
		if err != nil {
			return Report{StartErr: err, ExitCode: -1}
		}
	}
	p := sandbox.Confinement{
		Backend:   sandbox.Backend(spec.Sandbox.Backend),
		Workspace: spec.Workspace,
		Dir:       spec.Dir,
		ReadOnly:  spec.ReadOnly,
		Network:   spec.Sandbox.Network,
		Env:       spec.Env,
		PassEnv:   spec.PassEnv,
		Timeout:   spec.Timeout,
		MaxOutput: spec.MaxOutput,
		Limits:    spec.Limits,
		StdoutTee: spec.StdoutTee,
	}
	progress, flush := sandbox.LineProgress(spec.Progress)
	out, err := sandbox.Run(ctx, p, append([]string{spec.Binary}, spec.Args...), progress)
	flush()
	if err != nil {
		return Report{StartErr: err, ExitCode: -1}
	}
	return Report{
		ExitCode: out.ExitCode, Stdout: out.Stdout, Stderr: out.Stderr,
		StdoutTotal: out.StdoutTotal, StderrTotal: out.StderrTotal,
		TimedOut: out.TimedOut, Killed: out.Killed, KillReason: out.KillReason, Signal: out.Signal,
		Backend: out.Backend, Duration: out.Duration,
		Truncated: out.StdoutTotal > int64(spec.MaxOutput) || out.StderrTotal > int64(spec.MaxOutput),
	}
}

// Result turns an outcome into the tool result a model reads: stdout, a
// "[stderr]" section, and a status line when the run failed. Value holds
// exit_code, duration_ms, backend, timed_out and truncated.
func (o Report) Result(tool string) armory.Result {
	if o.StartErr != nil {
		kind := armory.KindUnavailable
		if errors.Is(o.StartErr, sandbox.ErrPolicy) {
			kind = armory.KindInvalid
		}
		return armory.Failf(kind, "%s could not start: %v", tool, o.StartErr)
	}
	var b strings.Builder
	b.Write(o.Stdout)
	if len(o.Stderr) > 0 {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteString("\n")
		}
		b.WriteString("[stderr]\n")
		b.Write(o.Stderr)
	}
	text := strings.ToValidUTF8(b.String(), "\uFFFD")
	value := map[string]any{
		"exit_code": o.ExitCode, "duration_ms": o.Duration.Milliseconds(), "backend": string(o.Backend),
		"timed_out": o.TimedOut, "truncated": o.Truncated,
	}
	sep := ""
	if text != "" && !strings.HasSuffix(text, "\n") {
		sep = "\n"
	}
	switch {
	case o.TimedOut:
		return armory.Result{Success: false, Kind: armory.KindTimeout, Text: fmt.Sprintf("%s%s[timed out after %s; the process tree was killed]", text, sep, o.Duration.Round(time.Millisecond)), Value: value}
	case o.Killed:
		return armory.Result{Success: false, Kind: armory.KindOther, Text: fmt.Sprintf("%s%s[killed: %s; the process tree was killed]", text, sep, o.KillReason), Value: value}
	case o.ExitCode != 0:
		return armory.Result{Success: false, Kind: armory.KindOther, Text: fmt.Sprintf("%s%s[exit code %s]", text, sep, strconv.Itoa(o.ExitCode)), Value: value}
	}
	return armory.Result{Success: true, Text: text, Value: value}
}
