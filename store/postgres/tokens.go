package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
		return fmt.Errorf("postgres: create token: %w", err)
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
	tag, err := s.pool.Exec(ctx, `INSERT INTO tokens (id, hash, admin, agent, name, created_us) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT DO NOTHING`, c.ID, c.Hash, c.Admin, c.Agent, c.Name, c.CreatedAt.UnixMicro())
	if err != nil {
		return fmt.Errorf("postgres: create token: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("postgres: create token %s: %w: id or hash exists", c.ID, store.ErrConflict)
	}
	*t = c
	return nil
}

const selectToken = `SELECT id, hash, admin, agent, name, created_us, revoked_us FROM tokens`

func scanToken(row pgx.Row) (*store.Token, error) {
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
	rows, err := s.pool.Query(ctx, selectToken+` ORDER BY created_us ASC, id ASC`)
	if err != nil {
		return nil, fmt.Errorf("postgres: list tokens: %w", err)
	}
	defer rows.Close()
	var out []*store.Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list tokens: %w", err)
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
	now := s.opts.Now().UnixMicro()
	if now == 0 {
		now = 1
	}
	// One statement: the row lock makes a second revoke see the first.
	var revoked int64
	err = s.pool.QueryRow(ctx, `WITH old AS (SELECT id, revoked_us FROM tokens WHERE id = $1 FOR UPDATE),
		upd AS (UPDATE tokens SET revoked_us = $2 FROM old WHERE tokens.id = old.id AND old.revoked_us = 0)
		SELECT revoked_us FROM old`, id, now).Scan(&revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("postgres: token %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("postgres: revoke token: %w", err)
	}
	if revoked != 0 {
		return fmt.Errorf("postgres: token %s: %w: already revoked", id, store.ErrConflict)
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
	t, err := scanToken(s.pool.QueryRow(ctx, selectToken+` WHERE hash = $1 AND revoked_us = 0`, hash))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: token: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: lookup token: %w", err)
	}
	return t, nil
}

// TokenEpoch returns "": a revocation is seen by the next lookup, as the
// Postgres store keeps no cheap revocation epoch, so a server caches tokens
// only by time (server.Options.TokenCacheTTL).
func (s *Store) TokenEpoch() (string, error) { return "", nil }
