// Package sqlite is the embedded store.Store: one SQLite file (pure Go,
// modernc.org/sqlite) in WAL mode, shared safely by several processes.
//
// Writes go through one writer connection (audit group commits, approvals,
// counters) and reads through a small pool of read-only connections, which
// WAL lets run alongside the writer. Every write transaction is BEGIN
// IMMEDIATE, so a process takes the file's write lock before it reads the
// audit head: the chain stays exact across processes. Waiting for the lock
// is bounded by the busy timeout.
//
// The committer keeps the audit head and the admission state (session
// starts, limit overrides, counters) from one committed batch to the next,
// and reuses them only while, read inside the next batch's transaction,
// PRAGMA data_version (another connection committed), the count of this
// Store's own writes of that state outside the committer, and the writer
// connection are all unchanged; otherwise it reads them afresh.
//
// Durability: with the default Synchronous "FULL", a commit is fsynced to
// the WAL before AppendAudit returns, so an acknowledged record survives a
// power loss. With "NORMAL" (WAL mode), commits survive a crash of the
// process but the last ones may roll back after an OS crash or power loss;
// the database stays consistent either way. Group commit makes either cost
// one fsync per batch, not per record.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/internal/auditrow"
	"github.com/armory-dev/armory/store/internal/commit"
	"github.com/armory-dev/armory/store/internal/notify"
	"github.com/armory-dev/armory/store/internal/sqlstore"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tunes a Store. The zero value gives the defaults.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "FULL" (default) or
	// "NORMAL" (see the package documentation for what each guarantees).
	Synchronous string
	// BusyTimeout bounds how long a write waits for another process's
	// write lock (default 10s).
	BusyTimeout time.Duration
	// MaxBatch bounds the audit records per group commit (default 256);
	// Queue bounds the records waiting for one (default 4096).
	MaxBatch, Queue int
	// Readers is the size of the read connection pool (default 4).
	Readers int
	// Now is the clock for approval, decision and session times (default
	// time.Now).
	Now func() time.Time
	// PollMax bounds the backoff of WaitApproval's polling for decisions
	// made by other processes (default 500ms). Decisions made through this
	// Store wake waiters at once.
	PollMax time.Duration
	// Durability is store.Strict (default) or store.Batched: every commit
	// with synchronous=NORMAL, the -wal file fsynced at most Window
	// (default store.DefaultDurabilityWindow) later (durability.go).
	// Batched overrides Synchronous.
	Durability store.Durability
	Window     time.Duration
}

// Store is a store.Store on one SQLite file. It is safe for concurrent use.
type Store struct {
	// Core implements what is the same in both SQL backends (audit reads,
	// approvals, session reads, tokens, pins, run claims).
	*sqlstore.Core

	w, r  *sql.DB
	opts  Options
	batch *commit.Batcher
	hub   notify.Hub
	gate  *sqlstore.Gate

	// Prepared multi-row statements by row count (insertSizes): audit
	// inserts, counter upserts, session starts.
	insert, setCounters, startSessions map[int]*sql.Stmt
	readHead, moveHead, dataVersion    *sql.Stmt
	// hotReads (on the readers) and hotWrites (on the writer) are the
	// shared layer's hot statements, prepared (sqlstore.HotReads), by text.
	hotReads, hotWrites map[string]*sql.Stmt
	admitStmts          struct{ start, overrides, counter *sql.Stmt }

	// tokenEpochFile is replaced whenever a token is revoked (TokenEpoch).
	tokenEpochFile string
	// ev is the event bus between the processes on this file (events.go).
	ev *events

	// conns counts the writer connections opened; writes counts the
	// non-committer writes of admission state. Either changing voids the
	// committer's cache (see flush).
	conns  *countingConnector
	writes atomic.Uint64

	// commits counts the committed group commits: [0] durable, [1] relaxed
	// (CommitCounts).
	commits [2]atomic.Int64

	// syncer keeps the durable point and, Batched, fsyncs the WAL;
	// walPath is the -wal file.
	syncer  *commit.Syncer
	walPath string

	// Committer state (flush runs only on the committer goroutine).
	scratch []commit.Entry
	args    []any
	cache   commitCache
}

