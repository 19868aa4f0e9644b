package skills

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// The skills for people: what the CLI (`armory skills …`) and the REST API
// call. A person acts as pipeline.Human; every change is audited with
// pipeline.AuditHuman (the surface passes its pipeline), reads are not. An
// agent's own view and changes go through its syscall.skill.* tools and
// the pipeline instead.

// SkillDetail is one skill pack as `armory skills show` prints it.
type SkillDetail struct {
	SkillInfo
	File          string            `json:"file"`
	Compatibility string            `json:"compatibility,omitempty"`
	Metadata      map[string]string `json:"metadata,omitempty"`
	AllowedTools  []string          `json:"allowed_tools,omitempty"`
	Files         []string          `json:"files"`
	Instructions  string            `json:"instructions"`
	// Holders are the agents that have acquired it, sorted.
	Holders []string `json:"holders"`
}

// SkillSummary is one skill pack in `armory skills list`.
type SkillSummary struct {
	SkillInfo
	Holders []string `json:"holders"`
}

// holders maps each skill to the agents that acquired it, per the store.
func (m *Module) holders(ctx context.Context) (map[string][]string, error) {
	ss, err := m.states(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	cursor := ""
	for {
		page, next, err := ss.ListSkillStates(ctx, "", store.Page{Limit: store.MaxPage, Cursor: cursor})
		if err != nil {
			return nil, store.Err("skills.list", err)
		}
		for _, st := range page {
			if st.Acquired {
				out[st.Skill] = append(out[st.Skill], st.Agent)
			}
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}

// allPacks returns every pack, the world's then each archetype's, sorted.
func (m *Module) allPacks() []*pack {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*pack
	for _, set := range m.packs {
		for _, p := range set {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].skill.Name != out[j].skill.Name {
			return out[i].skill.Name < out[j].skill.Name
		}
		return out[i].skill.Archetype < out[j].skill.Archetype
	})
	return out
}

// List returns every skill pack of the world (and of its archetypes) with
// the agents holding it.
func (m *Module) List(ctx context.Context) ([]SkillSummary, error) {
	m.rescanPacks()
	hold, err := m.holders(ctx)
	if err != nil {
		return nil, err
	}
	out := []SkillSummary{}
	for _, p := range m.allPacks() {
		out = append(out, SkillSummary{SkillInfo: p.info(), Holders: m.scopeHolders(p, hold[p.skill.Name])})
	}
	return out, nil
}

// scopeHolders keeps the holders that see pack p (an archetype's own
// skill is held by that archetype's agents only; a world skill by those
// whose archetype has none of that name).
func (m *Module) scopeHolders(p *pack, agents []string) []string {
	h := m.rosterOf()
	out := []string{}
	for _, id := range agents {
		if h == nil {
			out = append(out, id)
			continue
		}
		ag, err := h.Agent(id)
		if err != nil || m.skillFor(ag, p.skill.Name) != p {
			continue
		}
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Show returns skill name: the world's, or with archetype set that
// archetype's own. Errors: KindNotFound naming the skills there are.
func (m *Module) Show(ctx context.Context, name, archetype string) (SkillDetail, error) {
	m.rescanPacks()
	m.mu.Lock()
	p := m.packs[archetype][name]
	m.mu.Unlock()
	if p == nil {
		var names []string
		for _, q := range m.allPacks() {
			if q.skill.Archetype == "" {
				names = append(names, q.skill.Name)
			} else {
				names = append(names, q.skill.Name+" (archetype "+q.skill.Archetype+")")
			}
		}
		have := "none"
		if len(names) > 0 {
			have = strings.Join(names, ", ")
		}
		where := "the world"
		if archetype != "" {
			where = "archetype " + archetype
		}
		return SkillDetail{}, armory.E("skills.show", armory.KindNotFound, fmt.Sprintf("%s has no skill %q (skills: %s)", where, name, have))
	}
	hold, err := m.holders(ctx)
	if err != nil {
		return SkillDetail{}, err
	}
	s := p.skill
	return SkillDetail{SkillInfo: p.info(), File: s.File, Compatibility: s.Compatibility, Metadata: s.Metadata, AllowedTools: s.AllowedTools,
		Files: nonNil(append([]string(nil), s.Files...)), Instructions: s.Body, Holders: m.scopeHolders(p, hold[name])}, nil
}

// AgentSkills returns the skills agent id sees, with its state.
func (m *Module) AgentSkills(ctx context.Context, id string) ([]SkillInfo, error) {
	h := m.rosterOf()
	if h == nil {
		return nil, armory.E("skills", armory.KindUnavailable, "the skills module is not ready")
	}
	ag, err := h.Agent(id)
	if err != nil {
		return nil, err
	}
	list, err := m.Skills(ctx, ag)
	if list == nil {
		list = []SkillInfo{}
	}
	return list, err
}

// Acquire makes agent id acquire skill name for a person, audited as
// skills.acquire. Errors as syscall.skill.acquire's, and KindUnavailable
// when the change was made but its audit entry is missing.
func (m *Module) Acquire(ctx context.Context, p *pipeline.Pipeline, id, name, via string) (AcquireResult, error) {
	h := m.rosterOf()
	if h == nil {
		return AcquireResult{}, armory.E("skills.acquire", armory.KindUnavailable, "the skills module is not ready")
	}
	ag, err := h.Agent(id)
	if err != nil {
		return AcquireResult{}, err
	}
	res, err := m.acquire(ctx, ag, name)
	if err != nil {
		return res, err
	}
	err = p.AuditHuman(ctx, pipeline.HumanAction{Tool: "skills.acquire", Agent: id, Args: map[string]any{"agent": id, "skill": name, "via": via},
		Result: fmt.Sprintf("skill %s acquired for %s by %s via %s (tools: %s)", name, id, pipeline.Human, via, toolList(res.Tools))})
	return res, err
}

// Drop makes agent id drop skill name for a person, audited as
// skills.drop.
func (m *Module) Drop(ctx context.Context, p *pipeline.Pipeline, id, name, via string) error {
	h := m.rosterOf()
	if h == nil {
		return armory.E("skills.drop", armory.KindUnavailable, "the skills module is not ready")
	}
	ag, err := h.Agent(id)
	if err != nil {
		return err
	}
	if _, err := m.drop(ctx, ag, name); err != nil {
		return err
	}
	return p.AuditHuman(ctx, pipeline.HumanAction{Tool: "skills.drop", Agent: id, Args: map[string]any{"agent": id, "skill": name, "via": via},
		Result: fmt.Sprintf("skill %s dropped for %s by %s via %s", name, id, pipeline.Human, via)})
}

// Install installs a skill for a person (a folder anywhere on the server,
// an archive URL, a built-in skill), audited as skills.install: the
// person is the approver.
func (m *Module) Install(ctx context.Context, p *pipeline.Pipeline, req InstallRequest, via string) (Installed, error) {
	var net *armory.NetPolicy
	m.mu.Lock()
	if w := m.env.World; w != nil && w.Network != nil {
		net = &armory.NetPolicy{Allow: w.Network.Entries(), From: w.Network.From()}
	}
	m.mu.Unlock()
	res, err := m.install(ctx, req, "", net)
	if err != nil {
		return res, err
	}
	err = p.AuditHuman(ctx, pipeline.HumanAction{Tool: "skills.install", Args: map[string]any{"source": req.Source, "path": req.Path, "url": req.URL, "name": req.Name, "replace": req.Replace, "via": via},
		Result: fmt.Sprintf("skill %s installed in %s by %s via %s", res.Skill.Name, res.Dir, pipeline.Human, via)})
	return res, err
}

// Remove deletes world skill name for a person, audited as skills.remove,
// and returns the agents that held it.
func (m *Module) Remove(ctx context.Context, p *pipeline.Pipeline, name, via string) ([]string, error) {
	agents, err := m.remove(ctx, name)
	if err != nil {
		return nil, err
	}
	err = p.AuditHuman(ctx, pipeline.HumanAction{Tool: "skills.remove", Args: map[string]any{"skill": name, "via": via},
		Result: fmt.Sprintf("skill %s removed by %s via %s (held by: %s)", name, pipeline.Human, via, strings.Join(agents, ", "))})
	if agents == nil {
		agents = []string{}
	}
	return agents, err
}

// toolList names tools for a sentence: "none" for none.
func toolList(tools []string) string {
	if len(tools) == 0 {
		return "none"
	}
	return strings.Join(tools, ", ")
}
