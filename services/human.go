package services

import (
	"context"
	"errors"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// The messages and chats for people: what the REST API and the CLI call
// (never the tables). A person posts as pipeline.Human ("human"); an
// agent's reply to such a message lands in the inbox named "human", which
// ReadInbox reads like any other. Every change a person makes is audited
// with pipeline.AuditHuman (the surface passes its pipeline); reads are
// not, and a person's read acknowledges nothing (an agent's unread
// messages stay unread).

// PostMessage delivers body to agent's inbox from the human, audits it
// (tool inbox.post, args {to, bytes, via}) and returns the message.
// Errors: KindNotFound (no such agent), KindInvalid (an empty body),
// KindTooLarge (more than MaxMessage bytes), the store's; KindUnavailable
// when the message was delivered but its audit entry could not be
// written (the message is returned with it).
func (m *Module) PostMessage(ctx context.Context, p *pipeline.Pipeline, agent, body, via string) (*store.Message, error) {
	const op = "inbox.post"
	if r, ok := checkBody("message", body); !ok {
		return nil, armory.E(op, r.Kind, r.Text)
	}
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	if r, ok := m.checkAgent(ctx, st, "agent", agent); !ok {
		return nil, armory.E(op, r.Kind, r.Text)
	}
	msg := &store.Message{To: agent, From: pipeline.Human, Kind: store.KindMessage, Body: body}
	if err := m.deliver(ctx, st, []*store.Message{msg}, "message from "+pipeline.Human); err != nil {
		return nil, store.Err(op, err)
	}
	err = p.AuditHuman(ctx, pipeline.HumanAction{Tool: op, Agent: agent,
		Args: map[string]any{"to": agent, "message_id": msg.ID, "bytes": len(body), "via": via}, Result: "message " + msg.ID + " posted to " + agent + "'s inbox by " + pipeline.Human + " via " + via})
	return msg, err
}

// InboxQuery is the query of ReadInbox.
type InboxQuery struct {
	// Agent's inbox (pipeline.Human for the replies to the human).
	Agent string
	// LookbackMinutes keeps the messages of the last minutes (0: all).
	LookbackMinutes int
	Unacked         bool
	store.Page
}

// ReadInbox returns a page of q.Agent's inbox, oldest first, for a person
// to look at: it acknowledges nothing. Errors: KindNotFound (neither an
// agent nor "human"), KindInvalid (a bad cursor), the store's.
func (m *Module) ReadInbox(ctx context.Context, q InboxQuery) ([]*store.Message, string, error) {
	const op = "inbox.read"
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	if q.Agent != pipeline.Human {
		if r, ok := m.checkAgent(ctx, st, "agent", q.Agent); !ok {
			return nil, "", armory.E(op, r.Kind, r.Text)
		}
	}
	sq := store.InboxQuery{Agent: q.Agent, Unacked: q.Unacked, Page: q.Page}
	if q.LookbackMinutes > 0 {
		sq.Since = m.now().Add(-minutes(q.LookbackMinutes))
	}
	msgs, next, err := st.ReadInbox(ctx, sq)
	return msgs, next, store.Err(op, err)
}

// ListChats returns a page of the chats member belongs to (every chat
// when member is ""), oldest first, without their members.
func (m *Module) ListChats(ctx context.Context, member string, p store.Page) ([]*store.Chat, string, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	chats, next, err := st.ListChats(ctx, member, p)
	return chats, next, store.Err("chat.list", err)
}

// GetChat returns chat id with its members. Errors: KindNotFound.
func (m *Module) GetChat(ctx context.Context, id string) (*store.Chat, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	c, err := st.GetChat(ctx, id)
	if errors.Is(err, store.ErrInvalid) {
		err = store.ErrNotFound
	}
	return c, store.Err("chat.get", err)
}

// ChatHistory returns a page of chat id's history going back in time
// (ordered oldest first; the cursor continues with older messages).
// Errors: KindNotFound, KindInvalid (a bad cursor).
func (m *Module) ChatHistory(ctx context.Context, id string, p store.Page) ([]*store.ChatMessage, string, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	msgs, next, err := st.ChatHistory(ctx, id, p)
	return msgs, next, store.Err("chat.history", err)
}

// PostChat posts body to chat id as the human (delivered to every member's
// inbox unless the chat is gated) and audits it (tool chat.post, args
// {chat_id, message_id, bytes, via}). Errors as PostMessage's.
func (m *Module) PostChat(ctx context.Context, p *pipeline.Pipeline, id, body, via string) (*store.ChatMessage, error) {
	const op = "chat.post"
	if r, ok := checkBody("message", body); !ok {
		return nil, armory.E(op, r.Kind, r.Text)
	}
	ch, err := m.GetChat(ctx, id)
	if err != nil {
		return nil, err
	}
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	cm, n, err := m.sendChat(ctx, st, ch, pipeline.Human, body)
	if cm == nil {
		return nil, err
	}
	aerr := p.AuditHuman(ctx, pipeline.HumanAction{Tool: op,
		Args:   map[string]any{"chat_id": ch.ID, "message_id": cm.ID, "bytes": len(body), "delivered": n, "via": via},
		Result: "message " + cm.ID + " posted to chat " + ch.ID + " by " + pipeline.Human + " via " + via})
	return cm, errors.Join(err, aerr)
}

func minutes(n int) time.Duration { return time.Duration(n) * time.Minute }