// commitCache is what the committer keeps from its last committed batch:
// the audit head and the admission state (commit.Cache), valid for the next
// batch only if the file's data_version, the Store's write count and the
// writer connection are all what they were when that batch committed.
type commitCache struct {
	valid       bool
	dataVersion int64
	writes      uint64
	conns       uint64
	head        audit.Head
	adm         *commit.Cache
}

// countingConnector opens the writer's connections and counts them.
// PRAGMA data_version is a property of one connection: if database/sql
// replaces the writer connection, values from the old one mean nothing.
type countingConnector struct {
	dsn    string
	drv    driver.Driver
	opened atomic.Uint64
}

func (c *countingConnector) Connect(context.Context) (driver.Conn, error) {
	c.opened.Add(1)
	return c.drv.Open(c.dsn)
}

func (c *countingConnector) Driver() driver.Driver { return c.drv }

// sqliteDriver is the registered "sqlite" driver (sql.Open does not
// connect).
var sqliteDriver = func() driver.Driver {
	db, err := sql.Open("sqlite", "")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	return db.Driver()
}()

// Store implements every role (store.Store embeds them all).
var _ store.Store = (*Store)(nil)

// insertSizes are the row counts of the prepared audit inserts; a batch is
// written greedily with the largest that fit.
var insertSizes = []int{64, 16, 4, 1}

// OpenWith opens the database at path. It applies the embedded migrations
// that the file lacks (serialized across processes by the write lock).
func OpenWith(path string, opts Options) (*Store, error) {
	if opts.Synchronous == "" {
		opts.Synchronous = "FULL"
	}
	opts.Synchronous = strings.ToUpper(opts.Synchronous)
	if opts.Synchronous != "FULL" && opts.Synchronous != "NORMAL" {
		return nil, fmt.Errorf("sqlite: open: %w: synchronous must be FULL or NORMAL", store.ErrInvalid)
	}
	var err error
	if opts.Durability, opts.Window, err = opts.Durability.Normalize(opts.Window); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	if opts.Durability == store.Batched {
		opts.Synchronous = "NORMAL"
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 10 * time.Second
	}
	if opts.Readers <= 0 {
		opts.Readers = 4
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollMax <= 0 {
		opts.PollMax = 500 * time.Millisecond
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: open %q: %w: path must not contain ? or #", path, store.ErrInvalid)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+opts.Synchronous+")")
	q.Add("_pragma", "temp_store(MEMORY)")
	q.Add("_txlock", "immediate")
	conns := &countingConnector{dsn: path + "?" + q.Encode(), drv: sqliteDriver}
	w := sql.OpenDB(conns)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{w: w, opts: opts, gate: sqlstore.NewGate(), conns: conns, tokenEpochFile: path + "-tokens",
		insert: map[int]*sql.Stmt{}, setCounters: map[int]*sql.Stmt{}, startSessions: map[int]*sql.Stmt{}}
	s.cache.adm = commit.NewCache(0)
	s.walPath = path + "-wal"
	s.ev = newEvents(path+"-events", time.Now) // wall time: the events file is shared with other processes
	// A new database file is switched to WAL by the first connection;
	// another process opening the same new file at that moment can get
	// SQLITE_BUSY from the journal-mode switch, which does not wait on the
	// busy handler. Retry that case, bounded (about 5 s in all).
	for attempt := 0; ; attempt++ {
		err := s.migrate()
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "database is locked") || attempt >= 20 {
			w.Close()
			return nil, err
		}
		time.Sleep(min(time.Duration(10<<attempt)*time.Millisecond, 500*time.Millisecond))
	}
	rq := url.Values{}
	rq.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", opts.BusyTimeout.Milliseconds()))
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open: %w", err)
	}
	r.SetMaxOpenConns(opts.Readers)
	r.SetMaxIdleConns(opts.Readers)
	s.r = r
	for _, n := range insertSizes {
		for _, ps := range []struct {
			m map[int]*sql.Stmt
			q string
		}{
			{s.insert, insertSQL(n)},
			{s.setCounters, rowsSQL(`INSERT INTO counters (session, name, value) VALUES `, 3, n,
				` ON CONFLICT (session, name) DO UPDATE SET value = excluded.value`)},
			{s.startSessions, rowsSQL(`INSERT INTO sessions (id, started_us) VALUES `, 2, n, ` ON CONFLICT (id) DO NOTHING`)},
		} {
			st, err := w.Prepare(ps.q)
			if err != nil {
				s.closeDBs()
				return nil, fmt.Errorf("sqlite: prepare: %w", err)
			}
			ps.m[n] = st
		}
	}
	if s.readHead, err = w.Prepare(`SELECT seq, hash FROM audit_head WHERE id = 1`); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: prepare: %w", err)
	}
	if s.moveHead, err = w.Prepare(`UPDATE audit_head SET seq = ?, hash = ? WHERE id = 1`); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: prepare: %w", err)
	}
	if s.dataVersion, err = w.Prepare(`PRAGMA data_version`); err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("sqlite: prepare: %w", err)
	}
	for _, hot := range []struct {
		db *sql.DB
		m  *map[string]*sql.Stmt
		qs []string
	}{{r, &s.hotReads, sqlstore.HotReads()}, {w, &s.hotWrites, sqlstore.HotWrites()}} {
		*hot.m = make(map[string]*sql.Stmt, len(hot.qs))
		for _, q := range hot.qs {
			st, err := hot.db.Prepare(q)
			if err != nil {
				s.closeDBs()
				return nil, fmt.Errorf("sqlite: prepare: %w", err)
			}
			(*hot.m)[q] = st
		}
	}
	s.Core = s.core()
	a := &s.admitStmts
	for _, ps := range []struct {
		st **sql.Stmt
		q  string
	}{
		{&a.start, `SELECT started_us FROM sessions WHERE id = ?`},
		{&a.overrides, `SELECT name, max FROM limit_overrides WHERE session = ?`},
		{&a.counter, `SELECT value FROM counters WHERE session = ? AND name = ?`},
	} {
		if *ps.st, err = w.Prepare(ps.q); err != nil {
			s.closeDBs()
			return nil, fmt.Errorf("sqlite: prepare: %w", err)
		}
	}
	s.syncer = commit.NewSyncer(opts.Window, s.syncWAL)
	s.batch = commit.New(s.flush, opts.MaxBatch, opts.Queue)
	return s, nil
}

