package storetest

import (
	"testing"
	"time"
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
