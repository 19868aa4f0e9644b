package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/armory-dev/armory/store"
)

// --- Skills

// A hold is one row of skill_states; its parts are set while their time
// is not 0 (the Store's clock is at least 1 µs), and a row with neither
// part set is deleted, never kept.

// The statements of a skill change and of one agent's list: HotReads and
// HotWrites list them for a backend that keeps them prepared. A change
// reads the hold (skillRowQuery, locked where the backend locks rows),
// counts the agent's holds only for a new one, then writes the row
// (upsert) or deletes it.
const (
	selectSkillState = `SELECT agent, skill, acquired_us, activated_us, updated_us FROM skill_states`
	skillRowQuery    = `SELECT acquired_us, activated_us, updated_us FROM skill_states WHERE agent = ? AND skill = ?`
	countSkillsQuery = `SELECT COUNT(*) FROM skill_states WHERE agent = ?`
	upsertSkillQuery = `INSERT INTO skill_states (agent, skill, acquired_us, activated_us, updated_us) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (agent, skill) DO UPDATE SET acquired_us = excluded.acquired_us, activated_us = excluded.activated_us, updated_us = excluded.updated_us`
	deleteSkillQuery = `DELETE FROM skill_states WHERE agent = ? AND skill = ?`
	agentSkillsQuery = selectSkillState + ` WHERE agent = ? AND skill > ? ORDER BY skill LIMIT ?`
	allSkillsQuery   = selectSkillState + ` WHERE (agent, skill) > (?, ?) ORDER BY agent, skill LIMIT ?`
	forgetSkillQuery = `DELETE FROM skill_states WHERE skill = ? RETURNING agent`
)

// skillsLock prefixes the agent's name in the key that serializes the
// agent's skill changes (Config.Serialize).
const skillsLock = "skills:"

// skillHold is a hold's stored times (0: the part is not set).
type skillHold struct{ acquired, activated, updated int64 }

// state is the hold of agent on skill as a store.SkillState; nil when
// neither part is set (the row is gone).
func (h skillHold) state(agent, skill string) *store.SkillState {
	if h.acquired == 0 && h.activated == 0 {
		return nil
	}
	return &store.SkillState{
		Agent: agent, Skill: skill,
		Acquired: h.acquired != 0, AcquiredAt: TimeOrZero(h.acquired),
		Active: h.activated != 0, ActivatedAt: TimeOrZero(h.activated),
		UpdatedAt: TimeOrZero(h.updated),
	}
}

func scanSkillState(row Row) (*store.SkillState, error) {
	var (
		agent, skill string
		h            skillHold
	)
	if err := row.Scan(&agent, &skill, &h.acquired, &h.activated, &h.updated); err != nil {
		return nil, err
	}
	return h.state(agent, skill), nil
}

// checkSkill validates the names of a skill change.
func checkSkill(agent, skill string) error {
	return cmp.Or(store.CheckText("agent", agent, store.MaxName, true), store.CheckText("skill", skill, store.MaxName, true))
}

// SetSkillAcquired implements store.Skills.
func (c *Core) SetSkillAcquired(ctx context.Context, agent, skill string, acquired bool) (*store.SkillState, bool, error) {
	return c.setSkill(ctx, "set skill acquired", agent, skill, func(h skillHold, now int64) skillHold {
		switch {
		case acquired && h.acquired == 0:
			h.acquired = now
		case !acquired:
			// Dropping a skill drops its instructions too.
			h.acquired, h.activated = 0, 0
		}
		return h
	})
}

// SetSkillActive implements store.Skills.
func (c *Core) SetSkillActive(ctx context.Context, agent, skill string, active bool) (*store.SkillState, bool, error) {
	return c.setSkill(ctx, "set skill active", agent, skill, func(h skillHold, now int64) skillHold {
		switch {
		case active && h.activated == 0:
			h.activated = now
		case !active:
			h.activated = 0
		}
		return h
	})
}

