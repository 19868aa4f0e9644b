package pipeline

import (
	"context"
	"fmt"
	"strings"

	"github.com/armory-dev/armory/store"
)

// openApprovalFor returns the id of the approval that an identical call
// (same agent, session, tool and arguments) continues — the newest one that
// is pending, escalated, approved and not yet run, or denied — or "" when
// there is none (or the store cannot say: then a new request is made). A
// model told to wait and call again therefore continues its first call
// instead of queueing a second request, and a model that calls again after
// a denial is told of the denial (a denial stands for that exact call in
// that session; changed arguments are a new request).
func (p *Pipeline) openApprovalFor(ctx context.Context, s *state) string {
	h := argsHash(s.c.Args)
	var best *store.Approval
	for _, st := range []store.ApprovalStatus{store.StatusPending, store.StatusEscalated, store.StatusApproved, store.StatusDenied} {
		as, err := p.st.ListApprovals(ctx, store.ApprovalFilter{Status: st, Agent: s.c.Agent, Session: s.c.Session, Limit: 100})
		if err != nil {
			return ""
		}
		for _, a := range as {
			if a.Tool != s.c.Tool || a.ArgsHash != h || (st == store.StatusApproved && len(a.Result) > 0) {
				continue
			}
			if best == nil || a.CreatedAt.After(best.CreatedAt) {
				best = a
			}
		}
	}
	if best == nil {
		return ""
	}
	return best.ID
}

// pendingText is what a model reads when its call waits for approval id:
// what it can do, and no command (a model cannot run the human's tools).
func pendingText(id, who string) string {
	return fmt.Sprintf("This call is waiting for approval by %s (approval %s) and has not run yet. "+
		"You can wait and then call this tool again with the same arguments: once it is approved it runs (once) and you get its result; "+
		"while it is undecided you get this answer again; if it is denied you are told why. "+
		"Meanwhile you may work on something else that does not depend on it.", who, id)
}

// humanText is how a human decides approval id (CLI and REST).
func humanText(id, who string) string {
	if strings.HasPrefix(who, "approval agent ") {
		return fmt.Sprintf("Approval %s is with %s; a human may decide it first with: armory approvals approve|deny %s, or POST /api/approvals/%s/approve|deny. The call continues with: armory call --resume %s.", id, who, id, id, id)
	}
	return fmt.Sprintf("A human decides approval %s with: armory approvals show %s, then armory approvals approve|deny %s (or POST /api/approvals/%s/approve|deny). The call continues with: armory call --resume %s.", id, id, id, id, id)
}
