package pipeline

import (
	"context"
	"encoding/json"
	"strconv"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/store"
)

// ApprovalView is an approval as a decider sees it: the request and, for a
// tool that changes files (armory.Previewer: workspace.write,
// workspace.edit, …), the unified diff of the change against the file as it
// is now.
type ApprovalView struct {
	*store.Approval
	Diff string `json:"diff,omitempty"`
}

// MaxListDiffs bounds how many diffs one listing computes (each reads a
// file of up to workspace.PreviewLimit bytes); later entries say where to
// see theirs.
const MaxListDiffs = 50

// Preview returns the diff of the change a's call would make now, or ""
// when its tool does not preview changes. When no diff can be made it says
// why, in parentheses. A request whose arguments held secrets is previewed
// with them redacted, as the request stores them.
func (p *Pipeline) Preview(ctx context.Context, a *store.Approval) string {
	pv, ok := p.previewer(a)
	if !ok {
		return ""
	}
	ag, _ := p.h.Agent(a.Agent)
	d, err := pv.Preview(ctx, armory.Invocation{Args: json.RawMessage(a.Args), Agent: ag.Env})
	if err != nil {
		return "(no diff: " + armory.Message(err) + ")"
	}
	if a.ArgsHash != "" && a.ArgsHash != argsHash(a.Args) {
		d = "(the arguments held secrets; they are shown redacted)\n" + d
	}
	return d
}

// ApprovalViews returns views of as, with diffs for the first MaxListDiffs
// that have one.
func (p *Pipeline) ApprovalViews(ctx context.Context, as []*store.Approval) []ApprovalView {
	out := make([]ApprovalView, len(as))
	for i, a := range as {
		out[i] = ApprovalView{Approval: a}
		if i < MaxListDiffs {
			out[i].Diff = p.Preview(ctx, a)
		} else if _, ok := p.previewer(a); ok {
			out[i].Diff = "(not computed in a list past the first " + strconv.Itoa(MaxListDiffs) + " requests; show the request by its id)"
		}
	}
	return out
}

func (p *Pipeline) previewer(a *store.Approval) (armory.Previewer, bool) {
	ag, err := p.h.Agent(a.Agent)
	if err != nil {
		return nil, false
	}
	t, err := ag.Registry.Lookup(a.Tool)
	if err != nil {
		return nil, false
	}
	pv, ok := t.(armory.Previewer)
	return pv, ok
}
