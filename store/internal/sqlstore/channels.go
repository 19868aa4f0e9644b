package sqlstore

import (
	"cmp"
	"context"
	"fmt"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// --- Channels

const selectChannel = `SELECT id, holder, creator, version, created_us, updated_us FROM channels`

func scanChannel(row Row) (*store.Channel, error) {
	var (
		ch       store.Channel
		cUS, uUS int64
	)
	if err := row.Scan(&ch.ID, &ch.Holder, &ch.Creator, &ch.Version, &cUS, &uUS); err != nil {
		return nil, err
	}
	ch.CreatedAt, ch.UpdatedAt = TimeOrZero(cUS), TimeOrZero(uUS)
	return &ch, nil
}

// ClaimChannel implements store.Channels: an insert that does nothing
// when the conversation exists, then a read, in one transaction.
func (c *Core) ClaimChannel(ctx context.Context, id, agent string) (*store.Channel, error) {
	if err := cmp.Or(store.CheckText("channel", id, store.MaxName, true), store.CheckText("agent", agent, store.MaxName, true)); err != nil {
		return nil, c.errf("claim channel", err)
	}
	var ch *store.Channel
	now := c.nowUS()
	err := c.tx(ctx, "claim channel", func(q Querier) error {
		if _, err := q.Exec(ctx, `INSERT INTO channels (id, holder, creator, version, created_us, updated_us) VALUES (?, ?, ?, 1, ?, ?) ON CONFLICT (id) DO NOTHING`,
			id, agent, agent, now, now); err != nil {
			return err
		}
		var err error
		ch, err = scanChannel(q.QueryRow(ctx, selectChannel+` WHERE id = ?`, id))
		return err
	})
	return ch, err
}

// GetChannel implements store.Channels.
func (c *Core) GetChannel(ctx context.Context, id string) (*store.Channel, error) {
	return one(ctx, c, c.c.Read, "channel "+id, scanChannel, selectChannel+` WHERE id = ?`, id)
}

// holderConflict is the error of a write by an agent that does not hold
// conversation id (read again in q's transaction to say who does).
func (c *Core) holderConflict(ctx context.Context, q Querier, id, from string) error {
	var holder string
	err := q.QueryRow(ctx, `SELECT holder FROM channels WHERE id = ?`, id).Scan(&holder)
	if noRows(err) {
		return final(c.errf("channel "+id, store.ErrNotFound))
	}
	if err != nil {
		return err
	}
	return final(c.errf("channel "+id, fmt.Errorf("%w: held by %s, not %s", store.ErrConflict, holder, from)))
}

// insertChannelMessage appends m (checked) in q's transaction.
func (c *Core) insertChannelMessage(ctx context.Context, q Querier, m *store.ChannelMessage, now int64) error {
	cm := *m
	cm.ID = audit.NewID()
	var seq int64
	if err := q.QueryRow(ctx, `INSERT INTO channel_messages (id, channel, from_agent, kind, body, to_agent, created_us) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`,
		cm.ID, cm.Channel, cm.From, cm.Kind, cm.Body, cm.To, now).Scan(&seq); err != nil {
		return err
	}
	cm.Seq, cm.CreatedAt = seq, TimeOrZero(now)
	*m = cm
	return nil
}

// HandoffChannel implements store.Channels: a conditional update of the
// holder and the message's insert in one transaction.
func (c *Core) HandoffChannel(ctx context.Context, m *store.ChannelMessage, to string) (*store.Channel, error) {
	if m != nil {
		m.To = to
	}
	if err := store.CheckChannelMessage(m); err != nil {
		return nil, c.errf("hand off channel", err)
	}
	if err := store.CheckText("handoff to", to, store.MaxName, true); err != nil {
		return nil, c.errf("hand off channel", err)
	}
	now := c.nowUS()
	var ch *store.Channel
	cm := *m
	err := c.tx(ctx, "hand off channel", func(q Querier) error {
		var err error
		ch, err = scanChannel(q.QueryRow(ctx, `UPDATE channels SET holder = ?, version = version + 1, updated_us = ? WHERE id = ? AND holder = ?
			RETURNING id, holder, creator, version, created_us, updated_us`, to, now, cm.Channel, cm.From))
		if noRows(err) {
			return c.holderConflict(ctx, q, cm.Channel, cm.From)
		}
		if err != nil {
			return err
		}
		return c.insertChannelMessage(ctx, q, &cm, now)
	})
	if err != nil {
		return nil, err
	}
	*m = cm
	return ch, nil
}

// AppendChannelMessage implements store.Channels: the holder is checked
// and the message inserted in one transaction.
func (c *Core) AppendChannelMessage(ctx context.Context, m *store.ChannelMessage) error {
	if err := store.CheckChannelMessage(m); err != nil {
		return c.errf("append channel message", err)
	}
	now := c.nowUS()
	cm := *m
	err := c.tx(ctx, "append channel message", func(q Querier) error {
		var holder string
		err := c.lockRow(ctx, q, "channel "+cm.Channel, `SELECT holder FROM channels WHERE id = ?`, cm.Channel, &holder)
		if err != nil {
			return err
		}
		if holder != cm.From {
			return final(c.errf("channel "+cm.Channel, fmt.Errorf("%w: held by %s, not %s", store.ErrConflict, holder, cm.From)))
		}
		return c.insertChannelMessage(ctx, q, &cm, now)
	})
	if err != nil {
		return err
	}
	*m = cm
	return nil
}

const selectChannelMessage = `SELECT seq, id, channel, from_agent, kind, body, to_agent, created_us FROM channel_messages`

func scanChannelMessage(row Row) (*store.ChannelMessage, error) {
	var (
		m   store.ChannelMessage
		cUS int64
	)
	if err := row.Scan(&m.Seq, &m.ID, &m.Channel, &m.From, &m.Kind, &m.Body, &m.To, &cUS); err != nil {
		return nil, err
	}
	m.CreatedAt = TimeOrZero(cUS)
	return &m, nil
}

// ChannelMessages implements store.Channels.
func (c *Core) ChannelMessages(ctx context.Context, id string, p store.Page) ([]*store.ChannelMessage, string, error) {
	after, err := seqAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf("channel messages", err)
	}
	if _, err := c.GetChannel(ctx, id); err != nil {
		return nil, "", err
	}
	return pageOf(ctx, c, "channel messages", scanChannelMessage, p, func(m *store.ChannelMessage) string { return seqCursor(m.Seq) },
		selectChannelMessage+` WHERE channel = ? AND seq > ? ORDER BY seq`, id, after)
}
