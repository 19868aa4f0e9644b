package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/armory-dev/armory/store"
)

// ClaimClock returns the SQL expression, without placeholders, of the
// current time in Unix µs by which run claims' leases are measured: one
// clock per backend (store.RunClaims). It is called once per operation.
type ClaimClock func() string

// selectClaim reads a claim; now is the ClaimClock's expression (it decides
// Expired).
func selectClaim(now string) string {
	return `SELECT approval_id, holder, call_id, claimed_us, expires_us, state, resolved_by, resolved_us,
	state = 'running' AND expires_us <= ` + now + ` FROM run_claims WHERE approval_id = ?`
}

func scanClaim(row Row) (*store.RunClaim, error) {
	var (
		c                          store.RunClaim
		claimed, expires, resolved int64
		state                      string
	)
	if err := row.Scan(&c.ApprovalID, &c.Holder, &c.CallID, &claimed, &expires, &state, &c.ResolvedBy, &resolved, &c.Expired); err != nil {
		return nil, err
	}
	c.State = store.RunState(state)
	c.ClaimedAt, c.Expires, c.ResolvedAt = TimeOrZero(claimed), TimeOrZero(expires), TimeOrZero(resolved)
	return &c, nil
}

// leaseUS is ttl in µs, at least 1.
func leaseUS(ttl time.Duration) int64 { return max(ttl.Microseconds(), 1) }

// lockApproval reads approval id's row for the transaction (locking it
// where the backend locks rows: every claim operation on one approval does
// this first, so they are serialized across processes). It fails with
// ErrNotFound for no such approval.
func (c *Core) lockApproval(ctx context.Context, q Querier, id string) error {
	var status string
	return c.lockRow(ctx, q, "approval "+id, `SELECT status FROM approvals WHERE id = ?`, id, &status)
}

// ClaimRun implements store.RunClaims. The check of the approval and the
// insert run in one write transaction, so exactly one caller across
// processes wins.
func (c *Core) ClaimRun(ctx context.Context, id, holder, callID string, ttl time.Duration) (*store.RunClaim, bool, error) {
	if err := store.CheckClaim(id, holder, callID, ttl, true); err != nil {
		return nil, false, c.errf("claim run", err)
	}
	var (
		cl  *store.RunClaim
		won bool
	)
	now := c.c.Claims()
	err := c.tx(ctx, "claim run", func(q Querier) (err error) {
		if err := c.lockApproval(ctx, q, id); err != nil {
			return err
		}
		cl, err = scanClaim(q.QueryRow(ctx, selectClaim(now), id))
		if err == nil || !noRows(err) {
			return err
		}
		if err := c.runnable(ctx, q, id, "claim run"); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `INSERT INTO run_claims (approval_id, holder, call_id, claimed_us, expires_us)
			SELECT ?, ?, ?, n, n + ? FROM (SELECT `+now+` AS n) t`, id, holder, callID, leaseUS(ttl)); err != nil {
			return err
		}
		won = true
		cl, err = scanClaim(q.QueryRow(ctx, selectClaim(now), id))
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return cl, won, nil
}

// RenewRun implements store.RunClaims.
func (c *Core) RenewRun(ctx context.Context, id, holder string, ttl time.Duration) error {
	release, err := c.c.Gate.Use()
	if err != nil {
		return err
	}
	defer release()
	if err := store.CheckClaim(id, holder, "", ttl, false); err != nil {
		return c.errf("renew run", err)
	}
	n, err := c.c.Write.Exec(ctx, `UPDATE run_claims SET expires_us = `+c.c.Claims()+` + ? WHERE approval_id = ? AND holder = ? AND state = 'running'`,
		leaseUS(ttl), id, holder)
	if err != nil {
		return c.errf("renew run", err)
	}
	if n == 1 {
		return nil
	}
	cl, err := c.inspect(ctx, id)
	if err != nil {
		return err
	}
	return c.errf("renew run "+id, fmt.Errorf("%w: the claim is %s by %s", store.ErrConflict, cl.State, cl.Holder))
}

// FinishRun implements store.RunClaims.
func (c *Core) FinishRun(ctx context.Context, id, holder string, result json.RawMessage) error {
	_, err := c.resolve(ctx, id, "finish run", func(cl *store.RunClaim) bool { return cl.Holder == holder }, store.RunFinished, "", result)
	return err
}

// InterruptRun implements store.RunClaims.
func (c *Core) InterruptRun(ctx context.Context, id, resolver string, result json.RawMessage) (*store.RunClaim, error) {
	if resolver == "" {
		return nil, c.errf("interrupt run", fmt.Errorf("%w: no resolver", store.ErrInvalid))
	}
	return c.resolve(ctx, id, "interrupt run", func(cl *store.RunClaim) bool { return cl.Expired }, store.RunInterrupted, resolver, result)
}

// resolve moves id's running claim to state (by resolvedBy) when ok accepts
// it, storing result as the approval's result, in one transaction that
// first reads (locks) the approval's row. It returns the claim as resolved.
func (c *Core) resolve(ctx context.Context, id, op string, ok func(*store.RunClaim) bool, state store.RunState, resolvedBy string, result json.RawMessage) (*store.RunClaim, error) {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	var cl *store.RunClaim
	now := c.c.Claims()
	err := c.tx(ctx, op, func(q Querier) (err error) {
		if err := c.lockApproval(ctx, q, id); err != nil {
			return err
		}
		cl, err = scanClaim(q.QueryRow(ctx, selectClaim(now), id))
		if noRows(err) {
			return final(c.errf("run claim "+id, store.ErrNotFound))
		}
		if err != nil {
			return err
		}
		if cl.State != store.RunRunning || !ok(cl) {
			return final(c.errf(op+" "+id, fmt.Errorf("%w: the claim is %s by %s (expired: %v)", store.ErrConflict, cl.State, cl.Holder, cl.Expired)))
		}
		if err := c.runnable(ctx, q, id, op); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `UPDATE run_claims SET state = ?, resolved_by = ?, resolved_us = `+now+` WHERE approval_id = ?`,
			string(state), resolvedBy, id); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `UPDATE approvals SET result = ? WHERE id = ?`, string(result), id); err != nil {
			return err
		}
		cl, err = scanClaim(q.QueryRow(ctx, selectClaim(now), id))
		return err
	})
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// InspectRun implements store.RunClaims.
func (c *Core) InspectRun(ctx context.Context, id string) (*store.RunClaim, error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return nil, err
	}
	defer release()
	return c.inspect(ctx, id)
}

func (c *Core) inspect(ctx context.Context, id string) (*store.RunClaim, error) {
	cl, err := scanClaim(c.c.Read.QueryRow(ctx, selectClaim(c.c.Claims()), id))
	if noRows(err) {
		return nil, c.errf("run claim "+id, store.ErrNotFound)
	}
	if err != nil {
		return nil, c.errf("inspect run", err)
	}
	return cl, nil
}
