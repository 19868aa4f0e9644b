package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
)

// AgentControl is what the agent routes need of the services module
// (services.Module): the agents with their status, and stop and start for
// a human, audited through the pipeline.
type AgentControl interface {
	ListAgents(ctx context.Context) ([]services.AgentInfo, error)
	StopAgent(ctx context.Context, a services.Auditor, id, via string) (services.AgentInfo, error)
	StartAgent(ctx context.Context, a services.Auditor, id, via string) (services.AgentInfo, error)
}

// The agent routes. An admin token acts as a human: GET /api/agents lists
// every agent with its status, POST /api/agents/{id}/stop|start changes it
// through the services module's methods, audited as the human's (decided_by
// human, via rest). An agent token acts as its agent: the same routes run
// syscall.agent.list|stop|start through the pipeline as that agent's call,
// so the world's access policy decides (an agent outside the admin group
// does not have the tool: 404, an unknown tool), the call is audited, and
// a stopped agent is refused (403) like on every surface.

func (s *Server) handleAgents(w http.ResponseWriter, r *http.Request) {
	t := requestToken(r.Context())
	if !t.Admin {
		s.agentToolCall(w, r, t.Agent, "syscall.agent.list", json.RawMessage(`{}`))
		return
	}
	out := []AgentSummary{}
	if s.agents == nil {
		for _, ag := range s.h.Agents() {
			out = append(out, AgentSummary{ID: ag.ID, Archetype: ag.Def.Archetype, Tools: ag.Registry.Len()})
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	list, err := s.agents.ListAgents(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, a := range list {
		out = append(out, summary(a))
	}
	writeJSON(w, http.StatusOK, out)
}

func summary(a services.AgentInfo) AgentSummary {
	return AgentSummary{ID: a.ID, Archetype: a.Archetype, Tools: a.Tools, Status: string(a.Status), Origin: a.Origin,
		CreatedBy: a.CreatedBy, Since: a.Since, UptimeSeconds: a.UptimeSeconds}
}

// handleAgentStatus serves POST /api/agents/{id}/stop (stop true) and
// /start.
func (s *Server) handleAgentStatus(stop bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		t := requestToken(r.Context())
		if !t.Admin {
			tool := "syscall.agent.start"
			if stop {
				tool = "syscall.agent.stop"
			}
			args, _ := json.Marshal(map[string]string{"agent": id})
			s.agentToolCall(w, r, t.Agent, tool, args)
			return
		}
		if s.agents == nil {
			s.writeError(w, r, armory.E("", armory.KindUnavailable, "this server has no agents service (the services module)"))
			return
		}
		f := s.agents.StartAgent
		if stop {
			f = s.agents.StopAgent
		}
		info, err := f(r.Context(), s.p, id, pipeline.ViaREST)
		s.written(w, r, info.ID != "", map[string]any{"agent": summary(info)}, err)
	}
}

// agentToolCall runs tool for the token's agent through the pipeline and
// answers the tool's value (200), or the pipeline's refusal as an error
// (the one kind-to-status mapping): the pipeline alone decides, and audits
// the refusal. A tool the world does not give the agent is, as on every
// surface, an unknown tool (404, the ghost world); a stopped agent is 403.
func (s *Server) agentToolCall(w http.ResponseWriter, r *http.Request, agent, tool string, args json.RawMessage) {
	o := s.p.Execute(r.Context(), pipeline.Call{Agent: agent, Tool: tool, Args: args})
	if o.Status != audit.StatusSuccess {
		kind := o.Kind
		if kind == armory.KindOther {
			kind = armory.KindInternal
		}
		s.writeError(w, r, armory.E("", kind, o.Result))
		return
	}
	writeJSON(w, http.StatusOK, o.Value)
}
