package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
)

// hub fans the pipeline's events out to event-stream clients. publish never
// blocks: each client has a bounded buffer, and a client whose buffer is
// full is dropped (its stream ends) rather than slowing the pipeline.
type hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	size   int
	closed bool
}

// MaxEventStreams bounds the /api/events streams open at once on one
// server (each holds a goroutine and an EventBuffer of events).
const MaxEventStreams = 64

type subscriber struct {
	ch   chan []byte
	gone chan struct{} // closed when dropped or at shutdown
}

func newHub(size int) *hub { return &hub{subs: map[*subscriber]struct{}{}, size: size} }

func (h *hub) subscribe() (*subscriber, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, armory.E("events", armory.KindUnavailable, "the server is shutting down")
	}
	if len(h.subs) >= MaxEventStreams {
		return nil, armory.E("events", armory.KindBlocked, fmt.Sprintf("too many event streams: %d are open, the limit is %d; close one you no longer read", len(h.subs), MaxEventStreams))
	}
	sub := &subscriber{ch: make(chan []byte, h.size), gone: make(chan struct{})}
	h.subs[sub] = struct{}{}
	return sub, nil
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[sub]; ok {
		delete(h.subs, sub)
		close(sub.gone)
	}
}

// publish sends e to every subscriber. With none it costs no encoding (the
// common case: every tool call publishes events).
func (h *hub) publish(e pipeline.Event) {
	if h.count() == 0 {
		return
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	msg := fmt.Appendf(nil, "event: %s\ndata: %s\n\n", e.Kind, b)
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		select {
		case sub.ch <- msg:
		default: // too slow: drop it
			delete(h.subs, sub)
			close(sub.gone)
		}
	}
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
// stream is open, so that a server nobody watches (armory mcp, or serve
// with no console) listens to nothing.
type peerWatch struct {
	subscribe func(func(pipeline.Event)) func()

	mu   sync.Mutex
	n    int
	stop func()
}

// hold counts one stream; the first subscribes, publishing peers' events to
// h. The returned func releases it; the last unsubscribes.
func (w *peerWatch) hold(h *hub) (release func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n++; w.n == 1 && w.subscribe != nil {
		w.stop = w.subscribe(h.publish)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.n--; w.n == 0 && w.stop != nil {
				w.stop()
				w.stop = nil
			}
		})
	}
}

// handleEvents streams events as Server-Sent Events until the client goes,
// falls behind, its token is revoked, or the server shuts down. A comment line every 15s keeps
// proxies from closing an idle stream.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	sub, err := s.events.subscribe()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	defer s.events.unsubscribe(sub)
	defer s.peers.hold(s.events)()
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

// ctxOf returns a context that ends when ch is closed.
func ctxOf(ch <-chan struct{}) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-ch
		cancel()
	}()
	return ctx
}
