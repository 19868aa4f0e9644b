package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// TimerKind is what makes a timer fire.
type TimerKind string

// Timer kinds.
const (
	// TimerOnce fires once, at NextFire (util.timer).
	TimerOnce TimerKind = "timer"
	// TimerCron fires at every time a 5-field cron Spec matches
	// (util.cron); NextFire is the next one.
	TimerCron TimerKind = "cron"
	// TimerWatch fires when the file Spec names changes (util.watch); it
	// has no schedule (NextFire is zero).
	TimerWatch TimerKind = "watch"
)

// Timer is a durable timer definition. The service parses Spec and
// computes fire times; the store keeps them and makes each occurrence fire
// once (FireTimer).
type Timer struct {
	ID    string    `json:"id"`
	Owner string    `json:"owner"` // the agent that set it
	Name  string    `json:"name"`  // unique per owner
	Kind  TimerKind `json:"kind"`
	Spec  string    `json:"spec"` // a time, a cron expression, a path
	// NextFire is the next scheduled occurrence; zero for none.
	NextFire time.Time `json:"next_fire,omitzero"`
	// Action is what a firing does (a message or a task to create), as the
	// service's JSON; at most MaxBody bytes.
	Action  json.RawMessage `json:"action"`
	Enabled bool            `json:"enabled"`
	// Version is 1 at creation and grows by one with every update and
	// firing.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// LastFired is the last occurrence fired (zero: never); Fires counts
	// them.
	LastFired time.Time `json:"last_fired,omitzero"`
	Fires     int64     `json:"fires"`
}

// CheckTimer validates a timer about to be stored; backends call it.
func CheckTimer(t *Timer) error {
	if t == nil {
		return fmt.Errorf("%w: nil timer", ErrInvalid)
	}
	switch t.Kind {
	case TimerOnce, TimerCron, TimerWatch:
	default:
		return fmt.Errorf("%w: timer kind %q (timer, cron or watch)", ErrInvalid, t.Kind)
	}
	if len(t.Action) > MaxBody {
		return fmt.Errorf("%w: timer action is %d bytes; the limit is %d", ErrInvalid, len(t.Action), MaxBody)
	}
	if len(t.Action) > 0 && !json.Valid(t.Action) {
		return fmt.Errorf("%w: timer action is not JSON", ErrInvalid)
	}
	return checkAll(CheckText("timer id", t.ID, MaxName, true), CheckText("timer owner", t.Owner, MaxName, true),
		CheckText("timer name", t.Name, MaxName, true), CheckText("timer spec", t.Spec, MaxSubject, false))
}

// Timers are the durable timers (one-shot, cron, file watch). Safe for
// concurrent use; every occurrence of a timer fires at most once across
// every process sharing the database and across restarts.
type Timers interface {
	// CreateTimer stores t. An empty ID gets a fresh one; Version is set
	// to 1, CreatedAt and UpdatedAt to now; t is updated accordingly.
	// Errors: ErrConflict (the ID, or the owner's name, exists),
	// ErrInvalid.
	CreateTimer(ctx context.Context, t *Timer) error
	// GetTimer returns timer id, or ErrNotFound.
	GetTimer(ctx context.Context, id string) (*Timer, error)
	// UpdateTimer stores t's Name, Spec, NextFire, Action and Enabled iff
	// the stored version is t.Version, then sets t.Version and UpdatedAt
	// (t receives the stored Owner, Kind, CreatedAt, LastFired and
	// Fires). Errors: ErrNotFound, ErrConflict (stale version, or the
	// owner's name exists), ErrInvalid.
	UpdateTimer(ctx context.Context, t *Timer) error
	// DeleteTimer deletes timer id and its occurrence records. Errors:
	// ErrNotFound.
	DeleteTimer(ctx context.Context, id string) error
	// ListTimers returns a page of owner's timers (every timer when owner
	// is ""), oldest first.
	ListTimers(ctx context.Context, owner string, p Page) (timers []*Timer, next string, err error)
	// DueTimers returns at most limit (≤ 0: DefaultPage; at most MaxPage)
	// enabled timers whose NextFire is set and at or before now, earliest
	// first.
	DueTimers(ctx context.Context, now time.Time, limit int) ([]*Timer, error)
	// FireTimer records the occurrence at of timer id for holder and
	// moves the timer on, in one transaction, iff it is enabled, at is its
	// NextFire (any time for a watch) and the occurrence (id, at) was never
	// recorded; it then sets NextFire to next (zero: none, which disables
	// a one-shot or cron timer; a watch stays enabled), LastFired to at,
	// counts the firing and bumps Version. It reports whether this caller
	// fired the occurrence (exactly one caller does, across processes and
	// restarts: the occurrence record is unique and durable) and returns
	// the timer as it stands. The last FireHistory occurrence records of a
	// timer are kept. Errors: ErrNotFound, ErrInvalid (empty holder, zero
	// at).
	FireTimer(ctx context.Context, id string, at, next time.Time, holder string) (fired bool, t *Timer, err error)
}

// FireHistory is how many occurrence records FireTimer keeps per timer.
const FireHistory = 100
