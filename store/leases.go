package store

import (
	"context"
	"fmt"
	"time"
)

// Leases are named, time-bounded leases, the general form of run claims
// (RunClaims): one holder at a time across every process sharing the
// database (the replica that fires the timers, for one), and a holder that
// dies loses its lease when the lease expires, so another takes over.
//
// Lease times are measured by the backend's lease clock, as run claims'
// are: the SQLite store's clock, the Postgres server's clock. Every call is
// one transaction, atomic with respect to every other Store.
type Leases interface {
	// AcquireLease gives name to holder for ttl from now iff the lease is
	// free (never held, released or expired) or already holder's (then it
	// is renewed). It returns the lease as it now stands and whether
	// holder holds it. Errors: ErrInvalid (empty or oversized name or
	// holder, ttl ≤ 0).
	AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (l *Lease, won bool, err error)
	// RenewLease extends holder's lease on name to ttl from now, even past
	// its expiry as long as no one else took it. Errors: ErrNotFound (never
	// held), ErrConflict (holder does not hold it), ErrInvalid.
	RenewLease(ctx context.Context, name, holder string, ttl time.Duration) (*Lease, error)
	// ReleaseLease frees holder's lease on name at once. Errors:
	// ErrNotFound (never held), ErrConflict (holder does not hold it).
	ReleaseLease(ctx context.Context, name, holder string) error
	// InspectLease returns the lease on name (Holder "" when released), or
	// ErrNotFound.
	InspectLease(ctx context.Context, name string) (*Lease, error)
}

// Lease is a named lease.
type Lease struct {
	Name   string `json:"name"`
	Holder string `json:"holder"` // "" when released
	// Fence grows by one whenever the lease passes to a new term (a new
	// holder, or the same after a release or expiry): a fencing token.
	Fence      int64     `json:"fence"`
	AcquiredAt time.Time `json:"acquired_at"`
	Expires    time.Time `json:"expires"`
	// Expired reports whether, when read, the lease had ended (by the
	// backend's clock) or was released: AcquireLease would give it away.
	Expired bool `json:"expired"`
}

// CheckLease validates the arguments of AcquireLease and RenewLease (ttl
// ≤ 0 is not checked when !needTTL); backends call it.
func CheckLease(name, holder string, ttl time.Duration, needTTL bool) error {
	if needTTL && ttl <= 0 {
		return fmt.Errorf("%w: a lease must be positive, got %s", ErrInvalid, ttl)
	}
	return checkAll(CheckText("lease name", name, MaxName, true), CheckText("lease holder", holder, MaxName, true))
}
