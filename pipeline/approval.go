package pipeline

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// Event is something a human may want to see as it happens (the server
// streams these over SSE).
type Event struct {
	Kind       string    `json:"kind"`
	Time       time.Time `json:"time"`
	Agent      string    `json:"agent,omitempty"`
	Session    string    `json:"session,omitempty"`
	Tool       string    `json:"tool,omitempty"`
	ApprovalID string    `json:"approval_id,omitempty"`
	Status     string    `json:"status,omitempty"`
	Message    string    `json:"message,omitempty"`
	// Ref names the record a module's event is about (a message, a task,
	// a timer), for a subscriber to read from the store: the event only
	// says that it changed. The pipeline's own events leave it empty.
	Ref string `json:"ref,omitempty"`
}

// Event kinds the pipeline raises. Modules add kinds of their own
// (engine.Contribution.EventKinds).
const (
	EventApprovalRequested = "approval_requested"
	EventApprovalDecided   = "approval_decided"
	EventLimitReached      = "limit_reached"
	EventCallFinished      = "call_finished"
)

func (p *Pipeline) emit(e Event) {
	if p.opts.OnEvent != nil {
		e.Time = p.opts.Now()
		p.opts.OnEvent(e)
	}
}

// approverFor returns the approval agent whose tool_approval scope covers
// tool, never the calling agent itself; "" when there is none.
func (p *Pipeline) approverFor(caller, tool string) string {
	for _, ag := range p.h.Agents() {
		if ag.ID == caller || ag.Def.Config == nil {
			continue
		}
		if covers(ag.Def.Config.Policy.ApprovalScope, tool) {
			return ag.ID
		}
	}
	return ""
}

func covers(scope []worldItem, tool string) bool {
	for _, it := range scope {
		if it.Value == "*" || armory.InFamily(tool, it.Value) {
			return true
		}
	}
	return false
}

// requestApproval creates the approval request, writes the pending start
// entry and waits (bounded by Call.Wait) for the decision.
func (p *Pipeline) requestApproval(ctx context.Context, s *state) Outcome {
	route, why := store.RouteHuman, "level confirm: a human must approve"
	if s.level == armory.PermAlwaysConfirm {
		if a := p.approverFor(s.c.Agent, s.c.Tool); a != "" {
			route, why = store.RouteAgent(a), fmt.Sprintf("level always_confirm: routed to approval agent %s", a)
		} else {
			why = "level always_confirm: no approval agent covers this tool, so a human must approve"
		}
	}
	a := &store.Approval{
		ID:    audit.NewID(),
		Agent: s.c.Agent, Session: s.c.Session, Task: s.c.Task, Tool: s.c.Tool,
		Args: audit.Redact(s.c.Args), Reason: strings.Join(reasonsOf(s.stages), "; "),
		Level: s.level.String(), Route: route, ArgsHash: argsHash(s.c.Args),
	}
	// The pending start entry and the session caps are written first
	// (store.Admit), so that a call refused by a cap leaves no approval
	// behind; the approval is created once they are durable.
	s.approval = a
	s.stage("approval", "pending", why, "approval "+a.ID)
	r, err := p.admitStart(ctx, s, p.record(s, audit.PhaseStart, audit.StatusPending, ""))
	if r != nil {
		return p.refuse(ctx, s, r)
	}
	if err != nil && (!p.opts.AuditFailOpen || s.admit != nil) {
		s.approval = nil // never created
		return p.refuse(ctx, s, p.storeFailure(s, "audit", err))
	}
	if err := p.st.CreateApproval(ctx, a); err != nil {
		s.approval = nil
		return p.refuse(ctx, s, p.storeFailure(s, "approval", err))
	}
	p.emit(Event{Kind: EventApprovalRequested, Agent: s.c.Agent, Session: s.c.Session, Tool: s.c.Tool, ApprovalID: a.ID, Message: why})
	return p.awaitDecision(ctx, s)
}

