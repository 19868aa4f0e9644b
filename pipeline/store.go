package pipeline

import (
	"context"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Store is what the pipeline needs of the store (every store.Store has it):
// the approval queue with its leased run claims, atomic admission, its own
// audit records and the session state it reads and gives back. The
// contracts are the store package's roles.
type Store interface {
	store.Approvals
	store.RunClaims
	store.Admission

	AppendAudit(ctx context.Context, rec *audit.Record) error
	ListAudit(ctx context.Context, f store.AuditFilter) ([]*audit.Record, error)

	Acquire(ctx context.Context, session, counter string, n, max int64) (current int64, ok bool, err error)
	Release(ctx context.Context, session, counter string, n int64) (current int64, err error)
	Counters(ctx context.Context, session string) (map[string]int64, error)
	LimitOverrides(ctx context.Context, session string) (map[string]int64, error)
	SetLimitOverride(ctx context.Context, session, counter string, max int64) error
	ResetSession(ctx context.Context, session string) error
	SessionStart(ctx context.Context, session string) (time.Time, error)
	GetSession(ctx context.Context, session string) (store.SessionInfo, error)
	SessionGenerations(ctx context.Context, base string, limit int) ([]store.SessionInfo, error)
}