func insertSQL(rows int) string {
	// OR ROLLBACK: a failing insert ends the whole transaction (the batch
	// is retried record by record), so SQLite needs no statement journal.
	return rowsSQL("INSERT OR ROLLBACK INTO audit_records ("+auditrow.Columns+") VALUES ", auditrow.NumColumns, rows, "")
}

// rowsSQL returns head, rows tuples of cols placeholders, and tail.
func rowsSQL(head string, cols, rows int, tail string) string {
	var b strings.Builder
	b.WriteString(head)
	row := "(" + strings.TrimSuffix(strings.Repeat("?,", cols), ",") + ")"
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(tail)
	return b.String()
}

// execRows writes the rows in args (cols values each) in tx with the
// prepared multi-row statements stmts (keyed by insertSizes), the largest
// that fit first.
func execRows(ctx context.Context, tx *sql.Tx, stmts map[int]*sql.Stmt, cols int, args []any) error {
	for rows := len(args) / cols; rows > 0; {
		n := 1
		for _, size := range insertSizes {
			if size <= rows {
				n = size
				break
			}
		}
		if _, err := tx.StmtContext(ctx, stmts[n]).ExecContext(ctx, args[:n*cols]...); err != nil {
			return err
		}
		args, rows = args[n*cols:], rows-n
	}
	return nil
}

func (s *Store) migrate() error {
	return sqlstore.Migrate(context.Background(), "sqlite", func(ctx context.Context, fn func(sqlstore.Querier) error) error {
		return inTx(ctx, s.w, nil, nil, fn) // BEGIN IMMEDIATE: one migrator at a time
	}, sqlstore.Schema{
		FS:       migrations,
		Versions: `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_us INTEGER NOT NULL)`,
		Record: func(ctx context.Context, q sqlstore.Querier, version int) error {
			_, err := q.Exec(ctx, `INSERT INTO schema_version (version, applied_us) VALUES (?, ?)`, version, time.Now().UnixMicro())
			return err
		},
	})
}