// awaitDecision waits for s.approval to be decided, escalates an agent's
// request to the human queue when the agent takes too long, and runs the
// tool (at most once per approval) when approved.
func (p *Pipeline) awaitDecision(ctx context.Context, s *state) Outcome {
	a := s.approval
	if s.c.Wait > 0 {
		report(s, "waiting for approval %s (%s)", a.ID, a.Route)
		wctx, cancel := context.WithTimeout(ctx, s.c.Wait)
		a = p.waitWithEscalation(wctx, a)
		cancel()
		s.approval = a
	}
	switch a.Status {
	case store.StatusApproved:
		return p.runApproved(ctx, s)
	case store.StatusDenied, store.StatusExpired:
		s.stage("approval", "denied", fmt.Sprintf("%s by %s: %s", a.Status, a.DecidedBy, a.DecisionReason))
		return p.refuse(ctx, s, refuse(audit.StatusDenied, armory.KindDenied,
			"Denied by %s: %s. Do not retry this call; change your approach or ask why.", a.DecidedBy, orNone(a.DecisionReason)))
	}
	who := "a human"
	if strings.HasPrefix(a.Route, "agent:") {
		who = "approval agent " + strings.TrimPrefix(a.Route, "agent:")
	}
	return Outcome{CallID: s.id, Status: audit.StatusPending, Kind: armory.KindPending, ApprovalID: a.ID, Permission: a.Level,
		Stages: s.stages, Reasons: reasonsOf(s.stages),
		Result: pendingText(a.ID, who), Human: humanText(a.ID, who)}
}

// waitWithEscalation waits until the approval is final or ctx ends. An
// approval routed to an agent that stays undecided past the world's
// approval_timeout is escalated to the human queue.
func (p *Pipeline) waitWithEscalation(ctx context.Context, a *store.Approval) *store.Approval {
	for {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if a.Status == store.StatusPending && strings.HasPrefix(a.Route, "agent:") {
			deadline := a.CreatedAt.Add(p.h.World.Policy.ApprovalTimeout)
			wctx, cancel = context.WithDeadline(ctx, deadline)
		}
		got, err := p.st.WaitApproval(wctx, a.ID)
		cancel()
		if err == nil {
			return got
		}
		if ctx.Err() != nil {
			if cur, err := p.st.GetApproval(context.WithoutCancel(ctx), a.ID); err == nil {
				return cur
			}
			return a
		}
		// The agent's time is up: escalate (once; another process may have).
		if cur, err := p.EscalateExpired(context.WithoutCancel(ctx), a.ID); err == nil {
			a = cur
		} else {
			return a
		}
	}
}

// EscalateExpired escalates approval id to the human queue if it is routed
// to an agent and older than the approval timeout. It returns the approval
// as it now stands.
func (p *Pipeline) EscalateExpired(ctx context.Context, id string) (*store.Approval, error) {
	a, err := p.st.GetApproval(ctx, id)
	if err != nil {
		return nil, err
	}
	if a.Status == store.StatusPending && strings.HasPrefix(a.Route, "agent:") && p.opts.Now().Sub(a.CreatedAt) >= p.h.World.Policy.ApprovalTimeout {
		why := fmt.Sprintf("approval agent %s did not decide within %s", strings.TrimPrefix(a.Route, "agent:"), p.h.World.Policy.ApprovalTimeout)
		err := p.st.DecideApproval(ctx, id, store.StatusEscalated, "armory", why)
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, err
		}
		if err == nil { // audited once, by the process that escalated
			_ = p.auditDecision(ctx, a, store.StatusEscalated, "armory", why, ViaTimeout)
		}
		p.emit(Event{Kind: EventApprovalDecided, Agent: a.Agent, Tool: a.Tool, ApprovalID: id, Status: string(store.StatusEscalated)})
		return p.st.GetApproval(ctx, id)
	}
	return a, nil
}

// runApproved runs an approved call exactly once: the first caller to claim
// the approval runs it and stores the outcome; any other caller (a second
// resume, another process) waits for that outcome.
func (p *Pipeline) runApproved(ctx context.Context, s *state) Outcome {
	a := s.approval
	s.stage("approval", "approved", fmt.Sprintf("approved by %s: %s", a.DecidedBy, orNone(a.DecisionReason)))
	return p.runClaimed(ctx, s)
}

type storedOutcome struct {
	Outcome
	Kind armory.Kind `json:"kind"`
}

