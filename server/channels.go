package server

import (
	"context"
	"net/http"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/store"
)

// Channel context on the surfaces. A caller that relays an external
// channel names the conversation of its calls: REST with the
// X-Armory-Channel header or the "channel" field of POST
// /api/agents/{id}/calls; MCP with that header at initialize (the
// session's conversation, fixed for its life, as X-Armory-Session fixes
// its caps session), on each request of a sessionless client, or in a
// request's _meta "armory.dev/channel". The pipeline does the rest
// (pipeline.ChannelGate, armory.Manifest.NeedsChannel); the surfaces only
// pass the name on, and list an agent's tools for the caller they have
// (registry.Caller): the channel tools only for one that names a
// conversation.
const (
	ChannelHeader = pipeline.ChannelHeader
	MetaChannel   = pipeline.MetaChannel
)

// ChannelReader is what GET /api/channels/{id}/messages needs of the
// services module (services.Module).
type ChannelReader interface {
	Channel(ctx context.Context, id string) (*store.Channel, error)
	ChannelMessages(ctx context.Context, id string, p store.Page) ([]*store.ChannelMessage, string, error)
}

// caller is what a listing request carries (registry.Caller).
func caller(channel string) registry.Caller { return registry.Caller{Channel: channel != ""} }

// ChannelPage is the body of GET /api/channels/{id}/messages.
type ChannelPage struct {
	Channel  *store.Channel          `json:"channel"`
	Messages []*store.ChannelMessage `json:"messages"`
	// NextCursor reads on (""at the end of what there is now: to follow
	// the conversation, ask again with the cursor of the last page that
	// had one, or watch the "channel" events of GET /api/events).
	NextCursor string `json:"next_cursor,omitempty"`
}

// handleChannelMessages answers a page of a conversation's messages,
// oldest first (?cursor= reads on, ?limit= at most store.MaxPage). The
// conversation is named in the path (GET /api/channels/{id}/messages) or,
// for a name the path cannot carry (one holding a "/": the server refuses
// escaped slashes in a path), by the X-Armory-Channel header of
// GET /api/channels/messages, as the caller names it in its calls. An
// admin token reads every conversation; an agent token those its agent
// holds or began (others are answered as unknown, so a token learns
// nothing of other agents' conversations).
func (s *Server) handleChannelMessages(w http.ResponseWriter, r *http.Request) {
	if s.channels == nil {
		s.writeError(w, r, armory.E("", armory.KindNotFound, "this server keeps no conversations (no services module)"))
		return
	}
	id := r.PathValue("id")
	if id == "" {
		if id = r.Header.Get(ChannelHeader); id == "" {
			s.writeError(w, r, armory.E("", armory.KindInvalid, "name the conversation: GET /api/channels/{id}/messages, or the "+ChannelHeader+" header"))
			return
		}
	}
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ch, err := s.channels.Channel(r.Context(), id)
	tok := requestToken(r.Context())
	if err == nil && !tok.Admin && tok.Agent != ch.Holder && tok.Agent != ch.Creator {
		err = armory.E("", armory.KindNotFound, "")
	}
	if armory.KindOf(err) == armory.KindNotFound {
		s.writeError(w, r, armory.E("", armory.KindNotFound, "no conversation "+quote(id)+" (or not one of this token's agent)"))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	msgs, next, err := s.channels.ChannelMessages(r.Context(), id, p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, ChannelPage{Channel: ch, Messages: msgs, NextCursor: next})
}
