package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/armory-dev/armory/store/internal/eventbus"
)

// EventsChannel begins the name of the LISTEN/NOTIFY channel on which the
// processes sharing a store pass each other their events for humans (what
// /api/events streams), so that every replica shows every replica's
// events. NOTIFY channels belong to the database, not to a schema, so the
// name ends with a digest of the database and schema the Store's tables
// are in (eventsChannel): stores in other schemas of one database (set by
// search_path) do not stream each other's events.
const EventsChannel = "armory_events"

// eventsChannel returns the events channel of the store in schema of
// database db: EventsChannel, '_', 16 hex digits.
func eventsChannel(db, schema string) string {
	sum := sha256.Sum256([]byte(db + "\x00" + schema))
	return EventsChannel + "_" + hex.EncodeToString(sum[:8])
}

// MaxEventPayload is the largest event payload PublishEvent sends
// (PostgreSQL refuses NOTIFY payloads of 8,000 bytes or more).
const MaxEventPayload = eventbus.MaxPayload

// events is the Store's event relay: the shared bounded publisher, whose
// batches go out as one NOTIFY statement each, and the subscribers that the
// listener connection feeds.
type events struct {
	channel string // eventsChannel, set by OpenWith
	pub     eventbus.Publisher
	subs    eventbus.Subscribers
}

// PublishEvent sends payload to every process listening on the database,
// this one included, without waiting: it is queued (at most 1,024 events;
// past that, and for a payload of MaxEventPayload bytes or more, it is
// dropped and false returned). Delivery is best effort: events are for
// people watching, the store's records are the truth. Close sends what is
// still queued, within 2 s.
func (s *Store) PublishEvent(payload []byte) bool {
	release, err := s.use()
	if err != nil {
		return false
	}
	defer release()
	return s.ev.pub.Publish(payload, s.gate.Closing(), &s.lwg)
}

// EventsDropped is the number of events PublishEvent refused because its
// queue was full (armory_events_dropped_total).
func (s *Store) EventsDropped() int64 { return s.ev.pub.Dropped() }

// SubscribeEvents calls fn with every event payload published on the
// database, by any process (this one included), until the returned cancel
// is called. fn runs on the listener's goroutine and must not block.
// Events published while the listener connection was down are lost.
func (s *Store) SubscribeEvents(fn func(payload []byte)) (cancel func()) {
	return s.ev.subs.Add(fn, nil)
}

// deliverEvent hands a notification's payload to the subscribers.
func (s *Store) deliverEvent(payload string) { s.ev.subs.Deliver([]byte(payload)) }

// notifyEvents sends one batch of events in one statement, one transaction.
func (s *Store) notifyEvents(ctx context.Context, batch [][]byte) {
	texts := make([]string, len(batch))
	for i, b := range batch {
		texts[i] = string(b)
	}
	_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS t(p, i) ORDER BY i`, s.ev.channel, texts)
}
