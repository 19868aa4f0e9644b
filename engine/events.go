package engine

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/armory-dev/armory"
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
//
// Kinds. The pipeline raises four kinds (pipeline.EventApprovalRequested,
// …); a module adds its own (Contribution.EventKinds: a service's
// "message", "task", "timer") and publishes them with Env.Publish. The
// kinds are a registry built by Open and fixed from then on: a peer's
// event of a kind this engine does not know is dropped, as input from
// whoever can write to the store's event channel.

// EventGap is a kind no module may declare: the server's /api/events
// sends it to a client that missed events.
const EventGap = "gap"

// MaxEventKind bounds the length of a module's event kind; MaxEventRef
// bounds Event.Ref.
const (
	MaxEventKind = 32
	MaxEventRef  = 256
)

// pipelineKinds are the kinds the pipeline raises.
var pipelineKinds = []string{pipeline.EventApprovalRequested, pipeline.EventApprovalDecided, pipeline.EventLimitReached, pipeline.EventCallFinished}

// checkEventKind reports why kind cannot be a module's event kind; nil
// when it can.
func checkEventKind(kind string) error {
	if kind == "" || len(kind) > MaxEventKind {
		return fmt.Errorf("event kind %q: 1 to %d characters", kind, MaxEventKind)
	}
	for i, c := range kind {
		if !(c >= 'a' && c <= 'z' || i > 0 && (c >= '0' && c <= '9' || c == '_')) {
			return fmt.Errorf("event kind %q: only a-z, 0-9 and _, starting with a letter", kind)
		}
	}
	if kind == EventGap || slices.Contains(pipelineKinds, kind) {
		return fmt.Errorf("event kind %q is Armory's own", kind)
	}
	return nil
}

// EventKinds returns every kind of event this engine raises or relays:
// the pipeline's and the modules', sorted.
func (e *Engine) EventKinds() []string {
	out := slices.Clone(pipelineKinds)
	for k := range e.kinds {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// knownKind reports whether kind is the pipeline's or a module's.
func (e *Engine) knownKind(kind string) bool {
	_, ok := e.kinds[kind]
	return ok || slices.Contains(pipelineKinds, kind)
}

// publish is Env.Publish for the module named module.
func (e *Engine) publish(module string, ev pipeline.Event) error {
	if !e.opened.Load() {
		return armory.E("engine.Publish", armory.KindUnavailable, "the engine is not open (Publish works once Open has returned)")
	}
	if owner, ok := e.kinds[ev.Kind]; !ok || owner != module {
		return armory.E("engine.Publish", armory.KindInvalid, fmt.Sprintf("module %s did not declare the event kind %q (Contribution.EventKinds)", module, ev.Kind))
	}
	if len(ev.Ref) > MaxEventRef {
		return armory.E("engine.Publish", armory.KindInvalid, fmt.Sprintf("an event's ref is at most %d bytes", MaxEventRef))
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	e.emit(ev)
	return nil
}

// Subscribe calls f with every event of this engine's pipeline and its
// modules (Env.Publish) until the returned func is called. f must not block. Safe for concurrent use.
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
	known  func(kind string) bool // the kinds a peer's event may have

	mu       sync.Mutex
	peers    hooks
	n        int    // peer subscribers
	closed   bool   // Close ran: listen no more
	unlisten func() // the store subscription, while n > 0
}

// start publishes on bus from now on, and lets peer subscribers listen to
// the events of the known kinds — those that subscribed while Open ran (a
// module's Validate) too.
func (r *relay) start(bus store.Events, known func(string) bool) {
	if bus == nil {
		return
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	r.mu.Lock()
	defer r.mu.Unlock()
	r.known = known
	r.origin = hex.EncodeToString(b[:])
	r.bus = bus
	if r.n > 0 && !r.closed && r.unlisten == nil {
		r.unlisten = r.bus.SubscribeEvents(r.fromPeer)
	}
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
// write to the store's event channel: an event of a kind neither the
// pipeline nor a module of this engine raises is dropped (its kind is
// written as it is into the server's Server-Sent Events, where a newline
// would frame an event of its own), and so is one whose Ref is too long.
func (r *relay) fromPeer(payload []byte) {
	var m relayed
	if json.Unmarshal(payload, &m) != nil || m.Origin == "" || m.Origin == r.origin {
		return
	}
	if r.known(m.Event.Kind) && len(m.Event.Ref) <= MaxEventRef {
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
