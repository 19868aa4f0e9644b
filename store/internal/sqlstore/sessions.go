package sqlstore

import (
	"context"

	"github.com/armory-dev/armory/store"
)

// generationsQuery is SessionGenerations' statement: the sessions named base
// or base + "#…" that have a recorded start, with their last activity,
// longest then greatest name first (so base#10 comes before base#9).
const generationsQuery = `SELECT s.id, s.started_us, COALESCE(c.value, 0) FROM sessions s
	LEFT JOIN counters c ON c.session = s.id AND c.name = '` + store.ActivityCounter + `'
	WHERE s.id = ? OR substr(s.id, 1, length(CAST(? AS TEXT)) + 1) = CAST(? AS TEXT) || '#'
	ORDER BY length(s.id) DESC, s.id DESC LIMIT ?`

// sessionQuery is GetSession's statement.
const sessionQuery = `SELECT COALESCE((SELECT started_us FROM sessions WHERE id = ?), 0),
	COALESCE((SELECT value FROM counters WHERE session = ? AND name = '` + store.ActivityCounter + `'), 0)`

// GetSession implements store.Sessions.
func (c *Core) GetSession(ctx context.Context, session string) (store.SessionInfo, error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return store.SessionInfo{}, err
	}
	defer release()
	var start, active int64
	if err := c.c.Read.QueryRow(ctx, sessionQuery, session, session).Scan(&start, &active); err != nil {
		return store.SessionInfo{}, c.errf("session", err)
	}
	return store.NewSessionInfo(session, start, active), nil
}

// SessionGenerations implements store.Sessions.
func (c *Core) SessionGenerations(ctx context.Context, base string, limit int) ([]store.SessionInfo, error) {
	if limit <= 0 || limit > store.MaxSessionGenerations {
		limit = store.MaxSessionGenerations
	}
	return list(ctx, c, "session generations", func(r Row) (store.SessionInfo, error) {
		var id string
		var start, active int64
		err := r.Scan(&id, &start, &active)
		return store.NewSessionInfo(id, start, active), err
	}, generationsQuery, base, base, base, limit)
}

type pair struct {
	k string
	v int64
}

func (c *Core) readMap(ctx context.Context, q, session string) (map[string]int64, error) {
	kvs, err := list(ctx, c, "read session", func(r Row) (p pair, err error) {
		err = r.Scan(&p.k, &p.v)
		return p, err
	}, q, session)
	if err != nil {
		return nil, err
	}
	m := make(map[string]int64, len(kvs))
	for _, p := range kvs {
		m[p.k] = p.v
	}
	return m, nil
}

// Counters implements store.Sessions.
func (c *Core) Counters(ctx context.Context, session string) (map[string]int64, error) {
	return c.readMap(ctx, `SELECT name, value FROM counters WHERE session = ?`, session)
}

// LimitOverrides implements store.Sessions.
func (c *Core) LimitOverrides(ctx context.Context, session string) (map[string]int64, error) {
	return c.readMap(ctx, `SELECT name, max FROM limit_overrides WHERE session = ?`, session)
}
