package server

import (
	"context"
	"net/http"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/skills"
)

// SkillsAPI is what the skills routes need of the skills module
// (skills.Module): its human API. Every change is audited through the
// pipeline given (pipeline.AuditHuman: decided_by human, via rest).
type SkillsAPI interface {
	List(ctx context.Context) ([]skills.SkillSummary, error)
	Show(ctx context.Context, name, archetype string) (skills.SkillDetail, error)
	AgentSkills(ctx context.Context, agent string) ([]skills.SkillInfo, error)
	Acquire(ctx context.Context, p *pipeline.Pipeline, agent, name, via string) (skills.AcquireResult, error)
	Drop(ctx context.Context, p *pipeline.Pipeline, agent, name, via string) error
	Install(ctx context.Context, p *pipeline.Pipeline, req skills.InstallRequest, via string) (skills.Installed, error)
	Remove(ctx context.Context, p *pipeline.Pipeline, name, via string) ([]string, error)
}

var _ SkillsAPI = (*skills.Module)(nil)

// The skills routes follow the services routes (humans.go): an admin
// token acts as the human through the skills module's human API (every
// change audited as the human's); an agent token acts as its agent by
// running the matching syscall.skill.* tool through the pipeline (an
// install then waits for its approval: 202 with the approval, as any
// call); a route no tool matches is 403 for an agent token.
//
//	GET    /api/skills                         every skill with its holders (agent: syscall.skill.list)
//	GET    /api/skills/{name}[?archetype=]      one skill, its instructions and files
//	POST   /api/skills                         install {source, path|url|name, replace} (agent: syscall.skill.install)
//	DELETE /api/skills/{name}                  remove a world skill
//	GET    /api/agents/{id}/skills             the skills an agent sees, acquired and active (agent: its own)
//	POST   /api/agents/{id}/skills/{name}/acquire|drop
func (s *Server) skillRoutes(mux *http.ServeMux) {
	route := func(pattern string, human func(http.ResponseWriter, *http.Request, SkillsAPI), agent agentForm, params ...string) {
		mux.Handle(pattern, s.anyToken(s.params(s.skillRoute(human, agent), params...)))
	}
	route("GET /api/skills", func(w http.ResponseWriter, r *http.Request, m SkillsAPI) {
		list, err := m.List(r.Context())
		s.written(w, r, false, map[string]any{"skills": list}, err)
	}, func(r *http.Request, _ string) (string, map[string]any, error) { return "syscall.skill.list", nil, nil })
	route("GET /api/skills/{name}", func(w http.ResponseWriter, r *http.Request, m SkillsAPI) {
		d, err := m.Show(r.Context(), r.PathValue("name"), r.URL.Query().Get("archetype"))
		s.written(w, r, false, d, err)
	}, nil, "archetype")
	route("POST /api/skills", func(w http.ResponseWriter, r *http.Request, m SkillsAPI) {
		var req skills.InstallRequest
		if err := decodeJSON(r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
		res, err := m.Install(r.Context(), s.p, req, pipeline.ViaREST)
		s.written(w, r, res.Dir != "", res, err)
	}, func(r *http.Request, _ string) (string, map[string]any, error) {
		var req map[string]any
		if err := decodeJSON(r, &req); err != nil {
			return "", nil, err
		}
		return "syscall.skill.install", req, nil
	})
	route("DELETE /api/skills/{name}", func(w http.ResponseWriter, r *http.Request, m SkillsAPI) {
		agents, err := m.Remove(r.Context(), s.p, r.PathValue("name"), pipeline.ViaREST)
		s.written(w, r, agents != nil, map[string]any{"skill": r.PathValue("name"), "held_by": agents}, err)
	}, nil)
	own := func(r *http.Request, agent string) error {
		if id := r.PathValue("id"); id != agent {
			return armory.E("", armory.KindPermission, "an agent token acts only for its own agent, not "+quote(id))
		}
		return nil
	}
	route("GET /api/agents/{id}/skills", func(w http.ResponseWriter, r *http.Request, m SkillsAPI) {
		list, err := m.AgentSkills(r.Context(), r.PathValue("id"))
		s.written(w, r, false, map[string]any{"agent": r.PathValue("id"), "skills": list}, err)
	}, func(r *http.Request, agent string) (string, map[string]any, error) {
		return "syscall.skill.list", nil, own(r, agent)
	})
	route("POST /api/agents/{id}/skills/{name}/acquire", func(w http.ResponseWriter, r *http.Request, m SkillsAPI) {
		res, err := m.Acquire(r.Context(), s.p, r.PathValue("id"), r.PathValue("name"), pipeline.ViaREST)
		s.written(w, r, res.Skill != "", res, err)
	}, func(r *http.Request, agent string) (string, map[string]any, error) {
		return "syscall.skill.acquire", map[string]any{"name": r.PathValue("name")}, own(r, agent)
	})
	route("POST /api/agents/{id}/skills/{name}/drop", func(w http.ResponseWriter, r *http.Request, m SkillsAPI) {
		// Drop returns no value: a drop the store refused and one made but
		// not audited are both KindUnavailable, so neither is answered as
		// done (the second's message says that it was).
		if err := m.Drop(r.Context(), s.p, r.PathValue("id"), r.PathValue("name"), pipeline.ViaREST); err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"agent": r.PathValue("id"), "skill": r.PathValue("name"), "dropped": true})
	}, func(r *http.Request, agent string) (string, map[string]any, error) {
		return "syscall.skill.drop", map[string]any{"name": r.PathValue("name")}, own(r, agent)
	})
}

// skillRoute serves a skills route: human for an admin token, agent for an
// agent token (see skillRoutes).
func (s *Server) skillRoute(human func(http.ResponseWriter, *http.Request, SkillsAPI), agent agentForm) http.HandlerFunc {
	return s.tokenRoute(func(w http.ResponseWriter, r *http.Request) {
		if s.skills == nil {
			s.writeError(w, r, armory.E("", armory.KindUnavailable, "this server has no skills (the skills module)"))
			return
		}
		human(w, r, s.skills)
	}, agent)
}
