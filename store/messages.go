package store

import (
	"context"
	"fmt"
	"time"
)

// Message kinds the services use; the store keeps any kind (a name of at
// most MaxName bytes).
const (
	KindMessage = "message"
	KindAsk     = "ask"
	KindReply   = "reply"
	KindChat    = "chat"
	KindTask    = "task"
	KindTimer   = "timer"
)

// Message is one message in an agent's inbox.
type Message struct {
	// ID is store-generated (a UUIDv7); Seq orders an inbox (it grows with
	// every message committed to the database).
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	To      string `json:"to"`
	From    string `json:"from"`
	Kind    string `json:"kind"`
	Subject string `json:"subject,omitempty"`
	Body    string `json:"body"`
	// ReplyTo is the ID of the message this one answers.
	ReplyTo string `json:"reply_to,omitempty"`
	// Chat is the chat a chat message was posted to.
	Chat      string    `json:"chat,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// AckedAt is when the owner acknowledged it; zero while unacked.
	AckedAt time.Time `json:"acked_at,omitzero"`
}

// CheckMessage validates a message about to be sent; backends call it.
func CheckMessage(m *Message) error {
	if m == nil {
		return fmt.Errorf("%w: nil message", ErrInvalid)
	}
	return checkAll(CheckText("message to", m.To, MaxName, true), CheckText("message from", m.From, MaxName, true),
		CheckText("message kind", m.Kind, MaxName, true), CheckText("subject", m.Subject, MaxSubject, false),
		CheckText("message body", m.Body, MaxBody, false), CheckText("reply_to", m.ReplyTo, MaxName, false),
		CheckText("chat", m.Chat, MaxName, false))
}

// InboxQuery selects a page of one agent's inbox.
type InboxQuery struct {
	Agent string
	// Since keeps messages created at or after it (zero: all).
	Since time.Time
	// Unacked keeps only the messages not yet acknowledged.
	Unacked bool
	Page
}

// Inboxes are the agents' inboxes (ask, reply, broadcast, chat and timer
// deliveries). Safe for concurrent use.
type Inboxes interface {
	// SendMessages stores msgs, all or none, in one transaction (a
	// broadcast to N agents is one call of N messages), setting each one's
	// ID, Seq and CreatedAt (AckedAt is cleared). Seq follows the order of
	// msgs. Errors: ErrInvalid (a bad message, or more than MaxBatch).
	SendMessages(ctx context.Context, msgs []*Message) error
	// ReadInbox returns a page of q.Agent's messages, oldest (lowest Seq)
	// first. It changes nothing. The cursor is a position in Seq; on
	// Postgres a message whose transaction commits after a page was read
	// may have a lower Seq than that page's last (sequences are not
	// commit-ordered), so a consumer reads unacked messages from the
	// start (Unacked, no cursor) and acknowledges what it handled.
	ReadInbox(ctx context.Context, q InboxQuery) (msgs []*Message, next string, err error)
	// AckMessages acknowledges the messages of ids that are in agent's
	// inbox and not yet acknowledged, and returns how many it changed; an
	// ID of another agent's message, unknown or already acknowledged is
	// left as it is. Errors: ErrInvalid (more than MaxBatch ids).
	AckMessages(ctx context.Context, agent string, ids []string) (acked int, err error)
	// GetMessage returns message id, or ErrNotFound.
	GetMessage(ctx context.Context, id string) (*Message, error)
	// FindReply returns the first (lowest Seq) message of kind KindReply
	// whose ReplyTo is askID, or ErrNotFound while there is none.
	FindReply(ctx context.Context, askID string) (*Message, error)
	// TakeReply is FindReply and AckMessages in one statement: the first
	// (lowest Seq) message of kind KindReply whose ReplyTo is askID and
	// that is in agent's inbox, acknowledged (AckedAt set now, or kept if
	// it was acknowledged already). ErrNotFound while there is none; then
	// nothing is written.
	TakeReply(ctx context.Context, agent, askID string) (*Message, error)
	// SendReply stores rep, a message of kind KindReply answering message
	// rep.ReplyTo, and acknowledges that message in rep.From's inbox (if
	// it is there and not acknowledged yet), in one transaction; it sets
	// rep's ID, Seq and CreatedAt as SendMessages does. Errors:
	// ErrInvalid (a bad message, not a reply, or no ReplyTo).
	SendReply(ctx context.Context, rep *Message) error
}

// Chat is a shared channel. Members receive its messages in their inboxes
// unless it is Gated (then they are kept in its history only); the
// creator need not be a member.
type Chat struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Creator   string    `json:"creator"`
	Gated     bool      `json:"gated"`
	Members   []string  `json:"members"` // sorted
	CreatedAt time.Time `json:"created_at"`
}

// CheckChat validates a chat about to be created; backends call it.
func CheckChat(c *Chat) error {
	if c == nil {
		return fmt.Errorf("%w: nil chat", ErrInvalid)
	}
	if err := checkAll(CheckText("chat id", c.ID, MaxName, true), CheckText("chat name", c.Name, MaxName, false),
		CheckText("creator", c.Creator, MaxName, true)); err != nil {
		return err
	}
	if len(c.Members) > MaxBatch {
		return fmt.Errorf("%w: %d members; the limit is %d", ErrInvalid, len(c.Members), MaxBatch)
	}
	for _, m := range c.Members {
		if err := CheckText("member", m, MaxName, true); err != nil {
			return err
		}
	}
	return nil
}

// ChatMessage is one message of a chat's history.
type ChatMessage struct {
	ID        string    `json:"id"`
	Seq       int64     `json:"seq"`
	Chat      string    `json:"chat"`
	From      string    `json:"from"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at"`
}

