package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// decisionRecords returns the audit entries of decisions on approval id.
func decisionRecords(t *testing.T, st store.Store, id string) []*audit.Record {
	t.Helper()
	recs, err := st.ListAudit(context.Background(), store.AuditFilter{Tool: "approval.decide", Limit: store.MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	var out []*audit.Record
	for _, r := range recs {
		if r.ApprovalID == id {
			out = append(out, r)
		}
	}
	return out
}

// checkDecisionRecord checks that approval id has exactly one decision
// entry, naming the decider, the decision, the reason and the surface.
func checkDecisionRecord(t *testing.T, st store.Store, id, by, decision, reason, via string) {
	t.Helper()
	var recs []*audit.Record
	for _, r := range decisionRecords(t, st, id) {
		if r.Status != audit.StatusBlocked { // refused decisions are checked apart
			recs = append(recs, r)
		}
	}
	if len(recs) != 1 {
		t.Fatalf("decision entries of %s: %d, want 1", id, len(recs))
	}
	r := recs[0]
	var args map[string]string
	if err := json.Unmarshal(r.Args, &args); err != nil || r.Agent != by || r.DecidedBy != by || r.Status != audit.StatusSuccess ||
		args["id"] != id || args["decision"] != decision || args["reason"] != reason || args["via"] != via {
		t.Fatalf("decision entry = %+v (args %s)", r, r.Args)
	}
}

// TestDecideOnePath: an approval agent's approval.decide and a human's
// decision go through Pipeline.Decide: each leaves one audit entry naming
// the decider and the reason, and a second decision is refused with
// KindConflict naming who decided, whoever asks.
func TestDecideOnePath(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()

	// An approval agent decides through its tool.
	o := f.call("dev", "test.always", `{"q":1}`)
	if d := f.call("warden", "approval.decide", `{"id":"`+o.ApprovalID+`","decision":"approve","reason":"in scope"}`); d.Status != audit.StatusSuccess {
		t.Fatalf("approval.decide = %+v", d)
	}
	checkDecisionRecord(t, f.st, o.ApprovalID, "warden", "approved", "in scope", ViaTool)
	// A second decision: by the agent (a tool error), by a human (an error): the same kind, the same words.
	d := f.call("warden", "approval.decide", `{"id":"`+o.ApprovalID+`","decision":"deny","reason":"changed my mind"}`)
	_, err := f.p.Decide(ctx, ApprovalDecision{ID: o.ApprovalID, Status: store.StatusDenied, Reason: "no", Via: ViaREST})
	const want = "is already decided (approved by warden at "
	if d.Status != audit.StatusError || d.Kind != armory.KindConflict || !strings.Contains(d.Result, want) ||
		armory.KindOf(err) != armory.KindConflict || !strings.Contains(armory.Message(err), want) {
		t.Fatalf("second decision: tool %+v; human %v", d, err)
	}
	checkDecisionRecord(t, f.st, o.ApprovalID, "warden", "approved", "in scope", ViaTool)
	// Each refused decision is audited, blocked, naming who tried and why.
	refused := map[string]bool{}
	for _, r := range decisionRecords(t, f.st, o.ApprovalID) {
		if r.Status == audit.StatusBlocked && strings.Contains(r.Result, want) && r.DecidedBy == "" {
			refused[r.Agent] = true
		}
	}
	if !refused["warden"] || !refused[Human] || len(refused) != 2 {
		t.Fatalf("refused second decisions audited for %v, want warden and human", refused)
	}

	// A human decides any open request; only an approval agent escalates.
	h := f.call("dev", "test.confirm", `{}`)
	if _, err := f.p.Decide(ctx, ApprovalDecision{ID: h.ApprovalID, Status: store.StatusEscalated, Via: ViaCLI}); armory.KindOf(err) != armory.KindInvalid {
		t.Fatalf("a human escalating: %v", err)
	}
	// An agent may not decide what is not routed to it.
	if _, err := f.p.Decide(ctx, ApprovalDecision{ID: h.ApprovalID, Status: store.StatusApproved, Agent: "warden", Via: ViaTool}); armory.KindOf(err) != armory.KindPermission {
		t.Fatalf("an agent deciding a human's request: %v", err)
	}
	a, err := f.p.Decide(ctx, ApprovalDecision{ID: h.ApprovalID, Status: store.StatusDenied, Reason: "not today", Via: ViaCLI})
	if err != nil || a.Status != store.StatusDenied || a.DecidedBy != Human {
		t.Fatalf("human decision: %+v %v", a, err)
	}
	checkDecisionRecord(t, f.st, h.ApprovalID, Human, "denied", "not today", ViaCLI)
	if _, err := f.p.Decide(ctx, ApprovalDecision{ID: "nope", Status: store.StatusApproved, Via: ViaCLI}); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("unknown approval: %v", err)
	}
	if err := f.st.VerifyAudit(ctx); err != nil {
		t.Fatalf("the chain with decision entries: %v", err)
	}
}

// TestEscalationAudited: a request an approval agent leaves undecided past
// approval_timeout is escalated to the human queue once, with one decision
// entry (decided_by armory, via timeout), however many callers notice.
func TestEscalationAudited(t *testing.T) {
	f := newFixture(t)
	o := f.call("dev", "test.always", `{"q":3}`)
	if o.Status != audit.StatusPending {
		t.Fatalf("outcome = %+v", o)
	}
	// approval_timeout is 300ms in the test world: poll (bounded) until it has passed.
	ctx := context.Background()
	var cur *store.Approval
	for range 500 {
		var err error
		if cur, err = f.p.EscalateExpired(ctx, o.ApprovalID); err != nil {
			t.Fatal(err)
		}
		if cur.Status != store.StatusPending {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cur.Status != store.StatusEscalated || cur.DecidedBy != "armory" {
		t.Fatalf("escalation = %+v", cur)
	}
	f.p.EscalateExpired(ctx, o.ApprovalID) // a second look changes nothing
	checkDecisionRecord(t, f.st, o.ApprovalID, "armory", "escalated", cur.DecisionReason, ViaTimeout)
}