// Close implements store.Store.
func (s *Store) Close() error {
	return s.gate.Close(func() error {
		s.batch.Close()
		s.syncer.Close()
		return errors.Join(s.ev.close(), s.closeDBs())
	})
}

func (s *Store) closeDBs() error {
	var errs []error
	for _, m := range []map[int]*sql.Stmt{s.insert, s.setCounters, s.startSessions} {
		for _, st := range m {
			errs = append(errs, st.Close())
		}
	}
	for _, m := range []map[string]*sql.Stmt{s.hotReads, s.hotWrites} {
		for _, st := range m {
			errs = append(errs, st.Close())
		}
	}
	a := &s.admitStmts
	for _, st := range []*sql.Stmt{s.readHead, s.moveHead, s.dataVersion, a.start, a.overrides, a.counter} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	errs = append(errs, s.w.Close())
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	return errors.Join(errs...)
}

// use guards an operation against a concurrent Close: it returns a release
// function, or ErrClosed.
func (s *Store) use() (func(), error) { return s.gate.Use() }

// ---- audit ----

// AppendAudit implements store.Store.
func (s *Store) AppendAudit(ctx context.Context, rec *audit.Record) error {
	return s.batch.Append(ctx, rec, store.ErrClosed)
}

// flush writes one group commit: inside the write transaction (BEGIN
// IMMEDIATE: this process holds the file's write lock, so nothing it reads
// can change before it commits) take the audit head, decide the admissions
// in order, chain and insert the admitted records, write the counters and
// session starts the admissions changed, move the head.
//
// The head and the admission state come from the committer's cache when it
// is valid (see cacheValid), else from the database; a batch that does not
// commit drops the cache.
//
// A batch of NoSync entries only (commit.Durable) is committed with
// synchronous=NORMAL when the Store is FULL: written to the WAL without an
// fsync of its own. SQLite refuses to change the setting inside a
// transaction, so the committer holds the writer connection for the whole
// sequence (nothing else can write on it meanwhile) and puts FULL back
// after the commit; a connection that cannot be put back is discarded.
func (s *Store) flush(entries []commit.Entry) error {
	ctx := context.Background()
	if s.opts.Durability == store.Batched {
		return s.flushBatched(entries)
	}
	if s.opts.Synchronous != "FULL" || commit.Durable(entries) {
		err := s.write(ctx, s.w, entries)
		if err == nil {
			s.commits[0].Add(1)
			if s.opts.Synchronous == "FULL" {
				s.syncer.MarkDurable(commit.LastSeq(entries))
			}
		}
		return err
	}
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: append audit: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous=NORMAL"); err != nil {
		return fmt.Errorf("sqlite: append audit: relax: %w", err)
	}
	err = s.write(ctx, conn, entries)
	if _, rerr := conn.ExecContext(ctx, "PRAGMA synchronous=FULL"); rerr != nil {
		// Never let a relaxed connection serve a write that must be durable.
		conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	if err == nil {
		s.commits[1].Add(1)
	}
	return err
}

// CommitCounts reports how many group commits this Store's committer has
// made: Durable ones with the Store's own synchronous setting (an fsync per
// commit under FULL, the default), Relaxed ones (only NoSync entries) with
// NORMAL where the Store is FULL.
func (s *Store) CommitCounts() store.CommitCounts { return s.commitCounts() }