// Chats are the shared channels and their history. Safe for concurrent
// use. A chat has at most MaxBatch members.
type Chats interface {
	// CreateChat stores c with its members (duplicates dropped). An empty
	// ID gets a fresh one; CreatedAt is set to now; c is updated
	// accordingly. Errors: ErrConflict (the ID exists), ErrInvalid.
	CreateChat(ctx context.Context, c *Chat) error
	// GetChat returns chat id with its members, or ErrNotFound.
	GetChat(ctx context.Context, id string) (*Chat, error)
	// ListChats returns a page of the chats that member belongs to (every
	// chat when member is ""), oldest first, without their members (Members
	// is nil: a page of full chats would be unbounded; GetChat has them).
	ListChats(ctx context.Context, member string, p Page) (chats []*Chat, next string, err error)
	// AddChatMember adds agent to chat and reports whether it was not a
	// member yet. Errors: ErrNotFound (no chat), ErrInvalid (bounds, or
	// the chat is full).
	AddChatMember(ctx context.Context, chat, agent string) (added bool, err error)
	// RemoveChatMember removes agent from chat and reports whether it was
	// a member. Errors: ErrNotFound (no chat).
	RemoveChatMember(ctx context.Context, chat, agent string) (removed bool, err error)
	// AppendChatMessage adds m to chat m.Chat's history, setting its ID,
	// Seq and CreatedAt. Errors: ErrNotFound (no chat), ErrInvalid.
	AppendChatMessage(ctx context.Context, m *ChatMessage) error
	// ChatHistory returns a page of chat's history going back in time: the
	// most recent p.Limit messages before the cursor (the latest when
	// none), ordered oldest first; next continues with older ones.
	// Errors: ErrNotFound (no chat).
	ChatHistory(ctx context.Context, chat string, p Page) (msgs []*ChatMessage, next string, err error)
}

// CheckChatMessage validates a chat message about to be appended; backends
// call it.
func CheckChatMessage(m *ChatMessage) error {
	if m == nil {
		return fmt.Errorf("%w: nil chat message", ErrInvalid)
	}
	return checkAll(CheckText("chat", m.Chat, MaxName, true), CheckText("message from", m.From, MaxName, true),
		CheckText("message body", m.Body, MaxBody, false))
}
