package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/store/sqlite"
)

// A Store publishes only while another Store listens on the file: a lone
// listening Store (one armory serve) writes no events at all; once another
// Store listens, events flow to it; when it stops listening, they stop
// again. Each wait is bounded, not timed.
func TestEventsOnlyWhileAnotherStoreListens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "armory.db")
	a, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	defer a.SubscribeEvents(func([]byte) {})() // a listens to itself only
	if a.PublishEvent([]byte("alone")) {
		t.Fatal("a lone Store published an event nobody else can get")
	}
	if n := testenv.SQLiteRows(t, path+"-events", "events"); n != 0 {
		t.Fatalf("%d events written with no other listener", n)
	}

	b, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan string, 64)
	cancel := b.SubscribeEvents(func(p []byte) { got <- string(p) })
	eventually(t, "a publishes once b listens", func() bool { return a.PublishEvent([]byte("hello")) })
	select {
	case p := <-got:
		if p != "hello" {
			t.Fatalf("b got %q", p)
		}
	case <-time.After(time.Minute): // a bound, not a timing check
		t.Fatal("b never got the event")
	}

	cancel()
	eventually(t, "a stops publishing once b stopped listening", func() bool { return !a.PublishEvent([]byte("bye")) })
}

// eventually waits, at most a minute, for ok to hold, trying it every
// 100 ms.
func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal(what + ": not within a minute")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// The events file stays bounded however events were written: a listener
// prunes events older than a minute (and all but the last 10,000) when it
// marks itself alive, which it does when it starts listening.
func TestEventsFilePruned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "armory.db")
	a, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	a.SubscribeEvents(func([]byte) {})() // creates the events file
	db, err := sql.Open("sqlite", path+"-events")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old := time.Now().Add(-2 * time.Minute).UnixNano()
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 12000)
		INSERT INTO events (at, payload) SELECT CASE WHEN i <= 100 THEN ? ELSE ? END, 'x' FROM n`, old, time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	b, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	defer b.SubscribeEvents(func([]byte) {})()
	var n, oldest int
	if err := db.QueryRow(`SELECT COUNT(*), COUNT(*) FILTER (WHERE at = ?) FROM events`, old).Scan(&n, &oldest); err != nil {
		t.Fatal(err)
	}
	if n != 10000 || oldest != 0 {
		t.Fatalf("after pruning: %d events (%d older than a minute), want 10000 and 0", n, oldest)
	}
}
