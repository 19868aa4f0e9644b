package services

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// The syscall.agent.* tools and syscall.reflect. Who may call them is
// the world's access policy: the example world puts create, stop,
// start and inspect in the admin privilege group; an agent outside it does
// not see them, and the pipeline refuses its calls at lookup.

// agentTools returns the agents service's tools.
func (m *Module) agentTools() []*tool {
	return []*tool{m.agentListTool(), m.agentInspectTool(), m.agentCreateTool(), m.agentStatusTool(store.AgentStopped), m.agentStatusTool(store.AgentRunning), m.reflectTool()}
}

var (
	manRead    = armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatAgent, Capabilities: []armory.Capability{armory.CapReadState}}
	manInspect = armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatAgent, Capabilities: []armory.Capability{armory.CapAgentControl, armory.CapReadState}}
	manControl = armory.Manifest{Danger: armory.DangerDangerous, Permission: armory.PermAuto, Category: armory.CatAgent, Capabilities: []armory.Capability{armory.CapAgentControl, armory.CapWriteState}}
)

// granted refuses an agent-control call in a world that leaves the tool
// public (in no privilege group): stopping, starting, creating and
// inspecting agents must be granted on purpose (the usual admin group),
// not fall to every agent because the world did not mention the tool.
func (m *Module) granted(c call) *armory.Result {
	h, err := m.hosted()
	if err != nil {
		r := armory.FailErr(err)
		return &r
	}
	if h.Privileges == nil || h.Privileges.IsPublic(c.op) {
		r := c.fail(armory.KindPermission, "%s is in no privilege group of this world, and controlling agents must be granted on purpose: the world's owner lists it in a group of world-config.yaml tool_privileges (usually admin) and gives that group to the agents that may use it", c.op)
		return &r
	}
	return nil
}

// agentArg is the {agent} argument of stop and start.
type agentArg struct {
	Agent string `json:"agent"`
}

var agentSchema = schema([]string{"agent"}, prop("agent", str("The id of the agent.")))

func (m *Module) agentListTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.agent.list",
			Description: "List every agent of the world (defined in the world and created at run time) with its archetype, status (running or stopped) and uptime.",
			InputSchema: armory.EmptyObjectSchema,
		},
		man: manRead,
		run: func(ctx context.Context, c call) armory.Result {
			if err := c.decode(&struct{}{}); err != nil {
				return armory.FailErr(err)
			}
			list, err := m.ListAgents(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			return jsonResult(map[string]any{"agents": list})
		},
	}
}

// maxInspectValue cuts each value in an inspect listing (a key's whole
// value comes with {"key": …}).
const maxInspectValue = 2 << 10

func (m *Module) agentInspectTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.agent.inspect",
			Description: "Read another agent's memory, read-only: its keys with their values (each cut to 2 KiB; give \"key\" for one whole value), a page at a time.",
			InputSchema: schema([]string{"agent"}, prop("agent", str("The id of the agent whose memory to read.")),
				prop("key", str("One memory key to read whole (optional).")),
				prop("cursor", str("The next_cursor of the previous page (optional)."))),
		},
		man: manInspect,
		run: func(ctx context.Context, c call) armory.Result {
			if r := m.granted(c); r != nil {
				return *r
			}
			var a struct {
				Agent  string `json:"agent"`
				Key    string `json:"key"`
				Cursor string `json:"cursor"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			h, err := m.hosted()
			if err != nil {
				return armory.FailErr(err)
			}
			if _, err := h.Agent(a.Agent); err != nil {
				return armory.FailErr(err)
			}
			if a.Key != "" {
				st, err := m.store(ctx)
				if err != nil {
					return armory.FailErr(err)
				}
				e, err := st.ReadMemory(ctx, a.Agent, a.Key)
				if errors.Is(err, store.ErrNotFound) {
					return c.fail(armory.KindNotFound, "agent %s has no memory key %q; call without \"key\" to list its keys", a.Agent, a.Key)
				}
				if err != nil {
					return armory.FailErr(store.Err(c.op, err))
				}
				return jsonResult(e)
			}
			entries, next, err := m.ReadAgentMemory(ctx, a.Agent, store.Page{Limit: 100, Cursor: a.Cursor})
			if err != nil {
				return armory.FailErr(err)
			}
			for i, e := range entries {
				cp := *e
				cp.Value = audit.Cut(cp.Value, maxInspectValue)
				entries[i] = &cp
			}
			if entries == nil {
				entries = []*store.MemoryEntry{}
			}
			return jsonResult(map[string]any{"agent": a.Agent, "entries": entries, "next_cursor": next})
		},
	}
}

func (m *Module) agentCreateTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.agent.create",
			Description: "Create and start a new agent from one of the world's archetypes. Its tools are those the archetype's config grants, as for an agent of the world file.",
			InputSchema: schema([]string{"id", "archetype"},
				prop("id", str("The new agent's id: lower-case letters, digits, - and _, starting with a letter or digit, at most 64 characters.")),
				prop("archetype", str("The archetype (a folder under the world's archetype/) the agent is made from."))),
		},
		man: manControl,
		run: func(ctx context.Context, c call) armory.Result {
			if r := m.granted(c); r != nil {
				return *r
			}
			var a struct {
				ID        string `json:"id"`
				Archetype string `json:"archetype"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			info, err := m.createAgent(ctx, a.ID, a.Archetype, c.agent)
			if err != nil {
				return armory.FailErr(err)
			}
			return jsonResult(map[string]any{"created": info})
		},
	}
}