// storedOutcome returns the outcome another caller stored for the
// approval, waiting (bounded by ctx and resultWait) while that caller still
// runs the tool.
func (p *Pipeline) storedOutcome(ctx context.Context, s *state) Outcome {
	ctx, cancel := context.WithTimeout(ctx, p.resultWait(s))
	defer cancel()
	for {
		a, err := p.st.GetApproval(ctx, s.approval.ID)
		if err != nil && ctx.Err() == nil {
			return p.refuse(ctx, s, p.storeFailure(s, "approval", err))
		}
		if err == nil && len(a.Result) > 0 {
			var so storedOutcome
			if err := json.Unmarshal(a.Result, &so); err != nil {
				return p.refuse(ctx, s, p.storeFailure(s, "approval", err))
			}
			return p.answerStored(ctx, s, so)
		}
		select {
		case <-ctx.Done():
			id := s.approval.ID
			return Outcome{CallID: s.id, Status: audit.StatusPending, Kind: armory.KindPending, ApprovalID: id,
				Result: "The approved call is still running (approval " + id + "). Wait, then call this tool again with the same arguments to get its result.",
				Human:  "The call continues with: armory call --resume " + id}
		case <-time.After(p.opts.PollInterval):
		}
	}
}

// answerStored returns the stored outcome of an approval's run as the
// outcome of this call (its own call id), and audits it as a denied resume
// is audited: one finish entry with the stored status, the approval id and
// the call id of the run that produced the result.
func (p *Pipeline) answerStored(ctx context.Context, s *state, so storedOutcome) Outcome {
	ran := so.CallID
	o := so.Outcome
	o.CallID, o.Kind = s.id, so.Kind
	what := fmt.Sprintf("the tool already ran for approval %s (call %s); this is its stored result", s.approval.ID, ran)
	if so.Status == audit.StatusInterrupted {
		what = fmt.Sprintf("the run of approval %s (call %s) was interrupted: its process stopped; this is its stored outcome", s.approval.ID, ran)
	}
	s.stage("approval", "stored", what)
	o.Reasons = append(o.Reasons, "approval: "+what)
	rec := p.record(s, audit.PhaseFinish, o.Status, o.Result)
	if err := p.appendAudit(context.WithoutCancel(ctx), rec); err != nil {
		o.Reasons = append(o.Reasons, "audit entry could not be written: "+err.Error())
	}
	return o
}

// resume continues the call an approval was created for.
func (p *Pipeline) resume(ctx context.Context, s *state) Outcome {
	a, err := p.st.GetApproval(ctx, s.c.Resume)
	if err != nil {
		kind := armory.KindUnavailable
		if errors.Is(err, store.ErrNotFound) {
			kind = armory.KindNotFound
		}
		if kind == armory.KindUnavailable {
			return Outcome{CallID: s.id, Status: audit.StatusError, Kind: kind, Reasons: []string{"store: " + err.Error()},
				Result: fmt.Sprintf("Could not read approval %s: the store is unavailable. Try again later.", s.c.Resume)}
		}
		text := fmt.Sprintf("No approval %s: check its id (the pending result of the call that asked for it names it).", s.c.Resume)
		// A resume of an approval that does not exist is audited like any
		// refused call (a probe for approval ids belongs in the trail).
		s.stage("resume", "block", text)
		return p.refuse(ctx, s, refuse(audit.StatusError, kind, "%s", text))
	}
	conflict := func(msg string) Outcome {
		// Audited under the agent and tool the caller named: resuming
		// another agent's approval is a probe an operator looks for.
		if s.c.Agent == "" {
			s.c.Agent = a.Agent
		}
		if s.c.Tool == "" {
			s.c.Tool = a.Tool
		}
		text := "Cannot resume approval " + a.ID + ": " + msg
		s.stage("resume", "block", text)
		o := p.refuse(ctx, s, refuse(audit.StatusError, armory.KindConflict, "%s", text))
		o.ApprovalID = a.ID
		return o
	}
	if s.c.Agent != "" && s.c.Agent != a.Agent {
		return conflict(fmt.Sprintf("it was requested by agent %s, not %s", a.Agent, s.c.Agent))
	}
	if ag, err := p.h.Agent(a.Agent); err == nil && s.c.Tool != "" {
		if real, ok := ag.Registry.Resolve(s.c.Tool); ok {
			s.c.Tool = real // a provider name of the tool
		}
	}
	if s.c.Tool != "" && s.c.Tool != a.Tool {
		return conflict(fmt.Sprintf("it is for tool %s, not %s", a.Tool, s.c.Tool))
	}
	if len(bytes.TrimSpace(s.c.Args)) > 0 {
		if argsHash(s.c.Args) != a.ArgsHash {
			return conflict("the arguments differ from the approved call's (resume with the same --args, or none)")
		}
	} else {
		if a.ArgsHash != argsHash(a.Args) {
			return conflict("the approved call's arguments held secrets, which are not stored; resume with the same --args")
		}
		s.c.Args = a.Args
	}
	s.c.Agent, s.c.Tool, s.c.Session, s.c.Task = a.Agent, a.Tool, a.Session, a.Task
	if r := p.lookup(ctx, s); r != nil {
		return p.refuse(ctx, s, r)
	}
	if lvl, err := armory.ParsePermission(a.Level); err == nil {
		s.level, s.hasLvl = lvl, true
	}
	s.approval = a
	s.stage("resume", "ok", "resuming approval "+a.ID)
	if len(a.Result) > 0 {
		return p.storedOutcome(ctx, s)
	}
	// The tool may have changed since the approval was asked for (a
	// skill's tool replaced, or registered again, at run time): the
	// arguments must still be valid for the tool that would run now.
	if r := p.validate(ctx, s); r != nil {
		return p.refuse(ctx, s, r)
	}
	return p.awaitDecision(ctx, s)
}

