package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

const timerColumns = `seq, id, owner, name, kind, spec, next_us, action, enabled, version, created_us, updated_us, fired_us, fires`

const selectTimer = `SELECT ` + timerColumns + ` FROM timers`

type timerRow struct {
	seq int64
	*store.Timer
}

func scanTimer(row Row) (timerRow, error) {
	var (
		t                            store.Timer
		seq, next, cUS, uUS, firedUS int64
		kind, action                 string
	)
	if err := row.Scan(&seq, &t.ID, &t.Owner, &t.Name, &kind, &t.Spec, &next, &action, &t.Enabled, &t.Version,
		&cUS, &uUS, &firedUS, &t.Fires); err != nil {
		return timerRow{}, err
	}
	t.Kind, t.Action = store.TimerKind(kind), json.RawMessage(action)
	t.NextFire, t.CreatedAt, t.UpdatedAt, t.LastFired = TimeOrZero(next), TimeOrZero(cUS), TimeOrZero(uUS), TimeOrZero(firedUS)
	return timerRow{seq, &t}, nil
}

// action is a timer's action as stored ("null" for none).
func action(a json.RawMessage) string {
	if len(a) == 0 {
		return "null"
	}
	return string(a)
}

// CreateTimer implements store.Timers.
func (c *Core) CreateTimer(ctx context.Context, t *store.Timer) error {
	if t == nil {
		return c.errf("create timer", store.CheckTimer(t))
	}
	tm := *t
	if tm.ID == "" {
		tm.ID = audit.NewID()
	}
	if err := store.CheckTimer(&tm); err != nil {
		return c.errf("create timer", err)
	}
	now := c.nowUS()
	tm.Action = json.RawMessage(action(tm.Action))
	tm.NextFire = TimeOrZero(usTime(tm.NextFire))
	tm.Version, tm.CreatedAt, tm.UpdatedAt, tm.LastFired, tm.Fires = 1, TimeOrZero(now), TimeOrZero(now), time.Time{}, 0
	if err := c.insert(ctx, "create timer "+tm.ID, "timer id, or the owner's timer name, exists", `INSERT INTO timers
		(id, owner, name, kind, spec, next_us, action, enabled, version, created_us, updated_us) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)
		ON CONFLICT DO NOTHING`, tm.ID, tm.Owner, tm.Name, string(tm.Kind), tm.Spec, usTime(tm.NextFire), string(tm.Action), tm.Enabled, now, now); err != nil {
		return err
	}
	*t = tm
	return nil
}

// GetTimer implements store.Timers.
func (c *Core) GetTimer(ctx context.Context, id string) (*store.Timer, error) {
	r, err := one(ctx, c, c.c.Read, "timer "+id, scanTimer, selectTimer+` WHERE id = ?`, id)
	return r.Timer, err
}

// lockTimer reads timer id in q's transaction, locking its row where rows
// are locked; no row is a final ErrNotFound.
func (c *Core) lockTimer(ctx context.Context, q Querier, id string) (*store.Timer, error) {
	r, err := scanTimer(q.QueryRow(ctx, selectTimer+` WHERE id = ?`+c.c.ForUpdate, id))
	if noRows(err) {
		return nil, final(c.errf("timer "+id, store.ErrNotFound))
	}
	return r.Timer, err
}

// UpdateTimer implements store.Timers: the row is read (locked), compared
// and written in one transaction.
func (c *Core) UpdateTimer(ctx context.Context, t *store.Timer) error {
	if t == nil {
		return c.errf("update timer", store.CheckTimer(t))
	}
	var out *store.Timer
	err := c.tx(ctx, "update timer", func(q Querier) error {
		cur, err := c.lockTimer(ctx, q, t.ID)
		if err != nil {
			return err
		}
		if cur.Version != t.Version {
			return final(c.errf("update timer "+t.ID, fmt.Errorf("%w: version %d, not %d", store.ErrConflict, cur.Version, t.Version)))
		}
		nt := *t
		nt.Owner, nt.Kind = cur.Owner, cur.Kind
		if err := store.CheckTimer(&nt); err != nil {
			return final(c.errf("update timer", err))
		}
		var clash int
		err = q.QueryRow(ctx, `SELECT 1 FROM timers WHERE owner = ? AND name = ? AND id <> ?`, cur.Owner, nt.Name, nt.ID).Scan(&clash)
		if err == nil {
			return final(c.errf("update timer "+t.ID, fmt.Errorf("%w: %s has a timer named %q", store.ErrConflict, cur.Owner, nt.Name)))
		}
		if !noRows(err) {
			return err
		}
		r, err := scanTimer(q.QueryRow(ctx, `UPDATE timers SET name = ?, spec = ?, next_us = ?, action = ?, enabled = ?,
			version = version + 1, updated_us = ? WHERE id = ? RETURNING `+timerColumns,
			nt.Name, nt.Spec, usTime(nt.NextFire), action(nt.Action), nt.Enabled, c.nowUS(), nt.ID))
		out = r.Timer
		return err
	})
	if err != nil {
		return err
	}
	*t = *out
	return nil
}

