package store

import (
	"context"
	"time"
)

// Skill state: which agent holds which skill pack (package skills). A hold
// has two parts, each with its time: acquired (the skill's tools are in the
// agent's registry) and active (the agent loaded the skill's full
// instructions). A row exists while either part is set; clearing both
// deletes it. The store keeps the rows and makes each change atomic; which
// skills exist and who may change what is the skills module's decision.
// Every process on one database sees a change at once (the rows are the
// truth; the module's "skill" events only say a row changed).

// MaxSkillHolds bounds the skills one agent holds (acquired or active).
const MaxSkillHolds = 256

// SkillState is one agent's hold on one skill.
type SkillState struct {
	Agent string
	Skill string
	// Acquired: the skill's tools are the agent's; AcquiredAt when it was
	// acquired (zero unless Acquired).
	Acquired   bool
	AcquiredAt time.Time
	// Active: the agent loaded the skill's instructions; ActivatedAt when
	// (zero unless Active).
	Active      bool
	ActivatedAt time.Time
	// UpdatedAt is the time of the row's last change.
	UpdatedAt time.Time
}

// Skills keeps every agent's skill state. Safe for concurrent use; every
// call is one transaction, atomic across the Stores sharing the database
// (an agent's changes are serialized, so its bound holds across processes).
// Times are the Store's clock in UTC microseconds.
type Skills interface {
	// SetSkillAcquired sets whether agent has acquired skill. Acquiring
	// an acquired skill changes nothing (its AcquiredAt is kept); clearing
	// it also clears Active (dropping a skill drops its instructions too)
	// and deletes the row. It returns the state as stored after the call
	// (nil when the row is gone) and whether anything changed (of racing
	// calls that make the same change, exactly one reports it). Errors:
	// ErrInvalid (an empty or oversized agent or skill name, text that is
	// not UTF-8), ErrConflict (a new hold beyond MaxSkillHolds for the
	// agent; nothing is written).
	SetSkillAcquired(ctx context.Context, agent, skill string, acquired bool) (st *SkillState, changed bool, err error)
	// SetSkillActive sets whether agent has activated skill, whether or
	// not it is acquired (activating loads instructions only). Activating
	// an active skill keeps its ActivatedAt; clearing Active keeps
	// Acquired and AcquiredAt, and deletes a row that is not acquired.
	// Returns and errors as SetSkillAcquired.
	SetSkillActive(ctx context.Context, agent, skill string, active bool) (st *SkillState, changed bool, err error)
	// ListSkillStates returns a page of the holds of agent ("" for every
	// agent), ordered by agent then skill (by bytes). Errors: ErrInvalid
	// (a malformed cursor, an oversized agent name).
	ListSkillStates(ctx context.Context, agent string, p Page) (states []*SkillState, next string, err error)
	// ForgetSkill deletes every agent's hold on skill (a skill removed
	// from the world) and returns the agents that held it, sorted (none:
	// nil). Errors: ErrInvalid (an empty or oversized skill name).
	ForgetSkill(ctx context.Context, skill string) (agents []string, err error)
}
