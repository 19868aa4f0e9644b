package armory

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Tool is a function an agent can call. Implementations must be safe for
// concurrent use: one Tool value serves every agent whose registry holds it;
// everything agent-specific arrives in the Invocation.
type Tool interface {
	// Spec describes the tool to models and protocols. It must return the
	// same value on every call.
	Spec() Spec
	// Manifest describes what the tool can do to the world. It must return
	// the same value on every call.
	Manifest() Manifest
	// Execute runs the tool. A failure the model should read (bad argument,
	// missing file, non-zero exit) is a Result with Success false, never a
	// panic. Execute must return promptly once ctx is done.
	Execute(ctx context.Context, inv Invocation) Result
}

// Spec is what a model or protocol peer sees of a tool.
type Spec struct {
	// Name is a dotted family name: "workspace.read", "syscall.task.create",
	// "devtools.repo-git". See ValidToolName.
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is a JSON Schema object for the arguments. Never nil for a
	// valid spec; a tool without arguments uses {"type":"object"}.
	InputSchema json.RawMessage `json:"inputSchema"`
	// OutputSchema optionally describes Result.Value.
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
}

// EmptyObjectSchema is the input schema of a tool that takes no arguments.
var EmptyObjectSchema = json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)

// Invocation is one call of a tool, as the tool sees it.
type Invocation struct {
	// Args is the JSON object of arguments, already validated against the
	// tool's input schema by the pipeline when one runs.
	Args json.RawMessage
	// Agent is the calling agent's environment.
	Agent *AgentEnv
	// Channel is the conversation the call names (its channel context: a
	// REST caller's X-Armory-Channel header or "channel" field, an MCP
	// session's header or the request's _meta "armory.dev/channel"), ""
	// when it names none. The pipeline has checked that the calling agent
	// holds it. A tool whose manifest sets NeedsChannel only ever runs
	// with it set.
	Channel string
	// Progress, when not nil, receives human-readable progress as the tool
	// runs (for example output lines of a command). Tools must bound what
	// they send. It may be called from any goroutine but not concurrently.
	Progress func(msg string)
}

// AgentEnv is what a tool may know about the agent calling it.
type AgentEnv struct {
	// ID is the agent's id.
	ID string
	// Workspace is the absolute path of the agent's workspace folder
	// ("@me/"). Tools that touch files are confined to it (or to Roots).
	Workspace string
	// Roots maps further routing prefixes ("project:web", "org:acme") to
	// absolute folders the agent has been granted.
	Roots map[string]string
	// Sandbox says how the agent's processes are confined.
	Sandbox SandboxPolicy
	// Net is the network allow-list of the agent's web tools (tool.fetch,
	// web.search, tool.browser); nil is the default policy (public
	// addresses only).
	Net *NetPolicy
}

// NetPolicy is a network allow-list: the web tools reach only the
// destinations its entries name (host names, *.suffix, *, addresses and
// ranges, each optionally with :port; see package netguard), and a private,
// loopback, link-local or metadata address only through an address entry.
type NetPolicy struct {
	Allow []string
	// From says where the list is set ("world-config.yaml:12").
	From string
}

// SandboxPolicy is what the world and the agent's config say about the
// sandbox of the agent's processes (tool.cli, tool.python, toolbox tools).
type SandboxPolicy struct {
	// Backend is "" (the best available: bubblewrap, else Landlock; tools
	// that need a sandbox are unavailable when neither works), "bwrap",
	// "landlock", or "none" (explicitly unsandboxed; limits still apply).
	Backend string
	// Network grants the agent's processes network access (default none).
	Network bool
}

// Report sends a progress message if inv has a progress sink.
func (inv Invocation) Report(format string, args ...any) {
	if inv.Progress != nil {
		inv.Progress(fmt.Sprintf(format, args...))
	}
}

// Result is what a tool returns. It is always something a model can read.
type Result struct {
	Success bool `json:"success"`
	// Text is the human- and model-readable result (or error message).
	Text string `json:"result"`
	// Value is an optional structured result (MCP structuredContent).
	Value any `json:"value,omitempty"`
	// Artifacts lists files the tool produced.
	Artifacts []Artifact `json:"artifacts,omitempty"`
	// Kind classifies a failure (zero for success). It lets the pipeline
	// tell a timeout from an invalid argument without parsing Text.
	Kind Kind `json:"-"`
}

// Artifact is a file a tool produced, for example a screenshot.
type Artifact struct {
	Path     string `json:"path"`
	MIMEType string `json:"mime_type,omitempty"`
	Size     int64  `json:"size,omitempty"`
}

// OK returns a successful Result with text.
func OK(text string) Result { return Result{Success: true, Text: text} }

// Failf returns a failed Result of kind k whose text is the formatted
// message. The text is written for the model: say what went wrong and what
// to do instead.
func Failf(k Kind, format string, args ...any) Result {
	return Result{Success: false, Kind: k, Text: fmt.Sprintf(format, args...)}
}

// FailErr returns a failed Result for err, keeping its kind when err is an
// *Error (KindInternal otherwise).
func FailErr(err error) Result {
	return Result{Success: false, Kind: KindOf(err), Text: Message(err)}
}

// ValidToolName reports whether name is a well-formed tool name: one or more
// dot-separated segments, each of [a-z0-9] followed by [a-z0-9_-]*, at most
// 128 bytes in all. Upper case is refused so that names compare exactly.
func ValidToolName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, seg := range strings.Split(name, ".") {
		if !validSegment(seg) {
			return false
		}
	}
	return true
}

func validSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidAgentID reports whether id matches [a-z0-9][a-z0-9_-]* (at most 64 bytes).
func ValidAgentID(id string) bool {
	return len(id) <= 64 && validSegment(id)
}

// InFamily reports whether tool name belongs to family: the family itself
// ("channel") or any name below it ("channel.send", "channel.x.y").
func InFamily(name, family string) bool {
	return name == family || (len(name) > len(family) && name[len(family)] == '.' && name[:len(family)] == family)
}

// Previewer is implemented by tools that change files (workspace.write,
// workspace.edit and the like): Preview returns what the call would change,
// as a unified diff against the current file, without changing anything.
// Whoever decides an approval for such a call is shown it. Errors say why
// no diff can be made (the call would fail, the file is unreadable).
type Previewer interface {
	Preview(ctx context.Context, inv Invocation) (string, error)
}
