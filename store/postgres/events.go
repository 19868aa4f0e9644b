package postgres

import (
	"context"
	"sync"
	"time"
)

// EventsChannel is the LISTEN/NOTIFY channel on which the processes sharing
// a database pass each other their events for humans (what /api/events
// streams), so that every replica shows every replica's events.
const EventsChannel = "armory_events"

// MaxEventPayload is the largest event payload PublishEvent sends
// (PostgreSQL refuses NOTIFY payloads of 8,000 bytes or more).
const MaxEventPayload = 7900

// Bounds of the event publisher: events waiting to be sent, and events per
// NOTIFY transaction.
const (
	eventQueue = 1024
	eventBatch = 64
)

// events is the Store's event relay: a bounded queue drained by one
// goroutine that sends the queued events in one transaction (one round
// trip, one commit for the whole batch), and the subscribers that the
// listener connection feeds.
type events struct {
	once    sync.Once
	q       chan []byte
	dropped int64 // under mu
	mu      sync.Mutex
	subs    map[*func([]byte)]struct{}
}

// PublishEvent sends payload to every process listening on the database,
// this one included, without waiting: it is queued (at most 1,024 events;
// past that, and for a payload of MaxEventPayload bytes or more, it is
// dropped and false returned). Delivery is best effort: events are for
// people watching, the store's records are the truth.
func (s *Store) PublishEvent(payload []byte) bool {
	if len(payload) >= MaxEventPayload {
		return false
	}
	release, err := s.use()
	if err != nil {
		return false
	}
	defer release()
	s.ev.once.Do(func() {
		s.ev.q = make(chan []byte, eventQueue)
		s.lwg.Add(1)
		go s.publishLoop()
	})
	select {
	case s.ev.q <- payload:
		return true
	default:
		s.ev.mu.Lock()
		s.ev.dropped++
		s.ev.mu.Unlock()
		return false
	}
}

// EventsDropped is the number of events PublishEvent refused because its
// queue was full (armory_events_dropped_total).
func (s *Store) EventsDropped() int64 {
	s.ev.mu.Lock()
	defer s.ev.mu.Unlock()
	return s.ev.dropped
}

// SubscribeEvents calls fn with every event payload published on the
// database, by any process (this one included), until the returned cancel
// is called. fn runs on the listener's goroutine and must not block.
// Events published while the listener connection was down are lost.
func (s *Store) SubscribeEvents(fn func(payload []byte)) (cancel func()) {
	p := &fn
	s.ev.mu.Lock()
	if s.ev.subs == nil {
		s.ev.subs = map[*func([]byte)]struct{}{}
	}
	s.ev.subs[p] = struct{}{}
	s.ev.mu.Unlock()
	return func() {
		s.ev.mu.Lock()
		delete(s.ev.subs, p)
		s.ev.mu.Unlock()
	}
}

// deliverEvent hands a notification's payload to the subscribers.
func (s *Store) deliverEvent(payload string) {
	s.ev.mu.Lock()
	subs := make([]func([]byte), 0, len(s.ev.subs))
	for p := range s.ev.subs {
		subs = append(subs, *p)
	}
	s.ev.mu.Unlock()
	b := []byte(payload)
	for _, fn := range subs {
		fn(b)
	}
}

// publishLoop sends queued events in batches until the Store closes, then
// sends what is still queued (within eventDrainTimeout), so that a short
// process (a CLI command deciding an approval) does not lose its events
// by closing right after publishing them.
func (s *Store) publishLoop() {
	defer s.lwg.Done()
	batch := make([]string, 0, eventBatch)
	for {
		select {
		case <-s.gate.Closing():
			s.drainEvents(batch)
			return
		case p := <-s.ev.q:
			batch = append(batch[:0], string(p))
		}
		batch = s.fillBatch(batch)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s.notify(ctx, batch)
		cancel()
	}
}

// eventDrainTimeout bounds how long Close spends sending queued events.
const eventDrainTimeout = 2 * time.Second

// drainEvents sends the events queued when the Store began to close, in
// batches, until the queue is empty or eventDrainTimeout passes.
func (s *Store) drainEvents(batch []string) {
	ctx, cancel := context.WithTimeout(context.Background(), eventDrainTimeout)
	defer cancel()
	for ctx.Err() == nil {
		batch = s.fillBatch(batch[:0])
		if len(batch) == 0 {
			return
		}
		s.notify(ctx, batch)
	}
}

// fillBatch adds queued events to batch, without waiting, up to eventBatch.
func (s *Store) fillBatch(batch []string) []string {
	for len(batch) < eventBatch {
		select {
		case p := <-s.ev.q:
			batch = append(batch, string(p))
		default:
			return batch
		}
	}
	return batch
}

// notify sends batch in one statement, one transaction.
func (s *Store) notify(ctx context.Context, batch []string) {
	_, _ = s.pool.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) WITH ORDINALITY AS t(p, i) ORDER BY i`, EventsChannel, batch)
}
