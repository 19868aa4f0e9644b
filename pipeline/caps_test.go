package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/world"
)

func TestInvocationCapAndExtend(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 3; i++ {
		if o := f.call("plain", "test.noop", fmt.Sprintf(`{"i":%d}`, i)); o.Status != audit.StatusSuccess {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
	o := f.call("plain", "test.noop", `{"i":3}`)
	if o.Status != audit.StatusBlocked || !strings.HasPrefix(o.Result, "Safety limit reached: tool_invocations (3/3)") || !strings.Contains(o.Result, "Remaining budget:") ||
		!strings.Contains(o.Human, "armory session extend plain:default tool_invocations N") || !strings.Contains(o.Human, "armory session reset plain:default") ||
		!strings.Contains(o.Human, "new session") || !strings.Contains(o.Result, "report back") || strings.Contains(o.Result, "armory ") {
		t.Fatalf("outcome = %+v", o)
	}
	if err := f.st.SetLimitOverride(context.Background(), "plain:default", "tool_invocations", 5); err != nil {
		t.Fatal(err)
	}
	if o := f.call("plain", "test.noop", `{"i":4}`); o.Status != audit.StatusSuccess {
		t.Fatalf("after extend: %+v", o)
	}
	// Another session has its own budget.
	if o := f.p.Execute(context.Background(), Call{Agent: "plain", Tool: "test.noop", Session: "s2"}); o.Status != audit.StatusSuccess {
		t.Fatalf("other session: %+v", o)
	}
}

// 1,000 concurrent calls against a cap of 400 run exactly 400 tools, for a
// tool that can change something (admitted before it runs).
func TestCapExactUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	if err := f.st.SetLimitOverride(context.Background(), "race", "tool_invocations", 400); err != nil {
		t.Fatal(err)
	}
	statuses := raceCalls(f, "ops", "test.write", "race", 1000)
	if n := f.tools["test.write"].runs.Load(); n != 400 || statuses[audit.StatusSuccess] != 400 || statuses[audit.StatusBlocked] != 600 {
		t.Fatalf("ran %d tools; statuses %v", n, statuses)
	}
	checkRaceTrail(t, f, "race", 400, 600)
}

// 1,000 concurrent effect-free calls against a cap of 400: each runs its
// tool first and commits its admission with both records after, so more
// than 400 tools may run, but exactly 400 calls succeed; the other 600 are
// refused as before running (their results discarded), the trail holds a
// start and a success finish for each of the 400 and one blocked finish for
// each of the 600, and the chain verifies.
func TestCapExactEffectFreeUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	if err := f.st.SetLimitOverride(context.Background(), "race", "tool_invocations", 400); err != nil {
		t.Fatal(err)
	}
	st := f.st.(*sqlite.Store)
	c0 := st.CommitCounts()
	statuses := raceCalls(f, "dev", "test.noop", "race", 1000)
	if n := f.tools["test.noop"].runs.Load(); n < 400 || statuses[audit.StatusSuccess] != 400 || statuses[audit.StatusBlocked] != 600 {
		t.Fatalf("ran %d tools; statuses %v", n, statuses)
	}
	checkRaceTrail(t, f, "race", 400, 600)
	// Once the cap refused a call of the session, its calls are admitted
	// before they run again: no more tools run in vain.
	before := f.tools["test.noop"].runs.Load()
	for i := range 3 {
		if o := f.p.Execute(context.Background(), Call{Agent: "dev", Tool: "test.noop", Session: "race", Args: json.RawMessage(fmt.Sprintf(`{"again":%d}`, i))}); o.Status != audit.StatusBlocked {
			t.Fatalf("past the cap: %+v", o)
		}
	}
	if n := f.tools["test.noop"].runs.Load(); n != before {
		t.Fatalf("%d more tools ran past the cap", n-before)
	}
	c := st.CommitCounts()
	t.Logf("%d tools ran for 400 admitted calls; commits %+v → %+v", before, c0, c)
}

