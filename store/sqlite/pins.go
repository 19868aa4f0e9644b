package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/armory-dev/armory/store"
)

const selectPin = `SELECT server, tool, hash, definition, pinned_us, pending_hash, pending_def, pending_us FROM tool_pins`

func scanPin(row interface{ Scan(...any) error }) (*store.ToolPin, error) {
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
// write transaction, so the first observer across processes pins.
func (s *Store) ObservePin(ctx context.Context, server, tool, hash string, def json.RawMessage) (*store.ToolPin, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if err := store.CheckPin(server, tool, hash, def); err != nil {
		return nil, fmt.Errorf("sqlite: observe pin: %w", err)
	}
	now := max(s.opts.Now().UnixMicro(), 1)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: observe pin: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO tool_pins (server, tool, hash, definition, pinned_us) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT DO NOTHING`, server, tool, hash, nonNil(def), now); err != nil {
		return nil, fmt.Errorf("sqlite: observe pin: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE tool_pins SET pending_hash = ?, pending_def = ?, pending_us = ?
		WHERE server = ? AND tool = ? AND hash <> ? AND pending_hash <> ?`, hash, nonNil(def), now, server, tool, hash, hash); err != nil {
		return nil, fmt.Errorf("sqlite: observe pin: %w", err)
	}
	// Back to the pinned definition: the pending change is gone.
	if _, err := tx.ExecContext(ctx, `UPDATE tool_pins SET pending_hash = '', pending_def = x'', pending_us = 0
		WHERE server = ? AND tool = ? AND hash = ? AND pending_hash <> ''`, server, tool, hash); err != nil {
		return nil, fmt.Errorf("sqlite: observe pin: %w", err)
	}
	p, err := scanPin(tx.QueryRowContext(ctx, selectPin+` WHERE server = ? AND tool = ?`, server, tool))
	if err != nil {
		return nil, fmt.Errorf("sqlite: observe pin: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: observe pin: %w", err)
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
	rows, err := s.r.QueryContext(ctx, selectPin+` WHERE ? = '' OR server = ? ORDER BY server, tool`, server, server)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list pins: %w", err)
	}
	defer rows.Close()
	var out []*store.ToolPin
	for rows.Next() {
		p, err := scanPin(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list pins: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list pins: %w", err)
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
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlite: accept pin: %w", err)
	}
	defer tx.Rollback()
	p, err := scanPin(tx.QueryRowContext(ctx, selectPin+` WHERE server = ? AND tool = ?`, server, tool))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlite: pin %s/%s: %w", server, tool, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: accept pin: %w", err)
	}
	if err := store.CheckAccept(p, hash); err != nil {
		return nil, fmt.Errorf("sqlite: accept pin %s/%s: %w", server, tool, err)
	}
	now := max(s.opts.Now().UnixMicro(), 1)
	if _, err := tx.ExecContext(ctx, `UPDATE tool_pins SET hash = pending_hash, definition = pending_def, pinned_us = ?,
		pending_hash = '', pending_def = x'', pending_us = 0 WHERE server = ? AND tool = ?`, now, server, tool); err != nil {
		return nil, fmt.Errorf("sqlite: accept pin: %w", err)
	}
	if p, err = scanPin(tx.QueryRowContext(ctx, selectPin+` WHERE server = ? AND tool = ?`, server, tool)); err != nil {
		return nil, fmt.Errorf("sqlite: accept pin: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("sqlite: accept pin: %w", err)
	}
	return p, nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
