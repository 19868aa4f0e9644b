package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// CreateToken implements store.Store.
func (s *Store) CreateToken(ctx context.Context, t *store.Token) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	if err := store.CheckToken(t); err != nil {
		return fmt.Errorf("sqlite: create token: %w", err)
	}
	c := *t
	if c.ID == "" {
		c.ID = audit.NewID()
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = s.opts.Now()
	}
	c.CreatedAt = c.CreatedAt.UTC().Truncate(time.Microsecond)
	c.RevokedAt = time.Time{}
	res, err := s.w.ExecContext(ctx, `INSERT INTO tokens (id, hash, admin, agent, name, created_us) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`, c.ID, c.Hash, c.Admin, c.Agent, c.Name, c.CreatedAt.UnixMicro())
	if err != nil {
		return fmt.Errorf("sqlite: create token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sqlite: create token %s: %w: id or hash exists", c.ID, store.ErrConflict)
	}
	*t = c
	return nil
}

const selectToken = `SELECT id, hash, admin, agent, name, created_us, revoked_us FROM tokens`

func scanToken(row interface{ Scan(...any) error }) (*store.Token, error) {
	var (
		t                    store.Token
		createdUS, revokedUS int64
	)
	if err := row.Scan(&t.ID, &t.Hash, &t.Admin, &t.Agent, &t.Name, &createdUS, &revokedUS); err != nil {
		return nil, err
	}
	t.CreatedAt, t.RevokedAt = time.UnixMicro(createdUS).UTC(), timeOrZero(revokedUS)
	return &t, nil
}

// ListTokens implements store.Store.
func (s *Store) ListTokens(ctx context.Context) ([]*store.Token, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	rows, err := s.r.QueryContext(ctx, selectToken+` ORDER BY created_us ASC, id ASC`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tokens: %w", err)
	}
	defer rows.Close()
	var out []*store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list tokens: %w", err)
	}
	return out, nil
}

// RevokeToken implements store.Store.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: revoke token: %w", err)
	}
	defer tx.Rollback()
	var revoked int64
	err = tx.QueryRowContext(ctx, `SELECT revoked_us FROM tokens WHERE id = ?`, id).Scan(&revoked)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("sqlite: token %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: revoke token: %w", err)
	}
	if revoked != 0 {
		return fmt.Errorf("sqlite: token %s: %w: already revoked", id, store.ErrConflict)
	}
	now := s.opts.Now().UnixMicro()
	if now == 0 {
		now = 1
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tokens SET revoked_us = ? WHERE id = ?`, now, id); err != nil {
		return fmt.Errorf("sqlite: revoke token: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: revoke token: %w", err)
	}
	return nil
}

// LookupToken implements store.Store.
func (s *Store) LookupToken(ctx context.Context, hash string) (*store.Token, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	t, err := scanToken(s.lookupToken.QueryRowContext(ctx, hash))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: token: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: lookup token: %w", err)
	}
	return t, nil
}
