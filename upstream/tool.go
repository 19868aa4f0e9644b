package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
)

// Family is the family of every upstream tool: mcp.<server>.<tool>.
const Family = "mcp"

// Limits of one upstream tool definition.
const (
	// MaxDefinition bounds the JSON of one tool definition; a larger one is
	// refused (with a warning), as is a definition that cannot be pinned.
	MaxDefinition = 128 << 10
	// MaxDescription bounds the description shown to models (the pinned
	// hash covers the whole description).
	MaxDescription = 8 << 10
)

// MapName maps an upstream tool name to the part of its armory name after
// "mcp.<server>.": lower-case letters, digits, '_', '-' and '.' stay (a dot
// starts a further name segment); an upper-case letter becomes lower case,
// preceded by '_' when it follows a lower-case letter or a digit
// ("getWeather" → "get_weather"). It reports false when the result is not a
// valid tool name. Two upstream names that map to the same name are both
// refused by the caller, so the mapping of the tools kept is reversible.
func MapName(name string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'A' && c <= 'Z':
			if i > 0 {
				p := name[i-1]
				if (p >= 'a' && p <= 'z') || (p >= '0' && p <= '9') {
					b.WriteByte('_')
				}
			}
			b.WriteByte(c + 'a' - 'A')
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_', c == '-', c == '.':
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	out := b.String()
	return out, armory.ValidToolName(out)
}

// FullName returns the armory name of an upstream tool whose mapped name
// (see MapName) is mapped.
func FullName(server, mapped string) string { return Family + "." + server + "." + mapped }

// definition is what a pin covers: what models and the pipeline see.
type definition struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	InputSchema  any    `json:"inputSchema"`
	OutputSchema any    `json:"outputSchema,omitempty"`
}

// Definition returns the canonical JSON of t's pinned fields (name,
// description, input and output schema; objects with sorted keys) and its
// hex SHA-256.
func Definition(t *mcp.Tool) (json.RawMessage, string, error) {
	b, err := json.Marshal(definition{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema})
	if err != nil {
		return nil, "", err
	}
	// Decode and encode once more so that key order of any nested value
	// (json.RawMessage, structs) is the sorted order of a map.
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, "", err
	}
	if b, err = json.Marshal(v); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:]), nil
}

// Manifest derives the manifest of an upstream tool. Annotations are hints
// from the upstream, never grants: they may raise the danger (an explicit
// destructiveHint makes it critical) but never lower anything. The
// permission is confirm, the category mcp; a stdio server (an unconfined
// process) has process_exec, read_fs, write_fs and network, an HTTP server
// network.
func Manifest(stdio bool, ann *mcp.ToolAnnotations) armory.Manifest {
	m := armory.Manifest{Danger: armory.DangerDangerous, Permission: armory.PermConfirm, Category: armory.CatMCP}
	if stdio {
		m.Capabilities = []armory.Capability{armory.CapNetwork, armory.CapProcessExec, armory.CapReadFS, armory.CapWriteFS}
	} else {
		m.Capabilities = []armory.Capability{armory.CapNetwork}
	}
	if ann != nil && ann.DestructiveHint != nil && *ann.DestructiveHint {
		m.Danger = armory.DangerCritical
	}
	return m
}

// Tool is one tool of an upstream MCP server. It is safe for concurrent
// use; calls go to the server's current session.
type Tool struct {
	srv      *server
	upstream string // the upstream's own name
	hash     string // pinned definition hash
	spec     armory.Spec
	man      armory.Manifest
}

var _ armory.Tool = (*Tool)(nil)

// Spec implements armory.Tool.
func (t *Tool) Spec() armory.Spec { return t.spec }

// Manifest implements armory.Tool.
func (t *Tool) Manifest() armory.Manifest { return t.man }

// Server returns the name of the tool's upstream server.
func (t *Tool) Server() string { return t.srv.cfg.Name }

// Upstream returns the upstream's own name of the tool.
func (t *Tool) Upstream() string { return t.upstream }

