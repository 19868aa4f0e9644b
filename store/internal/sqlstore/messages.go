package sqlstore

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// chunk bounds the rows of one multi-row statement (SendMessages,
// AckMessages, CreateChat's members): well under both dialects' limits on
// placeholders, and few enough statements for a batch of MaxBatch.
const chunk = 100

// placeholders returns n groups of cols placeholders, comma-separated.
func placeholders(cols, n int) string {
	row := "(?" + strings.Repeat(", ?", cols-1) + ")"
	return row + strings.Repeat(", "+row, n-1)
}

// inChunks calls fn with consecutive slices of at most chunk items.
func inChunks[T any](items []T, fn func([]T) error) error {
	for len(items) > 0 {
		n := min(len(items), chunk)
		if err := fn(items[:n]); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

// --- Inboxes

const selectMessage = `SELECT seq, id, to_agent, from_agent, kind, subject, body, reply_to, chat, created_us, acked_us FROM messages`

// The statements of a syscall.ask round trip (the ask sent, the message
// read by the replier, the reply sent with the ask acknowledged, the reply
// taken by the asker): HotReads and HotWrites list them for a backend that
// keeps them prepared.
const (
	insertMessagePrefix = `INSERT INTO messages (id, to_agent, from_agent, kind, subject, body, reply_to, chat, created_us)
				VALUES `
	getMessageQuery = selectMessage + ` WHERE id = ?`
	takeReplyQuery  = `UPDATE messages
		SET acked_us = CASE WHEN acked_us = 0 THEN ? ELSE acked_us END
		WHERE id = (SELECT id FROM messages WHERE reply_to = ? AND reply_to <> '' AND kind = 'reply' AND to_agent = ? ORDER BY seq LIMIT 1)
		RETURNING seq, id, to_agent, from_agent, kind, subject, body, reply_to, chat, created_us, acked_us`
	sendReplyQuery = `INSERT INTO messages (id, to_agent, from_agent, kind, subject, body, reply_to, chat, created_us)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING seq`
	ackAnsweredQuery = `UPDATE messages SET acked_us = ? WHERE id = ? AND to_agent = ? AND acked_us = 0`
)

// sendMessagesQuery is SendMessages' insert of n rows.
func sendMessagesQuery(n int) string {
	return insertMessagePrefix + placeholders(9, n) + ` RETURNING id, seq`
}

// sendMessageQuery is sendMessagesQuery(1), built once: a hot statement.
var sendMessageQuery = sendMessagesQuery(1)

func scanMessage(row Row) (*store.Message, error) {
	var (
		m                  store.Message
		createdUS, ackedUS int64
	)
	if err := row.Scan(&m.Seq, &m.ID, &m.To, &m.From, &m.Kind, &m.Subject, &m.Body, &m.ReplyTo, &m.Chat, &createdUS, &ackedUS); err != nil {
		return nil, err
	}
	m.CreatedAt, m.AckedAt = TimeOrZero(createdUS), TimeOrZero(ackedUS)
	return &m, nil
}

// SendMessages implements store.Inboxes: every message in one write
// transaction, in multi-row inserts of up to chunk rows.
func (c *Core) SendMessages(ctx context.Context, msgs []*store.Message) error {
	if len(msgs) > store.MaxBatch {
		return c.errf("send messages", fmt.Errorf("%w: %d messages; the limit is %d", store.ErrInvalid, len(msgs), store.MaxBatch))
	}
	for _, m := range msgs {
		if err := store.CheckMessage(m); err != nil {
			return c.errf("send messages", err)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	now := c.nowUS()
	ids := make([]string, len(msgs))
	for i := range ids {
		ids[i] = audit.NewID()
	}
	seqs := make(map[string]int64, len(msgs))
	args := make([]any, 0, 9*chunk)
	err := c.tx(ctx, "send messages", func(q Querier) error {
		for start := 0; start < len(msgs); start += chunk {
			part := msgs[start:min(start+chunk, len(msgs))]
			args = args[:0]
			for i, m := range part {
				args = append(args, ids[start+i], m.To, m.From, m.Kind, m.Subject, m.Body, m.ReplyTo, m.Chat, now)
			}
			got, err := collect(ctx, q, func(r Row) (kv struct {
				id  string
				seq int64
			}, err error) {
				return kv, r.Scan(&kv.id, &kv.seq)
			}, sendMessagesQuery(len(part)), args...)
			if err != nil {
				return err
			}
			for _, kv := range got {
				seqs[kv.id] = kv.seq
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i, m := range msgs {
		m.ID, m.Seq, m.CreatedAt, m.AckedAt = ids[i], seqs[ids[i]], TimeOrZero(now), time.Time{}
	}
	return nil
}

// ReadInbox implements store.Inboxes.
func (c *Core) ReadInbox(ctx context.Context, iq store.InboxQuery) ([]*store.Message, string, error) {
	after, err := seqAfter(iq.Cursor)
	if err != nil {
		return nil, "", c.errf("read inbox", err)
	}
	var w filter
	w.add("to_agent = ?", iq.Agent)
	w.add("seq > ?", after)
	if !iq.Since.IsZero() {
		w.add("created_us >= ?", iq.Since.UnixMicro())
	}
	if iq.Unacked {
		w.conds = append(w.conds, "acked_us = 0")
	}
	return pageOf(ctx, c, "read inbox", scanMessage, iq.Page, func(m *store.Message) string { return seqCursor(m.Seq) },
		selectMessage+w.where()+` ORDER BY seq`, w.args...)
}

// AckMessages implements store.Inboxes: one transaction, and only rows of
// agent's inbox are touched.
func (c *Core) AckMessages(ctx context.Context, agent string, ids []string) (int, error) {
	if len(ids) > store.MaxBatch {
		return 0, c.errf("ack messages", fmt.Errorf("%w: %d ids; the limit is %d", store.ErrInvalid, len(ids), store.MaxBatch))
	}
	if len(ids) == 0 {
		return 0, nil
	}
	now, acked := c.nowUS(), 0
	err := c.tx(ctx, "ack messages", func(q Querier) error {
		acked = 0
		return inChunks(ids, func(part []string) error {
			args := []any{now, agent}
			for _, id := range part {
				args = append(args, id)
			}
			n, err := q.Exec(ctx, `UPDATE messages SET acked_us = ? WHERE to_agent = ? AND acked_us = 0 AND id IN (?`+
				strings.Repeat(", ?", len(part)-1)+`)`, args...)
			acked += int(n)
			return err
		})
	})
	return acked, err
}

// GetMessage implements store.Inboxes.
func (c *Core) GetMessage(ctx context.Context, id string) (*store.Message, error) {
	return one(ctx, c, c.c.Read, "message "+id, scanMessage, getMessageQuery, id)
}

// FindReply implements store.Inboxes.
func (c *Core) FindReply(ctx context.Context, askID string) (*store.Message, error) {
	return one(ctx, c, c.c.Read, "reply to "+askID, scanMessage, selectMessage+
		` WHERE reply_to = ? AND reply_to <> '' AND kind = 'reply' ORDER BY seq LIMIT 1`, askID)
}

// TakeReply implements store.Inboxes: one UPDATE … RETURNING on the
// writer, which writes nothing when there is no reply yet.
func (c *Core) TakeReply(ctx context.Context, agent, askID string) (*store.Message, error) {
	return one(ctx, c, c.c.Write, "reply to "+askID, scanMessage, takeReplyQuery, c.nowUS(), askID, agent)
}

// SendReply implements store.Inboxes: the reply's insert and the
// acknowledgement of the message answered in one transaction.
func (c *Core) SendReply(ctx context.Context, rep *store.Message) error {
	if err := store.CheckMessage(rep); err != nil {
		return c.errf("send reply", err)
	}
	if rep.Kind != store.KindReply || rep.ReplyTo == "" {
		return c.errf("send reply", fmt.Errorf("%w: a reply needs kind %q and reply_to", store.ErrInvalid, store.KindReply))
	}
	now, id := c.nowUS(), audit.NewID()
	var seq int64
	err := c.tx(ctx, "send reply", func(q Querier) error {
		if err := q.QueryRow(ctx, sendReplyQuery,
			id, rep.To, rep.From, rep.Kind, rep.Subject, rep.Body, rep.ReplyTo, rep.Chat, now).Scan(&seq); err != nil {
			return err
		}
		_, err := q.Exec(ctx, ackAnsweredQuery, now, rep.ReplyTo, rep.From)
		return err
	})
	if err != nil {
		return err
	}
	rep.ID, rep.Seq, rep.CreatedAt, rep.AckedAt = id, seq, TimeOrZero(now), time.Time{}
	return nil
}

// --- Chats

const selectChat = `SELECT seq, id, name, creator, gated, created_us FROM chats`

type chatRow struct {
	seq int64
	*store.Chat
}

func scanChat(row Row) (chatRow, error) {
	var (
		ch       store.Chat
		seq, cUS int64
	)
	if err := row.Scan(&seq, &ch.ID, &ch.Name, &ch.Creator, &ch.Gated, &cUS); err != nil {
		return chatRow{}, err
	}
	ch.CreatedAt = TimeOrZero(cUS)
	return chatRow{seq, &ch}, nil
}

// CreateChat implements store.Chats.
func (c *Core) CreateChat(ctx context.Context, ch *store.Chat) error {
	if ch == nil {
		return c.errf("create chat", store.CheckChat(ch))
	}
	cc := *ch
	if cc.ID == "" {
		cc.ID = audit.NewID()
	}
	if err := store.CheckChat(&cc); err != nil {
		return c.errf("create chat", err)
	}
	cc.Members = slices.Compact(slices.Sorted(slices.Values(cc.Members)))
	now := c.nowUS()
	cc.CreatedAt = TimeOrZero(now)
	err := c.tx(ctx, "create chat", func(q Querier) error {
		n, err := q.Exec(ctx, `INSERT INTO chats (id, name, creator, gated, created_us) VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
			cc.ID, cc.Name, cc.Creator, cc.Gated, now)
		if err != nil {
			return err
		}
		if n == 0 {
			return final(c.errf("create chat "+cc.ID, fmt.Errorf("%w: chat exists", store.ErrConflict)))
		}
		return inChunks(cc.Members, func(part []string) error {
			args := make([]any, 0, 3*len(part))
			for _, m := range part {
				args = append(args, cc.ID, m, now)
			}
			_, err := q.Exec(ctx, `INSERT INTO chat_members (chat, agent, added_us) VALUES `+placeholders(3, len(part)), args...)
			return err
		})
	})
	if err != nil {
		return err
	}
	if cc.Members == nil {
		cc.Members = []string{}
	}
	*ch = cc
	return nil
}

// GetChat implements store.Chats: the chat and its members from one
// snapshot.
func (c *Core) GetChat(ctx context.Context, id string) (*store.Chat, error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return nil, err
	}
	defer release()
	var ch chatRow
	err = c.c.Snapshot(ctx, func(q Querier) (err error) {
		ch, err = scanChat(q.QueryRow(ctx, selectChat+` WHERE id = ?`, id))
		if err != nil {
			return err
		}
		ch.Members, err = collect(ctx, q, func(r Row) (m string, err error) { return m, r.Scan(&m) },
			`SELECT agent FROM chat_members WHERE chat = ? ORDER BY agent`, id)
		return err
	})
	if noRows(err) {
		return nil, c.errf("chat "+id, store.ErrNotFound)
	}
	if err != nil {
		return nil, c.errf("get chat", err)
	}
	if ch.Members == nil {
		ch.Members = []string{}
	}
	return ch.Chat, nil
}

// ListChats implements store.Chats. The chats come without their members
// (a page of chats of up to MaxBatch members each would be unbounded):
// GetChat has them.
func (c *Core) ListChats(ctx context.Context, member string, p store.Page) ([]*store.Chat, string, error) {
	after, err := seqAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf("list chats", err)
	}
	rows, next, err := pageOf(ctx, c, "list chats", scanChat, p, func(r chatRow) string { return seqCursor(r.seq) },
		selectChat+` WHERE seq > ? AND (CAST(? AS TEXT) = '' OR id IN (SELECT chat FROM chat_members WHERE agent = ?)) ORDER BY seq`,
		after, member, member)
	out := make([]*store.Chat, len(rows))
	for i, r := range rows {
		out[i] = r.Chat
	}
	return out, next, err
}

// AddChatMember implements store.Chats: the chat's row is read (locked
// where rows are locked), its members counted and the member added in one
// transaction.
func (c *Core) AddChatMember(ctx context.Context, chat, agent string) (bool, error) {
	if err := store.CheckText("member", agent, store.MaxName, true); err != nil {
		return false, c.errf("add chat member", err)
	}
	var added bool
	err := c.tx(ctx, "add chat member", func(q Querier) error {
		var seq int64
		if err := c.lockRow(ctx, q, "chat "+chat, `SELECT seq FROM chats WHERE id = ?`, chat, &seq); err != nil {
			return err
		}
		var n int
		if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM chat_members WHERE chat = ?`, chat).Scan(&n); err != nil {
			return err
		}
		if n >= store.MaxBatch {
			return final(c.errf("add chat member", fmt.Errorf("%w: chat %s has %d members; the limit is %d", store.ErrInvalid, chat, n, store.MaxBatch)))
		}
		k, err := q.Exec(ctx, `INSERT INTO chat_members (chat, agent, added_us) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, chat, agent, c.nowUS())
		added = k == 1
		return err
	})
	return added, err
}

// RemoveChatMember implements store.Chats.
func (c *Core) RemoveChatMember(ctx context.Context, chat, agent string) (bool, error) {
	var removed bool
	err := c.tx(ctx, "remove chat member", func(q Querier) error {
		var seq int64
		if err := c.lockRow(ctx, q, "chat "+chat, `SELECT seq FROM chats WHERE id = ?`, chat, &seq); err != nil {
			return err
		}
		n, err := q.Exec(ctx, `DELETE FROM chat_members WHERE chat = ? AND agent = ?`, chat, agent)
		removed = n == 1
		return err
	})
	return removed, err
}

const selectChatMessage = `SELECT seq, id, chat, from_agent, body, created_us FROM chat_messages`

func scanChatMessage(row Row) (*store.ChatMessage, error) {
	var (
		m   store.ChatMessage
		cUS int64
	)
	if err := row.Scan(&m.Seq, &m.ID, &m.Chat, &m.From, &m.Body, &cUS); err != nil {
		return nil, err
	}
	m.CreatedAt = TimeOrZero(cUS)
	return &m, nil
}

// AppendChatMessage implements store.Chats: one statement, which inserts
// nothing when the chat does not exist.
func (c *Core) AppendChatMessage(ctx context.Context, m *store.ChatMessage) error {
	if err := store.CheckChatMessage(m); err != nil {
		return c.errf("append chat message", err)
	}
	cm := *m
	cm.ID = audit.NewID()
	now := c.nowUS()
	seq, err := one(ctx, c, c.c.Write, "chat "+cm.Chat, func(r Row) (n int64, err error) { return n, r.Scan(&n) },
		`INSERT INTO chat_messages (id, chat, from_agent, body, created_us)
		SELECT CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS BIGINT)
		WHERE EXISTS (SELECT 1 FROM chats WHERE id = ?) RETURNING seq`, cm.ID, cm.Chat, cm.From, cm.Body, now, cm.Chat)
	if err != nil {
		return err
	}
	cm.Seq, cm.CreatedAt = seq, TimeOrZero(now)
	*m = cm
	return nil
}

// ChatHistory implements store.Chats.
func (c *Core) ChatHistory(ctx context.Context, chat string, p store.Page) ([]*store.ChatMessage, string, error) {
	before, err := seqAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf("chat history", err)
	}
	if before == 0 {
		before = math.MaxInt64
	}
	if _, err := one(ctx, c, c.c.Read, "chat "+chat, func(r Row) (n int64, err error) { return n, r.Scan(&n) },
		`SELECT seq FROM chats WHERE id = ?`, chat); err != nil {
		return nil, "", err
	}
	msgs, next, err := pageOf(ctx, c, "chat history", scanChatMessage, p, func(m *store.ChatMessage) string { return seqCursor(m.Seq) },
		selectChatMessage+` WHERE chat = ? AND seq < ? ORDER BY seq DESC`, chat, before)
	slices.Reverse(msgs)
	return msgs, next, err
}
