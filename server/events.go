package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
)

// hub fans the pipeline's events out to event-stream clients. publish never
// blocks: each client has a bounded buffer, and a client whose buffer is
// full is dropped (its stream ends) rather than slowing the pipeline.
//
// Every event the hub gets is numbered (seq, from 1, in the order
// published) and kept in a ring of the last `replay` events, streams open
// or not, so that a client that reconnects with the id of the last event
// it read (Last-Event-ID: epoch-seq, epoch naming this hub, i.e. this
// server's run) gets what it missed — if the ring still holds it, and if
// the server was listening to the other processes all along (watchFrom);
// otherwise an EventGap event tells it that it missed events.
type hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	size   int
	closed bool

	epoch     string
	seq       uint64  // the last seq handed out
	ring      []entry // the last len(ring) ≤ replay events, oldest at ring[head] once full
	head      int
	replay    int
	evicted   uint64 // the seq of the last event the ring let go (0: none)
	watchFrom uint64 // the seq marking the start of the current watch of the other processes
}

// entry is one event the hub kept.
type entry struct {
	seq uint64
	ev  pipeline.Event
}

// MaxEventStreams bounds the /api/events streams open at once on one
// server (each holds a goroutine and an EventBuffer of events).
const MaxEventStreams = 64

type subscriber struct {
	ch   chan []byte
	gone chan struct{} // closed when dropped or at shutdown
	f    eventFilter
}

// eventFilter selects a stream's events: of the kinds in kinds (nil: every
// kind), about agent ("": every agent).
type eventFilter struct {
	kinds map[string]bool
	agent string
}

func (f eventFilter) match(e pipeline.Event) bool {
	return (f.kinds == nil || f.kinds[e.Kind]) && (f.agent == "" || f.agent == e.Agent)
}

// cursor is a parsed event id: the hub run it came from, and its seq.
type cursor struct {
	epoch string
	seq   uint64
}

func newHub(size, replay int) *hub {
	var b [8]byte
	_, _ = rand.Read(b[:])
	// The ring is allocated at once: keeping an event allocates nothing.
	return &hub{subs: map[*subscriber]struct{}{}, size: size, replay: replay, ring: make([]entry, 0, max(replay, 0)), epoch: hex.EncodeToString(b[:])}
}

// id is the SSE id of the event numbered seq.
func (h *hub) id(seq uint64) string { return h.epoch + "-" + strconv.FormatUint(seq, 10) }

// parseEventID parses a Last-Event-ID: EPOCH-SEQ, EPOCH 16 hex digits.
// Errors are KindInvalid.
func parseEventID(s string) (cursor, error) {
	bad := armory.E("events", armory.KindInvalid, "the Last-Event-ID header "+quote(s)+" is not an id this server sent (EPOCH-SEQ)")
	epoch, n, ok := strings.Cut(s, "-")
	if !ok || len(epoch) != 16 {
		return cursor{}, bad
	}
	if _, err := hex.DecodeString(epoch); err != nil {
		return cursor{}, bad
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return cursor{}, bad
	}
	return cursor{epoch, seq}, nil
}

