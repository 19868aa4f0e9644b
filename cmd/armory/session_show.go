package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// maxShownGenerations bounds the earlier generations session show lists.
const maxShownGenerations = 20

// sessionAgent returns the agent whose session id is: the "<agent>:" prefix
// when it names an agent of the world, else the agent of the session's
// newest audit record, else nil.
func sessionAgent(ctx context.Context, h *roster.Roster, st pipeline.Store, id string) *roster.Agent {
	if name, _, ok := strings.Cut(id, ":"); ok {
		if ag, err := h.Agent(name); err == nil {
			return ag
		}
	}
	if recs, err := st.ListAudit(ctx, store.AuditFilter{Session: id, Limit: 1}); err == nil && len(recs) == 1 {
		if ag, err := h.Agent(recs[0].Agent); err == nil {
			return ag
		}
	}
	return nil
}

// knownSession returns an error of kind KindNotFound when id is neither a
// session of an agent of the world (ag, from sessionAgent) nor one the store
// holds anything of: a typo such as "default" for "AGENT:default" is named,
// not shown, extended or reset as an empty session.
func knownSession(ctx context.Context, h *roster.Roster, st pipeline.Store, ag *roster.Agent, id string) error {
	if ag != nil {
		return nil
	}
	si, err := st.GetSession(ctx, id)
	if err != nil {
		return store.Err("session", err)
	}
	counters, err := st.Counters(ctx, id)
	if err != nil {
		return store.Err("session", err)
	}
	overrides, err := st.LimitOverrides(ctx, id)
	if err != nil {
		return store.Err("session", err)
	}
	if !si.Started.IsZero() || len(counters) > 0 || len(overrides) > 0 {
		return nil
	}
	ids := slices.Sorted(slices.Values(h.World.AgentIDs()))
	return armory.E("session", armory.KindNotFound, fmt.Sprintf("no session %q: a session is AGENT:NAME, AGENT one of the world's agents (%s)", id, strings.Join(ids, ", ")))
}

// resolveSessionArg maps what a human typed to the session meant: the
// agent's default session name is its current unnamed generation, and
// "<agent>:default#1" is that session's first generation.
func resolveSessionArg(ctx context.Context, p *pipeline.Pipeline, ag *roster.Agent, id string) (string, error) {
	if ag == nil {
		return id, nil
	}
	base := pipeline.DefaultSession(ag.ID)
	if id == base+"#1" {
		return base, nil
	}
	if id != base {
		return id, nil
	}
	cur, _, ok, err := p.CurrentGeneration(ctx, ag.ID)
	if err != nil || !ok {
		return id, err
	}
	return cur.ID, nil
}

func timeOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// sessionShow is the JSON of `armory session show`: the limits enforced for
// the session's agent (world, then the agent's ## Limits, then the
// session's overrides), its counters, start, last activity and state, and
// for an agent's unnamed session its earlier generations.
func sessionShow(ctx context.Context, p *pipeline.Pipeline, arg string) (map[string]any, error) {
	h, st := p.Roster(), p.Store()
	ag := sessionAgent(ctx, h, st, arg)
	if err := knownSession(ctx, h, st, ag, arg); err != nil {
		return nil, err
	}
	id, err := resolveSessionArg(ctx, p, ag, arg)
	if err != nil {
		return nil, err
	}
	counters, err := st.Counters(ctx, id)
	if err != nil {
		return nil, err
	}
	for k := range counters {
		if strings.HasPrefix(k, "~") {
			delete(counters, k) // bookkeeping (last activity, loop detection)
		}
	}
	overrides, err := st.LimitOverrides(ctx, id)
	if err != nil {
		return nil, err
	}
	agentID := ""
	if ag != nil {
		agentID = ag.ID
	}
	state, _, last, err := p.SessionState(ctx, agentID, id)
	if err != nil {
		return nil, err
	}
	si, err := st.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	unnamed := false
	if ag != nil {
		_, unnamed = pipeline.Generation(pipeline.DefaultSession(ag.ID), id)
	}
	limits := map[string]int64{} // session_runtime in seconds
	for _, n := range world.LimitNames {
		if n == world.LimitSessionRuntime && unnamed {
			continue // an unnamed session ends by idling instead (idle_timeout)
		}
		limits[n] = p.Limit(ag, n)
		if o, ok := overrides[n]; ok {
			limits[n] = o
		}
	}
	out := map[string]any{
		"session": id, "agent": agentID, "state": state, "counters": counters, "limits": limits, "overrides": overrides,
		"started": timeOrNil(si.Started), "last_activity": timeOrNil(last),
	}
	if id != arg {
		out["requested"] = arg
	}
	if unnamed {
		out["idle_timeout"] = p.IdleTimeout().String()
		gens, err := st.SessionGenerations(ctx, pipeline.DefaultSession(ag.ID), maxShownGenerations+1)
		if err != nil {
			return nil, err
		}
		var list []map[string]any
		for _, g := range gens {
			if _, ok := pipeline.Generation(pipeline.DefaultSession(ag.ID), g.ID); !ok || len(list) == maxShownGenerations {
				continue
			}
			gs, _, glast, err := p.SessionState(ctx, ag.ID, g.ID)
			if err != nil {
				return nil, err
			}
			list = append(list, map[string]any{"session": g.ID, "state": gs, "started": timeOrNil(g.Started), "last_activity": timeOrNil(glast)})
		}
		out["generations"] = list
	}
	return out, nil
}
