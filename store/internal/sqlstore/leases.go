package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/armory-dev/armory/store"
)

// Leases are measured by the backend's ClaimClock, as run claims are.

// selectLease reads a lease; now is the ClaimClock's expression (it decides
// Expired).
func selectLease(now string) string {
	return `SELECT name, holder, fence, acquired_us, expires_us, holder = '' OR expires_us <= ` + now + ` FROM leases WHERE name = ?`
}

func scanLease(row Row) (*store.Lease, error) {
	var (
		l                store.Lease
		acquired, expiry int64
	)
	if err := row.Scan(&l.Name, &l.Holder, &l.Fence, &acquired, &expiry, &l.Expired); err != nil {
		return nil, err
	}
	l.AcquiredAt, l.Expires = TimeOrZero(acquired), TimeOrZero(expiry)
	return &l, nil
}

// lease runs fn on name's lease, read (locked) in a write transaction, and
// returns the lease as it then stands; a lease never held is a final
// ErrNotFound unless create, which inserts a free one first.
func (c *Core) lease(ctx context.Context, op, name string, create bool, fn func(q Querier, now string, l *store.Lease) error) (*store.Lease, error) {
	var l *store.Lease
	now := c.c.Claims()
	err := c.tx(ctx, op, func(q Querier) (err error) {
		if create {
			if _, err := q.Exec(ctx, `INSERT INTO leases (name, holder, fence, acquired_us, expires_us) VALUES (?, '', 0, 0, 0)
				ON CONFLICT DO NOTHING`, name); err != nil {
				return err
			}
		}
		l, err = scanLease(q.QueryRow(ctx, selectLease(now)+c.c.ForUpdate, name))
		if noRows(err) {
			return final(c.errf("lease "+name, store.ErrNotFound))
		}
		if err != nil {
			return err
		}
		if err := fn(q, now, l); err != nil {
			return err
		}
		l, err = scanLease(q.QueryRow(ctx, selectLease(now), name))
		return err
	})
	return l, err
}

// AcquireLease implements store.Leases.
func (c *Core) AcquireLease(ctx context.Context, name, holder string, ttl time.Duration) (*store.Lease, bool, error) {
	if err := store.CheckLease(name, holder, ttl, true); err != nil {
		return nil, false, c.errf("acquire lease", err)
	}
	var won bool
	l, err := c.lease(ctx, "acquire lease", name, true, func(q Querier, now string, l *store.Lease) (err error) {
		switch {
		case l.Holder == holder && !l.Expired:
			_, err = q.Exec(ctx, `UPDATE leases SET expires_us = `+now+` + ? WHERE name = ?`, leaseUS(ttl), name)
		case l.Expired:
			_, err = q.Exec(ctx, `UPDATE leases SET holder = ?, fence = fence + 1, acquired_us = `+now+`, expires_us = `+now+` + ?
				WHERE name = ?`, holder, leaseUS(ttl), name)
		default:
			return nil
		}
		won = err == nil
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return l, won, nil
}

// held refuses a lease that holder does not hold.
func (c *Core) held(op string, l *store.Lease, holder string) error {
	if l.Holder != holder || holder == "" {
		return final(c.errf(op+" "+l.Name, fmt.Errorf("%w: the lease is held by %q", store.ErrConflict, l.Holder)))
	}
	return nil
}

// RenewLease implements store.Leases.
func (c *Core) RenewLease(ctx context.Context, name, holder string, ttl time.Duration) (*store.Lease, error) {
	if err := store.CheckLease(name, holder, ttl, true); err != nil {
		return nil, c.errf("renew lease", err)
	}
	return c.lease(ctx, "renew lease", name, false, func(q Querier, now string, l *store.Lease) error {
		if err := c.held("renew lease", l, holder); err != nil {
			return err
		}
		_, err := q.Exec(ctx, `UPDATE leases SET expires_us = `+now+` + ? WHERE name = ?`, leaseUS(ttl), name)
		return err
	})
}

// ReleaseLease implements store.Leases.
func (c *Core) ReleaseLease(ctx context.Context, name, holder string) error {
	if err := store.CheckLease(name, holder, 0, false); err != nil {
		return c.errf("release lease", err)
	}
	_, err := c.lease(ctx, "release lease", name, false, func(q Querier, now string, l *store.Lease) error {
		if err := c.held("release lease", l, holder); err != nil {
			return err
		}
		_, err := q.Exec(ctx, `UPDATE leases SET holder = '', expires_us = `+now+` WHERE name = ?`, name)
		return err
	})
	return err
}

// InspectLease implements store.Leases.
func (c *Core) InspectLease(ctx context.Context, name string) (*store.Lease, error) {
	return one(ctx, c, c.c.Read, "lease "+name, scanLease, selectLease(c.c.Claims()), name)
}
