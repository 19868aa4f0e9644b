package store

import "time"

// SessionInfo is what the store knows of one session.
type SessionInfo struct {
	ID string `json:"id"`
	// Started is when the session's clock started; zero when none is
	// recorded (never admitted a call, or reset since).
	Started time.Time `json:"started,omitzero"`
	// LastActive is when the session last admitted a call (the counter
	// ActivityCounter); zero when it has none (none since a reset).
	LastActive time.Time `json:"last_active,omitzero"`
}

// MaxSessionGenerations bounds SessionGenerations.
const MaxSessionGenerations = 1000

// NewSessionInfo returns the SessionInfo of a session from its stored start
// and last activity (Unix µs, 0 for none); backends call it.
func NewSessionInfo(id string, startUS, activeUS int64) SessionInfo {
	si := SessionInfo{ID: id}
	if startUS != 0 {
		si.Started = time.UnixMicro(startUS).UTC()
	}
	if activeUS != 0 {
		si.LastActive = time.UnixMicro(activeUS).UTC()
	}
	return si
}

// GenerationsQuery is the SQL (with ? placeholders for base, base, base and
// the limit) that both backends run for SessionGenerations: the sessions
// named base or base + "#…" that have a recorded start, with their last
// activity, longest then greatest name first (so base#10 comes before
// base#9).
const GenerationsQuery = `SELECT s.id, s.started_us, COALESCE(c.value, 0) FROM sessions s
	LEFT JOIN counters c ON c.session = s.id AND c.name = '` + ActivityCounter + `'
	WHERE s.id = ? OR substr(s.id, 1, length(CAST(? AS TEXT)) + 1) = CAST(? AS TEXT) || '#'
	ORDER BY length(s.id) DESC, s.id DESC LIMIT ?`

// SessionQuery is the SQL (one ? placeholder for the id, twice) for
// GetSession.
const SessionQuery = `SELECT COALESCE((SELECT started_us FROM sessions WHERE id = ?), 0),
	COALESCE((SELECT value FROM counters WHERE session = ? AND name = '` + ActivityCounter + `'), 0)`