// subscribe adds a stream of the events f selects. With last (the
// client's Last-Event-ID), it also returns what to send first: the kept
// events after last that f selects, preceded by an EventGap event when
// some events after last are not kept (the ring let them go, the server
// did not listen to the other processes for a while, or last is from
// another run of the server). Taken under the hub's lock, the replay and
// the live events that follow it neither overlap nor leave a hole.
func (h *hub) subscribe(f eventFilter, last *cursor) (*subscriber, [][]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, nil, armory.E("events", armory.KindUnavailable, "the server is shutting down")
	}
	if len(h.subs) >= MaxEventStreams {
		return nil, nil, armory.E("events", armory.KindBlocked, fmt.Sprintf("too many event streams: %d are open, the limit is %d; close one you no longer read", len(h.subs), MaxEventStreams))
	}
	sub := &subscriber{ch: make(chan []byte, h.size), gone: make(chan struct{}), f: f}
	h.subs[sub] = struct{}{}
	if last == nil {
		return sub, nil, nil
	}
	var out [][]byte
	from := last.seq // replay the kept events after from
	switch {
	case last.epoch != h.epoch || last.seq > h.seq:
		from = h.seq
		out = append(out, h.gap(from, "the server restarted, or this is another server, since event "+h.idOf(last)))
	case last.seq < max(h.evicted, h.watchFrom):
		from = max(h.evicted, h.watchFrom)
		why := fmt.Sprintf("the server keeps the last %d events only", h.replay)
		if h.watchFrom > h.evicted {
			why = "the server did not listen to the other processes on its store while no stream was open"
		}
		out = append(out, h.gap(from, "events after "+h.idOf(last)+" are missing: "+why))
	}
	for i := range len(h.ring) {
		en := h.ring[(h.head+i)%len(h.ring)]
		if en.seq > from && f.match(en.ev) {
			out = append(out, h.frame(en.seq, en.ev))
		}
	}
	return sub, out, nil
}

func (h *hub) idOf(c *cursor) string { return c.epoch + "-" + strconv.FormatUint(c.seq, 10) }

// gap is the EventGap event at position seq: the stream is complete from
// there on.
func (h *hub) gap(seq uint64, why string) []byte {
	return h.frame(seq, pipeline.Event{Kind: engine.EventGap, Time: time.Now(), Message: why + "; read the current state (approvals, audit) again"})
}

// frame is the Server-Sent Event of e, numbered seq.
func (h *hub) frame(seq uint64, e pipeline.Event) []byte {
	b, err := json.Marshal(e)
	if err != nil {
		b = []byte("{}")
	}
	return fmt.Appendf(nil, "id: %s\nevent: %s\ndata: %s\n\n", h.id(seq), e.Kind, b)
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sub]; ok {
		delete(h.subs, sub)
		close(sub.gone)
	}
}

// publish numbers e, keeps it in the ring and sends it to every subscriber
// whose filter selects it. With none it costs no encoding (the common
// case: every tool call publishes events).
func (h *hub) publish(e pipeline.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.keep(entry{h.seq, e})
	var msg []byte
	for sub := range h.subs {
		if !sub.f.match(e) {
			continue
		}
		if msg == nil {
			msg = h.frame(h.seq, e)
		}
		select {
		case sub.ch <- msg:
		default: // too slow: drop it
			delete(h.subs, sub)
			close(sub.gone)
		}
	}
}

// keep adds en to the ring, letting the oldest go when it is full.
func (h *hub) keep(en entry) {
	if h.replay <= 0 {
		h.evicted = en.seq
		return
	}
	if len(h.ring) < h.replay {
		h.ring = append(h.ring, en)
		return
	}
	h.evicted = h.ring[h.head].seq
	h.ring[h.head] = en
	h.head = (h.head + 1) % len(h.ring)
}

// watching marks the start of a watch of the other processes: their
// events from here on reach the hub, those before did not. It takes a seq
// of its own (no event has it), so that a client whose last event came
// before it is told of the gap.
func (h *hub) watching() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	h.watchFrom = h.seq
}

// close ends every stream and refuses new ones.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		delete(h.subs, sub)
		close(sub.gone)
	}
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// peerWatch holds the engine's subscription to the other processes'
// events (engine.Engine.SubscribePeers) while at least one /api/events
// stream is open, and for linger after the last one closes (so that a
// client that reconnects within it resumes without a gap), so that a
// server nobody watches (armory mcp, or serve with no console) listens to
// nothing. linger < 0 stops listening as the last stream closes.
type peerWatch struct {
	subscribe func(func(pipeline.Event)) func()
	linger    time.Duration

	mu     sync.Mutex
	n      int
	stop   func()
	timer  *time.Timer // ends the watch after linger, while n == 0
	closed bool
}

