package pipeline

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
)

// withLease rebuilds f's pipeline with run claim lease and result wait.
func (f *fixture) withLease(t testing.TB, lease, resultWait time.Duration) *fixture {
	t.Helper()
	p, err := New(f.h, Options{Store: f.st, PollInterval: 10 * time.Millisecond, Now: f.clock, RunLease: lease, ResultWait: resultWait})
	if err != nil {
		t.Fatal(err)
	}
	f.p = p
	return f
}

// helperResume resumes approval $ARMORY_GUARD_RESUME with a lease of
// $ARMORY_GUARD_LEASE; test.effect blocks, so it never returns on its own.
func helperResume() int {
	f, err := openFixture(os.Getenv("ARMORY_GUARD_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	lease, _ := time.ParseDuration(os.Getenv("ARMORY_GUARD_LEASE"))
	if f.p, err = New(f.h, Options{Store: f.st, PollInterval: 10 * time.Millisecond, RunLease: lease}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	o := f.p.Execute(context.Background(), Call{Resume: os.Getenv("ARMORY_GUARD_RESUME")})
	b, _ := json.Marshal(o)
	fmt.Println(string(b))
	return 0
}

// marks returns the lines of test.effect's mark file (its runs, in every
// process).
func (f *fixture) marks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "effect.log"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// waitFor polls cond (bounded by ctx).
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %s", what)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// approve asks for test.effect and approves it.
func (f *fixture) approveEffect(t *testing.T, ctx context.Context) string {
	t.Helper()
	o := f.call("plain", "test.effect", `{"target":"prod"}`)
	if o.Status != audit.StatusPending || o.ApprovalID == "" {
		t.Fatalf("want pending: %+v", o)
	}
	if err := f.st.DecideApproval(ctx, o.ApprovalID, store.StatusApproved, "human", "go"); err != nil {
		t.Fatal(err)
	}
	return o.ApprovalID
}

// A process SIGKILLed while it runs an approved side-effecting call does
// not leave the call stuck: a resume in another process answers within
// its wait with the interrupted outcome, which is stored (every later
// resume returns it) and audited under the interrupted call's ID, and the
// tool ran exactly once.
func TestApprovedCallKilledMidRunIsInterrupted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFixture(t).withLease(t, time.Second, 0)
	id := f.approveEffect(t, ctx)

	c := helper(t, f.dir, "resume", "ARMORY_GUARD_RESUME="+id, "ARMORY_GUARD_LEASE=1s")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the tool to start in the other process", func() bool { return len(f.marks(t)) > 0 })
	// The call the other process runs: its start entry names the approval.
	var callID string
	waitFor(t, ctx, "the start entry", func() bool {
		recs, err := f.st.ListAudit(ctx, store.AuditFilter{Tool: "test.effect", Status: audit.StatusRunning})
		if err == nil && len(recs) == 1 && recs[0].ApprovalID == id {
			callID = recs[0].ID
		}
		return callID != ""
	})
	c.Process.Signal(syscall.SIGKILL)
	c.Wait()

	// The wait covers the dead process's lease, however loaded the machine.
	o := f.p.Execute(ctx, Call{Resume: id, Wait: time.Minute})
	if o.Status != audit.StatusInterrupted || !strings.HasPrefix(o.Result, InterruptedResult) || o.ApprovalID != id || o.Kind != armory.KindUnavailable ||
		o.CallID == callID || !strings.Contains(strings.Join(o.Reasons, " "), callID) {
		t.Fatalf("resume after the kill: %+v", o)
	}
	if ctx.Err() != nil {
		t.Fatal("the resume answered only when the test's own deadline passed")
	}
	// The interrupted call has its start entry (written by the dead
	// process) and now a finish entry saying it was interrupted.
	recs := f.records(t, callID)
	if len(recs) != 2 || recs[0].Phase != audit.PhaseStart || recs[0].Status != audit.StatusRunning ||
		recs[1].Phase != audit.PhaseFinish || recs[1].Status != audit.StatusInterrupted || recs[1].ApprovalID != id || recs[1].DecidedBy != "human" ||
		!strings.HasPrefix(recs[1].Result, InterruptedResult) {
		t.Fatalf("audit of the interrupted call: %+v", recs)
	}
	// The resume that resolved it is a call of its own, audited too.
	if own := f.records(t, o.CallID); len(own) != 1 || own[0].Status != audit.StatusInterrupted || own[0].ApprovalID != id {
		t.Fatalf("audit of the resolving resume: %+v", own)
	}
	// Every later resume, in any process, returns the same outcome and
	// never runs the tool again.
	other := otherProcess(t, f)
	p2, err := New(f.h, Options{Store: other, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []*Pipeline{f.p, p2} {
		if again := p.Execute(ctx, Call{Resume: id}); again.Status != audit.StatusInterrupted || again.Result != o.Result {
			t.Fatalf("later resume: %+v", again)
		}
	}
	if m := f.marks(t); len(m) != 1 {
		t.Fatalf("the tool ran %d times: %v", len(m), m)
	}
	if cl, err := other.InspectRun(ctx, id); err != nil || cl.State != store.RunInterrupted || cl.ResolvedBy != f.p.opts.Holder {
		t.Fatalf("claim after: %+v %v", cl, err)
	}
	if err := f.st.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// A live runner keeps its claim: an approved call that runs for several
// leases is not taken over by a caller waiting for it, which gets the
// runner's result; the tool runs once.
func TestLiveRunnerKeepsItsClaim(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const lease = 2 * time.Second
	f := newFixture(t).withLease(t, lease, 0)
	id := f.approveEffect(t, ctx)
	p2, err := New(f.h, Options{Store: otherProcess(t, f), PollInterval: 10 * time.Millisecond, RunLease: lease})
	if err != nil {
		t.Fatal(err)
	}
	runner := make(chan Outcome, 1)
	go func() { runner <- f.p.Execute(ctx, Call{Resume: id}) }()
	waitFor(t, ctx, "the tool to start", func() bool { return len(f.marks(t)) > 0 })
	first, err := f.p.st.InspectRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	waiter := make(chan Outcome, 1)
	go func() { waiter <- p2.Execute(ctx, Call{Resume: id, Wait: time.Minute}) }()
	// Let the tool run past three leases: only renewals keep the claim.
	waitFor(t, ctx, "three leases to pass", func() bool { return time.Since(first.ClaimedAt) > 3*lease })
	if c, err := f.p.st.InspectRun(ctx, id); err != nil || c.State != store.RunRunning || !c.Expires.After(first.Expires) {
		t.Fatalf("the runner's claim after three leases: %+v %v", c, err)
	}
	close(f.tools["test.effect"].block)
	o := <-runner
	if o.Status != audit.StatusSuccess {
		t.Fatalf("runner: %+v", o)
	}
	w := <-waiter
	if w.Status != audit.StatusSuccess || w.Result != o.Result || !strings.Contains(strings.Join(w.Reasons, " "), o.CallID) {
		t.Fatalf("waiter must get the runner's result: %+v", w)
	}
	if m := f.marks(t); len(m) != 1 {
		t.Fatalf("the tool ran %d times", len(m))
	}
	if c, err := f.p.st.InspectRun(ctx, id); err != nil || c.State != store.RunFinished {
		t.Fatalf("claim: %+v %v", c, err)
	}
}

// Every wait for a stored result has a deadline: a resume while another
// caller still runs the approved call answers pending after ResultWait
// (with no deadline of its own), and the call is not run twice.
func TestResultWaitHasADeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFixture(t).withLease(t, time.Minute, 50*time.Millisecond)
	id := f.approveEffect(t, ctx)
	runner := make(chan Outcome, 1)
	go func() { runner <- f.p.Execute(context.Background(), Call{Resume: id}) }()
	waitFor(t, ctx, "the tool to start", func() bool { return len(f.marks(t)) > 0 })
	o := f.p.Execute(context.Background(), Call{Resume: id})
	if o.Status != audit.StatusPending || o.ApprovalID != id || !strings.Contains(o.Result, "still running") {
		t.Fatalf("resume while running: %+v", o)
	}
	if ctx.Err() != nil {
		t.Fatal("the resume answered only when the test's own deadline passed")
	}
	close(f.tools["test.effect"].block)
	if r := <-runner; r.Status != audit.StatusSuccess {
		t.Fatalf("runner: %+v", r)
	}
	if again := f.p.Execute(ctx, Call{Resume: id}); again.Status != audit.StatusSuccess {
		t.Fatalf("resume after the run: %+v", again)
	}
	if m := f.marks(t); len(m) != 1 {
		t.Fatalf("the tool ran %d times", len(m))
	}
}

// A claim whose holder died before it stored anything is resolved once,
// even when several callers find it expired at the same time.
func TestExpiredClaimResolvedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFixture(t)
	id := f.approveEffect(t, ctx)
	// A process that claimed the run and died at once (its lease is 1µs).
	if _, won, err := f.p.st.ClaimRun(ctx, id, "dead-host/1/x", "call-of-the-dead", time.Microsecond); !won || err != nil {
		t.Fatal(won, err)
	}
	outs := make(chan Outcome, 8)
	for range 8 {
		go func() { outs <- f.p.Execute(ctx, Call{Resume: id, Wait: time.Minute}) }()
	}
	for range 8 {
		if o := <-outs; o.Status != audit.StatusInterrupted || !strings.Contains(strings.Join(o.Reasons, " "), "call-of-the-dead") {
			t.Fatalf("%+v", o)
		}
	}
	recs := f.records(t, "call-of-the-dead")
	if len(recs) != 1 || recs[0].Status != audit.StatusInterrupted || !strings.Contains(strings.Join(recs[0].Stages[len(recs[0].Stages)-1].Reasons, " "), "dead-host/1/x") {
		t.Fatalf("one interrupted entry naming the dead holder: %+v", recs)
	}
	if m := f.marks(t); len(m) != 0 {
		t.Fatalf("the tool ran: %v", m)
	}
}

// Storing the result retries a failed write a bounded number of times: with
// the database's write lock held by another process, finishClaim gives up
// with the database's error instead of waiting for ever, and the claim is
// left running (its lease, no longer renewed, lapses into interrupted).
func TestFinishClaimRetryIsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := newFixture(t)
	id := f.approveEffect(t, ctx)
	st, err := sqlite.OpenWith(f.db, sqlite.Options{BusyTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p, err := New(f.h, Options{Store: st, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, won, err := p.st.ClaimRun(ctx, id, p.opts.Holder, "call-1", time.Hour); !won || err != nil {
		t.Fatal(won, err)
	}
	// Another process holds the write lock.
	db, err := sql.Open("sqlite", f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	if err := p.finishClaim(ctx, id, json.RawMessage(`{"status":"success"}`)); err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("finish under another process's write lock: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("finishClaim returned only when the test's own deadline passed")
	}
	if c, err := p.st.InspectRun(ctx, id); err != nil || c.State != store.RunRunning {
		t.Fatalf("claim after a failed finish: %+v %v", c, err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := p.finishClaim(ctx, id, json.RawMessage(`{"status":"success"}`)); err != nil {
		t.Fatalf("finish once the lock is gone: %v", err)
	}
}