func raceCalls(f *fixture, agent, tool, sess string, n int) map[audit.Status]int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[audit.Status]int{}
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := f.p.Execute(context.Background(), Call{Agent: agent, Tool: tool, Session: sess, Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			mu.Lock()
			statuses[o.Status]++
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	return statuses
}

// checkRaceTrail: the session's trail has a start and a success finish for
// exactly ok calls, one blocked finish and nothing else for exactly refused
// calls, and the chain verifies.
func checkRaceTrail(t *testing.T, f *fixture, sess string, ok, refused int) {
	t.Helper()
	recs, err := f.st.ListAudit(context.Background(), store.AuditFilter{Session: sess, Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	byCall := map[string][]*audit.Record{}
	for _, r := range recs {
		byCall[r.ID] = append(byCall[r.ID], r)
	}
	var gotOK, gotRefused int
	for id, rs := range byCall {
		switch {
		case len(rs) == 2 && rs[1].Phase == audit.PhaseStart && rs[0].Phase == audit.PhaseFinish && rs[0].Status == audit.StatusSuccess:
			gotOK++
		case len(rs) == 1 && rs[0].Phase == audit.PhaseFinish && rs[0].Status == audit.StatusBlocked:
			gotRefused++
		default:
			t.Fatalf("call %s has records %+v", id, rs)
		}
	}
	if gotOK != ok || gotRefused != refused {
		t.Fatalf("trail: %d successful calls, %d refused; want %d and %d", gotOK, gotRefused, ok, refused)
	}
	if err := f.st.VerifyAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLoopDetectionEdits(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 3; i++ {
		if o := f.call("ops", "test.write", fmt.Sprintf(`{"path":"@me/src/a.go","content":"%d"}`, i)); o.Status != audit.StatusSuccess {
			t.Fatalf("edit %d: %+v", i, o)
		}
	}
	o := f.call("ops", "test.write", `{"path":"src/./a.go","content":"3"}`)
	if o.Status != audit.StatusBlocked || !strings.HasPrefix(o.Result, `Loop detected: "src/a.go" edited 3 times in this session. Justify continued editing or stop.`) {
		t.Fatalf("4th edit: %+v", o)
	}
	j := f.p.Execute(context.Background(), Call{Agent: "ops", Tool: "test.write", Args: json.RawMessage(`{"path":"src/a.go","content":"4"}`), Justification: "the test still fails on line 12"})
	if j.Status != audit.StatusSuccess {
		t.Fatalf("justified edit: %+v", j)
	}
	recs := f.records(t, j.CallID)
	if recs[len(recs)-1].Justification != "the test still fails on line 12" {
		t.Fatalf("justification not audited: %+v", recs[len(recs)-1])
	}
	// Another file is fine.
	if o := f.call("ops", "test.write", `{"path":"src/b.go","content":"x"}`); o.Status != audit.StatusSuccess {
		t.Fatalf("other file: %+v", o)
	}
	// edits_per_file (8) is a hard cap even with justifications.
	for i := 5; i <= 8; i++ {
		f.p.Execute(context.Background(), Call{Agent: "ops", Tool: "test.write", Args: json.RawMessage(fmt.Sprintf(`{"path":"src/a.go","content":"%d"}`, i)), Justification: "again"})
	}
	o = f.p.Execute(context.Background(), Call{Agent: "ops", Tool: "test.write", Args: json.RawMessage(`{"path":"src/a.go","content":"9"}`), Justification: "again"})
	if !strings.HasPrefix(o.Result, "Safety limit reached: edits_per_file for src/a.go (8/8)") {
		t.Fatalf("9th edit: %+v", o)
	}
}

func TestLoopDetectionRepeats(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 4; i++ {
		if o := f.call("ops", "test.noop", `{"same":true}`); o.Status != audit.StatusSuccess {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
	o := f.call("ops", "test.noop", `{"same":true}`)
	if o.Status != audit.StatusBlocked || !strings.Contains(o.Result, "Loop detected: test.noop called 5 times in a row with identical arguments") ||
		!strings.Contains(o.Result, `"justification" argument`) || strings.Count(o.Result, "change your approach") != 1 {
		t.Fatalf("5th (the advice once): %+v", o)
	}
	// Spelled differently, the same values: still the same call.
	if o := f.call("ops", "test.noop", `{ "same" : true }`); o.Status != audit.StatusBlocked {
		t.Fatalf("respelled arguments: %+v", o)
	}
	// What the refusal says works with nothing but the arguments: the
	// justification is taken out (the tool does not see it) and audited.
	o = f.call("ops", "test.noop", `{"same":true,"justification":"polling a build that is still running"}`)
	if o.Status != audit.StatusSuccess || strings.Contains(o.Result, "justification") {
		t.Fatalf("justified: %+v", o)
	}
	recs := f.records(t, o.CallID)
	if len(recs) != 2 || recs[1].Justification != "polling a build that is still running" || strings.Contains(string(recs[1].Args), "justification") {
		t.Fatalf("audit of the justified call: %+v", recs[1])
	}
	long := strings.Repeat("j", 2001)
	if o := f.call("ops", "test.noop", `{"same":true,"justification":"`+long+`"}`); o.Status != audit.StatusError || !strings.Contains(o.Result, "the limit is 2000") {
		t.Fatalf("over-long justification: %.200s", o.Result)
	}
	if o := f.p.Execute(context.Background(), Call{Agent: "ops", Tool: "test.noop", Args: json.RawMessage(`{}`), Justification: long}); o.Status != audit.StatusError {
		t.Fatalf("over-long justification field: %.200s", o.Result)
	}
	if o := f.call("ops", "test.noop", `{"same":true,"justification":7}`); o.Status != audit.StatusError || !strings.Contains(o.Result, "must be a string") {
		t.Fatalf("non-string justification: %+v", o)
	}
	if o := f.call("ops", "test.noop", `{"same":false}`); o.Status != audit.StatusSuccess {
		t.Fatalf("different arguments break the run: %+v", o)
	}
}

// A named session keeps its runtime cap.
func TestSessionRuntimeCap(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	f.now.Store(start.UnixNano())
	named := func(args string) Outcome {
		return f.p.Execute(context.Background(), Call{Agent: "dev", Tool: "test.noop", Args: json.RawMessage(args), Session: "dev:work"})
	}
	if o := named(`{}`); o.Status != audit.StatusSuccess {
		t.Fatal(o)
	}
	f.now.Store(start.Add(11 * time.Minute).UnixNano())
	o := named(`{"later":1}`)
	if o.Status != audit.StatusBlocked || !strings.HasPrefix(o.Result, "Safety limit reached: session_runtime (660/600)") ||
		!strings.Contains(o.Human, "armory session extend dev:work session_runtime N") || !strings.Contains(o.Human, "armory session reset dev:work") {
		t.Fatalf("outcome = %+v", o)
	}
}

// The unnamed session has no runtime cap: busy for an hour and more, it is
// never locked out; idle for the timeout, the next call opens a new
// generation, which starts with fresh counters; the old one keeps its
// counters and records, and shows as idle-closed.
func TestUnnamedSessionIdles(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	start := time.Now()
	var o Outcome
	for i := range 40 { // a call every two minutes for 80 minutes
		f.now.Store(start.Add(time.Duration(2*i) * time.Minute).UnixNano())
		if o = f.call("dev", "test.noop", fmt.Sprintf(`{"i":%d}`, i)); o.Status != audit.StatusSuccess || o.Session != "dev:default" {
			t.Fatalf("minute %d: %+v", i, o)
		}
	}
	if st, _, _, err := f.p.SessionState(ctx, "dev", "dev:default"); err != nil || st != SessionOpen {
		t.Fatalf("state %q %v", st, err)
	}
	// Idle for exactly the timeout: a new generation.
	f.now.Store(start.Add(78*time.Minute + f.p.IdleTimeout()).UnixNano())
	if st, _, _, _ := f.p.SessionState(ctx, "dev", "dev:default"); st != SessionIdleClosed {
		t.Fatalf("idle session state %q", st)
	}
	o = f.call("dev", "test.noop", `{"after":"idle"}`)
	if o.Status != audit.StatusSuccess || o.Session != "dev:default#2" {
		t.Fatalf("after idling: %+v", o)
	}
	if c, _ := f.st.Counters(ctx, "dev:default#2"); c["tool_invocations"] != 1 {
		t.Fatalf("new generation counters %v", c)
	}
	if c, _ := f.st.Counters(ctx, "dev:default"); c["tool_invocations"] != 40 {
		t.Fatalf("old generation counters %v", c)
	}
	if recs, _ := f.st.ListAudit(ctx, store.AuditFilter{Session: "dev:default", Limit: 1000}); len(recs) != 80 {
		t.Fatalf("old generation has %d audit records, want 80", len(recs))
	}
	if st, _, _, _ := f.p.SessionState(ctx, "dev", "dev:default"); st != SessionIdleClosed {
		t.Fatalf("old generation state %q", st)
	}
	if st, _, _, _ := f.p.SessionState(ctx, "dev", "dev:default#2"); st != SessionOpen {
		t.Fatalf("new generation state %q", st)
	}
	// Naming the default session explicitly is the same unnamed session.
	o = f.p.Execute(ctx, Call{Agent: "dev", Tool: "test.noop", Args: json.RawMessage(`{}`), Session: "dev:default"})
	if o.Session != "dev:default#2" {
		t.Fatalf("explicit default: %+v", o)
	}
	// A second pipeline on the same store (another process) agrees.
	p2, err := New(f.p.Roster(), Options{Store: f.st, Now: f.clock})
	if err != nil {
		t.Fatal(err)
	}
	if o := p2.Execute(ctx, Call{Agent: "dev", Tool: "test.noop", Args: json.RawMessage(`{"p":2}`)}); o.Session != "dev:default#2" {
		t.Fatalf("second pipeline: %+v", o)
	}
	f.now.Store(start.Add(200 * time.Minute).UnixNano())
	if o := p2.Execute(ctx, Call{Agent: "dev", Tool: "test.noop", Args: json.RawMessage(`{"p":3}`)}); o.Session != "dev:default#3" {
		t.Fatalf("second pipeline after idling: %+v", o)
	}
	if o := f.call("dev", "test.noop", `{"p":4}`); o.Session != "dev:default#3" {
		t.Fatalf("first pipeline follows the second: %+v", o)
	}
	// Reset: the state says so until the next call.
	if err := f.st.ResetSession(ctx, "dev:default#3"); err != nil {
		t.Fatal(err)
	}
	if st, _, _, _ := f.p.SessionState(ctx, "dev", "dev:default#3"); st != SessionReset {
		t.Fatalf("reset state %q", st)
	}
}

// Generation names parse back; other names are not generations.
func TestGenerationNames(t *testing.T) {
	for n := 1; n < 12; n++ {
		if g, ok := Generation("a:default", GenerationName("a:default", n)); !ok || g != n {
			t.Fatalf("generation %d: %d %v", n, g, ok)
		}
	}
	for _, id := range []string{"a:default#", "a:default#1", "a:default#02", "a:default#x", "a:default#2x", "a:defaultx", "a:default#99999999999"} {
		if _, ok := Generation("a:default", id); ok {
			t.Errorf("%q parsed as a generation", id)
		}
	}
}

func TestAuditFailClosed(t *testing.T) {
	f := newFixture(t)
	f.st.Close()
	o := f.call("dev", "test.noop", `{}`)
	if o.Status == audit.StatusSuccess || f.tools["test.noop"].runs.Load() != 0 {
		t.Fatalf("a call ran without its audit entry: %+v", o)
	}
}

func TestCancelWhileRunning(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Outcome)
	go func() { done <- f.p.Execute(ctx, Call{Agent: "dev", Tool: "test.slow"}) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	o := <-done
	if o.Status == audit.StatusSuccess {
		t.Fatalf("outcome = %+v", o)
	}
	// Its finish entry was written even though the caller went away.
	if recs := f.records(t, o.CallID); len(recs) != 2 {
		t.Fatalf("records = %d", len(recs))
	}
}

// A call that would wait for approval is refused by a reached cap before
// any approval exists; the refusal is the caps stage's, audited with one
// finish entry and no start entry, and counts nothing.
func TestCapReachedBeforeApproval(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.SetLimitOverride(ctx, "appr", "tool_invocations", 1); err != nil {
		t.Fatal(err)
	}
	call := func(args string) Outcome {
		return f.p.Execute(ctx, Call{Agent: "dev", Tool: "test.confirm", Session: "appr", Args: json.RawMessage(args)})
	}
	if o := call(`{"i":1}`); o.Status != audit.StatusPending || o.ApprovalID == "" {
		t.Fatalf("first call: %+v", o)
	}
	o := call(`{"i":2}`)
	if o.Status != audit.StatusBlocked || o.ApprovalID != "" || !strings.HasPrefix(o.Result, "Safety limit reached: tool_invocations (1/1)") {
		t.Fatalf("second call: %+v", o)
	}
	as, err := f.st.ListApprovals(ctx, store.ApprovalFilter{Session: "appr"})
	if err != nil || len(as) != 1 {
		t.Fatalf("approvals %d (%v), want only the first call's", len(as), err)
	}
	recs := f.records(t, o.CallID)
	if len(recs) != 1 || recs[0].Phase != audit.PhaseFinish || recs[0].Status != audit.StatusBlocked {
		t.Fatalf("records of the refused call: %+v", recs)
	}
	last := recs[0].Stages[len(recs[0].Stages)-1]
	if last.Name != "caps" || last.Decision != "block" || last.Reasons[0] != "Safety limit reached: tool_invocations (1/1)" {
		t.Fatalf("stages %+v", recs[0].Stages)
	}
	if m, _ := f.st.Counters(ctx, "appr"); m["tool_invocations"] != 1 || m["stream_events"] != 1 {
		t.Fatalf("counters %v", m)
	}
}

// A call refused after the caps stage (a veto) takes no cap.
func TestRefusedCallCountsNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	o := f.p.Execute(ctx, Call{Agent: "dev", Tool: "test.noop", Session: "veto", Args: json.RawMessage(`{"db":"production-db"}`)})
	if o.Status != audit.StatusBlocked || !strings.Contains(o.Result, "VETOED") {
		t.Fatalf("outcome %+v", o)
	}
	if m, _ := f.st.Counters(ctx, "veto"); len(m) != 0 {
		t.Fatalf("a vetoed call took caps: %v", m)
	}
}

// MaxArgsBytes: arguments over the limit are refused before anything is
// counted or run; arguments at the limit are accepted.
func TestArgsSizeLimit(t *testing.T) {
	f := newFixture(t)
	pad := func(n int) string { // a JSON object of exactly n bytes
		return `{"p":"` + strings.Repeat("a", n-8) + `"}`
	}
	if o := f.call("ops", "test.noop", pad(MaxArgsBytes)); o.Status != audit.StatusSuccess {
		t.Fatalf("at the limit: %s %.200s", o.Status, o.Result)
	}
	o := f.call("ops", "test.noop", pad(MaxArgsBytes+1))
	if o.Status != audit.StatusError || !strings.Contains(o.Result, fmt.Sprintf("the limit is %d", MaxArgsBytes)) {
		t.Fatalf("over the limit: %s %.200s", o.Status, o.Result)
	}
	if n := f.tools["test.noop"].runs.Load(); n != 1 {
		t.Fatalf("ran %d times", n)
	}
}

// The sessions remembered as capped are bounded: past maxCapped the set
// starts over (a forgotten session runs at most one more effect-free call
// before its admission refuses it).
func TestCappedSessionsBounded(t *testing.T) {
	var c cappedSessions
	for i := range 3 * maxCapped {
		c.set(fmt.Sprint("s", i), true)
		if len(c.m) > maxCapped {
			t.Fatalf("%d sessions remembered, the bound is %d", len(c.m), maxCapped)
		}
	}
	last := fmt.Sprint("s", 3*maxCapped-1)
	if !c.has(last) {
		t.Fatal("the last capped session was forgotten")
	}
	c.set(last, false)
	if c.has(last) {
		t.Fatal("an admitted session is still capped")
	}
}

// Stream events count what a call streams: a call whose caller takes
// progress counts one event per message plus its result; a caller that takes
// none counts one. At the cap the stream stops: no message past it is
// delivered, the tool is stopped, and the call is blocked with the cap's
// name.
func TestStreamEventsCountProgress(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var got []string
	call := func(session string) Outcome {
		got = nil
		return f.p.Execute(ctx, Call{Agent: "dev", Tool: "test.stream", Args: json.RawMessage(`{}`), Session: session,
			Progress: func(m string) { got = append(got, m) }})
	}
	o := call("dev:s1")
	if o.Status != audit.StatusSuccess || len(got) != 100 {
		t.Fatalf("%s, %d messages", o.Status, len(got))
	}
	if c, _ := f.st.Counters(ctx, "dev:s1"); c[world.LimitStreamEvents] != 101 {
		t.Fatalf("stream_events %d, want 101 (100 messages and the result)", c[world.LimitStreamEvents])
	}
	// Without a progress receiver nothing streams: one event.
	if o := f.p.Execute(ctx, Call{Agent: "dev", Tool: "test.stream", Args: json.RawMessage(`{"n":1}`), Session: "dev:s2"}); o.Status != audit.StatusSuccess {
		t.Fatal(o)
	}
	if c, _ := f.st.Counters(ctx, "dev:s2"); c[world.LimitStreamEvents] != 1 {
		t.Fatalf("stream_events %d without progress, want 1", c[world.LimitStreamEvents])
	}
	// A cap of 150: the second streaming call takes one event at admission
	// (102), gets 48 messages, and stops.
	if err := f.st.SetLimitOverride(ctx, "dev:s1", world.LimitStreamEvents, 150); err != nil {
		t.Fatal(err)
	}
	o = call("dev:s1")
	if o.Status != audit.StatusBlocked || len(got) != 48 || !strings.HasPrefix(o.Result, "Safety limit reached: stream_events (150/150) while the tool was streaming") ||
		!strings.Contains(o.Human, "armory session extend dev:s1 stream_events N") {
		t.Fatalf("%s after %d messages: %.300s", o.Status, len(got), o.Result)
	}
	if c, _ := f.st.Counters(ctx, "dev:s1"); c[world.LimitStreamEvents] != 150 {
		t.Fatalf("stream_events %d, want 150", c[world.LimitStreamEvents])
	}
	recs := f.records(t, o.CallID)
	if fin := recs[len(recs)-1]; fin.Status != audit.StatusBlocked {
		t.Fatalf("finish record %s", fin.Status)
	}
	// The next call is refused at admission.
	if o := call("dev:s1"); o.Status != audit.StatusBlocked || len(got) != 0 || !strings.Contains(o.Result, "stream_events (150/150)") {
		t.Fatalf("after the cap: %s %d %.200s", o.Status, len(got), o.Result)
	}
}

// Two streaming calls at once in one session with a cap of 120: the cap
// holds between them, every delivered message is counted exactly once, and
// nothing reserved and unused stays counted.
func TestStreamEventsConcurrentCap(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := f.st.SetLimitOverride(ctx, "dev:c", world.LimitStreamEvents, 120); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	delivered := 0
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			f.p.Execute(ctx, Call{Agent: "dev", Tool: "test.stream", Args: json.RawMessage(fmt.Sprintf(`{"c":%d}`, i)), Session: "dev:c",
				Progress: func(string) { mu.Lock(); delivered++; mu.Unlock() }})
		})
	}
	wg.Wait()
	c, _ := f.st.Counters(ctx, "dev:c")
	if c[world.LimitStreamEvents] != int64(2+delivered) || c[world.LimitStreamEvents] > 120 || delivered != 118 {
		t.Fatalf("stream_events %d, %d messages delivered (want 120 and 118)", c[world.LimitStreamEvents], delivered)
	}
}