// Execute implements armory.Tool: it calls the tool on the upstream, bounded
// by Options.CallTimeout, and returns at most Options.MaxOutput bytes of
// text. A server that is down or restarting, a definition that changed
// since it was pinned, an upstream error or an isError result are failed
// Results; Execute never panics on what the upstream sends.
func (t *Tool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	sess, hash, err := t.srv.current(t.upstream)
	if err != nil {
		return armory.Failf(armory.KindUnavailable, "%s: %v", t.spec.Name, err)
	}
	if hash != t.hash {
		if hash == "" {
			return armory.Failf(armory.KindUnavailable, "%s: the upstream MCP server %q no longer offers the tool %q", t.spec.Name, t.srv.cfg.Name, t.upstream)
		}
		return armory.Failf(armory.KindPermission, "%s is withheld: its definition changed since it was pinned; a human must accept it (armory toolbox pins accept %s %s) and the world be reloaded", t.spec.Name, t.srv.cfg.Name, t.upstream)
	}
	args := json.RawMessage(inv.Args)
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	ctx, cancel := context.WithTimeout(ctx, t.srv.opts.CallTimeout)
	defer cancel()
	res, err := sess.CallTool(ctx, &mcp.CallToolParams{Name: t.upstream, Arguments: args})
	if err != nil {
		var we *jsonrpc.Error
		switch {
		case errors.As(err, &we):
			return armory.Failf(armory.KindInvalid, "%s: the upstream MCP server %q refused the call: %s", t.spec.Name, t.srv.cfg.Name, clip(we.Message, 2048))
		case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return armory.Failf(armory.KindTimeout, "%s: the upstream MCP server %q did not answer within %s", t.spec.Name, t.srv.cfg.Name, t.srv.opts.CallTimeout)
		case ctx.Err() != nil:
			return armory.Failf(armory.KindTimeout, "%s: the call was canceled", t.spec.Name)
		}
		t.srv.broken(sess, err)
		return armory.Failf(armory.KindUnavailable, "%s: the connection to the upstream MCP server %q failed: %s; it is being restarted, try again shortly", t.spec.Name, t.srv.cfg.Name, clip(err.Error(), 2048))
	}
	return render(res, t.srv.opts.MaxOutput)
}

// render turns an upstream result into a Result of at most max bytes of
// text; structured content becomes Value when its JSON fits in max.
func render(res *mcp.CallToolResult, max int) armory.Result {
	var b strings.Builder
	for i, c := range res.Content {
		if i > 0 {
			b.WriteByte('\n')
		}
		switch c := c.(type) {
		case *mcp.TextContent:
			b.WriteString(c.Text)
		case *mcp.ImageContent:
			fmt.Fprintf(&b, "[image %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(&b, "[audio %s, %d bytes]", c.MIMEType, len(c.Data))
		case *mcp.ResourceLink:
			fmt.Fprintf(&b, "[resource link %s]", c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource != nil && c.Resource.Text != "" {
				b.WriteString(c.Resource.Text)
			} else if c.Resource != nil {
				fmt.Fprintf(&b, "[resource %s %s, %d bytes]", c.Resource.URI, c.Resource.MIMEType, len(c.Resource.Blob))
			}
		default:
			fmt.Fprintf(&b, "[%T content]", c)
		}
		if b.Len() > max {
			break
		}
	}
	out := armory.Result{Success: !res.IsError, Text: b.String()}
	if len(out.Text) > max {
		out.Text = clip(out.Text, max) + fmt.Sprintf("\n[output truncated at %d bytes]", max)
	}
	if res.IsError {
		out.Kind = armory.KindOther
		if out.Text == "" {
			out.Text = "the upstream tool reported an error without a message"
		}
	}
	if res.StructuredContent != nil {
		if raw, err := json.Marshal(res.StructuredContent); err == nil && len(raw) <= max {
			out.Value = json.RawMessage(raw)
			if out.Text == "" {
				out.Text = string(raw)
			}
		}
	}
	return out
}

// clip cuts s to at most n bytes without splitting a UTF-8 sequence.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
