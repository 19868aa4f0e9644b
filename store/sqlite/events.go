package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"time"
)

// Events (store.Events) between the processes that share a database file
// pass through a second SQLite database beside it, PATH-events: a table of
// recent events that publishers append to and subscribers poll. It is a
// file of its own, with synchronous=OFF, because events are best effort
// (the audit records and approvals are the truth): publishing one costs no
// fsync and never takes the store's write lock, so it adds nothing to a
// call's commit. A crash may lose the events of its last moments, which is
// what "best effort" allows.
//
// A Store publishes only while another Store listens on the file: each
// listening Store keeps a row in the listeners table fresh (every
// listenerBeat), and a publishing Store checks for another fresh row when
// it first publishes and then every listenerBeat. A lone `armory serve`
// therefore writes no events at all; a CLI command beside it writes its
// own, which the server streams.
//
// Bounds: the publish queue holds eventQueue events (past that, an event
// is dropped and counted); a payload of MaxEventPayload bytes or more is
// refused; the table keeps the events of the last eventKeep (at most
// eventKeepRows of them); a subscriber polls every eventPoll and reads at
// most eventReadBatch rows per query.
const (
	// MaxEventPayload is the largest event payload PublishEvent sends, the
	// same bound as the Postgres store's.
	MaxEventPayload = 7900

	eventQueue     = 1024
	eventBatch     = 64
	eventKeep      = time.Minute
	eventKeepRows  = 10000
	eventPoll      = 200 * time.Millisecond
	eventReadBatch = 512
	// eventDrainTimeout bounds how long Close spends sending queued events.
	eventDrainTimeout = 2 * time.Second
	// listenerBeat is how often a listening Store marks itself alive and a
	// publishing Store looks for listeners; a mark older than
	// listenerStale is not a listener.
	listenerBeat  = 2 * time.Second
	listenerStale = 3 * listenerBeat
)

const eventsSchema = `CREATE TABLE IF NOT EXISTS events (
	seq     INTEGER PRIMARY KEY AUTOINCREMENT,
	at      INTEGER NOT NULL,
	payload BLOB    NOT NULL
);
CREATE TABLE IF NOT EXISTS listeners (
	id   TEXT    PRIMARY KEY,
	seen INTEGER NOT NULL
)`

// events is the Store's event bus: the events database (opened on first
// use), the publish queue and its goroutine, and the subscribers with
// their polling goroutine.
type events struct {
	path string
	id   string // this Store's row in listeners
	now  func() time.Time

	openOnce sync.Once
	db       *sql.DB
	openErr  error

	pubOnce sync.Once
	q       chan []byte
	dropped atomic.Int64
	others  atomic.Bool // another Store listened at the last look

	mu      sync.Mutex
	subs    map[*func([]byte)]struct{}
	polling bool

	stop chan struct{} // closed by Close: the goroutines end
	wg   sync.WaitGroup
}

func newEvents(path string, now func() time.Time) *events {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &events{path: path, id: hex.EncodeToString(b[:]), now: now, stop: make(chan struct{})}
}

// open opens the events database, creating it and its table on first use.
func (ev *events) open() (*sql.DB, error) {
	ev.openOnce.Do(func() {
		q := url.Values{}
		q.Add("_pragma", "busy_timeout(5000)")
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(OFF)")
		db, err := sql.Open("sqlite", ev.path+"?"+q.Encode())
		if err == nil {
			db.SetMaxOpenConns(2) // the publisher and the poller
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_, err = db.ExecContext(ctx, eventsSchema)
			cancel()
			if err != nil {
				db.Close()
			}
		}
		if err != nil {
			ev.openErr = fmt.Errorf("sqlite: events database %s: %w", ev.path, err)
			return
		}
		ev.db = db
	})
	return ev.db, ev.openErr
}

