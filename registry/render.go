package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/armory-dev/armory"
)

// ToolkitPrompt is a toolkit's prompt text, shown in the briefing when at least
// one of the toolkit's tools is in the registry.
type ToolkitPrompt struct {
	Toolkit string
	Tools   []string
	Text    string
}

// Brief renders one "- name: description" line per tool (first line of
// the description only), sorted as given: what `armory tool brief` prints
// and GET /api/agents/{id}/tools/brief answers (text/plain).
func Brief(specs []armory.Spec) string {
	var b strings.Builder
	for _, s := range specs {
		desc, _, _ := strings.Cut(strings.TrimSpace(s.Description), "\n")
		fmt.Fprintf(&b, "- %s: %s\n", s.Name, strings.TrimSpace(desc))
	}
	return b.String()
}

// Briefing renders the <tools> block of an agent's prompt: one
// "- name: description" line per tool (first line of the description only),
// sorted by name, then the policy text of each toolkit that has at least one
// of these tools, in the order given.
func Briefing(specs []armory.Spec, prompts []ToolkitPrompt) string {
	var b strings.Builder
	b.WriteString("<tools>\n")
	have := make(map[string]bool, len(specs))
	for _, s := range specs {
		have[s.Name] = true
	}
	b.WriteString(Brief(specs))
	first := true
	for _, p := range prompts {
		if strings.TrimSpace(p.Text) == "" {
			continue
		}
		for _, t := range p.Tools {
			if have[t] {
				if first {
					b.WriteString("\n")
					first = false
				}
				fmt.Fprintf(&b, "Toolkit %s: %s\n", p.Toolkit, strings.TrimSpace(p.Text))
				break
			}
		}
	}
	b.WriteString("</tools>\n")
	return b.String()
}

// NameMap maps tool names to names that OpenAI and Anthropic accept
// ([A-Za-z0-9_-]{1,64}) and back. Dots become "__"; a name still longer
// than 64 bytes is cut and given a hash suffix. The map is built for a fixed
// set of names and fails loudly when two names would map to one.
type NameMap struct {
	toAPI   map[string]string
	fromAPI map[string]string
}

// APIName maps one tool name. It is deterministic and does not check for
// collisions (NewNameMap does).
func APIName(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c == '.':
			b.WriteString("__")
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "_x%02x_", c)
		}
	}
	s := b.String()
	if len(s) > 64 {
		h := sha256.Sum256([]byte(name))
		s = s[:55] + "_" + hex.EncodeToString(h[:4])
	}
	return s
}

// NewNameMap builds the map for names. When two names map to one API name it
// returns an error of kind KindConflict naming both.
func NewNameMap(names []string) (*NameMap, error) {
	m := &NameMap{toAPI: make(map[string]string, len(names)), fromAPI: make(map[string]string, len(names))}
	var clashes []string
	for _, n := range names {
		a := APIName(n)
		if prev, ok := m.fromAPI[a]; ok && prev != n {
			clashes = append(clashes, fmt.Sprintf("%q and %q both map to %q", prev, n, a))
			continue
		}
		m.toAPI[n] = a
		m.fromAPI[a] = n
	}
	if len(clashes) > 0 {
		sort.Strings(clashes)
		return nil, armory.E("registry.NewNameMap", armory.KindConflict, "tool names collide for OpenAI/Anthropic: "+strings.Join(clashes, "; "))
	}
	return m, nil
}

// API returns the API name of tool name (name itself when unknown).
func (m *NameMap) API(name string) string {
	if a, ok := m.toAPI[name]; ok {
		return a
	}
	return APIName(name)
}

// Resolve maps a name a model used back to the real tool name. It accepts
// the API name and the real name.
//
// It is exported for embedders that render tools with OpenAI or Anthropic
// and run the model loop themselves: the map returned with the rendering
// takes the model's calls back. Armory's own surfaces resolve through
// Registry.Resolve, which also sees tools registered after the rendering.
func (m *NameMap) Resolve(apiName string) (string, bool) {
	if n, ok := m.fromAPI[apiName]; ok {
		return n, true
	}
	if _, ok := m.toAPI[apiName]; ok {
		return apiName, true
	}
	return "", false
}

func schemaOrEmpty(s json.RawMessage) json.RawMessage {
	if len(s) == 0 {
		return armory.EmptyObjectSchema
	}
	return s
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type openAITool struct {
	Type     string         `json:"type"`
	Function openAIFunction `json:"function"`
}

// OpenAI renders specs as an OpenAI chat-completions "tools" array.
func OpenAI(specs []armory.Spec) ([]byte, *NameMap, error) {
	return renderAPI(specs, func(name, desc string, params json.RawMessage) openAITool {
		return openAITool{Type: "function", Function: openAIFunction{Name: name, Description: desc, Parameters: params}}
	})
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// Anthropic renders specs as an Anthropic Messages API "tools" array.
func Anthropic(specs []armory.Spec) ([]byte, *NameMap, error) {
	return renderAPI(specs, func(name, desc string, schema json.RawMessage) anthropicTool {
		return anthropicTool{Name: name, Description: desc, InputSchema: schema}
	})
}

// renderAPI renders specs as a provider's tools array, one entry a spec
// made by entry from the tool's API name (see NameMap), its description
// and its input schema with the justification field.
func renderAPI[T any](specs []armory.Spec, entry func(name, desc string, schema json.RawMessage) T) ([]byte, *NameMap, error) {
	m, err := NewNameMap(specNames(specs))
	if err != nil {
		return nil, nil, err
	}
	out := make([]T, len(specs))
	for i, s := range specs {
		out[i] = entry(m.API(s.Name), s.Description, WithJustification(schemaOrEmpty(s.InputSchema)))
	}
	b, err := json.MarshalIndent(out, "", "  ")
	return b, m, err
}

// MCPTool is one entry of an MCP tools/list result.
type MCPTool struct {
	Name         string             `json:"name"`
	Description  string             `json:"description"`
	InputSchema  json.RawMessage    `json:"inputSchema"`
	OutputSchema json.RawMessage    `json:"outputSchema,omitempty"`
	Annotations  armory.Annotations `json:"annotations"`
}

// MCPTools returns the MCP tools/list entries for tools (MCP allows dots in
// names, so names are kept).
func MCPTools(tools []armory.Tool) []MCPTool {
	out := make([]MCPTool, len(tools))
	for i, t := range tools {
		s := t.Spec()
		out[i] = MCPTool{Name: s.Name, Description: s.Description, InputSchema: WithJustification(schemaOrEmpty(s.InputSchema)), OutputSchema: s.OutputSchema, Annotations: t.Manifest().Annotations()}
	}
	return out
}

// MCP renders tools as an MCP tools/list result object {"tools":[…]}.
func MCP(tools []armory.Tool) ([]byte, error) {
	return json.MarshalIndent(struct {
		Tools []MCPTool `json:"tools"`
	}{MCPTools(tools)}, "", "  ")
}

func specNames(specs []armory.Spec) []string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Name
	}
	return out
}
