package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/armory-dev/armory/store"
)

const selectPin = `SELECT server, tool, hash, definition, pinned_us, pending_hash, pending_def, pending_us FROM tool_pins`

func scanPin(row pgx.Row) (*store.ToolPin, error) {
	var (
		p                   store.ToolPin
		def, pdef           []byte
		pinnedUS, pendingUS int64
	)
	if err := row.Scan(&p.Server, &p.Tool, &p.Hash, &def, &pinnedUS, &p.PendingHash, &pdef, &pendingUS); err != nil {
		return nil, err
	}
	p.Definition, p.PinnedAt, p.PendingAt = rawOrNil(def), timeOrZero(pinnedUS), timeOrZero(pendingUS)
	p.PendingDefinition = rawOrNil(pdef)
	return &p, nil
}

func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// ObservePin implements store.Store. The insert-or-compare runs in one
// transaction; the primary key makes the first observer across processes pin
// (a concurrent insert waits for the first and then does nothing).
func (s *Store) ObservePin(ctx context.Context, server, tool, hash string, def json.RawMessage) (*store.ToolPin, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if err := store.CheckPin(server, tool, hash, def); err != nil {
		return nil, fmt.Errorf("postgres: observe pin: %w", err)
	}
	now := max(s.opts.Now().UnixMicro(), 1)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: observe pin: %w", err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `INSERT INTO tool_pins (server, tool, hash, definition, pinned_us) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING`, server, tool, hash, nonNil(def), now); err != nil {
		return nil, fmt.Errorf("postgres: observe pin: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE tool_pins SET pending_hash = $1, pending_def = $2, pending_us = $3
		WHERE server = $4 AND tool = $5 AND hash <> $6 AND pending_hash <> $7`, hash, nonNil(def), now, server, tool, hash, hash); err != nil {
		return nil, fmt.Errorf("postgres: observe pin: %w", err)
	}
	// Back to the pinned definition: the pending change is gone.
	if _, err := tx.Exec(ctx, `UPDATE tool_pins SET pending_hash = '', pending_def = '', pending_us = 0
		WHERE server = $1 AND tool = $2 AND hash = $3 AND pending_hash <> ''`, server, tool, hash); err != nil {
		return nil, fmt.Errorf("postgres: observe pin: %w", err)
	}
	p, err := scanPin(tx.QueryRow(ctx, selectPin+` WHERE server = $1 AND tool = $2`, server, tool))
	if err != nil {
		return nil, fmt.Errorf("postgres: observe pin: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: observe pin: %w", err)
	}
	return p, nil
}

// ListPins implements store.Store.
func (s *Store) ListPins(ctx context.Context, server string) ([]*store.ToolPin, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	rows, err := s.pool.Query(ctx, selectPin+` WHERE $1 = '' OR server = $1 ORDER BY server, tool`, server)
	if err != nil {
		return nil, fmt.Errorf("postgres: list pins: %w", err)
	}
	defer rows.Close()
	var out []*store.ToolPin
	for rows.Next() {
		p, err := scanPin(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: list pins: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: list pins: %w", err)
	}
	return out, nil
}

// AcceptPin implements store.Store.
func (s *Store) AcceptPin(ctx context.Context, server, tool, hash string) (*store.ToolPin, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("postgres: accept pin: %w", err)
	}
	defer tx.Rollback(ctx)
	p, err := scanPin(tx.QueryRow(ctx, selectPin+` WHERE server = $1 AND tool = $2 FOR UPDATE`, server, tool))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("postgres: pin %s/%s: %w", server, tool, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: accept pin: %w", err)
	}
	if err := store.CheckAccept(p, hash); err != nil {
		return nil, fmt.Errorf("postgres: accept pin %s/%s: %w", server, tool, err)
	}
	now := max(s.opts.Now().UnixMicro(), 1)
	if _, err := tx.Exec(ctx, `UPDATE tool_pins SET hash = pending_hash, definition = pending_def, pinned_us = $1,
		pending_hash = '', pending_def = '', pending_us = 0 WHERE server = $2 AND tool = $3`, now, server, tool); err != nil {
		return nil, fmt.Errorf("postgres: accept pin: %w", err)
	}
	if p, err = scanPin(tx.QueryRow(ctx, selectPin+` WHERE server = $1 AND tool = $2`, server, tool)); err != nil {
		return nil, fmt.Errorf("postgres: accept pin: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("postgres: accept pin: %w", err)
	}
	return p, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
