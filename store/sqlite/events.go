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

	"github.com/armory-dev/armory/store/internal/eventbus"
	"github.com/fsnotify/fsnotify"
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
// Bounds: the publish queue holds eventbus.QueueSize events (past that, an
// event is dropped and counted); a payload of MaxEventPayload bytes or more is
// refused, and a subscriber skips a row whose payload is larger (or not
// a blob); each listener's beat prunes the table to the events of the
// last eventKeep (at most eventKeepRows of them); a subscriber polls every eventPoll and reads at
// most eventReadBatch rows per query.
//
// Wake: a subscribed Store also watches the events database's WAL file
// (PATH-events-wal, fsnotify: inotify on Linux), which every commit to the
// events database writes, and polls as soon as it changes, at most once
// per eventWakeGap; the poll every eventPoll stays, as the fallback when
// the watch cannot be set up or is lost (no inotify, its limits reached, the
// file removed), and a lost watch is set up again at the next listener
// beat. One watch per Store, held by its poller; the WAL is not replaced
// while this Store holds the events database open (SQLite removes it with
// the last connection), so watching the file, not its folder (which holds
// the store's own busy WAL too), is enough. The write that wakes the
// poller comes a moment before the commit is visible to readers (SQLite
// updates the WAL index after writing the frames, in shared memory, which
// no watch sees), so after a woken poll the poller polls again
// eventWakeGap later, doubling back to eventPoll (pollPace): about eight
// small indexed reads per change of the file, at most one per
// eventWakeGap however busy it is.
const (
	// MaxEventPayload is the largest event payload PublishEvent sends, the
	// same bound as the Postgres store's.
	MaxEventPayload = eventbus.MaxPayload

	eventKeep      = time.Minute
	eventKeepRows  = 10000
	eventPoll      = 200 * time.Millisecond
	eventReadBatch = 512
	eventWakeGap   = time.Millisecond
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
// use), the shared bounded publisher (its batches go into the events
// table), and the subscribers with their polling goroutine.
type events struct {
	path string
	id   string // names this Store in listeners: its pollers mark themselves ID.N
	now  func() time.Time

	openOnce sync.Once
	db       *sql.DB
	openErr  error
	pollStmt *sql.Stmt // pollQuery, prepared: a poll runs at every change of the file

	pub     eventbus.Publisher
	subs    eventbus.Subscribers
	pollers int         // pollers started (under subs' lock, in its start func)
	lookOne sync.Once   // the first look, and the look loop
	others  atomic.Bool // another Store listened at the last look

	interval atomic.Int64 // the poller's last interval, in ns (for tests)

	// slow replaces eventPoll when set, and noWatch turns the watch off
	// (tests; set before the first subscription).
	slow    time.Duration
	noWatch bool
	// watched counts the wakes of the watch (for tests).
	watched atomic.Int64

	stop chan struct{} // closed by Close: the goroutines end
	wg   sync.WaitGroup
}

// pollPace is the poller's interval: eventWakeGap after a poll the watch
// woke (the change it saw may become visible a moment after the write that
// woke it), then doubling at each poll back to slow (eventPoll).
type pollPace struct{ cur, slow time.Duration }

// next returns the interval to wait before the next poll; woken: the
// watch woke this poll.
func (p *pollPace) next(woken bool) time.Duration {
	slow := p.slow
	if slow <= 0 {
		slow = eventPoll
	}
	switch {
	case woken:
		p.cur = eventWakeGap
	case p.cur <= 0:
		p.cur = slow
	default:
		p.cur = min(2*p.cur, slow)
	}
	return p.cur
}

// walWatch wakes the poller when the events database's WAL file changes
// (see Wake above). lost is set once it no longer watches.
type walWatch struct {
	w    *fsnotify.Watcher
	lost atomic.Bool
	done chan struct{}
}

// watch starts watching the WAL file of the events database; nil when it
// cannot (the poll is the fallback). Each change sends on wake without
// blocking (wake holds one: changes coalesce).
func (ev *events) watch(wake chan<- struct{}) *walWatch {
	if ev.noWatch {
		return nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil
	}
	if err := w.Add(ev.path + "-wal"); err != nil {
		w.Close()
		return nil
	}
	ww := &walWatch{w: w, done: make(chan struct{})}
	go func() {
		defer close(ww.done)
		defer ww.lost.Store(true)
		for {
			select {
			case e, ok := <-w.Events:
				if !ok {
					return
				}
				if e.Has(fsnotify.Remove) || e.Has(fsnotify.Rename) {
					return // the file is gone: polls only, until the next beat re-arms
				}
				if !e.Has(fsnotify.Write) {
					continue
				}
			case _, ok := <-w.Errors: // an overflow among them: poll, changes may have been missed
				if !ok {
					return
				}
			}
			ev.watched.Add(1)
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}()
	return ww
}

// arm starts the watch (nil when it cannot) and, when it watches, asks for
// one poll at once: what was written before the watch existed raised no
// change it could see (the WAL may not even have existed yet).
func (ev *events) arm(wake chan struct{}) *walWatch {
	ww := ev.watch(wake)
	if ww.ok() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	return ww
}

// unwatched bounds the poller's next interval d by listenerBeat while no
// watch runs, so that setting it up again is tried at the next beat even
// when the poll is slower than a beat.
func (ev *events) unwatched(d time.Duration, ww *walWatch) time.Duration {
	if ev.noWatch || ww.ok() {
		return d
	}
	return min(d, listenerBeat)
}

// close ends the watch and waits for its goroutine; nil-safe.
func (ww *walWatch) close() {
	if ww == nil {
		return
	}
	ww.w.Close()
	<-ww.done
}

// ok reports whether ww still watches.
func (ww *walWatch) ok() bool { return ww != nil && !ww.lost.Load() }

func newEvents(path string, now func() time.Time) *events {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ev := &events{path: path, id: hex.EncodeToString(b[:]), now: now, stop: make(chan struct{})}
	ev.pub.Send = ev.append
	return ev
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
			if err == nil {
				ev.pollStmt, err = db.PrepareContext(ctx, pollQuery)
			}
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
	release, err := s.use()
	if err != nil {
		return false
	}
	defer release()
	ev := s.ev
	if _, err := ev.open(); err != nil {
		return false
	}
	ev.lookOne.Do(func() {
		ev.look()
		ev.wg.Add(1)
		go ev.lookLoop()
	})
	if !ev.others.Load() {
		return false
	}
	return ev.pub.Publish(payload, ev.stop, &ev.wg)
}

// EventsDropped is the number of events PublishEvent refused because its
// queue was full (armory_events_dropped_total).
func (s *Store) EventsDropped() int64 { return s.ev.pub.Dropped() }

// SubscribeEvents calls fn with every event payload published on the
// database file from now on, by any process (this one included), until the
// returned cancel is called. fn runs on the poller's goroutine and must
// not block. Events a subscriber's poll did not reach within eventKeep are
// lost.
func (s *Store) SubscribeEvents(fn func(payload []byte)) (cancel func()) {
	ev := s.ev
	release, err := s.use()
	if err != nil {
		return func() {}
	}
	defer release()
	db, err := ev.open()
	if err != nil {
		return func() {}
	}
	return ev.subs.Add(fn, func() {
		// Each poller marks itself under an id of its own, so that a poller
		// ending (no subscriber left) cannot unmark the next one.
		ev.pollers++
		lid := fmt.Sprintf("%s.%d", ev.id, ev.pollers)
		ev.beat(db, lid, true)
		ev.wg.Add(1)
		go ev.pollLoop(db, lid, latestSeq(db))
	})
}

// append writes batch in one transaction (eventbus.Publisher.Send).
func (ev *events) append(ctx context.Context, batch [][]byte) {
	at := ev.now().UnixNano()
	tx, err := ev.db.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	defer tx.Rollback()
	st, err := tx.PrepareContext(ctx, `INSERT INTO events (at, payload) VALUES (?, ?)`)
	if err != nil {
		return
	}
	defer st.Close()
	for _, p := range batch {
		if _, err := st.ExecContext(ctx, at, p); err != nil {
			return
		}
	}
	_ = tx.Commit()
}

// look sets others: whether a Store other than this one marked itself
// listening within listenerStale.
func (ev *events) look() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int
	now := ev.now()
	// A mark in the future (a clock that jumped back, a bogus row) is no
	// listener: nobody would read or prune what was written for it.
	// This Store's pollers mark themselves ID.N (ID is hex: no LIKE
	// wildcards in it).
	err := ev.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM listeners WHERE id NOT LIKE ? AND seen >= ? AND seen <= ?`,
		ev.id+".%", now.Add(-listenerStale).UnixNano(), now.Add(listenerStale).UnixNano()).Scan(&n)
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
func (ev *events) beat(db *sql.DB, lid string, alive bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := ev.now()
	if !alive {
		_, _ = db.ExecContext(ctx, `DELETE FROM listeners WHERE id = ?`, lid)
		return
	}
	_, _ = db.ExecContext(ctx, `INSERT INTO listeners (id, seen) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET seen = excluded.seen`, lid, now.UnixNano())
	_, _ = db.ExecContext(ctx, `DELETE FROM listeners WHERE seen < ? OR seen > ?`, now.Add(-time.Minute).UnixNano(), now.Add(time.Minute).UnixNano())
	_, _ = db.ExecContext(ctx, pruneEvents, now.Add(-eventKeep).UnixNano(), eventKeepRows)
}

// pruneEvents deletes the events older than ?1 and all but the last ?2.
const pruneEvents = `DELETE FROM events WHERE at < ? OR seq <= (SELECT MAX(seq) FROM events) - ?`

// latestSeq returns the seq of the latest event, or -1 when it cannot be
// read (then the poller reads it again instead of replaying old events).
func latestSeq(db *sql.DB) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var last int64
	if err := db.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM events`).Scan(&last); err != nil {
		return -1
	}
	return last
}

