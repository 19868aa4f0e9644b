package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// A human's changes to a session's caps. Like an approval decision, each is
// made in one place, whichever surface it comes from (armory session
// extend|reset today; the console's buttons later), and each leaves an
// audit record: raising a cap or restarting a session is a decision an
// operator must be able to find in the trail.

// CheckLimitOverride says whether cap name may be raised to n: a known cap
// (world.LimitNames), n ≥ 1, and at most MaxLimit(name) where the cap has a
// maximum (session_runtime is in seconds). Errors: KindInvalid.
func CheckLimitOverride(name string, n int64) error {
	const op = "session.extend"
	if !slices.Contains(world.LimitNames, name) {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("unknown limit %q (known: %v)", name, world.LimitNames))
	}
	if n < 1 {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("%s must be raised to at least 1, got %d", name, n))
	}
	if max := MaxLimit(name); max > 0 && n > max {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("%s can be raised to at most %d", name, max))
	}
	return nil
}

// ExtendSession raises cap name of session to n (CheckLimitOverride) and
// audits it: tool session.extend, agent and decided_by human, the session,
// args {limit, to, via}. Errors: KindInvalid, or the store's.
func (p *Pipeline) ExtendSession(ctx context.Context, session, name string, n int64, via string) error {
	if err := CheckLimitOverride(name, n); err != nil {
		return err
	}
	if err := p.st.SetLimitOverride(ctx, session, name, n); err != nil {
		return store.Err("session.extend", err)
	}
	return p.auditOperator(ctx, "session.extend", session, map[string]any{"limit": name, "to": n, "via": via},
		fmt.Sprintf("session %s: %s raised to %d by %s via %s", session, name, n, Human, via))
}

// ResetSession zeroes session's counters and restarts its clock (raised
// caps stay), and audits it: tool session.reset, agent and decided_by
// human, args {via}. Errors: the store's.
func (p *Pipeline) ResetSession(ctx context.Context, session, via string) error {
	if err := p.st.ResetSession(ctx, session); err != nil {
		return store.Err("session.reset", err)
	}
	return p.auditOperator(ctx, "session.reset", session, map[string]any{"via": via},
		fmt.Sprintf("session %s reset by %s via %s", session, Human, via))
}

// auditOperator writes the one audit entry of a human's change to a
// session. The change stands whether or not the entry could be written;
// the error says which.
func (p *Pipeline) auditOperator(ctx context.Context, tool, session string, args map[string]any, result string) error {
	return p.AuditHuman(ctx, HumanAction{Tool: tool, Session: session, Args: args, Result: result})
}

// HumanAction is a change a person made outside a tool call — a message
// posted to an agent, an agent stopped, a task reassigned from the REST
// API or the CLI — as its audit entry records it.
type HumanAction struct {
	// Tool names the action ("session.extend", "inbox.post", …).
	Tool string
	// Agent is the agent the action concerns ("" when none: the entry
	// then names the human as its agent).
	Agent string
	// Session is recorded as the entry's session ("" when none).
	Session string
	// Args are the action's arguments (redacted like a call's).
	Args map[string]any
	// Result is the one-line outcome written to the entry.
	Result string
}

// AuditHuman writes the one audit entry of a human's action: decided_by
// human, status success. The action has happened by then: it stands
// whether or not the entry could be written, and the error (KindUnavailable)
// says that the trail lacks it. Safe for concurrent use.
func (p *Pipeline) AuditHuman(ctx context.Context, a HumanAction) error {
	b, _ := json.Marshal(a.Args)
	agent := a.Agent
	if agent == "" {
		agent = Human
	}
	rec := &audit.Record{
		ID: audit.NewID(), Time: p.opts.Now(), Phase: audit.PhaseFinish, Agent: agent, Session: a.Session,
		Tool: a.Tool, Args: audit.Redact(b), DecidedBy: Human, Status: audit.StatusSuccess, Result: audit.Summary(a.Result),
	}
	tool := a.Tool
	if err := p.appendAudit(context.WithoutCancel(ctx), rec); err != nil {
		return armory.E(tool, armory.KindUnavailable, "done, but its audit entry could not be written", err)
	}
	return nil
}
