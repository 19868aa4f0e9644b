package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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

// RevokeToken implements store.Store. Besides the database it replaces
// the token epoch file (TokenEpoch) before and after the revocation, so that
// servers caching tokens by epoch notice it at their next request. If the
// file cannot be replaced beforehand nothing is revoked; if only the second
// replacement fails the token is revoked in the store and the error says
// that caching servers may not have noticed.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	if err := s.bumpTokenEpoch(); err != nil {
		return fmt.Errorf("sqlite: revoke token: %w", err)
	}
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
	if err := s.bumpTokenEpoch(); err != nil {
		return fmt.Errorf("sqlite: token %s is revoked in the store, but servers that cache tokens may not have noticed (restart them): %w", id, err)
	}
	return nil
}

// TokenEpoch returns a value that changes whenever a token of this
// database is revoked (by any process, through RevokeToken): the content of
// the token epoch file next to the database, a random value that every
// revocation replaces (a file's inode and time could repeat). Reading it is
// an open and a read of a few bytes, for servers that cache tokens: a
// cached token stays valid while the epoch it was read under is current
// (server.tokenCache).
func (s *Store) TokenEpoch() (string, error) {
	f, err := os.Open(s.tokenEpochFile)
	if errors.Is(err, os.ErrNotExist) {
		return "none", nil
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: token epoch: %w", err)
	}
	defer f.Close()
	var b [64]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("sqlite: token epoch: %w", err)
	}
	if n == 0 {
		return "", fmt.Errorf("sqlite: token epoch: %s is empty", s.tokenEpochFile)
	}
	return string(b[:n]), nil
}

// bumpTokenEpoch replaces the token epoch file with a new random value,
// atomically (rename).
func (s *Store) bumpTokenEpoch() error {
	f, err := os.CreateTemp(filepath.Dir(s.tokenEpochFile), filepath.Base(s.tokenEpochFile)+".*")
	if err != nil {
		return fmt.Errorf("token epoch: %w", err)
	}
	_, werr := f.WriteString(rand.Text())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), s.tokenEpochFile)
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("token epoch: %w", werr)
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
