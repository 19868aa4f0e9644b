package sqlite_test

import (
	"database/sql"
	"fmt"
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
	path, _, db := withEventsFile(t)
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

// A local writer of the events file cannot make a subscriber read or hand
// on more than MaxEventPayload bytes an event: rows holding a larger
// payload (as a blob or as text) or a payload that is not a blob are
// skipped, and the events after them still arrive.
func TestEventsFileHostileRowsSkipped(t *testing.T) {
	_, a, db := withEventsFile(t)
	got := make(chan []byte, 64)
	defer a.SubscribeEvents(func(p []byte) { got <- p })()
	now := time.Now().UnixNano()
	big := make([]byte, 4<<20)
	if _, err := db.Exec(`INSERT INTO events (at, payload) VALUES (?, ?), (?, ?), (?, ?), (?, 12345), (?, ?)`,
		now, big, now, string(big), now, "a text, not a blob", now, now, []byte("ok")); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(time.Minute) // a bound, not a timing check
	for {
		select {
		case p := <-got:
			if string(p) == "ok" {
				return
			}
			t.Fatalf("the subscriber got a bogus row's payload (%d bytes)", len(p))
		case <-deadline:
			t.Fatal("the event after the bogus rows never arrived")
		}
	}
}

// A listener row marked alive in the future (a local writer, or a clock
// that jumped back) does not count as a listener: a Store with no real
// listener beside it writes no events that nobody would read or prune.
func TestEventsFutureListenerIgnored(t *testing.T) {
	_, a, db := withEventsFile(t)
	if _, err := db.Exec(`INSERT INTO listeners (id, seen) VALUES ('ghost', ?)`, time.Now().Add(time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if a.PublishEvent([]byte("to nobody")) {
		t.Fatal("a Store published to a listener marked alive an hour from now")
	}
}

// A subscriber that cannot read where the events end when it starts
// (the file busy or broken for a moment) starts from the end once it can,
// instead of replaying every recent event into its new stream.
func TestEventsSubscriberStartsAtTheEndAfterAFailedRead(t *testing.T) {
	path, a, db := withEventsFile(t)
	// a's subscription (which made the file) is over once its poller has
	// taken its listener row away: until then a Store still publishes,
	// and "nobody listens" below would not hold.
	eventually(t, "a's listener gone", func() bool {
		var n int
		return db.QueryRow(`SELECT COUNT(*) FROM listeners`).Scan(&n) == nil && n == 0
	})
	now := time.Now().UnixNano()
	for i := range 100 {
		if _, err := db.Exec(`INSERT INTO events (at, payload) VALUES (?, ?)`, now, []byte(fmt.Sprint("old", i))); err != nil {
			t.Fatal(err)
		}
	}
	b, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.PublishEvent([]byte("opens b's events file")) // nobody listens: not sent
	if _, err := db.Exec(`ALTER TABLE events RENAME TO events_away`); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 256)
	defer b.SubscribeEvents(func(p []byte) { got <- string(p) })() // its first read fails
	if _, err := db.Exec(`ALTER TABLE events_away RENAME TO events`); err != nil {
		t.Fatal(err)
	}
	// New events, until one arrives (those published before the poller
	// found the end are behind it): the first to arrive must be new.
	eventually(t, "a new event arrives", func() bool {
		a.PublishEvent([]byte("new"))
		select {
		case p := <-got:
			if p != "new" {
				t.Fatalf("the new subscriber got the old event %q", p)
			}
			return true
		default:
			return false
		}
	})
}

// withEventsFile opens a Store on a new database, has it create its events
// file, and opens that file directly, as another local writer would.
func withEventsFile(t *testing.T) (path string, s *sqlite.Store, events *sql.DB) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "armory.db")
	s, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	s.SubscribeEvents(func([]byte) {})() // creates the events file
	events, err = sql.Open("sqlite", path+"-events")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { events.Close() })
	return path, s, events
}

// The poller's pace: every EventPoll; after a poll the watch woke, again
// EventWakeGap later, then doubling back to EventPoll.
func TestEventsPollPace(t *testing.T) {
	gap, slow := sqlite.EventWakeGap, sqlite.EventPoll
	if 128*gap >= slow || 256*gap < slow {
		t.Fatalf("the test assumes 128×%v < %v ≤ 256×%v", gap, slow, gap)
	}
	got := sqlite.Pace(false, true, false, false, false, false, false, false, false, false, false, true, false)
	want := []time.Duration{slow, gap, 2 * gap, 4 * gap, 8 * gap, 16 * gap, 32 * gap, 64 * gap, 128 * gap, slow, slow, gap, 2 * gap}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pace %v, want %v", got, want)
	}
}

// The watch of the events file wakes a subscriber as soon as another Store
// writes: with the poll an hour apart (so only the watch can deliver within
// the test's bound), each of several events from b reaches a, in order.
// Without the watch, the poll still delivers (the fallback).
func TestEventsWatchWakesSubscriber(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(fmt.Sprint("watch=", watch), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "armory.db")
			a, err := sqlite.OpenWith(path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			b, err := sqlite.OpenWith(path, sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			slow := time.Hour
			if !watch {
				slow = 20 * time.Millisecond
			}
			sqlite.SetEventPoll(a, slow, watch)
			got := make(chan string, 64)
			defer a.SubscribeEvents(func(p []byte) { got <- string(p) })()
			eventually(t, "b publishes to a", func() bool { return b.PublishEvent([]byte("e0")) })
			for i := range 5 {
				if i > 0 && !b.PublishEvent(fmt.Appendf(nil, "e%d", i)) {
					t.Fatalf("event %d not published", i)
				}
				select {
				case p := <-got:
					if want := fmt.Sprintf("e%d", i); p != want {
						t.Fatalf("a got %q, want %q", p, want)
					}
				case <-time.After(time.Minute): // a bound, not a timing check
					t.Fatalf("a never got event %d", i)
				}
			}
			if n := sqlite.EventWakes(a); watch != (n > 0) {
				t.Fatalf("watch %v: %d wakes", watch, n)
			}
		})
	}
}
