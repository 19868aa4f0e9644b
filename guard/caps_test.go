package guard

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
)

func TestInvocationCapAndExtend(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 3; i++ {
		if o := f.call("plain", "test.noop", fmt.Sprintf(`{"i":%d}`, i)); o.Status != audit.StatusSuccess {
			t.Fatalf("call %d: %+v", i, o)
		}
	}
	o := f.call("plain", "test.noop", `{"i":3}`)
	if o.Status != audit.StatusBlocked || !strings.HasPrefix(o.Result, "Safety limit reached: tool_invocations (3/3)") || !strings.Contains(o.Result, "Remaining budget:") || !strings.Contains(o.Result, "armory session extend plain:default tool_invocations N") {
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

// 1,000 concurrent calls against a cap of 400 run exactly 400 tools.
func TestCapExactUnderConcurrency(t *testing.T) {
	f := newFixture(t)
	if err := f.st.SetLimitOverride(context.Background(), "race", "tool_invocations", 400); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[audit.Status]int{}
	for i := 0; i < 1000; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			o := f.p.Execute(context.Background(), Call{Agent: "dev", Tool: "test.noop", Session: "race", Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
			mu.Lock()
			statuses[o.Status]++
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	if n := f.tools["test.noop"].runs.Load(); n != 400 || statuses[audit.StatusSuccess] != 400 || statuses[audit.StatusBlocked] != 600 {
		t.Fatalf("ran %d tools; statuses %v", n, statuses)
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
	if o.Status != audit.StatusBlocked || !strings.Contains(o.Result, "Loop detected: test.noop called 5 times in a row with identical arguments") {
		t.Fatalf("5th: %+v", o)
	}
	if o := f.call("ops", "test.noop", `{"same":false}`); o.Status != audit.StatusSuccess {
		t.Fatalf("different arguments break the run: %+v", o)
	}
}

func TestSessionRuntimeCap(t *testing.T) {
	f := newFixture(t)
	start := time.Now()
	f.now.Store(start.UnixNano())
	if o := f.call("dev", "test.noop", `{}`); o.Status != audit.StatusSuccess {
		t.Fatal(o)
	}
	f.now.Store(start.Add(11 * time.Minute).UnixNano())
	o := f.call("dev", "test.noop", `{"later":1}`)
	if o.Status != audit.StatusBlocked || !strings.HasPrefix(o.Result, "Safety limit reached: session_runtime (660/600)") {
		t.Fatalf("outcome = %+v", o)
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