// hold counts one stream; the first subscribes (unless the watch still
// lingers), publishing peers' events to h. The returned func releases it;
// the last leaves the watch for linger.
func (w *peerWatch) hold(h *hub) (release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.timer != nil {
		w.timer.Stop() // if it fired already, end sees n > 0 and does nothing
		w.timer = nil
	}
	if w.stop == nil && w.subscribe != nil && !w.closed {
		h.watching()
		w.stop = w.subscribe(h.publish)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.n--; w.n > 0 || w.stop == nil {
				return
			}
			if w.linger < 0 {
				w.end()
				return
			}
			w.timer = time.AfterFunc(w.linger, func() {
				w.mu.Lock()
				defer w.mu.Unlock()
				if w.n == 0 {
					w.end()
				}
			})
		})
	}
}

// end stops the watch (w.mu held).
func (w *peerWatch) end() {
	if w.stop != nil {
		w.stop()
		w.stop = nil
	}
}

// close ends the watch now and for good (the server closes).
func (w *peerWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.end()
}

// handleEvents streams events as Server-Sent Events until the client goes,
// falls behind, its token is revoked, or the server shuts down. A comment
// line every 15s keeps proxies from closing an idle stream. Every event
// has an id; a client that sends the last one it read (Last-Event-ID)
// gets what it missed first (see hub). ?kind=a,b keeps those kinds,
// ?agent=ID that agent's events; an agent token sees its own agent's
// events only.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	f, err := s.eventFilter(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var last *cursor
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		c, err := parseEventID(v)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		last = &c
	}
	// Hold the watch of the other processes first: a replay then knows
	// whether it was listening all along.
	defer s.peers.hold(s.events)()
	sub, replay, err := s.events.subscribe(f, last)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.events.unsubscribe(sub)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	fmt.Fprint(w, ": armory events\n\n")
	if rc.Flush() != nil {
		return
	}
	ping := time.NewTicker(15 * time.Second)
	defer ping.Stop()
	// A write blocked on a client that does not read is cut when the
	// client is dropped, and in any case after WriteTimeout (long).
	stopWatch := context.AfterFunc(ctxOf(sub.gone), func() { rc.SetWriteDeadline(time.Now()) })
	defer stopWatch()
	// A token revoked while its stream is open gets nothing more: the
	// stream ends at its next event or ping.
	tok := requestToken(r.Context())
	write := func(b []byte) bool {
		if tok == nil || !s.stillValid(r.Context(), tok) {
			return false
		}
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	for _, msg := range replay {
		if !write(msg) {
			return
		}
	}
	for {
		select {
		case msg := <-sub.ch:
			if !write(msg) {
				return
			}
		case <-ping.C:
			if !write([]byte(": ping\n\n")) {
				return
			}
		case <-sub.gone:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// eventFilter reads the stream's filter from the request: ?kind=a,b (each a
// kind the engine raises, engine.Engine.EventKinds) and ?agent=ID. An
// agent token's stream is its agent's, whatever it asks: another agent
// is refused (the same 403 whether or not that agent exists).
func (s *Server) eventFilter(r *http.Request) (eventFilter, error) {
	var f eventFilter
	q := r.URL.Query()
	if v := q.Get("kind"); v != "" {
		f.kinds = map[string]bool{}
		for k := range strings.SplitSeq(v, ",") {
			if !slices.Contains(s.kinds, k) {
				return f, armory.E("events", armory.KindInvalid, "unknown event kind "+quote(k)+"; the kinds are "+strings.Join(s.kinds, ", "))
			}
			f.kinds[k] = true
		}
	}
	f.agent = q.Get("agent")
	tok := requestToken(r.Context())
	if tok != nil && !tok.Admin {
		if f.agent != "" && f.agent != tok.Agent {
			return f, errWrongAgent
		}
		f.agent = tok.Agent
	}
	if f.agent != "" {
		if _, err := s.h.Agent(f.agent); err != nil {
			return f, armory.E("events", armory.KindNotFound, "unknown agent "+quote(f.agent))
		}
	}
	return f, nil
}

// ctxOf returns a context that ends when ch is closed.
func ctxOf(ch <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-ch
		cancel()
	}()
	return ctx
}
