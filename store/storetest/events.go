package storetest

import (
	"fmt"

	"testing"
	"time"

	"github.com/armory-dev/armory/store/internal/eventbus"
)

// testEvents: an event PublishEvent reports sent reaches a subscriber on
// another Store on the database (a backend that cannot reach other
// processes reports false and delivers nothing); a cancelled subscription
// and a closed Store get nothing; EventsDropped counts only drops.
func testEvents(t *testing.T, open Opener) {
	a, b := open(t), open(t)
	got := make(chan string, 16)
	cancel := b.SubscribeEvents(func(p []byte) { got <- string(p) })
	sent := a.PublishEvent([]byte("hello"))
	deadline := time.After(time.Minute) // a bound, not a timing check
	for sent {
		select {
		case p := <-got:
			if p == "hello" {
				sent = false
				continue
			}
			t.Fatalf("unexpected event %q", p)
		case <-deadline:
			t.Fatal("a sent event never reached the other Store")
		}
	}
	// An event of MaxPayload bytes or more is refused on every backend.
	if a.PublishEvent(make([]byte, eventbus.MaxPayload)) {
		t.Fatalf("an event of %d bytes was sent", eventbus.MaxPayload)
	}
	cancel()
	cancel() // idempotent
	if a.EventsDropped() != 0 {
		t.Fatalf("EventsDropped = %d with an empty queue", a.EventsDropped())
	}
	a.Close()
	if a.PublishEvent([]byte("after close")) {
		t.Fatal("a closed Store sent an event")
	}
}

// testEventsSentBeforeClose: events a Store queued just before it closed
// still reach the other Stores (a short process, such as a CLI command
// deciding an approval, closes right after publishing).
func testEventsSentBeforeClose(t *testing.T, open Opener) {
	a, b := open(t), open(t)
	const n = 600 // more than one batch sent (64) and one batch read (SQLite: 512)
	got := make(chan string, n)
	defer b.SubscribeEvents(func(p []byte) { got <- string(p) })()
	sent := 0
	for i := range n {
		if a.PublishEvent(fmt.Appendf(nil, "e%d", i)) {
			sent++
		}
	}
	a.Close()
	if sent == 0 {
		return // this backend reaches no other process
	}
	if sent != n {
		t.Fatalf("%d of %d events queued with an empty queue", sent, n)
	}
	deadline := time.After(time.Minute) // a bound, not a timing check
	seen := map[string]bool{}
	for len(seen) < n {
		select {
		case p := <-got:
			seen[p] = true
		case <-deadline:
			t.Fatalf("%d of %d events published before Close arrived", len(seen), n)
		}
	}
}
