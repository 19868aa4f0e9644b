package skills_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/skills"
	"github.com/armory-dev/armory/world"
)

// mcpEcho builds the echo MCP server (internal/mcpecho) for these tests.
func mcpEcho(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mcp-echo")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/armory-dev/armory/internal/mcpecho/mcp-echo").CombinedOutput()
	if err != nil {
		t.Fatalf("building mcp-echo: %v\n%s", err, out)
	}
	return bin
}

func mcpSkillEngine(t *testing.T, config string) (*engine.Engine, *skills.Module) {
	t.Helper()
	if config == "" {
		config = "name: m\nagents:\n  - {id: a, archetype: a}\n"
	}
	dir := testenv.WriteTree(t, t.TempDir(), map[string]string{
		"world-config.yaml":     config,
		"archetype/a/config.md": "## Tool Access\n## Permissions\nprofile: trusted\n",
	})
	m := skills.New(skills.Options{})
	e, err := engine.Open(context.Background(), engine.Options{World: dir, Modules: []engine.Module{m}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, m
}

// An MCP server's skill: installed from a definition, its server starts
// when an agent acquires the skill, its tools (pinned in the store) run
// through the pipeline under the skill's source, and leave on a drop.
func TestMCPServerSkill(t *testing.T) {
	bin := mcpEcho(t)
	e, m := mcpSkillEngine(t, "")
	ctx := context.Background()
	res, err := m.Install(ctx, e.Pipeline(), skills.InstallRequest{Source: skills.SourceMCPServer, Name: "echo", Description: "Says things back.",
		Server: &skills.MCPServerDef{Command: []string{bin}, Sandbox: false}}, pipeline.ViaCLI)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Skill.MCPServer || res.Dir != "skills/echo" {
		t.Fatalf("installed %+v", res)
	}
	if _, err := os.Stat(filepath.Join(e.World().Dir, "skills/echo", world.SkillMCPFile)); err != nil {
		t.Fatal(err)
	}
	acq, err := m.Acquire(ctx, e.Pipeline(), "a", "echo", pipeline.ViaCLI)
	if err != nil || len(acq.Tools) != 1 || acq.Tools[0] != "mcp.echo.echo" {
		t.Fatalf("acquire: %+v %v", acq, err)
	}
	o := e.Pipeline().Execute(ctx, pipeline.Call{Agent: "a", Tool: "mcp.echo.echo", Args: json.RawMessage(`{"x":1}`)})
	if o.Status != audit.StatusSuccess || o.Result != `{"x":1}` {
		t.Fatalf("call: %+v", o)
	}
	ag, _ := e.Roster().Agent("a")
	if src := e.Roster().Source(ag, "mcp.echo.echo"); src != "skill echo" {
		t.Errorf("source = %q", src)
	}
	if pins, err := e.Store().ListPins(ctx, "echo"); err != nil || len(pins) != 1 {
		t.Errorf("pins: %v %v", pins, err)
	}
	if err := m.Drop(ctx, e.Pipeline(), "a", "echo", pipeline.ViaCLI); err != nil {
		t.Fatal(err)
	}
	if ag.Registry.Has("mcp.echo.echo") {
		t.Error("the server's tool stayed after the drop")
	}
}

// A skill's server takes nothing from the server's environment: a pack
// an agent proposed must not carry the server's secrets to a program of
// its choosing. Nor can it share a name with a world server.
func TestMCPServerSkillRefusals(t *testing.T) {
	e, m := mcpSkillEngine(t, "name: m\nagents:\n  - {id: a, archetype: a}\nmcp_servers:\n  fs:\n    url: http://127.0.0.1:9/mcp\n")
	ctx := context.Background()
	for _, c := range []struct {
		req  skills.InstallRequest
		kind armory.Kind
		want string
	}{
		{skills.InstallRequest{Source: skills.SourceMCPServer, Name: "leak", Server: &skills.MCPServerDef{Command: []string{"/bin/true"}, Env: map[string]string{"T": "${HOME}"}}},
			armory.KindInvalid, "takes no value from the server's environment"},
		{skills.InstallRequest{Source: skills.SourceMCPServer, Name: "leak", Server: &skills.MCPServerDef{URL: "http://127.0.0.1:9/mcp", Headers: map[string]string{"Authorization": "Bearer ${TOKEN}"}}},
			armory.KindInvalid, "takes no value from the server's environment"},
		{skills.InstallRequest{Source: skills.SourceMCPServer, Name: "fs", Server: &skills.MCPServerDef{URL: "http://127.0.0.1:9/mcp"}},
			armory.KindConflict, `mcp_servers has a server "fs" already`},
		{skills.InstallRequest{Source: skills.SourceMCPServer, Name: "Bad_Name", Server: &skills.MCPServerDef{URL: "http://127.0.0.1:9/mcp"}},
			armory.KindInvalid, "needs a name"},
		{skills.InstallRequest{Source: skills.SourceMCPServer, Name: "both", Server: &skills.MCPServerDef{URL: "http://127.0.0.1:9/mcp", Command: []string{"/bin/true"}}},
			armory.KindInvalid, "not both"},
		{skills.InstallRequest{Source: skills.SourceMCPServer, Name: "none"}, armory.KindInvalid, "needs server"},
	} {
		_, err := m.Install(ctx, e.Pipeline(), c.req, pipeline.ViaCLI)
		if armory.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want %v containing %q", c.req, err, c.kind, c.want)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(e.World().Dir, "skills"))
	if len(ents) != 0 {
		t.Errorf("a refused install left %v behind", ents)
	}
}

// A command server without a sandbox key runs confined; sandbox: false
// says otherwise on purpose.
func TestSkillMCPServerSandboxedByDefault(t *testing.T) {
	var ds world.Diagnostics
	s := world.ParseSkillMCPServer("mcp-server.yaml", "/w/skills/x", "x", []byte("command: [bin/server, --flag]\n"), &ds)
	if s == nil || s.Sandbox == nil || s.Command[0] != "/w/skills/x/bin/server" {
		t.Fatalf("%+v %v", s, ds)
	}
	s = world.ParseSkillMCPServer("mcp-server.yaml", "/w/skills/x", "x", []byte("command: [server]\nsandbox: false\n"), &ds)
	if s == nil || s.Sandbox != nil || s.Command[0] != "server" {
		t.Fatalf("%+v %v", s, ds)
	}
}