// DeleteTimer implements store.Timers.
func (c *Core) DeleteTimer(ctx context.Context, id string) error {
	return c.tx(ctx, "delete timer", func(q Querier) error {
		n, err := q.Exec(ctx, `DELETE FROM timers WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if n == 0 {
			return final(c.errf("timer "+id, store.ErrNotFound))
		}
		_, err = q.Exec(ctx, `DELETE FROM timer_fires WHERE timer_id = ?`, id)
		return err
	})
}

// ListTimers implements store.Timers.
func (c *Core) ListTimers(ctx context.Context, owner string, p store.Page) ([]*store.Timer, string, error) {
	after, err := seqAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf("list timers", err)
	}
	rows, next, err := pageOf(ctx, c, "list timers", scanTimer, p, func(r timerRow) string { return seqCursor(r.seq) },
		selectTimer+` WHERE seq > ? AND (CAST(? AS TEXT) = '' OR owner = ?) ORDER BY seq`, after, owner, owner)
	return timers(rows), next, err
}

func timers(rows []timerRow) []*store.Timer {
	out := make([]*store.Timer, len(rows))
	for i, r := range rows {
		out[i] = r.Timer
	}
	return out
}

// DueTimers implements store.Timers.
func (c *Core) DueTimers(ctx context.Context, now time.Time, limit int) ([]*store.Timer, error) {
	rows, err := list(ctx, c, "due timers", scanTimer, selectTimer+` WHERE enabled AND next_us <> 0 AND next_us <= ?
		ORDER BY next_us, seq LIMIT ?`, now.UnixMicro(), store.PageLimit(limit))
	return timers(rows), err
}

// FireTimer implements store.Timers: the timer's row is read (locked), the
// occurrence inserted (its primary key lets exactly one caller in) and the
// timer moved on, in one transaction.
func (c *Core) FireTimer(ctx context.Context, id string, at, next time.Time, holder string) (bool, *store.Timer, error) {
	if err := store.CheckText("holder", holder, store.MaxName, true); err != nil {
		return false, nil, c.errf("fire timer", err)
	}
	if at.IsZero() {
		return false, nil, c.errf("fire timer", fmt.Errorf("%w: no occurrence time", store.ErrInvalid))
	}
	var (
		fired bool
		out   *store.Timer
	)
	atUS := at.UnixMicro()
	err := c.tx(ctx, "fire timer", func(q Querier) (err error) {
		fired = false
		if out, err = c.lockTimer(ctx, q, id); err != nil {
			return err
		}
		if !out.Enabled || (out.Kind != store.TimerWatch && usTime(out.NextFire) != atUS) {
			return nil
		}
		now := c.nowUS()
		n, err := q.Exec(ctx, `INSERT INTO timer_fires (timer_id, at_us, holder, fired_us) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			id, atUS, holder, now)
		if err != nil || n == 0 {
			return err
		}
		fired = true
		enabled := out.Kind == store.TimerWatch || !next.IsZero()
		r, err := scanTimer(q.QueryRow(ctx, `UPDATE timers SET next_us = ?, enabled = ?, fired_us = ?, fires = fires + 1,
			version = version + 1, updated_us = ? WHERE id = ? RETURNING `+timerColumns, usTime(next), enabled, atUS, now, id))
		if err != nil {
			return err
		}
		out = r.Timer
		_, err = q.Exec(ctx, `DELETE FROM timer_fires WHERE timer_id = ? AND at_us <
			(SELECT at_us FROM timer_fires WHERE timer_id = ? ORDER BY at_us DESC LIMIT 1 OFFSET ?)`, id, id, store.FireHistory-1)
		return err
	})
	if err != nil {
		return false, nil, err
	}
	return fired, out, nil
}
