// Package toolbox turns the CLI tools declared in a world's
// toolbox/<name>/toolbox.yaml into armory.Tools. A toolbox tool runs its
// binary directly (no shell): declared arguments become argv entries, a
// missing required argument is a tool error, and the timeout and output cap
// are enforced. The process tree is killed as a whole (process group).
package toolbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/toolbox/compact"
	"github.com/armory-dev/armory/world"
)

// Tool is a toolbox tool. Safe for concurrent use.
type Tool struct {
	def  *world.ToolboxTool
	spec armory.Spec
	man  armory.Manifest
}

var _ armory.Tool = (*Tool)(nil)

// New builds the tool for def.
func New(def *world.ToolboxTool) *Tool {
	t := &Tool{def: def, man: def.Manifest}
	t.man.Requires = append(t.man.Requires, armory.Requirement{Kind: "binary", Name: def.BinaryPath})
	t.spec = armory.Spec{Name: def.FullName(), Description: def.Description, InputSchema: inputSchema(def.Args)}
	return t
}

// FromWorld returns the tools of every toolbox the world allows, in no
// particular order.
func FromWorld(w *world.World) []armory.Tool {
	var names []string
	for n := range w.Toolboxes {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []armory.Tool
	for _, n := range names {
		for _, d := range w.Toolboxes[n].Tools {
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

// Execute runs the binary with the mapped argv in the agent's workspace.
func (t *Tool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	argv, err := t.Argv(inv.Args)
	if err != nil {
		return armory.FailErr(err)
	}
	dir := ""
	if inv.Agent != nil && inv.Agent.Workspace != "" {
		if err := os.MkdirAll(inv.Agent.Workspace, 0o750); err != nil {
			return armory.Failf(armory.KindInternal, "cannot create workspace: %v", err)
		}
		dir = inv.Agent.Workspace
	}
	spec := RunSpec{Binary: t.def.BinaryPath, Args: argv, Dir: dir, Env: t.env(inv), Timeout: t.def.Timeout, MaxOutput: t.def.MaxOutput}
	var stream *compact.Stream
	if compact.IsCodingAgent(t.spec.Name) {
		// Coding agents (seed 000): the whole NDJSON stream is parsed as it
		// arrives — not just the capped part — so the result event at its end
		// is never lost; live progress goes to the caller.
		stream = compact.NewStream(t.spec.Name)
		if inv.Progress != nil {
			stream.OnProgress(inv.Progress)
		}
		spec.StdoutTee = stream
	}
	out := Run(ctx, spec)
	if stream != nil {
		if summary, ok := stream.Summary(); ok {
			out.Stdout, out.StdoutTotal = []byte(summary), int64(len(summary))
		}
	}
	return out.Result(t.spec.Name)
}

func (t *Tool) env(inv armory.Invocation) []string {
	env := BaseEnv(inv.Agent)
	for _, k := range t.def.Env {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// BaseEnv is the reduced environment every toolbox process gets: PATH,
// LANG, TERM=dumb, HOME and AGENT_WORKSPACE set to the workspace, and
// ARMORY_AGENT. Nothing else of armory's own environment leaks through.
func BaseEnv(agent *armory.AgentEnv) []string {
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin"
	}
	env := []string{"PATH=" + path, "LANG=C.UTF-8", "TERM=dumb"}
	if agent != nil {
		env = append(env, "HOME="+agent.Workspace, "AGENT_WORKSPACE="+agent.Workspace, "ARMORY_AGENT="+agent.ID)
	}
	return env
}

// RunSpec is one unsandboxed process run.
type RunSpec struct {
	Binary    string
	Args      []string
	Dir       string
	Env       []string
	Timeout   time.Duration
	MaxOutput int // per stream
	// StdoutTee, when set, also receives every byte of stdout (not just
	// the kept part). It must not block.
	StdoutTee io.Writer
}

// Outcome is what a run produced.
type Outcome struct {
	ExitCode       int
	Stdout, Stderr []byte
	StdoutTotal    int64
	StderrTotal    int64
	TimedOut       bool
	StartErr       error
	Duration       time.Duration
}

// waitDelay bounds how long Run waits for pipes after the process exits or
// is killed (a grandchild holding them open must not hang the call).
const waitDelay = 2 * time.Second

// Run starts spec's binary with stdin closed and kills its whole process
// group when the timeout passes or ctx ends. Output beyond MaxOutput per
// stream is drained and counted, not kept.
func Run(ctx context.Context, spec RunSpec) Outcome {
	if spec.Timeout <= 0 {
		spec.Timeout = world.DefaultToolTimeout
	}
	if spec.MaxOutput <= 0 {
		spec.MaxOutput = world.DefaultToolMaxOutput
	}
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, spec.Binary, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdin = nil // /dev/null
	stdout := &capped{max: spec.MaxOutput}
	stderr := &capped{max: spec.MaxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if spec.StdoutTee != nil {
		cmd.Stdout = io.MultiWriter(stdout, spec.StdoutTee)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		// Kill the whole group: children that the tool started die too.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = waitDelay
	start := time.Now()
	err := cmd.Run()
	o := Outcome{Stdout: stdout.buf.Bytes(), Stderr: stderr.buf.Bytes(), StdoutTotal: stdout.total, StderrTotal: stderr.total, Duration: time.Since(start)}
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // leftovers of the group
	}
	if ctx.Err() == context.DeadlineExceeded {
		o.TimedOut = true
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		o.ExitCode = ee.ExitCode()
	case errors.Is(err, exec.ErrWaitDelay):
	case cmd.Process == nil:
		o.StartErr = err
		o.ExitCode = -1
	default:
		o.ExitCode = -1
	}
	return o
}

// Result turns an outcome into the tool result a model reads.
func (o Outcome) Result(tool string) armory.Result {
	if o.StartErr != nil {
		return armory.Failf(armory.KindUnavailable, "%s could not start: %v", tool, o.StartErr)
	}
	var b strings.Builder
	b.Write(o.Stdout)
	if o.StdoutTotal > int64(len(o.Stdout)) {
		fmt.Fprintf(&b, "\n(%d bytes, truncated)", o.StdoutTotal)
	}
	if len(o.Stderr) > 0 {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString("[stderr]\n")
		b.Write(o.Stderr)
		if o.StderrTotal > int64(len(o.Stderr)) {
			fmt.Fprintf(&b, "\n(%d bytes, truncated)", o.StderrTotal)
		}
	}
	value := map[string]any{"exit_code": o.ExitCode, "duration_ms": o.Duration.Milliseconds()}
	switch {
	case o.TimedOut:
		return armory.Result{Success: false, Kind: armory.KindTimeout, Text: fmt.Sprintf("%s\n[timed out after %s; the process tree was killed]", b.String(), o.Duration.Round(time.Millisecond)), Value: value}
	case o.ExitCode != 0:
		return armory.Result{Success: false, Kind: armory.KindOther, Text: fmt.Sprintf("%s\n[exit code %s]", b.String(), strconv.Itoa(o.ExitCode)), Value: value}
	}
	return armory.Result{Success: true, Text: b.String(), Value: value}
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	max   int
	buf   bytes.Buffer
	total int64
}

func (c *capped) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - c.buf.Len(); room > 0 {
		if len(p) > room {
			c.buf.Write(p[:room])
		} else {
			c.buf.Write(p)
		}
	}
	return len(p), nil
}
