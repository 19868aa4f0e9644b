package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Defaults of the run claim's lease (Options.RunLease, Options.ResultWait).
const (
	DefaultRunLease = 15 * time.Second
)

// InterruptedResult begins the result of an approved call whose process
// stopped while its tool ran.
const InterruptedResult = "interrupted, result unknown: the replica running it stopped"

// defaultHolder names this process in run claims: host, pid and a random
// suffix (a restarted process with the same pid is another holder).
func defaultHolder() string {
	h, _ := os.Hostname()
	id := audit.NewID()
	return fmt.Sprintf("%s/%d/%s", h, os.Getpid(), id[len(id)-12:])
}

// resultWait is how long call s waits for the result of an approved call
// another caller runs.
func (p *Pipeline) resultWait(s *state) time.Duration {
	return max(p.opts.ResultWait, s.c.Wait)
}

// runClaimed runs an approved call under a leased run claim: the caller
// that wins the claim runs the tool, renewing the lease while it runs, and
// stores the outcome as it releases the claim; any other caller waits for
// that outcome (awaitRun).
func (p *Pipeline) runClaimed(ctx context.Context, s *state) Outcome {
	a := s.approval
	_, won, err := p.st.ClaimRun(ctx, a.ID, p.opts.Holder, s.id, p.opts.RunLease)
	if errors.Is(err, store.ErrConflict) {
		return p.awaitRun(ctx, s) // the result was stored meanwhile
	}
	if err != nil {
		return p.refuse(ctx, s, p.storeFailure(s, "approval", err))
	}
	if !won {
		return p.awaitRun(ctx, s)
	}
	stop := p.holdClaim(ctx, a.ID)
	o := p.run(ctx, s, a.DecidedBy)
	lost := stop()
	b, _ := json.Marshal(storedOutcome{Outcome: o, Kind: o.Kind})
	err = p.finishClaim(context.WithoutCancel(ctx), a.ID, b)
	switch {
	case errors.Is(err, store.ErrConflict) || lost:
		o.Reasons = append(o.Reasons, "approval: this process's claim on the run lapsed (it could not renew its lease in time) and another caller resolved the call as interrupted; this result is in the audit trail, the approval keeps the interrupted outcome")
	case err != nil:
		o.Reasons = append(o.Reasons, "approval: the result could not be stored: "+err.Error())
	}
	return o
}

// finishClaim stores the result and releases the claim, retrying a failed
// store a few times (the claim's lease is no longer renewed: a result that
// cannot be stored ends as interrupted).
func (p *Pipeline) finishClaim(ctx context.Context, id string, result json.RawMessage) error {
	var err error
	for i := range 3 {
		if i > 0 {
			time.Sleep(time.Duration(i) * p.opts.PollInterval)
		}
		fctx, cancel := context.WithTimeout(ctx, p.opts.RunLease)
		err = p.st.FinishRun(fctx, id, p.opts.Holder, result)
		cancel()
		if err == nil || errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrClosed) {
			return err
		}
	}
	return err
}

// holdClaim renews the lease on approval id's run claim every third of
// the lease until stop is called. stop returns whether the claim was lost
// (another caller resolved it). A renewal that fails for another reason
// (the database is unreachable) is retried at the next tick; the lease
// lapses only if none succeeds within it.
func (p *Pipeline) holdClaim(ctx context.Context, id string) (stop func() (lost bool)) {
	done := make(chan struct{})
	var (
		wg     sync.WaitGroup
		isLost atomic.Bool
	)
	every := max(p.opts.RunLease/3, time.Millisecond)
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), every)
			err := p.st.RenewRun(rctx, id, p.opts.Holder, p.opts.RunLease)
			cancel()
			if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
				isLost.Store(true)
				return
			}
		}
	}()
	return func() bool {
		close(done)
		wg.Wait()
		return isLost.Load()
	}
}

