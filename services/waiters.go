package services

import (
	"fmt"
	"sync"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
)

// waiters are the asks waiting for a reply in this process, at most a
// limit of them. While there is one, the module listens to the "message"
// events of this process and of the others (Env.Subscribe and
// Env.SubscribePeers) and wakes the waiters of the agent an event names;
// the listening lingers a while after the last waiter leaves.
//
// Locks: subMu (the subscription) before mu (the waiters). onEvent, which
// the engine calls from its event goroutines, takes mu only, so that
// subscribing and unsubscribing (which may wait for those goroutines)
// never run under mu.
type waiters struct {
	subMu  sync.Mutex
	unsub  func()      // the subscriptions, while listening
	linger *time.Timer // stops listening, once idle

	mu     sync.Mutex
	n      int
	byAg   map[string]map[*waiter]struct{}
	closed bool
}

// waiter is one waiting ask; wake has room for one pending wake-up.
type waiter struct {
	agent string
	wake  chan struct{}
}

// add registers a waiter for agent's reply, subscribing to the events if
// none is listened to. Errors: KindUnavailable when m.opts.MaxWaiters
// asks wait already (or the module is closed).
func (ws *waiters) add(m *Module, agent string) (*waiter, error) {
	ws.subMu.Lock()
	defer ws.subMu.Unlock()
	ws.mu.Lock()
	switch {
	case ws.closed:
		ws.mu.Unlock()
		return nil, armory.E("syscall.ask", armory.KindUnavailable, "the services are closed")
	case ws.n >= m.opts.MaxWaiters:
		n := ws.n
		ws.mu.Unlock()
		return nil, armory.E("syscall.ask", armory.KindUnavailable, fmt.Sprintf("%d asks are already waiting for replies here, the limit; nothing was sent. Send a message without waiting (syscall.chat.send), or ask again later", n))
	}
	w := &waiter{agent: agent, wake: make(chan struct{}, 1)}
	if ws.byAg == nil {
		ws.byAg = map[string]map[*waiter]struct{}{}
	}
	if ws.byAg[agent] == nil {
		ws.byAg[agent] = map[*waiter]struct{}{}
	}
	ws.byAg[agent][w] = struct{}{}
	ws.n++
	ws.mu.Unlock()
	if ws.linger != nil {
		ws.linger.Stop()
		ws.linger = nil
	}
	m.mu.Lock()
	env := m.env
	m.mu.Unlock()
	if ws.unsub == nil {
		local := env.Subscribe(ws.onEvent)
		peers := env.SubscribePeers(ws.onEvent)
		ws.unsub = func() { local(); peers() }
	}
	return w, nil
}

// remove unregisters w; the last waiter out starts the linger.
func (ws *waiters) remove(w *waiter) {
	ws.subMu.Lock()
	defer ws.subMu.Unlock()
	ws.mu.Lock()
	set := ws.byAg[w.agent]
	if _, ok := set[w]; !ok {
		ws.mu.Unlock()
		return
	}
	delete(set, w)
	if len(set) == 0 {
		delete(ws.byAg, w.agent)
	}
	ws.n--
	idle := ws.n == 0
	ws.mu.Unlock()
	if idle && ws.unsub != nil && ws.linger == nil {
		ws.linger = time.AfterFunc(subscriptionLinger, ws.stopIdle)
	}
}

// stopIdle stops listening if no waiter came back during the linger.
func (ws *waiters) stopIdle() {
	ws.subMu.Lock()
	defer ws.subMu.Unlock()
	ws.mu.Lock()
	idle := ws.n == 0
	ws.mu.Unlock()
	if idle && ws.unsub != nil {
		ws.unsub()
		ws.unsub = nil
	}
	ws.linger = nil
}

// close stops listening; later adds fail.
func (ws *waiters) close() {
	ws.subMu.Lock()
	defer ws.subMu.Unlock()
	ws.mu.Lock()
	ws.closed = true
	ws.mu.Unlock()
	if ws.linger != nil {
		ws.linger.Stop()
		ws.linger = nil
	}
	if ws.unsub != nil {
		ws.unsub()
		ws.unsub = nil
	}
}

// onEvent wakes the waiters of the agent a "message" event names. It
// does not block: a waiter already woken keeps its one pending wake-up.
func (ws *waiters) onEvent(ev pipeline.Event) {
	if ev.Kind != EventMessage || ev.Agent == "" {
		return
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.byAg[ev.Agent] {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}
