package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

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
