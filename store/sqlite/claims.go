package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/armory-dev/armory/store"
)

const selectClaim = `SELECT approval_id, holder, call_id, claimed_us, expires_us, state, resolved_by, resolved_us FROM run_claims`

// scanClaim reads one claim; nowUS decides Expired.
func scanClaim(row interface{ Scan(...any) error }, nowUS int64) (*store.RunClaim, error) {
	var (
		c                          store.RunClaim
		claimed, expires, resolved int64
		state                      string
	)
	if err := row.Scan(&c.ApprovalID, &c.Holder, &c.CallID, &claimed, &expires, &state, &c.ResolvedBy, &resolved); err != nil {
		return nil, err
	}
	c.State = store.RunState(state)
	c.ClaimedAt, c.Expires, c.ResolvedAt = timeOrZero(claimed), timeOrZero(expires), timeOrZero(resolved)
	c.Expired = c.State == store.RunRunning && expires <= nowUS
	return &c, nil
}

func leaseUS(ttl time.Duration) int64 { return max(ttl.Microseconds(), 1) }

// ClaimRun implements store.RunClaims. The check of the approval and the
// insert run in one write transaction (BEGIN IMMEDIATE), so exactly one
// caller across processes wins.
func (s *Store) ClaimRun(ctx context.Context, id, holder, callID string, ttl time.Duration) (*store.RunClaim, bool, error) {
	release, err := s.use()
	if err != nil {
		return nil, false, err
	}
	defer release()
	if err := store.CheckClaim(id, holder, callID, ttl, true); err != nil {
		return nil, false, fmt.Errorf("sqlite: claim run: %w", err)
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: claim run: %w", err)
	}
	defer tx.Rollback()
	now := s.opts.Now().UnixMicro()
	c, err := scanClaim(tx.QueryRowContext(ctx, selectClaim+` WHERE approval_id = ?`, id), now)
	if err == nil {
		return c, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, false, fmt.Errorf("sqlite: claim run: %w", err)
	}
	if err := checkRunnable(ctx, tx, id); err != nil {
		return nil, false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_claims (approval_id, holder, call_id, claimed_us, expires_us) VALUES (?, ?, ?, ?, ?)`,
		id, holder, callID, now, now+leaseUS(ttl)); err != nil {
		return nil, false, fmt.Errorf("sqlite: claim run: %w", err)
	}
	if c, err = scanClaim(tx.QueryRowContext(ctx, selectClaim+` WHERE approval_id = ?`, id), now); err != nil {
		return nil, false, fmt.Errorf("sqlite: claim run: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("sqlite: claim run: %w", err)
	}
	return c, true, nil
}

// checkRunnable returns nil iff approval id is approved and has no result.
func checkRunnable(ctx context.Context, tx *sql.Tx, id string) error {
	var (
		status string
		have   sql.NullString
	)
	err := tx.QueryRowContext(ctx, `SELECT status, result FROM approvals WHERE id = ?`, id).Scan(&status, &have)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: approval %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: claim run: %w", err)
	}
	if status != string(store.StatusApproved) || have.Valid {
		return fmt.Errorf("sqlite: approval %s: %w: status %s, result stored: %v", id, store.ErrConflict, status, have.Valid)
	}
	return nil
}

// RenewRun implements store.RunClaims.
func (s *Store) RenewRun(ctx context.Context, id, holder string, ttl time.Duration) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	if err := store.CheckClaim(id, holder, "", ttl, false); err != nil {
		return fmt.Errorf("sqlite: renew run: %w", err)
	}
	now := s.opts.Now().UnixMicro()
	res, err := s.w.ExecContext(ctx, `UPDATE run_claims SET expires_us = ? WHERE approval_id = ? AND holder = ? AND state = 'running'`,
		now+leaseUS(ttl), id, holder)
	if err != nil {
		return fmt.Errorf("sqlite: renew run: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	return s.claimLost(ctx, id, "renew run")
}

// claimLost explains why a claim could not be changed: ErrNotFound or
// ErrConflict.
func (s *Store) claimLost(ctx context.Context, id, op string) error {
	c, err := s.inspect(ctx, id)
	if err != nil {
		return err
	}
	return fmt.Errorf("sqlite: %s %s: %w: the claim is %s by %s", op, id, store.ErrConflict, c.State, c.Holder)
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
		return nil, fmt.Errorf("sqlite: interrupt run: %w: no resolver", store.ErrInvalid)
	}
	return s.resolve(ctx, id, "interrupt run", func(c *store.RunClaim) bool { return c.Expired }, store.RunInterrupted, resolver, result)
}

// resolve moves id's running claim to state (by resolvedBy) when ok accepts
// it, storing result as the approval's result, in one write transaction.
func (s *Store) resolve(ctx context.Context, id, op string, ok func(*store.RunClaim) bool, state store.RunState, resolvedBy string, result json.RawMessage) (*store.RunClaim, error) {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	defer tx.Rollback()
	now := s.opts.Now().UnixMicro()
	c, err := scanClaim(tx.QueryRowContext(ctx, selectClaim+` WHERE approval_id = ?`, id), now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: run claim %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if c.State != store.RunRunning || !ok(c) {
		return nil, fmt.Errorf("sqlite: %s %s: %w: the claim is %s by %s (expired: %v)", op, id, store.ErrConflict, c.State, c.Holder, c.Expired)
	}
	if err := checkRunnable(ctx, tx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE run_claims SET state = ?, resolved_by = ?, resolved_us = ? WHERE approval_id = ?`,
		string(state), resolvedBy, now, id); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE approvals SET result = ? WHERE id = ?`, string(result), id); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if c, err = scanClaim(tx.QueryRowContext(ctx, selectClaim+` WHERE approval_id = ?`, id), now); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: %s: %w", op, err)
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
	c, err := scanClaim(s.r.QueryRowContext(ctx, selectClaim+` WHERE approval_id = ?`, id), s.opts.Now().UnixMicro())
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: run claim %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: inspect run: %w", err)
	}
	return c, nil
}
