package services

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// hurrying reports whether the waiters hold a hurry of the peers' events.
func (ws *waiters) hurrying() bool {
	ws.subMu.Lock()
	defer ws.subMu.Unlock()
	return ws.hurry != nil
}

// A waiting ask hurries the other processes' events (on SQLite: the fast
// poll of the events file), and only while some ask waits: the hurry ends
// with the last waiter, well before the subscription's linger.
func TestAskHurriesPeersOnlyWhileWaiting(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	e, m := open(t, world, db, Options{})
	if _, ok := e.Store().(store.EventsHurrier); !ok {
		t.Fatal("the SQLite store has no EventsHurrier")
	}
	if m.waiters.hurrying() {
		t.Fatal("hurrying before any ask")
	}
	done := make(chan pipeline.Outcome, 1)
	go func() {
		done <- exec(t, e, "architect", "syscall.ask", map[string]any{"to": "reviewer", "message": "there?", "timeout_secs": 30})
	}()
	deadline := time.Now().Add(time.Minute) // a bound, not a timing check
	for m.waiters.waiting() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the ask never waited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !m.waiters.hurrying() {
		t.Fatal("an ask waits, and the peers' events are not hurried")
	}
	var asks []*store.Message
	for len(asks) == 0 {
		var err error
		if asks, _, err = e.Store().ReadInbox(context.Background(), store.InboxQuery{Agent: "reviewer"}); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the ask never reached reviewer's inbox")
		}
		time.Sleep(10 * time.Millisecond)
	}
	rep := &store.Message{To: "architect", From: "reviewer", Kind: store.KindReply, ReplyTo: asks[0].ID, Body: "yes"}
	if err := e.Store().SendReply(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	m.publishMessage(rep)
	if o := <-done; o.Status != audit.StatusSuccess || !strings.Contains(o.Result, "yes") {
		t.Fatalf("ask: %s %s", o.Status, o.Result)
	}
	if m.waiters.hurrying() {
		t.Fatal("still hurrying after the last ask ended")
	}
}
