package sqlstore

import (
	"context"
	"encoding/json"

	"github.com/armory-dev/armory/store"
)

const selectPin = `SELECT server, tool, hash, definition, pinned_us, pending_hash, pending_def, pending_us FROM tool_pins`

func scanPin(row Row) (*store.ToolPin, error) {
	var (
		p                   store.ToolPin
		def, pdef           []byte
		pinnedUS, pendingUS int64
	)
	if err := row.Scan(&p.Server, &p.Tool, &p.Hash, &def, &pinnedUS, &p.PendingHash, &pdef, &pendingUS); err != nil {
		return nil, err
	}
	p.Definition, p.PinnedAt, p.PendingAt = rawOrNil(def), TimeOrZero(pinnedUS), TimeOrZero(pendingUS)
	p.PendingDefinition = rawOrNil(pdef)
	return &p, nil
}

// rawOrNil is b, nil when empty.
func rawOrNil(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(b)
}

// nonNil is b, or an empty (not NULL) value when nil.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ObservePin implements store.Pins: the insert (which does nothing when a
// pin exists) and the pending change run in one write transaction, and the
// primary key makes the first observer across processes pin.
func (c *Core) ObservePin(ctx context.Context, server, tool, hash string, def json.RawMessage) (*store.ToolPin, error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return nil, err
	}
	defer release()
	if err := store.CheckPin(server, tool, hash, def); err != nil {
		return nil, c.errf("observe pin", err)
	}
	now := max(c.c.Now().UnixMicro(), 1) // 0 reads back as "no time"
	var p *store.ToolPin
	err = c.c.Tx(ctx, func(q Querier) (err error) {
		if _, err := q.Exec(ctx, `INSERT INTO tool_pins (server, tool, hash, definition, pinned_us) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`, server, tool, hash, nonNil(def), now); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `UPDATE tool_pins SET pending_hash = ?, pending_def = ?, pending_us = ?
			WHERE server = ? AND tool = ? AND hash <> ? AND pending_hash <> ?`, hash, nonNil(def), now, server, tool, hash, hash); err != nil {
			return err
		}
		// Seeing the pinned definition again drops a pending change.
		if _, err := q.Exec(ctx, `UPDATE tool_pins SET pending_hash = '', pending_def = ?, pending_us = 0
			WHERE server = ? AND tool = ? AND hash = ? AND pending_hash <> ''`, []byte{}, server, tool, hash); err != nil {
			return err
		}
		p, err = scanPin(q.QueryRow(ctx, selectPin+` WHERE server = ? AND tool = ?`, server, tool))
		return err
	})
	if err != nil {
		return nil, c.errf("observe pin", err)
	}
	return p, nil
}

// ListPins implements store.Pins.
func (c *Core) ListPins(ctx context.Context, server string) ([]*store.ToolPin, error) {
	return list(ctx, c, "list pins", scanPin, selectPin+` WHERE CAST(? AS TEXT) = '' OR server = ? ORDER BY server, tool`, server, server)
}

// AcceptPin implements store.Pins.
func (c *Core) AcceptPin(ctx context.Context, server, tool, hash string) (*store.ToolPin, error) {
	var p *store.ToolPin
	err := c.tx(ctx, "accept pin", func(q Querier) (err error) {
		p, err = scanPin(q.QueryRow(ctx, selectPin+` WHERE server = ? AND tool = ?`+c.c.ForUpdate, server, tool))
		if noRows(err) {
			return final(c.errf("pin "+server+"/"+tool, store.ErrNotFound))
		}
		if err != nil {
			return err
		}
		if err := store.CheckAccept(p, hash); err != nil {
			return final(c.errf("accept pin "+server+"/"+tool, err))
		}
		if _, err := q.Exec(ctx, `UPDATE tool_pins SET hash = pending_hash, definition = pending_def, pinned_us = ?,
			pending_hash = '', pending_def = ?, pending_us = 0 WHERE server = ? AND tool = ?`, max(c.c.Now().UnixMicro(), 1), []byte{}, server, tool); err != nil {
			return err
		}
		p, err = scanPin(q.QueryRow(ctx, selectPin+` WHERE server = ? AND tool = ?`, server, tool))
		return err
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}
