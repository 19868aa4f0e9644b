package pipeline

import (
	"context"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
)

// Gate decides whether an agent may make calls at all, before anything is
// decided about the call itself: a stopped agent's calls are refused
// whatever the tool, on every surface, because every surface calls
// Execute. Gates come from the engine's modules (engine.Contribution.Gate:
// the services module's agent status), so the core knows nothing of what a
// gate checks; the pipeline only runs them and records the refusal.
//
// Admit runs on every call, on the call's path: it must be cheap (no
// store round trip per call: a gate caches what it reads and keeps the
// cache current) and safe for concurrent use. It returns nil to let the
// call go on, else an error whose message is the reason, written for the
// model and kept in the audit record (stage "gate"), and whose kind is the
// outcome's (KindBlocked for a stopped agent; KindUnavailable when the gate
// cannot tell, which refuses the call: a gate fails closed).
type Gate interface {
	Admit(ctx context.Context, agent string) error
}

// gate runs the pipeline's gates for the call's agent (found by lookup).
// A pass adds no stage (the hot path stays as it was); a refusal adds
// stage "gate" with decision "block" and the gate's reason.
func (p *Pipeline) gate(ctx context.Context, s *state) *refusal {
	for _, g := range p.opts.Gates {
		err := g.Admit(ctx, s.ag.ID)
		if err == nil {
			continue
		}
		return gateRefusal(s, "gate", "", err)
	}
	return nil
}

// gateRefusal records and returns a gate's refusal (Gate or ChannelGate)
// in stage (decision "block", why then the gate's reason): the error's
// message is the reason and its kind the outcome's (an error without a
// kind is KindInternal: the call is refused all the same). The status
// is error when the gate could not decide (KindUnavailable, KindInternal,
// KindInvalid, KindTimeout), blocked when it refused.
func gateRefusal(s *state, stage, why string, err error) *refusal {
	msg := armory.Message(err)
	kind := armory.KindOf(err) // never KindOther for an error
	if why != "" {
		s.stage(stage, "block", why+": "+msg)
	} else {
		s.stage(stage, "block", msg)
	}
	status := audit.StatusBlocked
	switch kind {
	case armory.KindUnavailable, armory.KindInternal, armory.KindInvalid, armory.KindTimeout:
		status = audit.StatusError
	}
	return refuse(status, kind, "%s", msg)
}
