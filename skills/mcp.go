package skills

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/upstream"
	"github.com/armory-dev/armory/world"
	"go.yaml.in/yaml/v3"
)

// An MCP server's skill: a pack whose mcp-server.yaml defines one server
// (the keys of a world-config.yaml mcp_servers entry). Its tools are the
// server's, named mcp.<skill>.<tool> as any upstream server's, with their
// definitions pinned in the store as the world's servers' are (a changed
// definition is withheld until a person accepts it: armory toolbox pins).
// The server starts the first time this process needs its tools — an
// agent here holds the skill — and stops when the module closes. A
// command server runs in the sandbox unless its definition says otherwise.

// mcpStartTimeout bounds starting a skill's server and listing its tools.
const mcpStartTimeout = 30 * time.Second

// mcpPack is the running server of one MCP server's skill.
type mcpPack struct {
	once sync.Once
	mu   sync.Mutex // guards what follows, written once by the start
	set  *upstream.Set
	// tools are the server's tools; unav the tools it withheld (a changed
	// definition not accepted yet) and why the server failed, if it did.
	tools []*Tool
	unav  map[string]string
	why   string
}

// state returns the server's tools and why some or all are missing.
func (mp *mcpPack) state() ([]*Tool, map[string]string, string) {
	mp.mu.Lock()
	defer mp.mu.Unlock()
	return mp.tools, mp.unav, mp.why
}

// ensureMCP starts pack p's server, once, and returns its tools.
func (m *Module) ensureMCP(ctx context.Context, p *pack) []*Tool {
	if p.mcp == nil {
		return nil
	}
	p.mcp.once.Do(func() {
		mp := p.mcp
		mp.mu.Lock()
		defer mp.mu.Unlock()
		m.mu.Lock()
		env := m.env
		m.mu.Unlock()
		st, err := env.Store(ctx)
		if err != nil {
			mp.why = "no store to pin the server's tool definitions: " + armory.Message(err)
			return
		}
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mcpStartTimeout)
		defer cancel()
		w := &world.World{Dir: env.World.Dir, Sandbox: env.World.Sandbox, MCPServers: []world.MCPServer{*p.skill.MCPServer}}
		set, err := upstream.Start(sctx, w, upstream.Options{Pins: st, Logger: m.log, StartTimeout: mcpStartTimeout})
		if err != nil {
			mp.why = armory.Message(err)
			return
		}
		mp.set, mp.unav = set, set.Unavailable()
		for _, t := range set.Tools() {
			mp.tools = append(mp.tools, &Tool{inner: t, skill: p.skill.Name, m: m})
		}
		if len(mp.tools) == 0 && len(mp.unav) == 0 {
			mp.why = "the server offers no usable tool"
		}
		m.mu.Lock()
		m.started = append(m.started, set)
		m.mu.Unlock()
	})
	tools, _, _ := p.mcp.state()
	return tools
}

// closeMCP stops every skill server this process started.
func (m *Module) closeMCP() error {
	m.mu.Lock()
	sets := m.started
	m.started = nil
	m.mu.Unlock()
	var first error
	for _, s := range sets {
		if err := s.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// MCPServerDef is the server of an install of source mcp_server: the keys
// of a world-config.yaml mcp_servers entry.
type MCPServerDef struct {
	Command []string          `json:"command,omitempty" yaml:"command,omitempty"`
	Env     map[string]string `json:"env,omitempty" yaml:"env,omitempty"`
	// Sandbox: absent or true runs a command server confined without
	// network; false unconfined; a mapping as in mcp_servers.
	Sandbox any               `json:"sandbox,omitempty" yaml:"sandbox,omitempty"`
	URL     string            `json:"url,omitempty" yaml:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty" yaml:"headers,omitempty"`
}

// writeMCPPack writes the pack of an MCP server's skill into dest: a
// SKILL.md naming and describing it, and its mcp-server.yaml.
func writeMCPPack(name, description string, def *MCPServerDef, dest string) error {
	const op = "syscall.skill.install"
	if def == nil {
		return armory.E(op, armory.KindInvalid, "source mcp_server needs server: {command: [...]} or {url: ...}")
	}
	if !world.ValidSkillName(name) {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("source mcp_server needs a name for the skill (and its server): 1 to %d of a-z, 0-9 and single hyphens, got %q", world.MaxSkillName, name))
	}
	if description == "" {
		description = "The tools of the MCP server " + name + "."
	}
	y, err := yaml.Marshal(def)
	if err != nil {
		return armory.E(op, armory.KindInvalid, "the server definition", err)
	}
	d, _ := json.Marshal(description) // a JSON string is a YAML string
	md := fmt.Sprintf("---\nname: %s\ndescription: %s\n---\n# %s\n\nAcquire this skill to get the tools of the MCP server %s (named mcp.%s.<tool>).\n", name, d, name, name, name)
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return armory.E(op, armory.KindUnavailable, "staging the skill", err)
	}
	if err := os.WriteFile(filepath.Join(dest, world.SkillFile), []byte(md), 0o644); err != nil {
		return armory.E(op, armory.KindUnavailable, "staging the skill", err)
	}
	if err := os.WriteFile(filepath.Join(dest, world.SkillMCPFile), y, 0o644); err != nil {
		return armory.E(op, armory.KindUnavailable, "staging the skill", err)
	}
	return nil
}