// PublishEvent sends payload to every process subscribed on the database
// file, this one included, without waiting: it is queued (at most 1,024
// events; past that, and for a payload of MaxEventPayload bytes or more,
// it is dropped and false returned). False too when no other Store
// listens on the file (nobody would get the event), when the Store is
// closed, and when its events database cannot be opened.
func (s *Store) PublishEvent(payload []byte) bool {
	if len(payload) >= MaxEventPayload {
		return false
	}
	release, err := s.use()
	if err != nil {
		return false
	}
	defer release()
	ev := s.ev
	if _, err := ev.open(); err != nil {
		return false
	}
	ev.pubOnce.Do(func() {
		ev.look()
		ev.q = make(chan []byte, eventQueue)
		ev.wg.Add(2)
		go ev.publishLoop()
		go ev.lookLoop()
	})
	if !ev.others.Load() {
		return false
	}
	select {
	case ev.q <- payload:
		return true
	default:
		ev.dropped.Add(1)
		return false
	}
}

// EventsDropped is the number of events PublishEvent refused because its
// queue was full (armory_events_dropped_total).
func (s *Store) EventsDropped() int64 { return s.ev.dropped.Load() }

// SubscribeEvents calls fn with every event payload published on the
// database file from now on, by any process (this one included), until the
// returned cancel is called. fn runs on the poller's goroutine and must
// not block. Events a subscriber's poll did not reach within eventKeep are
// lost.
func (s *Store) SubscribeEvents(fn func(payload []byte)) (cancel func()) {
	ev := s.ev
	p := &fn
	release, err := s.use()
	if err != nil {
		return func() {}
	}
	defer release()
	db, err := ev.open()
	if err != nil {
		return func() {}
	}
	ev.mu.Lock()
	if ev.subs == nil {
		ev.subs = map[*func([]byte)]struct{}{}
	}
	ev.subs[p] = struct{}{}
	if !ev.polling {
		ev.polling = true
		var last int64
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&last)
		cancel()
		ev.beat(db, true)
		ev.wg.Add(1)
		go ev.pollLoop(db, last)
	}
	ev.mu.Unlock()
	return func() {
		ev.mu.Lock()
		delete(ev.subs, p)
		ev.mu.Unlock()
	}
}