// pollLoop reads the events appended after seq last as soon as the watch
// of the events file wakes it (then at pollPace's quick pace, backing off),
// and every eventPoll in any case, and hands each to the
// subscribers, until the Store closes or no subscriber is left.
func (ev *events) pollLoop(db *sql.DB, lid string, last int64) {
	defer ev.wg.Done()
	defer ev.beat(db, lid, false)
	wake := make(chan struct{}, 1)
	ww := ev.arm(wake)
	defer func() { ww.close() }()
	pace := pollPace{slow: ev.slow}
	d := ev.unwatched(pace.next(false), ww)
	ev.interval.Store(int64(d))
	t := time.NewTimer(d)
	defer t.Stop()
	beaten := ev.now()
	var polled time.Time // the last poll (wall time: the wake's gap)
	for {
		woken := false
		select {
		case <-ev.stop:
			return
		case <-t.C:
		case <-wake: // the events file changed: poll now (at most once per eventWakeGap)
			woken = true
			if gap := eventWakeGap - time.Since(polled); gap > 0 {
				select {
				case <-ev.stop:
					return
				case <-time.After(gap):
				}
			}
		}
		d := ev.unwatched(pace.next(woken), ww)
		ev.interval.Store(int64(d))
		t.Reset(d)
		if ev.subs.Idle() { // the next subscription starts a new poller
			return
		}
		if now := ev.now(); now.Sub(beaten) >= listenerBeat || now.Before(beaten) {
			ev.beat(db, lid, true)
			beaten = now
			if !ww.ok() { // set up, or lost since: try again
				ww.close()
				ww = ev.arm(wake)
			}
		}
		polled = time.Now()
		if last < 0 { // the latest seq could not be read: start from now
			last = latestSeq(db)
			continue
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

const pollQuery = `SELECT seq, CASE WHEN typeof(payload) = 'blob' AND length(payload) < ? THEN payload END
		FROM events WHERE seq > ? ORDER BY seq LIMIT ?`

// poll reads at most eventReadBatch events after seq last and delivers
// them; it returns how many it read and the last seq read.
func (ev *events) poll(db *sql.DB, last int64) (int, int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Only a blob payload under MaxEventPayload bytes is read (what
	// PublishEvent writes); another row's payload, written by something
	// else on the file, is skipped unread (length of a blob reads no
	// content), so a subscriber holds at most eventReadBatch small events.
	rows, err := ev.pollStmt.QueryContext(ctx, MaxEventPayload, last, eventReadBatch)
	if err != nil {
		return 0, last, err
	}
	var got [][]byte
	n := 0
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&last, &p); err != nil {
			rows.Close()
			return n, last, err
		}
		if n++; p != nil {
			got = append(got, p)
		}
	}
	err = errors.Join(rows.Err(), rows.Close())
	ev.subs.Deliver(got...)
	return n, last, err
}

// close ends the goroutines (the publisher first sends what is queued,
// within eventbus.DrainTimeout) and closes the events database.
func (ev *events) close() error {
	close(ev.stop)
	ev.wg.Wait()
	if ev.db != nil {
		return errors.Join(ev.pollStmt.Close(), ev.db.Close())
	}
	return nil
}
