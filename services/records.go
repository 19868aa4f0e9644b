package services

import (
	"context"
	"fmt"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// groupsOf returns the privilege groups agent belongs to (config.md's
// privilege_groups); none for an agent the world's files do not define (an
// agent created at run time) or before the roster is built.
func (m *Module) groupsOf(agent string) []string {
	m.mu.Lock()
	r := m.roster
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	ag, err := r.Agent(agent)
	if err != nil || ag.Def == nil || ag.Def.Config == nil {
		return nil
	}
	out := make([]string, 0, len(ag.Def.Config.Groups))
	for _, g := range ag.Def.Config.Groups {
		out = append(out, g.Value)
	}
	return out
}

// requireAgent returns nil when id is an agent of the world (defined in
// its files or created at run time), else a KindNotFound error naming op.
func (m *Module) requireAgent(ctx context.Context, st agentGetter, op, id string) error {
	ok, err := m.knownAgent(ctx, st, id)
	switch {
	case err != nil:
		return store.Err(op, err)
	case ok:
		return nil
	}
	m.mu.Lock()
	r := m.roster
	m.mu.Unlock()
	if r == nil {
		return nil // no roster to check against (a library use without Validate)
	}
	return armory.E(op, armory.KindNotFound, fmt.Sprintf("no agent %q in this world (agents: %s)", id, strings.Join(r.World.AgentIDs(), ", ")))
}

// audited records a person's change (through REST or the CLI) with
// pipeline.AuditHuman; p nil records nothing (a library caller without a
// pipeline). The change has happened: an audit failure is returned as
// KindUnavailable, saying so.
func audited(ctx context.Context, p *pipeline.Pipeline, a pipeline.HumanAction) error {
	if p == nil {
		return nil
	}
	return p.AuditHuman(ctx, a)
}

// pageArgs bounds a tool's limit argument: ≤ 0 is store.DefaultPage, more
// than store.MaxPage is store.MaxPage.
func pageArgs(limit int, cursor string) store.Page {
	return store.Page{Limit: store.PageLimit(limit), Cursor: cursor}
}

// Common schema properties of the paginated tools.
var (
	propLimit  = prop("limit", integer(fmt.Sprintf("Most items to return (default %d, at most %d).", store.DefaultPage, store.MaxPage)))
	propCursor = prop("cursor", str("The next_cursor of a previous call, to read the next page."))
)

// listPage is a page of a list result.
type listPage[T any] struct {
	Items []T `json:"items"`
	// NextCursor is "" on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
}
