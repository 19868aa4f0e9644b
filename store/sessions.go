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
