package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// Events. Every event of the engine's pipeline (approval requested or
// decided, limit reached, call finished) goes to the engine's subscribers
// and, through the store (store.Events), to every other process on the same
// database: another replica of `armory serve`, or the server a human's
// `armory approvals approve` should show its decision on. Those processes'
// engines hand it to their peer subscribers (SubscribePeers). The store
// decides how events cross processes: Postgres passes them over
// LISTEN/NOTIFY, SQLite through a second file beside its own. Delivery is
// best effort, as the store's contract says: the store's approvals and
// audit records are the truth, events only show them as they happen.

// Subscribe calls f with every event of this engine's pipeline until the
// returned func is called. f must not block. Safe for concurrent use.
func (e *Engine) Subscribe(f func(pipeline.Event)) (unsubscribe func()) {
	return e.events.add(f)
}

// SubscribePeers calls f with every event another process on the same
// store published (another replica's, a CLI command's), until the returned
// func is called. The engine listens to the store only while it has such a
// subscriber: a process whose events nobody here shows (armory mcp) listens
// to nothing, and a SQLite store writes events only while some process
// listens. f must not block. Safe for concurrent use.
func (e *Engine) SubscribePeers(f func(pipeline.Event)) (unsubscribe func()) {
	return e.relay.subscribe(f)
}

// emit is the pipeline's OnEvent: this process's subscribers first, then
// the other processes.
func (e *Engine) emit(ev pipeline.Event) {
	e.events.emit(ev)
	e.relay.publish(ev)
}

// maxRelayedMessage bounds an event's message as it travels between
// processes (the store bounds payloads: Postgres refuses NOTIFY payloads of
// 8,000 bytes or more).
const maxRelayedMessage = 2048

// relayed is an event as it travels between processes; Origin names the
// engine that published it, so that an engine skips its own when the store
// hands them back.
type relayed struct {
	Origin string         `json:"origin"`
	Event  pipeline.Event `json:"event"`
}

// relay passes the engine's events to the other processes on its store
// and theirs to its peer subscribers. The zero relay passes nothing.
type relay struct {
	origin string
	bus    store.Events

	mu       sync.Mutex
	peers    hooks
	n        int    // peer subscribers
	closed   bool   // Close ran: listen no more
	unlisten func() // the store subscription, while n > 0
}

// start publishes on bus from now on, and lets peer subscribers listen.
func (r *relay) start(bus store.Events) {
	if bus == nil {
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	r.origin = hex.EncodeToString(b[:])
	r.bus = bus
}

// subscribe adds a peer subscriber, listening to the store if it is the
// first.
func (r *relay) subscribe(f func(pipeline.Event)) func() {
	r.mu.Lock()
	defer r.mu.Unlock()
	remove := r.peers.add(f)
	r.n++
	if r.n == 1 && r.bus != nil && !r.closed {
		r.unlisten = r.bus.SubscribeEvents(r.fromPeer)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			remove()
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.n--; r.n == 0 && r.unlisten != nil {
				r.unlisten()
				r.unlisten = nil
			}
		})
	}
}

// fromPeer hands an event the store delivered to the peer subscribers,
// unless this engine published it. A payload is input from whoever can
// write to the store's event channel: an event of a kind the pipeline does
// not raise is dropped (its kind is written as it is into the server's
// Server-Sent Events, where a newline would frame an event of its own).
func (r *relay) fromPeer(payload []byte) {
	var m relayed
	if json.Unmarshal(payload, &m) != nil || m.Origin == "" || m.Origin == r.origin {
		return
	}
	switch m.Event.Kind {
	case pipeline.EventApprovalRequested, pipeline.EventApprovalDecided, pipeline.EventLimitReached, pipeline.EventCallFinished:
		r.peers.emit(m.Event)
	}
}

// publish sends ev to the other processes, without waiting.
func (r *relay) publish(ev pipeline.Event) {
	if r.bus == nil {
		return
	}
	ev.Message = audit.Cut(ev.Message, maxRelayedMessage)
	b, err := json.Marshal(relayed{Origin: r.origin, Event: ev})
	if err != nil {
		return
	}
	r.bus.PublishEvent(b)
}

// stop stops listening; events already published are still sent by the
// store (its Close sends what it queued, within a bound).
func (r *relay) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.unlisten != nil {
		r.unlisten()
		r.unlisten = nil
	}
}

// hooks is a list of event subscribers, read on every event without a
// lock held while calling them.
type hooks struct {
	mu   sync.Mutex
	next int
	fs   map[int]func(pipeline.Event)
	snap []func(pipeline.Event) // the current subscribers, rebuilt on change
}

func (h *hooks) add(f func(pipeline.Event)) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fs == nil {
		h.fs = map[int]func(pipeline.Event){}
	}
	id := h.next
	h.next++
	h.fs[id] = f
	h.rebuild()
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			delete(h.fs, id)
			h.rebuild()
		})
	}
}

// rebuild snapshots the subscribers in the order they subscribed (its
// cost follows the subscribers, not every id ever handed out).
func (h *hooks) rebuild() {
	ids := slices.Sorted(maps.Keys(h.fs))
	snap := make([]func(pipeline.Event), 0, len(ids))
	for _, id := range ids {
		snap = append(snap, h.fs[id])
	}
	h.snap = snap
}

func (h *hooks) emit(ev pipeline.Event) {
	h.mu.Lock()
	snap := h.snap
	h.mu.Unlock()
	for _, f := range snap {
		f(ev)
	}
}