// argsHash is the hash of a call's canonical (compact) arguments; an
// approval keeps it so that a resume with other arguments is refused.
func argsHash(args json.RawMessage) string {
	var buf bytes.Buffer
	raw := bytes.TrimSpace(args)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := json.Compact(&buf, raw); err != nil {
		buf.Reset()
		buf.Write(raw)
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:])
}

func report(s *state, format string, args ...any) {
	if s.c.Progress != nil {
		s.c.Progress(fmt.Sprintf(format, args...))
	}
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// ---- the tools of approval agents (Thinkroid) ----

type worldItem = world.Item

func (p *Pipeline) scopeOf(agent string) []worldItem {
	ag, err := p.h.Agent(agent)
	if err != nil || ag.Def.Config == nil {
		return nil
	}
	return ag.Def.Config.Policy.ApprovalScope
}

type approvalList struct{ p *Pipeline }

func (*approvalList) Spec() armory.Spec         { return roster.ApprovalList.Spec() }
func (*approvalList) Manifest() armory.Manifest { return roster.ApprovalList.Manifest() }
func (t *approvalList) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	me := inv.Agent.ID
	as, err := t.p.st.ListApprovals(ctx, store.ApprovalFilter{Status: store.StatusPending, Route: store.RouteAgent(me)})
	if err != nil {
		return armory.Failf(armory.KindUnavailable, "cannot list approvals: %v", err)
	}
	type item struct {
		ID      string          `json:"id"`
		Agent   string          `json:"agent"`
		Tool    string          `json:"tool"`
		Args    json.RawMessage `json:"args"`
		Reason  string          `json:"reason"`
		Created time.Time       `json:"created_at"`
		Diff    string          `json:"diff,omitempty"` // the change against the current file (Preview)
	}
	out := []item{}
	scope := t.p.scopeOf(me)
	for _, a := range as {
		if a.Agent == me || !covers(scope, a.Tool) {
			continue
		}
		if cur, err := t.p.EscalateExpired(ctx, a.ID); err == nil && cur.Status != store.StatusPending {
			continue
		}
		it := item{a.ID, a.Agent, a.Tool, a.Args, a.Reason, a.CreatedAt, ""}
		if len(out) < MaxListDiffs {
			it.Diff = t.p.Preview(ctx, a)
		}
		out = append(out, it)
	}
	b, _ := json.MarshalIndent(out, "", "  ")
	text := string(b)
	if len(out) == 0 {
		text = "No calls are waiting for your approval."
	}
	return armory.Result{Success: true, Text: text, Value: out}
}

type approvalDecide struct{ p *Pipeline }

func (*approvalDecide) Spec() armory.Spec         { return roster.ApprovalDecide.Spec() }
func (*approvalDecide) Manifest() armory.Manifest { return roster.ApprovalDecide.Manifest() }
func (t *approvalDecide) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	var a struct {
		ID, Decision, Reason string
	}
	if err := json.Unmarshal(inv.Args, &a); err != nil {
		return armory.Failf(armory.KindInvalid, "bad arguments: %v", err)
	}
	status := map[string]store.ApprovalStatus{"approve": store.StatusApproved, "deny": store.StatusDenied, "escalate": store.StatusEscalated}[a.Decision]
	if _, err := t.p.Decide(ctx, ApprovalDecision{ID: a.ID, Status: status, Agent: inv.Agent.ID, Reason: a.Reason, Via: ViaTool}); err != nil {
		return armory.FailErr(err)
	}
	return armory.OK(fmt.Sprintf("approval %s: %s", a.ID, status))
}
