package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
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
// engines hand it to their own subscribers as a peer's event. The store
// decides how events cross processes: Postgres passes them over
// LISTEN/NOTIFY, SQLite through a second file beside its own. Delivery is best effort, as the store's contract says: the store's
// approvals and audit records are the truth, events only show them as they
// happen.

// Subscribe calls f with every event of this engine's pipeline (peer
// false) and every event another process on the same store published (peer
// true), until the returned func is called. f must not block. Safe for
// concurrent use.
func (e *Engine) Subscribe(f func(ev pipeline.Event, peer bool)) (unsubscribe func()) {
	e.relay.listen()
	return e.events.add(f)
}

// emit is the pipeline's OnEvent: this process's subscribers first, then
// the other processes.
func (e *Engine) emit(ev pipeline.Event) {
	e.events.emit(ev, false)
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
// and theirs to the engine. The zero relay passes nothing.
type relay struct {
	origin  string
	bus     store.Events
	deliver func(pipeline.Event)

	mu       sync.Mutex
	listened bool
	unlisten func()
}

// start publishes on bus from now on; listen will hand the other
// processes' events to deliver.
func (r *relay) start(bus store.Events, deliver func(pipeline.Event)) {
	if bus == nil {
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	r.origin = hex.EncodeToString(b[:])
	r.bus, r.deliver = bus, deliver
}

// listen subscribes to the other processes' events, once: when the engine
// gets its first subscriber, so that a command nobody watches (armory
// call) listens to nothing.
func (r *relay) listen() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bus == nil || r.listened {
		return
	}
	r.listened = true
	r.unlisten = r.bus.SubscribeEvents(func(payload []byte) {
		var m relayed
		if json.Unmarshal(payload, &m) != nil || m.Origin == "" || m.Origin == r.origin {
			return
		}
		r.deliver(m.Event)
	})
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
	r.listened = true // no listening after Close
	if r.unlisten != nil {
		r.unlisten()
		r.unlisten = nil
	}
}

// hooks is the engine's list of event subscribers, read on every event
// without a lock held while calling them.
type hooks struct {
	mu   sync.Mutex
	next int
	fs   map[int]func(pipeline.Event, bool)
	snap []func(pipeline.Event, bool) // the current subscribers, rebuilt on change
}

func (h *hooks) add(f func(pipeline.Event, bool)) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fs == nil {
		h.fs = map[int]func(pipeline.Event, bool){}
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

func (h *hooks) rebuild() {
	snap := make([]func(pipeline.Event, bool), 0, len(h.fs))
	for i := 0; i < h.next; i++ {
		if f, ok := h.fs[i]; ok {
			snap = append(snap, f)
		}
	}
	h.snap = snap
}

func (h *hooks) emit(ev pipeline.Event, peer bool) {
	h.mu.Lock()
	snap := h.snap
	h.mu.Unlock()
	for _, f := range snap {
		f(ev, peer)
	}
}

// peer delivers another process's event.
func (h *hooks) peer(ev pipeline.Event) { h.emit(ev, true) }
