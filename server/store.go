package server

import (
	"context"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// Store is what the server needs of the store (every store.Store has it):
// what its pipeline needs, and for the surfaces the audit head and
// verification, the token lookup, the event relay between replicas and
// the group-commit counts its metrics show. The contracts are the store
// package's roles.
type Store interface {
	pipeline.Store
	store.Events

	AuditHead(ctx context.Context) (audit.Head, error)
	VerifyAudit(ctx context.Context) error
	CommitCounts() store.CommitCounts

	LookupToken(ctx context.Context, hash string) (*store.Token, error)
	TokenEpoch() (string, error)
}

// TokenStore is what CreateToken and EnsureAdminToken need of the store.
type TokenStore interface {
	CreateToken(ctx context.Context, t *store.Token) error
	ListTokens(ctx context.Context) ([]*store.Token, error)
}