// awaitRun waits for the outcome of an approved call that another caller
// (in this process or another) runs. The wait polls with a backoff up to
// PollInterval and is bounded by ctx and resultWait; at the deadline the
// outcome is pending (retry with the approval id). When the runner's lease
// has expired without a result, the runner is taken to have died and the
// call is resolved as interrupted (interrupt): it is never run a second
// time.
func (p *Pipeline) awaitRun(ctx context.Context, s *state) Outcome {
	wctx, cancel := context.WithTimeout(ctx, p.resultWait(s))
	defer cancel()
	delay := min(10*time.Millisecond, p.opts.PollInterval)
	holder := "another caller"
	for {
		a, err := p.st.GetApproval(wctx, s.approval.ID)
		if err != nil && wctx.Err() == nil {
			return p.refuse(ctx, s, p.storeFailure(s, "approval", err))
		}
		if err == nil && len(a.Result) > 0 {
			s.approval = a
			return p.storedOutcome(ctx, s)
		}
		if err == nil {
			c, err := p.st.InspectRun(wctx, a.ID)
			if err == nil {
				holder = c.Holder
				if c.Expired {
					if o, ok := p.interrupt(ctx, s, c); ok {
						return o
					}
				}
			}
		}
		select {
		case <-wctx.Done():
			return Outcome{CallID: s.id, Status: audit.StatusPending, Kind: armory.KindPending, ApprovalID: s.approval.ID, Permission: s.approval.Level,
				Stages: s.stages, Reasons: append(reasonsOf(s.stages), "approval: the approved call is running on "+holder),
				Result: fmt.Sprintf("The approved call %s is still running; retry with armory call --resume %s.", s.approval.ID, s.approval.ID)}
		case <-time.After(delay):
		}
		delay = min(2*delay, p.opts.PollInterval)
	}
}

// interrupt resolves the expired run claim c as interrupted, stores that
// outcome as the approval's result (every later resume returns it), writes
// the finish entry of the interrupted call (c.CallID), and answers this
// call with the stored outcome (answerStored: its own call id and finish
// entry). ok is false when another caller resolved the claim first, or its
// holder renewed it.
func (p *Pipeline) interrupt(ctx context.Context, s *state, c *store.RunClaim) (Outcome, bool) {
	a := s.approval
	why := fmt.Sprintf("the process running approved call %s (%s, call %s) stopped renewing its claim; its lease ended at %s",
		a.ID, c.Holder, c.CallID, c.Expires.UTC().Format(time.RFC3339Nano))
	stages := append(cloneStages(s.stages), audit.Stage{Name: "run", Decision: string(audit.StatusInterrupted),
		Reasons: []string{why, "resolved by " + p.opts.Holder + "; the tool is not run again for this approval"}})
	text := InterruptedResult + ". Whether the tool had its effect is unknown, and it is not run again for this approval: check its effect before asking for a new call."
	o := Outcome{CallID: c.CallID, Status: audit.StatusInterrupted, Kind: armory.KindUnavailable, Result: text, ApprovalID: a.ID,
		DecidedBy: a.DecidedBy, Permission: a.Level, Stages: stages, Reasons: reasonsOf(stages)}
	so := storedOutcome{Outcome: o, Kind: o.Kind}
	b, _ := json.Marshal(so)
	if _, err := p.st.InterruptRun(ctx, a.ID, p.opts.Holder, b); err != nil {
		return Outcome{}, false
	}
	saved := s.stages
	s.stages = stages
	rec := p.record(s, audit.PhaseFinish, audit.StatusInterrupted, text)
	s.stages = saved
	rec.ID = c.CallID
	rec.DurationMS = p.opts.Now().Sub(c.ClaimedAt).Milliseconds()
	err := p.appendAudit(context.WithoutCancel(ctx), rec)
	// This call answers with the stored outcome, as every later resume does.
	out := p.answerStored(ctx, s, so)
	if err != nil {
		out.Reasons = append(out.Reasons, "audit: the interrupted call's finish entry could not be written: "+err.Error())
	}
	return out, true
}