// write commits entries in one transaction begun on db (the writer pool,
// or its one connection held by flush).
func (s *Store) write(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, entries []commit.Entry) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: append audit: %w", err)
	}
	defer tx.Rollback()
	c := &s.cache
	committed := false
	defer func() {
		if !committed {
			c.valid = false
			c.adm.Clear()
		}
	}()
	var dv int64
	if err := tx.StmtContext(ctx, s.dataVersion).QueryRowContext(ctx).Scan(&dv); err != nil {
		return fmt.Errorf("sqlite: append audit: data version: %w", err)
	}
	writes, conns := s.writes.Load(), s.conns.opened.Load()
	if !c.valid || dv != c.dataVersion || writes != c.writes || conns != c.conns {
		c.adm.Clear()
		if err := tx.StmtContext(ctx, s.readHead).QueryRowContext(ctx).Scan(&c.head.Seq, &c.head.Hash); err != nil {
			return fmt.Errorf("sqlite: append audit: read head: %w", err)
		}
	}
	c.valid = false // until this batch commits
	head := c.head
	var (
		ledger *commit.Ledger
		load   *loader
	)
	recs := s.scratch[:0]
	for _, e := range entries {
		if e.Admit != nil {
			if ledger == nil {
				load = &loader{ctx: ctx, tx: tx, s: s}
				ledger = c.adm.Ledger(load, s.opts.Now())
			}
			if err := ledger.Decide(e.Admit); err != nil {
				return fmt.Errorf("sqlite: admit: %w", err)
			}
		}
		if !e.Appended() {
			continue
		}
		head = e.Rec.Chain(head)
		recs = append(recs, e)
	}
	s.scratch = recs[:0]
	args := s.args[:0]
	for _, e := range recs {
		rec := e.Rec
		args = append(args, rec.Seq, rec.ID, rec.Time.UnixMicro(), string(rec.Phase), rec.Agent, rec.Session,
			rec.Task, rec.Tool, string(rec.Args), e.Stages, rec.Permission, rec.ApprovalID, rec.DecidedBy,
			string(rec.Status), rec.Result, rec.DurationMS, rec.Justification, rec.PrevHash, rec.Hash)
	}
	err = execRows(ctx, tx, s.insert, auditrow.NumColumns, args)
	clear(args)
	s.args = args[:0]
	if err != nil {
		return fmt.Errorf("sqlite: append audit: %w", err)
	}
	if ledger != nil {
		if err := s.writeLedger(ctx, tx, ledger); err != nil {
			return fmt.Errorf("sqlite: admit: %w", err)
		}
	}
	if len(recs) > 0 {
		if _, err := tx.StmtContext(ctx, s.moveHead).ExecContext(ctx, head.Seq, head.Hash); err != nil {
			return fmt.Errorf("sqlite: append audit: move head: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: append audit: commit: %w", err)
	}
	committed = true
	*c = commitCache{valid: true, dataVersion: dv, writes: writes, conns: conns, head: head, adm: c.adm}
	return nil
}

// writeLedger stores what the ledger changed: one multi-row upsert for the
// counters, one multi-row insert for the sessions started.
func (s *Store) writeLedger(ctx context.Context, tx *sql.Tx, ledger *commit.Ledger) error {
	keys, values := ledger.Dirty()
	args := s.args[:0]
	defer func() { clear(args); s.args = args[:0] }()
	for i, k := range keys {
		args = append(args, k.Session, k.Name, values[i])
	}
	if err := execRows(ctx, tx, s.setCounters, 3, args); err != nil {
		return err
	}
	started, us := ledger.Started()
	args = args[:0]
	for _, id := range started {
		args = append(args, id, us)
	}
	return execRows(ctx, tx, s.startSessions, 2, args)
}

// loader reads admission state inside the flush's transaction.
type loader struct {
	ctx                       context.Context
	tx                        *sql.Tx
	s                         *Store
	start, overrides, counter *sql.Stmt
}

func (l *loader) stmt(p **sql.Stmt, shared *sql.Stmt) *sql.Stmt {
	if *p == nil {
		*p = l.tx.StmtContext(l.ctx, shared)
	}
	return *p
}

func (l *loader) SessionStart(session string) (int64, bool, error) {
	var us int64
	err := l.stmt(&l.start, l.s.admitStmts.start).QueryRowContext(l.ctx, session).Scan(&us)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return us, err == nil, err
}

func (l *loader) Overrides(session string) (map[string]int64, error) {
	rows, err := l.stmt(&l.overrides, l.s.admitStmts.overrides).QueryContext(l.ctx, session)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var m map[string]int64
	for rows.Next() {
		var (
			k string
			v int64
		)
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if m == nil {
			m = map[string]int64{}
		}
		m[k] = v
	}
	return m, rows.Err()
}