// publishLoop appends queued events in batches, one transaction a batch,
// until the Store closes, then appends what is still queued (within
// eventDrainTimeout), so that a short process (a CLI command deciding an
// approval) does not lose its events by closing right after publishing.
func (ev *events) publishLoop() {
	defer ev.wg.Done()
	batch := make([][]byte, 0, eventBatch)
	var appended int
	for {
		select {
		case <-ev.stop:
			ctx, cancel := context.WithTimeout(context.Background(), eventDrainTimeout)
			defer cancel()
			for ctx.Err() == nil {
				if batch = ev.fill(batch[:0]); len(batch) == 0 {
					return
				}
				_ = ev.append(ctx, batch, false)
			}
			return
		case p := <-ev.q:
			batch = append(batch[:0], p)
		}
		batch = ev.fill(batch)
		appended += len(batch)
		prune := appended >= eventBatch*4
		if prune {
			appended = 0
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = ev.append(ctx, batch, prune)
		cancel()
	}
}

// fill adds queued events to batch, without waiting, up to eventBatch.
func (ev *events) fill(batch [][]byte) [][]byte {
	for len(batch) < eventBatch {
		select {
		case p := <-ev.q:
			batch = append(batch, p)
		default:
			return batch
		}
	}
	return batch
}

// append writes batch in one transaction; with prune it also deletes the
// events older than eventKeep and all but the last eventKeepRows.
func (ev *events) append(ctx context.Context, batch [][]byte, prune bool) error {
	at := ev.now()
	tx, err := ev.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO events (at, payload) VALUES (?, ?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, p := range batch {
		if _, err := st.ExecContext(ctx, at.UnixNano(), p); err != nil {
			return err
		}
	}
	if prune {
		if _, err := tx.ExecContext(ctx, pruneEvents, at.Add(-eventKeep).UnixNano(), eventKeepRows); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// look sets others: whether a Store other than this one marked itself
// listening within listenerStale.
func (ev *events) look() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	err := ev.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM listeners WHERE id <> ? AND seen >= ?`,
		ev.id, ev.now().Add(-listenerStale).UnixNano()).Scan(&n)
	ev.others.Store(err == nil && n > 0)
}

// lookLoop looks for listeners every listenerBeat until the Store closes.
func (ev *events) lookLoop() {
	defer ev.wg.Done()
	t := time.NewTicker(listenerBeat)
	defer t.Stop()
	for {
		select {
		case <-ev.stop:
			return
		case <-t.C:
			ev.look()
		}
	}
}

// beat marks this Store listening (alive now), or, with alive false, not
// listening any more. Alive, it also prunes: the events older than
// eventKeep and all but the last eventKeepRows, and the listeners gone for
// a minute. There is a listener wherever events are written, so the file
// stays bounded however few events each publisher writes.
func (ev *events) beat(db *sql.DB, alive bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := ev.now()
	if !alive {
		_, _ = db.ExecContext(ctx, `DELETE FROM listeners WHERE id = ?`, ev.id)
		return
	}
	_, _ = db.ExecContext(ctx, `INSERT INTO listeners (id, seen) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET seen = excluded.seen`, ev.id, now.UnixNano())
	_, _ = db.ExecContext(ctx, `DELETE FROM listeners WHERE seen < ?`, now.Add(-time.Minute).UnixNano())
	_, _ = db.ExecContext(ctx, pruneEvents, now.Add(-eventKeep).UnixNano(), eventKeepRows)
}

// pruneEvents deletes the events older than ?1 and all but the last ?2.
const pruneEvents = `DELETE FROM events WHERE at < ? OR seq <= (SELECT MAX(seq) FROM events) - ?`

// pollLoop reads the events appended after seq last, every eventPoll,
// and hands each to the subscribers, until the Store closes or no
// subscriber is left.
func (ev *events) pollLoop(db *sql.DB, last int64) {
	defer ev.wg.Done()
	defer ev.beat(db, false)
	t := time.NewTicker(eventPoll)
	defer t.Stop()
	beaten := ev.now()
	for {
		select {
		case <-ev.stop:
			return
		case <-t.C:
		}
		ev.mu.Lock()
		if len(ev.subs) == 0 { // the next subscription starts a new poller
			ev.polling = false
			ev.mu.Unlock()
			return
		}
		ev.mu.Unlock()
		if now := ev.now(); now.Sub(beaten) >= listenerBeat || now.Before(beaten) {
			ev.beat(db, true)
			beaten = now
		}
		for {
			n, next, err := ev.poll(db, last)
			last = next
			if err != nil || n < eventReadBatch {
				break
			}
		}
	}
}

// poll reads at most eventReadBatch events after seq last and delivers
// them; it returns how many it read and the last seq read.
func (ev *events) poll(db *sql.DB, last int64) (int, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT seq, payload FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, last, eventReadBatch)
	if err != nil {
		return 0, last, err
	}
	var got [][]byte
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&last, &p); err != nil {
			rows.Close()
			return len(got), last, err
		}
		got = append(got, p)
	}
	err = errors.Join(rows.Err(), rows.Close())
	ev.mu.Lock()
	subs := make([]func([]byte), 0, len(ev.subs))
	for p := range ev.subs {
		subs = append(subs, *p)
	}
	ev.mu.Unlock()
	for _, p := range got {
		for _, fn := range subs {
			fn(p)
		}
	}
	return len(got), last, err
}

// close ends the goroutines (the publisher first sends what is queued,
// within eventDrainTimeout) and closes the events database.
func (ev *events) close() error {
	close(ev.stop)
	ev.wg.Wait()
	if ev.db != nil {
		return ev.db.Close()
	}
	return nil
}
