package pipeline

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// Unnamed sessions.
//
// Calls that name no session (or name the agent's default session,
// DefaultSession) share the agent's unnamed session. It has no runtime cap;
// it ends instead when it has been idle for the world's session idle
// timeout (world.Policy.SessionIdleTimeout), and the next call opens a new
// generation: DefaultSession(agent) is the first, then "<agent>:default#2",
// "#3", …. Every generation keeps its counters, its audit records and its
// approvals, so an ended one stays queryable. Generations are derived from
// the store (SessionGenerations: start and last admitted call), so every
// process and replica on one database picks the same one: two that find
// the current generation idle at once both choose the next one.

// Unnamed reports whether session is agent's unnamed session: empty, or the
// agent's default session name.
func Unnamed(agent, session string) bool {
	return session == "" || session == DefaultSession(agent)
}

// GenerationName returns the name of generation n (≥ 1) of the unnamed
// session whose first generation is base.
func GenerationName(base string, n int) string {
	if n <= 1 {
		return base
	}
	return base + "#" + strconv.Itoa(n)
}

// Generation returns which generation of base the session id is (1 for base
// itself), or false when id is not one.
func Generation(base, id string) (int, bool) {
	if id == base {
		return 1, true
	}
	rest, ok := strings.CutPrefix(id, base+"#")
	if !ok || rest == "" || rest[0] == '0' || len(rest) > 9 {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 2 || strconv.Itoa(n) != rest {
		return 0, false
	}
	return n, true
}

// IdleTimeout is how long an unnamed session may be idle before the next
// call opens a new one.
func (p *Pipeline) IdleTimeout() time.Duration {
	if d := p.h.World.Policy.SessionIdleTimeout; d > 0 {
		return d
	}
	return world.DefaultSessionIdleTimeout
}

// lastActive is when the session last did anything the store knows of.
func lastActive(si store.SessionInfo) time.Time {
	if si.LastActive.After(si.Started) {
		return si.LastActive
	}
	return si.Started
}

// CurrentGeneration returns the agent's current unnamed session as the
// store sees it now: the newest generation with a recorded start (ok), or
// false when the agent has none. A returned generation may be idle (see
// SessionState).
func (p *Pipeline) CurrentGeneration(ctx context.Context, agent string) (si store.SessionInfo, n int, ok bool, err error) {
	base := DefaultSession(agent)
	gens, err := p.st.SessionGenerations(ctx, base, 100)
	if err != nil {
		return si, 0, false, err
	}
	for _, g := range gens {
		if gen, valid := Generation(base, g.ID); valid {
			return g, gen, true, nil
		}
	}
	return si, 0, false, nil
}

// defaultGen is what a pipeline last admitted in an agent's unnamed
// session: while it is younger than the idle timeout, that generation is
// still current (activity only moves forward; no process can have found it
// idle), so the store need not be asked.
type defaultGen struct {
	name   string
	active time.Time
}

// resolveUnnamed returns the session an unnamed call of agent goes to.
func (p *Pipeline) resolveUnnamed(ctx context.Context, agent string) (string, error) {
	now, idle := p.opts.Now(), p.IdleTimeout()
	if v, ok := p.unnamed.Load(agent); ok {
		if g := v.(defaultGen); now.Sub(g.active) < idle {
			return g.name, nil
		}
	}
	si, n, ok, err := p.CurrentGeneration(ctx, agent)
	if err != nil {
		return "", err
	}
	base := DefaultSession(agent)
	if !ok {
		return base, nil
	}
	if now.Sub(lastActive(si)) >= idle {
		return GenerationName(base, n+1), nil
	}
	return si.ID, nil
}

// touchUnnamed notes that a call of agent was admitted in its unnamed
// session name.
func (p *Pipeline) touchUnnamed(agent, name string) {
	p.unnamed.Store(agent, defaultGen{name: name, active: p.opts.Now()})
}

// Session states (SessionState).
const (
	SessionOpen       = "open"        // takes calls
	SessionIdleClosed = "idle-closed" // an unnamed generation that ended by idling; the next unnamed call opens a new one
	SessionReset      = "reset"       // reset by a human and not used since: the next call starts it anew
	SessionUnused     = "unused"      // nothing recorded
)

// SessionState says what state session is in: open, idle-closed (an
// unnamed generation idle past the timeout, or older than the current
// one), reset (no start recorded, but the audit trail has its calls) or
// unused. last is its last activity (from the store, else the audit trail).
func (p *Pipeline) SessionState(ctx context.Context, agent, session string) (state string, si store.SessionInfo, last time.Time, err error) {
	si, err = p.st.GetSession(ctx, session)
	if err != nil {
		return "", si, last, err
	}
	if si.Started.IsZero() {
		recs, err := p.st.ListAudit(ctx, store.AuditFilter{Session: session, Limit: 1})
		if err != nil {
			return "", si, last, err
		}
		if len(recs) == 0 {
			return SessionUnused, si, last, nil
		}
		return SessionReset, si, recs[0].Time, nil
	}
	last = lastActive(si)
	base := DefaultSession(agent)
	if _, isGen := Generation(base, session); !isGen || agent == "" {
		return SessionOpen, si, last, nil
	}
	if p.opts.Now().Sub(last) >= p.IdleTimeout() {
		return SessionIdleClosed, si, last, nil
	}
	cur, _, ok, err := p.CurrentGeneration(ctx, agent)
	if err != nil {
		return "", si, last, err
	}
	if ok && cur.ID != session {
		return SessionIdleClosed, si, last, nil
	}
	return SessionOpen, si, last, nil
}
