package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
)

// otherProcess opens a second store on the same database, as another
// armory process (the human's `armory approvals approve`) would.
func otherProcess(t *testing.T, f *fixture) store.Store {
	t.Helper()
	st, err := sqlite.OpenWith(f.db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestHumanApprovalResumeRunsOnce(t *testing.T) {
	f := newFixture(t)
	o := f.call("plain", "test.confirm", `{"x":1}`)
	if o.Status != audit.StatusPending {
		t.Fatalf("outcome = %+v", o)
	}
	id := o.ApprovalID
	ap, err := f.st.GetApproval(context.Background(), id)
	if err != nil || ap.Route != store.RouteHuman || ap.Level != "confirm" || ap.Tool != "test.confirm" || !strings.Contains(ap.Reason, "confirm") {
		t.Fatalf("approval = %+v, %v", ap, err)
	}
	// Resume before a decision: still pending.
	if r := f.p.Execute(context.Background(), Call{Resume: id}); r.Status != audit.StatusPending {
		t.Fatalf("resume before decision: %+v", r)
	}
	human := otherProcess(t, f)
	if err := human.DecideApproval(context.Background(), id, store.StatusApproved, "human", "looks fine"); err != nil {
		t.Fatal(err)
	}
	r1 := f.p.Execute(context.Background(), Call{Resume: id})
	if r1.Status != audit.StatusSuccess || r1.DecidedBy != "human" || r1.ApprovalID != id {
		t.Fatalf("resume after approval: %+v", r1)
	}
	r2 := f.p.Execute(context.Background(), Call{Agent: "plain", Tool: "test.confirm", Args: json.RawMessage(`{"x":1}`), Resume: id})
	if r2.Status != audit.StatusSuccess || r2.Result != r1.Result {
		t.Fatalf("second resume must return the stored result: %+v", r2)
	}
	if n := f.tools["test.confirm"].runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times for one approval", n)
	}
	r3 := f.p.Execute(context.Background(), Call{Agent: "plain", Tool: "test.confirm", Args: json.RawMessage(`{"x":2}`), Resume: id})
	if r3.Kind != armory.KindConflict || r3.Status != audit.StatusError {
		t.Fatalf("resume with other arguments is a conflict: %+v", r3)
	}
	if r := f.p.Execute(context.Background(), Call{Agent: "dev", Resume: id}); r.Kind != armory.KindConflict {
		t.Fatalf("resume by another agent is a conflict: %+v", r)
	} else if recs := f.records(t, r.CallID); len(recs) != 1 || recs[0].Agent != "dev" || recs[0].ApprovalID != "" && recs[0].Status == audit.StatusSuccess ||
		!strings.Contains(recs[0].Result, "requested by agent plain, not dev") {
		// Every refused resume is audited, under the agent that tried.
		t.Fatalf("resume by another agent: audit records %+v", recs)
	}
	if r := f.p.Execute(context.Background(), Call{Agent: "dev", Resume: "no-such-approval"}); r.Kind != armory.KindNotFound {
		t.Fatalf("resume of an unknown approval: %+v", r)
	} else if recs := f.records(t, r.CallID); len(recs) != 1 || recs[0].Agent != "dev" || recs[0].Status != audit.StatusError {
		t.Fatalf("resume of an unknown approval: audit records %+v", recs)
	}
	// With no agent named (armory call --resume ID), the refusal reads
	// plainly (no store internals) and is audited under no made-up session.
	if r := f.p.Execute(context.Background(), Call{Resume: "no-such-approval"}); r.Kind != armory.KindNotFound ||
		!strings.HasPrefix(r.Result, "No approval no-such-approval: check its id") || strings.Contains(r.Result, "store") {
		t.Fatalf("resume of an unknown approval, no agent: %+v", r)
	} else if recs := f.records(t, r.CallID); len(recs) != 1 || recs[0].Session != "" || recs[0].Status != audit.StatusError {
		t.Fatalf("resume of an unknown approval, no agent: audit records %+v", recs)
	}
	for _, o := range []Outcome{r3} {
		if recs := f.records(t, o.CallID); len(recs) != 1 || !strings.Contains(recs[0].Result, "arguments differ") {
			t.Fatalf("resume with other arguments: audit records %+v", recs)
		}
	}
	// The finish record names the approval and who decided.
	recs := f.records(t, r1.CallID)
	last := recs[len(recs)-1]
	if last.ApprovalID != id || last.DecidedBy != "human" || last.Status != audit.StatusSuccess {
		t.Fatalf("finish record = %+v", last)
	}
}

// A resume answered from the stored result is a call of its own: it has
// its own call id and one finish entry (status, approval id, the run it
// repeats), as a denied resume has; the tool still ran once.
func TestResumeFromStoredResultIsAudited(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	human := otherProcess(t, f)
	// A denied resume, for comparison: one finish entry naming the approval.
	o := f.call("plain", "test.confirm", `{"x":0}`)
	if err := human.DecideApproval(ctx, o.ApprovalID, store.StatusDenied, "human", "no"); err != nil {
		t.Fatal(err)
	}
	denied := f.p.Execute(ctx, Call{Resume: o.ApprovalID})
	if recs := f.records(t, denied.CallID); denied.Status != audit.StatusDenied || len(recs) != 1 || recs[0].ApprovalID != o.ApprovalID || recs[0].Status != audit.StatusDenied {
		t.Fatalf("denied resume: %+v, records %+v", denied, recs)
	}

	o = f.call("plain", "test.confirm", `{"x":1}`)
	id := o.ApprovalID
	if err := human.DecideApproval(ctx, id, store.StatusApproved, "human", "fine"); err != nil {
		t.Fatal(err)
	}
	ran := f.p.Execute(ctx, Call{Resume: id})
	if ran.Status != audit.StatusSuccess {
		t.Fatalf("first resume: %+v", ran)
	}
	for i := range 2 {
		again := f.p.Execute(ctx, Call{Agent: "plain", Resume: id})
		if again.Status != audit.StatusSuccess || again.Result != ran.Result || again.ApprovalID != id {
			t.Fatalf("resume %d from the stored result: %+v", i, again)
		}
		if again.CallID == ran.CallID || again.CallID == "" {
			t.Fatalf("resume %d answered with call id %q (the run's is %q); it needs its own", i, again.CallID, ran.CallID)
		}
		recs := f.records(t, again.CallID)
		if len(recs) != 1 {
			t.Fatalf("resume %d from the stored result left %d audit records, want 1", i, len(recs))
		}
		r := recs[0]
		if r.Phase != audit.PhaseFinish || r.Status != audit.StatusSuccess || r.ApprovalID != id || r.DecidedBy != "human" ||
			r.Agent != "plain" || r.Tool != "test.confirm" || r.Session != DefaultSession("plain") || r.Result != audit.Summary(ran.Result) {
			t.Fatalf("record of resume %d = %+v", i, r)
		}
		if !strings.Contains(strings.Join(reasonsOf(r.Stages), " "), "call "+ran.CallID) {
			t.Fatalf("the record does not name the run it repeats: %+v", r.Stages)
		}
	}
	if n := f.tools["test.confirm"].runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times for one approval", n)
	}
	if err := f.st.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestApprovalWhileWaiting(t *testing.T) {
	f := newFixture(t)
	human := otherProcess(t, f)
	for _, tc := range []struct {
		decision store.ApprovalStatus
		want     audit.Status
	}{{store.StatusApproved, audit.StatusSuccess}, {store.StatusDenied, audit.StatusDenied}} {
		var progress []string
		done := make(chan Outcome)
		go func() {
			done <- f.p.Execute(context.Background(), Call{Agent: "plain", Tool: "test.confirm", Args: json.RawMessage(`{}`), Wait: 20 * time.Second,
				Progress: func(m string) { progress = append(progress, m) }})
		}()
		var id string
		for id == "" {
			as, _ := human.ListApprovals(context.Background(), store.ApprovalFilter{Status: store.StatusPending})
			if len(as) > 0 {
				id = as[0].ID
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err := human.DecideApproval(context.Background(), id, tc.decision, "human", "because"); err != nil {
			t.Fatal(err)
		}
		o := <-done
		if o.Status != tc.want || o.ApprovalID != id {
			t.Fatalf("%s: outcome = %+v", tc.decision, o)
		}
		if tc.want == audit.StatusDenied && !strings.Contains(o.Result, "Denied by human: because") {
			t.Fatalf("denial text: %q", o.Result)
		}
		if len(progress) == 0 || !strings.Contains(progress[0], "waiting for approval "+id) {
			t.Fatalf("progress = %v", progress)
		}
	}
	// Denied requests are kept and queryable with their reasons.
	as, _ := f.st.ListApprovals(context.Background(), store.ApprovalFilter{Status: store.StatusDenied})
	if len(as) != 1 || as[0].DecisionReason != "because" || as[0].DecidedBy != "human" {
		t.Fatalf("denied = %+v", as)
	}
}

func TestApprovalAgent(t *testing.T) {
	f := newFixture(t)
	o := f.call("dev", "test.always", `{"q":1}`)
	if o.Status != audit.StatusPending || o.Permission != "always_confirm" {
		t.Fatalf("outcome = %+v", o)
	}
	ap, _ := f.st.GetApproval(context.Background(), o.ApprovalID)
	if ap.Route != store.RouteAgent("warden") {
		t.Fatalf("always_confirm must route to the approval agent covering the tool: %+v", ap)
	}
	// The approval agent sees it through its own tools, which go through the pipeline.
	l := f.call("warden", "approval.list", `{}`)
	if l.Status != audit.StatusSuccess || !strings.Contains(l.Result, o.ApprovalID) {
		t.Fatalf("approval.list = %+v", l)
	}
	if d := f.call("dev", "approval.decide", `{"id":"`+o.ApprovalID+`","decision":"approve","reason":"x"}`); !strings.Contains(d.Result, "Unknown tool") {
		t.Fatalf("only approval agents have approval.decide: %+v", d)
	}
	d := f.call("warden", "approval.decide", `{"id":"`+o.ApprovalID+`","decision":"approve","reason":"in scope and harmless"}`)
	if d.Status != audit.StatusSuccess {
		t.Fatalf("approval.decide = %+v", d)
	}
	r := f.p.Execute(context.Background(), Call{Resume: o.ApprovalID})
	if r.Status != audit.StatusSuccess || r.DecidedBy != "warden" {
		t.Fatalf("resume = %+v", r)
	}
	// No agent decides its own call: the warden's own always_confirm call goes to a human.
	own := f.call("warden", "test.always", `{}`)
	ap, _ = f.st.GetApproval(context.Background(), own.ApprovalID)
	if ap.Route != store.RouteHuman {
		t.Fatalf("own call route = %s", ap.Route)
	}
	if d := f.call("warden", "approval.decide", `{"id":"`+own.ApprovalID+`","decision":"approve","reason":"me"}`); d.Status == audit.StatusSuccess {
		t.Fatalf("an agent decided its own call: %+v", d)
	}
	// Escalate sends it to the human queue.
	o2 := f.call("dev", "test.always", `{"q":2}`)
	if d := f.call("warden", "approval.decide", `{"id":"`+o2.ApprovalID+`","decision":"escalate","reason":"not sure"}`); d.Status != audit.StatusSuccess {
		t.Fatalf("escalate = %+v", d)
	}
	ap, _ = f.st.GetApproval(context.Background(), o2.ApprovalID)
	if ap.Status != store.StatusEscalated || ap.Route != store.RouteHuman {
		t.Fatalf("escalated = %+v", ap)
	}
	// Out of scope: test.confirm is confirm-level, for humans; never listed for the warden.
	h := f.call("dev", "test.confirm", `{}`)
	if l := f.call("warden", "approval.list", `{}`); strings.Contains(l.Result, h.ApprovalID) {
		t.Fatal("the warden sees a request outside its scope")
	}
}

func TestApprovalAgentTimeoutEscalates(t *testing.T) {
	f := newFixture(t)
	// approval_timeout is 300ms in the test world; the caller waits longer.
	done := make(chan Outcome)
	go func() {
		done <- f.p.Execute(context.Background(), Call{Agent: "dev", Tool: "test.always", Args: json.RawMessage(`{}`), Wait: 20 * time.Second})
	}()
	var id string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		as, _ := f.st.ListApprovals(context.Background(), store.ApprovalFilter{Status: store.StatusEscalated})
		if len(as) == 1 {
			id = as[0].ID
			if as[0].Route != store.RouteHuman || !strings.Contains(as[0].DecisionReason, "did not decide within") {
				t.Fatalf("escalation = %+v", as[0])
			}
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("the request was not escalated after the approval agent's timeout")
	}
	if err := otherProcess(t, f).DecideApproval(context.Background(), id, store.StatusApproved, "human", "ok"); err != nil {
		t.Fatal(err)
	}
	if o := <-done; o.Status != audit.StatusSuccess || o.DecidedBy != "human" {
		t.Fatalf("outcome = %+v", o)
	}
}

// An approval agent's approval.list shows the diff of a file change.
func TestApprovalListShowsDiff(t *testing.T) {
	f := newFixture(t)
	o := f.call("plain", "test.family.edit", `{"x":1}`)
	if o.Status != audit.StatusPending {
		t.Fatalf("outcome = %+v", o)
	}
	l := f.call("warden", "approval.list", `{}`)
	var items []struct{ ID, Diff string }
	if err := json.Unmarshal([]byte(l.Result), &items); err != nil || len(items) != 1 || items[0].ID != o.ApprovalID ||
		items[0].Diff != "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-old\n+{\"x\":1}\n" {
		t.Fatalf("approval.list = %s", l.Result)
	}
	if d := f.p.Preview(context.Background(), mustApproval(t, f, o.ApprovalID)); d != items[0].Diff {
		t.Fatalf("Preview %q", d)
	}
}

// A listing computes at most MaxListDiffs diffs (each reads a file); the
// requests past them say where to see theirs.
func TestApprovalViewsBoundDiffs(t *testing.T) {
	f := newFixture(t)
	var as []*store.Approval
	for i := range MaxListDiffs + 2 {
		// A session each: the fixture's agent has a small call cap.
		o := f.p.Execute(context.Background(), Call{Agent: "plain", Tool: "test.family.edit", Args: json.RawMessage(fmt.Sprintf(`{"x":%d}`, i)), Session: fmt.Sprint("plain:s", i)})
		if o.Status != audit.StatusPending {
			t.Fatalf("call %d: %+v", i, o)
		}
		as = append(as, mustApproval(t, f, o.ApprovalID))
	}
	vs := f.p.ApprovalViews(context.Background(), as)
	for i, v := range vs {
		computed := strings.HasPrefix(v.Diff, "--- a/f")
		if computed != (i < MaxListDiffs) || !computed && !strings.Contains(v.Diff, "show the request by its id") {
			t.Fatalf("view %d of %d: diff %q", i, len(vs), v.Diff)
		}
	}
}

func mustApproval(t *testing.T, f *fixture, id string) *store.Approval {
	t.Helper()
	a, err := f.st.GetApproval(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Calling again continues the request of an identical call: pending, the
// same approval answers; denied, the denial answers (no second request);
// other arguments are a new request.
func TestCallAgainContinuesRequest(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	o := f.call("dev", "test.confirm", `{"a":1}`)
	if o.Status != audit.StatusPending || strings.Contains(o.Result, "armory ") || !strings.Contains(o.Human, "armory call --resume "+o.ApprovalID) {
		t.Fatalf("first: %+v", o)
	}
	if again := f.call("dev", "test.confirm", `{"a":1}`); again.Status != audit.StatusPending || again.ApprovalID != o.ApprovalID {
		t.Fatalf("again: %+v", again)
	}
	if err := f.st.DecideApproval(ctx, o.ApprovalID, store.StatusDenied, "human", "not now"); err != nil {
		t.Fatal(err)
	}
	if again := f.call("dev", "test.confirm", `{"a":1}`); again.Status != audit.StatusDenied || !strings.Contains(again.Result, "not now") {
		t.Fatalf("after the denial: %+v", again)
	}
	if other := f.call("dev", "test.confirm", `{"a":2}`); other.Status != audit.StatusPending || other.ApprovalID == o.ApprovalID {
		t.Fatalf("other arguments: %+v", other)
	}
	all := 0
	for _, st := range []store.ApprovalStatus{store.StatusPending, store.StatusEscalated, store.StatusApproved, store.StatusDenied} {
		l, _ := f.st.ListApprovals(ctx, store.ApprovalFilter{Agent: "dev", Status: st})
		all += len(l)
	}
	if all != 2 {
		t.Fatalf("%d requests, want 2 (one per distinct call)", all)
	}
}

// A tool that declares its own "justification" argument gets it, and the
// argument does not pass loop detection (only the surfaces' own fields do).
func TestOwnJustificationIsTheTools(t *testing.T) {
	f := newFixture(t)
	var o Outcome
	for range 5 {
		o = f.call("ops", "test.ownjust", `{"justification":"mine"}`)
	}
	if o.Status != audit.StatusBlocked || !strings.Contains(o.Result, "Loop detected") {
		t.Fatalf("fifth: %+v", o)
	}
	// An effect-free tool runs before its admission commits: the fifth ran
	// and its result was discarded.
	if n := f.tools["test.ownjust"].runs.Load(); n != 5 {
		t.Fatalf("ran %d times", n)
	}
	o = f.p.Execute(context.Background(), Call{Agent: "ops", Tool: "test.ownjust", Args: json.RawMessage(`{"justification":"mine"}`), Justification: "via _meta"})
	if o.Status != audit.StatusSuccess || !strings.Contains(o.Result, `"justification":"mine"`) {
		t.Fatalf("justified through the call: %+v", o)
	}
}

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
