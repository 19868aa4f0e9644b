package store

import (
	"context"
	"fmt"
	"time"
)

// Channel is a conversation of an external channel (a chat thread, a
// ticket) that a REST or MCP caller relays and names in its calls (the
// call's channel context). The first agent to make a call in it holds it;
// it holds it until it hands it off. What the agents post to it are its
// messages (ChannelMessage), which the caller reads back.
type Channel struct {
	ID string `json:"id"`
	// Holder is the agent the conversation belongs to now; Creator the
	// first one.
	Holder  string `json:"holder"`
	Creator string `json:"creator"`
	// Version is 1 at creation and grows by one with every handoff.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Kinds of channel messages the services write; the store keeps any kind
// (a name of at most MaxName bytes).
const (
	ChannelSend    = "message"    // channel.send, syscall.channel.send
	ChannelHandoff = "handoff"    // channel.handoff, syscall.channel.handoff
	ChannelAttach  = "attachment" // channel.file_attach
)

// ChannelMessage is one entry of a conversation: what an agent posted to
// it (or a handoff, an attachment), oldest first by Seq.
type ChannelMessage struct {
	ID      string `json:"id"`
	Seq     int64  `json:"seq"`
	Channel string `json:"channel"`
	From    string `json:"from"`
	Kind    string `json:"kind"`
	Body    string `json:"body"`
	// To is the agent a handoff gave the conversation to.
	To        string    `json:"to,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// CheckChannelMessage validates a channel message about to be appended;
// backends call it.
func CheckChannelMessage(m *ChannelMessage) error {
	if m == nil {
		return fmt.Errorf("%w: nil channel message", ErrInvalid)
	}
	return checkAll(CheckText("channel", m.Channel, MaxName, true), CheckText("message from", m.From, MaxName, true),
		CheckText("message kind", m.Kind, MaxName, true), CheckText("message body", m.Body, MaxBody, false),
		CheckText("handoff to", m.To, MaxName, false))
}

// Channels are the conversations of external channels and their messages.
// Safe for concurrent use; every call is atomic across the Stores sharing
// the database.
type Channels interface {
	// ClaimChannel returns conversation id, creating it held by agent when
	// it does not exist (two first calls racing: one creates it, both get
	// that one). Errors: ErrInvalid (bounds).
	ClaimChannel(ctx context.Context, id, agent string) (*Channel, error)
	// GetChannel returns conversation id, or ErrNotFound.
	GetChannel(ctx context.Context, id string) (*Channel, error)
	// HandoffChannel gives conversation m.Channel to agent to iff m.From
	// holds it, and appends m (its Kind, Body; To is set to to) to the
	// conversation's messages, in one transaction; it returns the
	// conversation as it is then and sets m's ID, Seq and CreatedAt.
	// Errors: ErrNotFound (no conversation), ErrConflict (m.From does not
	// hold it: another agent does), ErrInvalid.
	HandoffChannel(ctx context.Context, m *ChannelMessage, to string) (*Channel, error)
	// AppendChannelMessage appends m to conversation m.Channel iff m.From
	// holds it, setting m's ID, Seq and CreatedAt. Errors: ErrNotFound (no
	// conversation), ErrConflict (m.From does not hold it), ErrInvalid.
	AppendChannelMessage(ctx context.Context, m *ChannelMessage) error
	// ChannelMessages returns a page of conversation id's messages, oldest
	// first; next continues with newer ones (read again from the last
	// cursor to follow the conversation). Errors: ErrNotFound (no
	// conversation).
	ChannelMessages(ctx context.Context, id string, p Page) (msgs []*ChannelMessage, next string, err error)
}
