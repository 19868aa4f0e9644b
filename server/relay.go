package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
)

// relayed is an event as it travels between replicas; Origin names the
// replica that published it, so that a replica skips its own.
type relayed struct {
	Origin string         `json:"origin"`
	Event  pipeline.Event `json:"event"`
}

// maxRelayedMessage bounds an event's message as it travels (the bus
// bounds payloads).
const maxRelayedMessage = 2048

// startRelay subscribes to the store's events (store.Events), which pass
// between the processes sharing the store (store/postgres, over
// LISTEN/NOTIFY), so that /api/events on every replica streams every
// replica's events. Delivery is best effort.
func (s *Server) startRelay() {
	bus := s.st
	var b [8]byte
	_, _ = rand.Read(b[:])
	s.origin = hex.EncodeToString(b[:])
	s.bus = bus
	s.unwatch = append(s.unwatch, bus.SubscribeEvents(s.fromPeer))
}

// relay sends e, published here, to the other replicas.
func (s *Server) relay(e pipeline.Event) {
	if s.bus == nil {
		return
	}
	e.Message = audit.Cut(e.Message, maxRelayedMessage)
	b, err := json.Marshal(relayed{Origin: s.origin, Event: e})
	if err != nil {
		return
	}
	s.bus.PublishEvent(b)
}

// fromPeer streams an event another replica published (its own come back
// too, and are skipped: they were streamed when they happened).
func (s *Server) fromPeer(payload []byte) {
	var r relayed
	if json.Unmarshal(payload, &r) != nil || r.Origin == s.origin || r.Origin == "" {
		return
	}
	s.events.publish(r.Event)
}
