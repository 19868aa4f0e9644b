package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/armory-dev/armory/store"
)

// dbNowUS is the database server's clock in microseconds: every lease is
// measured by it, so replicas on machines whose clocks disagree still agree
// on which leases have expired.
const dbNowUS = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

const selectClaim = `SELECT approval_id, holder, call_id, claimed_us, expires_us, state, resolved_by, resolved_us,
	state = 'running' AND expires_us <= ` + dbNowUS + ` FROM run_claims`

func scanClaim(row pgx.Row) (*store.RunClaim, error) {
	var (
		c                          store.RunClaim
		claimed, expires, resolved int64
		state                      string
	)
	if err := row.Scan(&c.ApprovalID, &c.Holder, &c.CallID, &claimed, &expires, &state, &c.ResolvedBy, &resolved, &c.Expired); err != nil {
		return nil, err
	}
	c.State = store.RunState(state)
	c.ClaimedAt, c.Expires, c.ResolvedAt = timeOrZero(claimed), timeOrZero(expires), timeOrZero(resolved)
	return &c, nil
}

func leaseUS(ttl time.Duration) int64 { return max(ttl.Microseconds(), 1) }

// lockApproval locks approval id's row for the transaction (every claim
// operation on one approval takes this lock first, so they are serialized
// across processes) and returns nil iff it is approved with no result.
// runnable false skips the status check (the lock is still taken).
func lockApproval(ctx context.Context, tx pgx.Tx, id, op string, runnable bool) error {
	var (
		status string
		have   *string
	)
	err := tx.QueryRow(ctx, `SELECT status, result FROM approvals WHERE id = $1 FOR UPDATE`, id).Scan(&status, &have)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: approval %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("postgres: %s: %w", op, err)
	}
	if runnable && (status != string(store.StatusApproved) || have != nil) {
		return fmt.Errorf("postgres: %s %s: %w: status %s, result stored: %v", op, id, store.ErrConflict, status, have != nil)
	}
	return nil
}

// ClaimRun implements store.RunClaims.
func (s *Store) ClaimRun(ctx context.Context, id, holder, callID string, ttl time.Duration) (*store.RunClaim, bool, error) {
	release, err := s.use()
	if err != nil {
		return nil, false, err
	}
	defer release()
	if err := store.CheckClaim(id, holder, callID, ttl, true); err != nil {
		return nil, false, fmt.Errorf("postgres: claim run: %w", err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("postgres: claim run: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := lockApproval(ctx, tx, id, "claim run", false); err != nil {
		return nil, false, err
	}
	c, err := scanClaim(tx.QueryRow(ctx, selectClaim+` WHERE approval_id = $1`, id))
	if err == nil {
		return c, false, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("postgres: claim run: %w", err)
	}
	if err := lockApproval(ctx, tx, id, "claim run", true); err != nil {
		return nil, false, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO run_claims (approval_id, holder, call_id, claimed_us, expires_us)
		SELECT $1, $2, $3, n, n + $4 FROM (SELECT `+dbNowUS+` AS n) t`, id, holder, callID, leaseUS(ttl)); err != nil {
		return nil, false, fmt.Errorf("postgres: claim run: %w", err)
	}
	if c, err = scanClaim(tx.QueryRow(ctx, selectClaim+` WHERE approval_id = $1`, id)); err != nil {
		return nil, false, fmt.Errorf("postgres: claim run: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("postgres: claim run: %w", err)
	}
	return c, true, nil
}

// RenewRun implements store.RunClaims.
func (s *Store) RenewRun(ctx context.Context, id, holder string, ttl time.Duration) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	if err := store.CheckClaim(id, holder, "", ttl, false); err != nil {
		return fmt.Errorf("postgres: renew run: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE run_claims SET expires_us = `+dbNowUS+` + $1 WHERE approval_id = $2 AND holder = $3 AND state = 'running'`,
		leaseUS(ttl), id, holder)
	if err != nil {
		return fmt.Errorf("postgres: renew run: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	c, err := s.inspect(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("postgres: renew run %s: %w: the claim is %s by %s", id, store.ErrConflict, c.State, c.Holder)
}

// FinishRun implements store.RunClaims.
func (s *Store) FinishRun(ctx context.Context, id, holder string, result json.RawMessage) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	_, err = s.resolve(ctx, id, "finish run", func(c *store.RunClaim) bool { return c.Holder == holder }, store.RunFinished, "", result)
	return err
}

// InterruptRun implements store.RunClaims.
func (s *Store) InterruptRun(ctx context.Context, id, resolver string, result json.RawMessage) (*store.RunClaim, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if resolver == "" {
		return nil, fmt.Errorf("postgres: interrupt run: %w: no resolver", store.ErrInvalid)
	}
	return s.resolve(ctx, id, "interrupt run", func(c *store.RunClaim) bool { return c.Expired }, store.RunInterrupted, resolver, result)
}

// resolve moves id's running claim to state (by resolvedBy) when ok accepts
// it, storing result as the approval's result, in one transaction under
// the approval's row lock. It returns the claim as resolved.
func (s *Store) resolve(ctx context.Context, id, op string, ok func(*store.RunClaim) bool, state store.RunState, resolvedBy string, result json.RawMessage) (*store.RunClaim, error) {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	defer tx.Rollback(ctx)
	if err := lockApproval(ctx, tx, id, op, false); err != nil {
		return nil, err
	}
	c, err := scanClaim(tx.QueryRow(ctx, selectClaim+` WHERE approval_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: run claim %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if c.State != store.RunRunning || !ok(c) {
		return nil, fmt.Errorf("postgres: %s %s: %w: the claim is %s by %s (expired: %v)", op, id, store.ErrConflict, c.State, c.Holder, c.Expired)
	}
	if err := lockApproval(ctx, tx, id, op, true); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `UPDATE run_claims SET state = $1, resolved_by = $2, resolved_us = `+dbNowUS+` WHERE approval_id = $3`,
		string(state), resolvedBy, id); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if _, err := tx.Exec(ctx, `UPDATE approvals SET result = $1 WHERE id = $2`, string(result), id); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if c, err = scanClaim(tx.QueryRow(ctx, selectClaim+` WHERE approval_id = $1`, id)); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: %s: %w", op, err)
	}
	return c, nil
}

// InspectRun implements store.RunClaims.
func (s *Store) InspectRun(ctx context.Context, id string) (*store.RunClaim, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	return s.inspect(ctx, id)
}

func (s *Store) inspect(ctx context.Context, id string) (*store.RunClaim, error) {
	c, err := scanClaim(s.pool.QueryRow(ctx, selectClaim+` WHERE approval_id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: run claim %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: inspect run: %w", err)
	}
	return c, nil
}