func (l *loader) Counter(k commit.Key) (int64, error) {
	var v int64
	err := l.stmt(&l.counter, l.s.admitStmts.counter).QueryRowContext(l.ctx, k.Session, k.Name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// onWriter runs fn on the writer connection, for a write of admission state
// (sessions, limit overrides, counters) outside the group commit. It counts
// the write while it holds the connection, so the committer, which reads
// the count while it holds that same connection, sees the write before its
// next batch and drops its cache (see flush).
func (s *Store) onWriter(ctx context.Context, fn func(*sql.Conn) error) error {
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	s.writes.Add(1)
	return fn(conn)
}

// Admit implements store.Store inside the group commit.
func (s *Store) Admit(ctx context.Context, req *store.AdmitRequest) (store.AdmitResult, error) {
	if err := store.CheckAdmit(req); err != nil {
		return store.AdmitResult{}, fmt.Errorf("sqlite: admit: %w", err)
	}
	return s.batch.Admit(ctx, req, store.ErrClosed)
}

// ---- approvals ----

// ---- session counters ----

// Acquire implements store.Store with one atomic upsert.
func (s *Store) Acquire(ctx context.Context, session, counter string, n, max int64) (int64, bool, error) {
	if n < 0 {
		return 0, false, fmt.Errorf("sqlite: acquire: %w: n = %d", store.ErrInvalid, n)
	}
	release, err := s.use()
	if err != nil {
		return 0, false, err
	}
	defer release()
	var cur int64
	err = s.onWriter(ctx, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, `INSERT INTO counters (session, name, value)
		SELECT ?1, ?2, ?3 WHERE ?3 <= COALESCE((SELECT max FROM limit_overrides WHERE session = ?1 AND name = ?2), ?4)
		ON CONFLICT (session, name) DO UPDATE SET value = value + excluded.value
		WHERE value + excluded.value <= COALESCE((SELECT max FROM limit_overrides WHERE session = ?1 AND name = ?2), ?4)
		RETURNING value`, session, counter, n, max).Scan(&cur)
	})
	if err == nil {
		return cur, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("sqlite: acquire: %w", err)
	}
	err = s.r.QueryRowContext(ctx, `SELECT value FROM counters WHERE session = ? AND name = ?`, session, counter).Scan(&cur)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("sqlite: acquire: %w", err)
	}
	return cur, false, nil
}

// SetLimitOverride implements store.Store.
func (s *Store) SetLimitOverride(ctx context.Context, session, counter string, max int64) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	err = s.onWriter(ctx, func(c *sql.Conn) (err error) {
		if max < 0 {
			_, err = c.ExecContext(ctx, `DELETE FROM limit_overrides WHERE session = ? AND name = ?`, session, counter)
		} else {
			_, err = c.ExecContext(ctx, `INSERT INTO limit_overrides (session, name, max) VALUES (?, ?, ?)
			ON CONFLICT (session, name) DO UPDATE SET max = excluded.max`, session, counter, max)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: set limit override: %w", err)
	}
	return nil
}

// ResetSession implements store.Store.
func (s *Store) ResetSession(ctx context.Context, session string) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	err = s.onWriter(ctx, func(c *sql.Conn) error {
		tx, err := c.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `DELETE FROM counters WHERE session = ?`, session); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, session); err != nil {
			return err
		}
		return tx.Commit()
	})
	if err != nil {
		return fmt.Errorf("sqlite: reset session: %w", err)
	}
	return nil
}

// SessionStart implements store.Store.
func (s *Store) SessionStart(ctx context.Context, session string) (time.Time, error) {
	release, err := s.use()
	if err != nil {
		return time.Time{}, err
	}
	defer release()
	var us int64
	err = s.onWriter(ctx, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, `INSERT INTO sessions (id, started_us) VALUES (?, ?)
		ON CONFLICT (id) DO UPDATE SET id = excluded.id RETURNING started_us`,
			session, s.opts.Now().UnixMicro()).Scan(&us)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlite: session start: %w", err)
	}
	return time.UnixMicro(us).UTC(), nil
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, session, counter string, n int64) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("sqlite: release: %w: n = %d", store.ErrInvalid, n)
	}
	release, err := s.use()
	if err != nil {
		return 0, err
	}
	defer release()
	var cur int64
	err = s.onWriter(ctx, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, `UPDATE counters SET value = MAX(value - ?3, 0) WHERE session = ?1 AND name = ?2 RETURNING value`,
			session, counter, n).Scan(&cur)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: release: %w", err)
	}
	return cur, nil
}
