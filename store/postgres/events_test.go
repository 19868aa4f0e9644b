package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/postgres"
)

// Events published through one Store reach every Store on the database
// (the publisher's own included), in order, batched or not; a payload too
// large for NOTIFY is refused, and nothing is sent after Close.
func TestEventsCrossStores(t *testing.T) {
	open, _ := opener(postgres.Options{})
	a, b := open(t), open(t)
	type sink struct {
		mu  sync.Mutex
		got []string
	}
	var ga, gb sink
	listen := func(s store.Store, g *sink) {
		s.SubscribeEvents(func(p []byte) {
			g.mu.Lock()
			g.got = append(g.got, string(p))
			g.mu.Unlock()
		})
	}
	listen(a, &ga)
	listen(b, &gb)
	const n = 300 // more than one batch
	for i := range n {
		if !a.PublishEvent([]byte(fmt.Sprint("e", i))) {
			t.Fatalf("event %d not queued", i)
		}
	}
	if a.PublishEvent(bytes.Repeat([]byte("x"), postgres.MaxEventPayload)) {
		t.Fatal("an oversized payload was queued")
	}
	for name, g := range map[string]*sink{"A": &ga, "B": &gb} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			g.mu.Lock()
			k := len(g.got)
			g.mu.Unlock()
			if k >= n || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		g.mu.Lock()
		if len(g.got) != n {
			t.Fatalf("%s received %d of %d events", name, len(g.got), n)
		}
		for i, p := range g.got {
			if p != fmt.Sprint("e", i) {
				t.Fatalf("%s: event %d is %q", name, i, p)
			}
		}
		g.mu.Unlock()
	}
	a.Close()
	if a.PublishEvent([]byte("late")) {
		t.Fatal("a closed Store queued an event")
	}
}

// A flood of events faster than NOTIFY drains them is held at the queue's
// bound: the excess is refused (PublishEvent false, counted in
// EventsDropped), and every event that was accepted arrives.
func TestEventsQueueBounded(t *testing.T) {
	open, _ := opener(postgres.Options{})
	s := open(t)
	var got atomic.Int64
	s.SubscribeEvents(func([]byte) { got.Add(1) })
	accepted := int64(0)
	const n = 200_000
	for i := range n {
		if s.PublishEvent([]byte(fmt.Sprint("f", i))) {
			accepted++
		}
	}
	if dropped := s.EventsDropped(); dropped == 0 || accepted+dropped != n {
		t.Fatalf("%d accepted, %d dropped of %d: the queue did not bound the flood", accepted, dropped, n)
	}
	deadline := time.Now().Add(60 * time.Second)
	for got.Load() < accepted && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := got.Load(); g != accepted {
		t.Fatalf("%d of %d accepted events arrived", g, accepted)
	}
}

// Stores in two schemas of one database (search_path) are two systems:
// one's events do not reach the other's subscribers, though NOTIFY
// channels belong to the database. B's event is delivered in its own
// schema before A's is sent, so had it crossed, A would get it first.
func TestEventsStayInTheirSchema(t *testing.T) {
	openStore := func(dsn string) store.Store {
		s, err := postgres.OpenWith(context.Background(), dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	dsnA, dsnB := freshSchema(t), freshSchema(t)
	a, a2, b, b2 := openStore(dsnA), openStore(dsnA), openStore(dsnB), openStore(dsnB)
	gotA, gotB := make(chan string, 16), make(chan string, 16)
	defer a.SubscribeEvents(func(p []byte) { gotA <- string(p) })()
	defer b2.SubscribeEvents(func(p []byte) { gotB <- string(p) })()
	deadline := time.After(time.Minute) // a bound, not a timing check
	if !b.PublishEvent([]byte("schema B")) {
		t.Fatal("B's event not queued")
	}
	select {
	case <-gotB:
	case <-deadline:
		t.Fatal("B's event never reached B")
	}
	if !a2.PublishEvent([]byte("schema A")) {
		t.Fatal("A's event not queued")
	}
	select {
	case p := <-gotA:
		if p != "schema A" {
			t.Fatalf("a subscriber of schema A got %q", p)
		}
	case <-deadline:
		t.Fatal("A's event never reached A")
	}
}
