package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Human is the decided_by of a decision a human made (over REST with the
// admin token, or with the armory command).
const Human = "human"

// Surfaces a decision can come from (Decision.Via, recorded in the audit
// entry of the decision).
const (
	ViaREST = "rest" // POST /api/approvals/{id}/approve|deny
	ViaCLI  = "cli"  // armory approvals approve|deny
	ViaTool = "tool" // an approval agent's approval.decide call
	// ViaTimeout is Armory escalating (decided_by "armory") a request an
	// approval agent did not decide within the world's approval_timeout.
	ViaTimeout = "timeout"
)

// ApprovalDecision is one decision on an approval request.
type ApprovalDecision struct {
	ID     string               // the approval's id
	Status store.ApprovalStatus // approved, denied, or (for an approval agent) escalated
	// Agent is the approval agent deciding; "" is a human, who may decide
	// any open request. An agent may decide only requests routed to it,
	// within its tool_approval scope, and never its own.
	Agent  string
	Reason string
	Via    string // ViaREST, ViaCLI or ViaTool
}

// Decide is the one way an approval is decided, whichever surface the
// decision comes from: it checks who may decide what, records the decision
// (a request decided once cannot be decided again: KindConflict, naming who
// decided it and when), writes one audit entry naming the decider, the
// decision and the reason, and emits approval_decided. It returns the
// approval as decided. Errors are *armory.Error. A refused decision (a
// second one, one the decider may not make, an unknown request) is audited
// too, with status blocked and the reason, on every surface alike.
func (p *Pipeline) Decide(ctx context.Context, d ApprovalDecision) (*store.Approval, error) {
	ap, err := p.decide(ctx, d)
	if err != nil && ap == nil && armory.KindOf(err) != armory.KindUnavailable && armory.KindOf(err) != armory.KindInternal {
		p.auditRefusedDecision(ctx, d, err)
	}
	return ap, err
}

func (p *Pipeline) decide(ctx context.Context, d ApprovalDecision) (*store.Approval, error) {
	const op = "approval.decide"
	by := d.Agent
	if by == "" {
		by = Human
	}
	switch d.Status {
	case store.StatusApproved, store.StatusDenied:
	case store.StatusEscalated:
		if d.Agent == "" {
			return nil, armory.E(op, armory.KindInvalid, "a human approves or denies; only an approval agent escalates")
		}
	default:
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("the decision must be approve, deny or escalate, got %q", d.Status))
	}
	ap, err := p.st.GetApproval(ctx, d.ID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, armory.E(op, armory.KindNotFound, "no approval "+d.ID)
	} else if err != nil {
		return nil, store.Err(op, err)
	}
	if d.Agent != "" {
		switch {
		case ap.Agent == d.Agent:
			return nil, armory.E(op, armory.KindPermission, fmt.Sprintf("you cannot decide your own call (approval %s); it goes to a human", d.ID))
		case ap.Route != store.RouteAgent(d.Agent) || !covers(p.scopeOf(d.Agent), ap.Tool):
			return nil, armory.E(op, armory.KindPermission, fmt.Sprintf("approval %s is not routed to you", d.ID))
		}
		// An agent that took too long is too late: the request went to
		// the human queue (escalated), which EscalateExpired records.
		if cur, err := p.EscalateExpired(ctx, d.ID); err == nil && cur.Status != store.StatusPending {
			return nil, alreadyDecided(op, cur)
		}
	}
	if err := p.st.DecideApproval(ctx, d.ID, d.Status, by, d.Reason); err != nil {
		if errors.Is(err, store.ErrConflict) {
			if cur, gerr := p.st.GetApproval(context.WithoutCancel(ctx), d.ID); gerr == nil {
				return nil, alreadyDecided(op, cur)
			}
		}
		return nil, store.Err(op, err)
	}
	if cur, err := p.st.GetApproval(context.WithoutCancel(ctx), d.ID); err == nil {
		ap = cur
	} else {
		ap.Status, ap.DecidedBy, ap.DecisionReason = d.Status, by, d.Reason
	}
	p.emit(Event{Kind: EventApprovalDecided, Agent: ap.Agent, Session: ap.Session, Tool: ap.Tool, ApprovalID: d.ID, Status: string(d.Status), Message: "by " + by})
	if err := p.auditDecision(ctx, ap, d.Status, by, d.Reason, d.Via); err != nil {
		return ap, armory.E(op, armory.KindUnavailable, fmt.Sprintf("approval %s is %s, but its audit entry could not be written", d.ID, d.Status), err)
	}
	return ap, nil
}

// auditDecision writes the one audit entry of a decision on approval ap:
// tool approval.decide, agent and decided_by the decider, args {id,
// decision, reason, via}.
func (p *Pipeline) auditDecision(ctx context.Context, ap *store.Approval, status store.ApprovalStatus, by, reason, via string) error {
	args, _ := json.Marshal(map[string]string{"id": ap.ID, "decision": string(status), "reason": reason, "via": via})
	rec := &audit.Record{
		ID: audit.NewID(), Time: p.opts.Now(), Phase: audit.PhaseFinish, Agent: by, Session: ap.Session, Task: ap.Task,
		Tool: "approval.decide", Args: audit.Redact(args), Permission: ap.Level, ApprovalID: ap.ID, DecidedBy: by, Status: audit.StatusSuccess,
		Result: audit.Summary(fmt.Sprintf("approval %s (%s → %s): %s by %s via %s: %s", ap.ID, ap.Agent, ap.Tool, status, by, via, orNone(reason))),
	}
	return p.appendAudit(context.WithoutCancel(ctx), rec)
}

// auditRefusedDecision writes the audit entry of a refused decision: tool
// approval.decide, agent the would-be decider, status blocked, the refusal
// as its result. The refusal stands whether or not the entry could be
// written.
func (p *Pipeline) auditRefusedDecision(ctx context.Context, d ApprovalDecision, refusal error) {
	by := d.Agent
	if by == "" {
		by = Human
	}
	args, _ := json.Marshal(map[string]string{"id": d.ID, "decision": string(d.Status), "reason": d.Reason, "via": d.Via})
	rec := &audit.Record{
		ID: audit.NewID(), Time: p.opts.Now(), Phase: audit.PhaseFinish, Agent: by, Tool: "approval.decide",
		Args: audit.Redact(args), ApprovalID: d.ID, Status: audit.StatusBlocked,
		Result: audit.Summary("refused: " + armory.Message(refusal)),
	}
	if ap, err := p.st.GetApproval(context.WithoutCancel(ctx), d.ID); err == nil {
		rec.Session, rec.Task, rec.Permission = ap.Session, ap.Task, ap.Level
	}
	_ = p.appendAudit(context.WithoutCancel(ctx), rec)
}

// alreadyDecided is the refusal of a second decision, the same on every
// surface.
func alreadyDecided(op string, a *store.Approval) error {
	return armory.E(op, armory.KindConflict, fmt.Sprintf("approval %s is already decided (%s by %s at %s)",
		a.ID, a.Status, a.DecidedBy, a.DecidedAt.UTC().Format("2006-01-02T15:04:05Z")))
}
