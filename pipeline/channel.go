package pipeline

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
)

// Channel context: a call may name the conversation it is made in
// (Call.Channel), as an external channel (a chat thread, a support
// ticket) that a REST or MCP caller relays names it. The pipeline only
// carries it: it checks the name, refuses at lookup a tool that needs a
// conversation (armory.Manifest.NeedsChannel) when the call names none,
// asks the gates that keep conversations (ChannelGate) whether the agent
// holds it, records the conversation in the call's stages (stage
// "channel", so the audit record keeps it under the hash chain without a
// new field), and hands it to the tool (armory.Invocation.Channel).

// ChannelHeader is the HTTP header a REST or MCP caller names its
// conversation with; MetaChannel the MCP request _meta key.
const (
	ChannelHeader = "X-Armory-Channel"
	MetaChannel   = "armory.dev/channel"
)

// MaxChannelBytes bounds a conversation name.
const MaxChannelBytes = 256

// ChannelGate is a Gate that also keeps conversations: AdmitChannel
// decides whether agent may make a call in conversation channel, and
// returns who holds it (the services module: the first agent to name a
// conversation holds it until it hands it off). It runs on every call
// that names a conversation (only those), after the agent's gates and the
// tool's lookup. An error refuses the call: its message is the reason
// (for the model; kept in the audit record, stage "channel") and its kind
// the outcome's (KindConflict for a conversation another agent holds).
type ChannelGate interface {
	AdmitChannel(ctx context.Context, agent, channel string) (holder string, err error)
}

// checkChannelName refuses a conversation name that is too long, not
// UTF-8 or holds a control character (it reaches terminals and the
// store); the record keeps it cut and cleaned, as a refused session's.
func checkChannelName(s *state) *refusal {
	ch := s.c.Channel
	msg := ""
	switch {
	case len(ch) > MaxChannelBytes || !utf8.ValidString(ch):
		msg = fmt.Sprintf("the conversation name is %d bytes; the limit is %d bytes of UTF-8", len(ch), MaxChannelBytes)
	case strings.IndexFunc(ch, unicode.IsControl) >= 0:
		r, _ := utf8.DecodeRuneInString(ch[strings.IndexFunc(ch, unicode.IsControl):])
		msg = fmt.Sprintf("the conversation name holds the control character U+%04X", r)
	default:
		return nil
	}
	s.c.Channel = recordableSession(ch)
	s.stage("lookup", "error", msg)
	return refuse(audit.StatusError, armory.KindInvalid, "Invalid conversation: %s. Name it in letters, digits and punctuation.", msg)
}

// channel runs the channel gates for a call that names a conversation and
// records it (stage "channel").
func (p *Pipeline) channel(ctx context.Context, s *state) *refusal {
	if s.c.Channel == "" {
		return nil
	}
	why := fmt.Sprintf("conversation %q", s.c.Channel)
	for _, g := range p.opts.Gates {
		cg, ok := g.(ChannelGate)
		if !ok {
			continue
		}
		holder, err := cg.AdmitChannel(ctx, s.ag.ID, s.c.Channel)
		if err != nil {
			return gateRefusal(s, "channel", why, err)
		}
		if holder != "" {
			why += ", held by " + holder
		}
	}
	s.stage("channel", "ok", why)
	return nil
}
