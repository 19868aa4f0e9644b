package trail

import (
	"context"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Store is what the trail reads of the store's audit log (store.AuditLog):
// its records a page at a time, and its head.
type Store interface {
	ListAudit(ctx context.Context, f store.AuditFilter) ([]*audit.Record, error)
	AuditHead(ctx context.Context) (audit.Head, error)
}