// agentStatusTool is syscall.agent.stop (to AgentStopped) or
// syscall.agent.start (to AgentRunning): one agent's status set by
// another, through setStatus.
func (m *Module) agentStatusTool(to store.AgentStatus) *tool {
	name, desc, done, already := "syscall.agent.stop", "Stop another agent by id: its tool calls are refused until it is started again. Its data is kept. You cannot stop yourself.", "stopped", "already stopped"
	if to == store.AgentRunning {
		name, desc, done, already = "syscall.agent.start", "Start a stopped agent by id: its tool calls are allowed again. Nothing happens if it is running.", "started", "already running"
	}
	return &tool{
		spec: armory.Spec{
			Name:        name,
			Description: desc,
			InputSchema: agentSchema,
		},
		man: manControl,
		run: func(ctx context.Context, c call) armory.Result {
			if r := m.granted(c); r != nil {
				return *r
			}
			var a agentArg
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			if to == store.AgentStopped && a.Agent == c.agent {
				// A stopped agent's calls are refused, syscall.agent.start
				// included: an agent that stopped itself could not undo it,
				// and a model's slip would take it out of service silently.
				return c.fail(armory.KindPermission, "You cannot stop yourself: none of your calls could start you again. Finish your work and report back; a human can stop you (armory agents stop %s).", c.agent)
			}
			info, changed, err := m.setStatus(ctx, a.Agent, to)
			if err != nil {
				return armory.FailErr(err)
			}
			if !changed {
				return agentResult(already, info)
			}
			return agentResult(done, info)
		},
	}
}

func agentResult(what string, info AgentInfo) armory.Result {
	r := jsonResult(map[string]any{"result": what, "agent": info})
	r.Text = fmt.Sprintf("Agent %s: %s.\n%s", info.ID, what, r.Text)
	return r
}

// Reflection is syscall.reflect's result.
type Reflection struct {
	World struct {
		Name   string `json:"name"`
		Status string `json:"status"`
		// UptimeSeconds is the time since this process opened the world.
		UptimeSeconds int64 `json:"uptime_seconds"`
	} `json:"world"`
	Agents  []AgentInfo `json:"agents"`
	Running int         `json:"running"`
	Stopped int         `json:"stopped"`
	// TokenUsage is what Armory knows of the agents' model tokens:
	// "unknown", with why, as long as no part of Armory sees the model
	// calls.
	TokenUsage string    `json:"token_usage"`
	Time       time.Time `json:"time"`
	Host       string    `json:"host,omitempty"`
}

// tokenUsageUnknown says honestly why reflect has no token figures.
const tokenUsageUnknown = "unknown: Armory runs the agents' tool calls, not their model calls, so it does not see the tokens they use"

func (m *Module) reflectTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.reflect",
			Description: "A snapshot of the world: its name and status, every agent with its status, token usage where known, and the time.",
			InputSchema: armory.EmptyObjectSchema,
		},
		man: armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadState}},
		run: func(ctx context.Context, c call) armory.Result {
			if err := c.decode(&struct{}{}); err != nil {
				return armory.FailErr(err)
			}
			h, err := m.hosted()
			if err != nil {
				return armory.FailErr(err)
			}
			list, err := m.ListAgents(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			var r Reflection
			r.World.Name, r.World.Status = h.World.Name, "running"
			r.World.UptimeSeconds = int64(time.Since(m.opened) / time.Second)
			r.Agents = list
			for _, a := range list {
				if a.Status == store.AgentStopped {
					r.Stopped++
				} else {
					r.Running++
				}
			}
			r.TokenUsage = tokenUsageUnknown
			r.Time = m.now().UTC()
			r.Host, _ = os.Hostname()
			return jsonResult(r)
		},
	}
}