// setSkill changes agent's hold on skill with change (given the stored
// hold, the zero hold when there is none, and the time of the call) in
// one transaction that first serializes the agent's skill changes
// (Config.Serialize) and reads the hold locked, so the bound on the
// agent's holds is exact across processes and a concurrent ForgetSkill
// either precedes or follows the whole change.
func (c *Core) setSkill(ctx context.Context, op, agent, skill string, change func(h skillHold, now int64) skillHold) (*store.SkillState, bool, error) {
	if err := checkSkill(agent, skill); err != nil {
		return nil, false, c.errf(op, err)
	}
	now := c.nowUS()
	var (
		st      *store.SkillState
		changed bool
	)
	err := c.tx(ctx, op, func(q Querier) error {
		if err := c.serialize(ctx, q, skillsLock+agent); err != nil {
			return err
		}
		var old skillHold
		err := q.QueryRow(ctx, skillRowQuery+c.c.ForUpdate, agent, skill).Scan(&old.acquired, &old.activated, &old.updated)
		held := err == nil
		if err != nil && !noRows(err) {
			return err
		}
		h := change(old, now)
		if h.acquired == old.acquired && h.activated == old.activated {
			st = old.state(agent, skill)
			return nil
		}
		changed = true
		h.updated = now
		if st = h.state(agent, skill); st == nil {
			_, err := q.Exec(ctx, deleteSkillQuery, agent, skill)
			return err
		}
		if !held {
			var n int
			if err := q.QueryRow(ctx, countSkillsQuery, agent).Scan(&n); err != nil {
				return err
			}
			if n >= store.MaxSkillHolds {
				return final(c.errf(op, fmt.Errorf("%w: agent %s holds %d skills; the limit is %d (drop one first)", store.ErrConflict, agent, n, store.MaxSkillHolds)))
			}
		}
		_, err = q.Exec(ctx, upsertSkillQuery, agent, skill, h.acquired, h.activated, h.updated)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return st, changed, nil
}

// skillCursor is the position of a hold in the order of ListSkillStates
// (agent, then skill; a name holds no NUL byte).
func skillCursor(s *store.SkillState) string { return cursor(s.Agent + "\x00" + s.Skill) }

// skillAfter decodes a skillCursor ("" for the first page: before every
// hold).
func skillAfter(c string) (agent, skill string, err error) {
	if c == "" {
		return "", "", nil
	}
	pos, err := keyAfter(c)
	if err != nil {
		return "", "", err
	}
	agent, skill, ok := strings.Cut(pos, "\x00")
	if !ok || agent == "" || skill == "" {
		return "", "", fmt.Errorf("%w: malformed cursor", store.ErrInvalid)
	}
	return agent, skill, nil
}

// ListSkillStates implements store.Skills.
func (c *Core) ListSkillStates(ctx context.Context, agent string, p store.Page) ([]*store.SkillState, string, error) {
	const op = "list skill states"
	if err := store.CheckText("agent", agent, store.MaxName, false); err != nil {
		return nil, "", c.errf(op, err)
	}
	afterAgent, afterSkill, err := skillAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf(op, err)
	}
	limit := store.PageLimit(p.Limit)
	var states []*store.SkillState
	if agent == "" {
		states, err = list(ctx, c, op, scanSkillState, allSkillsQuery, afterAgent, afterSkill, limit+1)
	} else {
		// A cursor of another agent's hold: resume where agent's holds
		// stand relative to it.
		switch {
		case afterAgent < agent:
			afterSkill = ""
		case afterAgent > agent:
			return nil, "", nil
		}
		states, err = list(ctx, c, op, scanSkillState, agentSkillsQuery, agent, afterSkill, limit+1)
	}
	if err != nil || len(states) <= limit {
		return states, "", err
	}
	states = states[:limit]
	return states, skillCursor(states[limit-1]), nil
}

// ForgetSkill implements store.Skills: one DELETE … RETURNING.
func (c *Core) ForgetSkill(ctx context.Context, skill string) ([]string, error) {
	const op = "forget skill"
	if err := store.CheckText("skill", skill, store.MaxName, true); err != nil {
		return nil, c.errf(op, err)
	}
	var agents []string
	err := c.tx(ctx, op, func(q Querier) (err error) {
		agents, err = collect(ctx, q, func(row Row) (a string, err error) { return a, row.Scan(&a) }, forgetSkillQuery, skill)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(agents)
	return agents, nil
}
