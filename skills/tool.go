package skills

import (
	"context"

	"github.com/armory-dev/armory"
)

// Tool is one tool of a skill pack (a toolbox binary or a WASM module),
// as it joins an agent's registry when the agent acquires the skill. Its
// source is "skill <name>" (roster.Origin). Before it runs it checks that
// the calling agent still holds the skill — reading the store again when
// this process's view is older than Options.StateTTL — so a skill dropped
// in another process stops running here at once, even if the event that
// said so was lost.
type Tool struct {
	inner armory.Tool
	skill string
	m     *Module
}

var _ armory.Tool = (*Tool)(nil)

// Spec implements armory.Tool.
func (t *Tool) Spec() armory.Spec { return t.inner.Spec() }

// Manifest implements armory.Tool.
func (t *Tool) Manifest() armory.Manifest { return t.inner.Manifest() }

// Origin implements roster.Origin.
func (t *Tool) Origin() string { return "skill " + t.skill }

// Skill is the name of the skill pack the tool belongs to.
func (t *Tool) Skill() string { return t.skill }

// Execute implements armory.Tool.
func (t *Tool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	if inv.Agent == nil || inv.Agent.ID == "" {
		return armory.Failf(armory.KindInvalid, "%s is a tool of skill %s and runs for an agent; this call names none", t.Spec().Name, t.skill)
	}
	if h := t.m.rosterOf(); h != nil {
		ag, err := h.Agent(inv.Agent.ID)
		if err != nil {
			return armory.FailErr(err)
		}
		held, err := t.m.fresh(ctx, ag, t.skill)
		if err != nil {
			return armory.Failf(armory.KindUnavailable, "could not check that you still hold skill %s: %s", t.skill, armory.Message(err))
		}
		if !held {
			return armory.Failf(armory.KindPermission, "skill %s was dropped, so its tool %s is gone; syscall.skill.acquire {\"name\": %q} loads it again", t.skill, t.Spec().Name, t.skill)
		}
	}
	return t.inner.Execute(ctx, inv)
}
