package sqlstore

import (
	"context"
	"fmt"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// CreateToken implements store.Tokens.
func (c *Core) CreateToken(ctx context.Context, t *store.Token) error {
	if err := store.CheckToken(t); err != nil {
		return c.errf("create token", err)
	}
	tk := *t
	if tk.ID == "" {
		tk.ID = audit.NewID()
	}
	if tk.CreatedAt.IsZero() {
		tk.CreatedAt = c.c.Now()
	}
	tk.CreatedAt = tk.CreatedAt.UTC().Truncate(time.Microsecond)
	tk.RevokedAt = time.Time{}
	err := c.insert(ctx, "create token "+tk.ID, "id or hash exists", `INSERT INTO tokens (id, hash, admin, agent, name, created_us)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`, tk.ID, tk.Hash, tk.Admin, tk.Agent, tk.Name, tk.CreatedAt.UnixMicro())
	if err != nil {
		return err
	}
	*t = tk
	return nil
}

const selectToken = `SELECT id, hash, admin, agent, name, created_us, revoked_us FROM tokens`

// LookupTokenQuery is LookupToken's statement (SQLite prepares it: every
// authenticated request runs it).
const LookupTokenQuery = selectToken + ` WHERE hash = ? AND revoked_us = 0`

func scanToken(row Row) (*store.Token, error) {
	var (
		t                    store.Token
		createdUS, revokedUS int64
	)
	if err := row.Scan(&t.ID, &t.Hash, &t.Admin, &t.Agent, &t.Name, &createdUS, &revokedUS); err != nil {
		return nil, err
	}
	t.CreatedAt, t.RevokedAt = time.UnixMicro(createdUS).UTC(), TimeOrZero(revokedUS)
	return &t, nil
}

// ListTokens implements store.Tokens.
func (c *Core) ListTokens(ctx context.Context) ([]*store.Token, error) {
	return list(ctx, c, "list tokens", scanToken, selectToken+` ORDER BY created_us ASC, id ASC`)
}

// RevokeToken implements store.Tokens: the token's row is read (locked
// where the backend locks rows) and changed in one transaction, so a second
// revocation sees the first.
func (c *Core) RevokeToken(ctx context.Context, id string) error {
	now := c.nowUS()
	return c.tx(ctx, "revoke token", func(q Querier) error {
		var revoked int64
		if err := c.lockRow(ctx, q, "token "+id, `SELECT revoked_us FROM tokens WHERE id = ?`, id, &revoked); err != nil {
			return err
		}
		if revoked != 0 {
			return final(c.errf("token "+id, fmt.Errorf("%w: already revoked", store.ErrConflict)))
		}
		_, err := q.Exec(ctx, `UPDATE tokens SET revoked_us = ? WHERE id = ?`, now, id)
		return err
	})
}

// LookupToken implements store.Tokens.
func (c *Core) LookupToken(ctx context.Context, hash string) (*store.Token, error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return nil, err
	}
	defer release()
	t, err := scanToken(c.c.Read.QueryRow(ctx, LookupTokenQuery, hash))
	if noRows(err) {
		return nil, c.errf("token", store.ErrNotFound)
	}
	if err != nil {
		return nil, c.errf("lookup token", err)
	}
	return t, nil
}
