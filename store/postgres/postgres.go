// Package postgres is the store.Store for a shared PostgreSQL database
// (pgx/v5), for deployments that run several Armory processes.
//
// The audit chain stays exact across processes because every group commit
// locks the head row (SELECT … FOR UPDATE) before it reads the last hash,
// and moves the head in the same transaction. Session caps stay exact
// because every write of admission state (sessions, limit overrides,
// counters), in the group commit or not, from any process, also locks the
// head row first and bumps a generation there; the committer caches
// admission state across batches only while that generation is the one its
// last batch wrote (docs/storage.md). Decisions on approvals
// are announced with NOTIFY on the channel "armory_approvals"; every Store
// LISTENs on one dedicated connection and also polls, with a bounded backoff,
// in case a notification is lost (a dropped listener connection).
//
// Durability is PostgreSQL's: with the default synchronous_commit=on, an
// appended record is in the flushed WAL when AppendAudit returns. Tables are
// created in the connection's current schema (set search_path in the DSN to
// choose one).
package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/internal/auditrow"
	"github.com/armory-dev/armory/store/internal/commit"
	"github.com/armory-dev/armory/store/internal/notify"
	"github.com/armory-dev/armory/store/internal/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// NotifyChannel is the LISTEN/NOTIFY channel on which decided approval IDs
// are announced.
const NotifyChannel = "armory_approvals"

// migrationLock is the advisory lock key that serializes migrations.
const migrationLock = 0x61726d6f7279 // "armory"

// Options tunes a Store. The zero value gives the defaults.
type Options struct {
	// MaxBatch bounds the audit records per group commit (default 256);
	// Queue bounds the records waiting for one (default 4096).
	MaxBatch, Queue int
	// Now is the clock for approval, decision and session times (default
	// time.Now).
	Now func() time.Time
	// PollMax bounds WaitApproval's fallback polling interval (default 2s).
	PollMax time.Duration
	// Durability is store.Strict (default) or store.Batched: every commit
	// with synchronous_commit off, made durable at most Window (default
	// store.DefaultDurabilityWindow) later (durability.go).
	Durability store.Durability
	Window     time.Duration
}

// Store is a store.Store on a PostgreSQL database. It is safe for
// concurrent use.
type Store struct {
	// Core implements what is the same in both SQL backends (audit reads,
	// approvals, session reads, tokens, pins, run claims).
	*sqlstore.Core

	pool   *pgxpool.Pool
	opts   Options
	batch  *commit.Batcher
	hub    notify.Hub
	ev     events
	gate   *sqlstore.Gate
	cancel context.CancelFunc // stops the listener
	lwg    sync.WaitGroup

	// commits counts the committed group commits: [0] durable, [1] relaxed
	// (CommitCounts).
	commits [2]atomic.Int64
	// syncer keeps the durable point and, Batched, flushes the WAL.
	syncer *commit.Syncer

	// Committer state (flush runs only on the committer goroutine): the
	// admission state as of this Store's last committed batch, valid while
	// audit_head.gen is still cacheGen, the generation that batch wrote.
	cache      *commit.Cache
	cacheValid bool
	cacheGen   int64
	cacheHead  audit.Head
}

// Store implements every role (store.Store embeds them all).
var _ store.Store = (*Store)(nil)

// OpenWith connects to dsn, applies the embedded migrations that the
// database lacks (serialized across processes by an advisory lock) and
// starts listening for approval decisions.
func OpenWith(ctx context.Context, dsn string, opts Options) (*Store, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.PollMax <= 0 {
		opts.PollMax = 2 * time.Second
	}
	var err error
	if opts.Durability, opts.Window, err = opts.Durability.Normalize(opts.Window); err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	s := &Store{pool: pool, opts: opts, gate: sqlstore.NewGate(), cache: commit.NewCache(0)}
	s.ev.pub.Send = s.notifyEvents
	s.Core = s.core()
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	var db, schema string
	if err := pool.QueryRow(ctx, `SELECT current_database(), current_schema()`).Scan(&db, &schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	s.ev.channel = eventsChannel(db, schema)
	lctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	conn, err := s.listen(ctx)
	if err != nil {
		cancel()
		pool.Close()
		return nil, err
	}
	s.lwg.Add(1)
	go s.listenLoop(lctx, conn)
	s.syncer = commit.NewSyncer(opts.Window, s.syncWAL)
	s.batch = commit.New(s.flush, opts.MaxBatch, opts.Queue)
	return s, nil
}

func (s *Store) migrate(ctx context.Context) error {
	return sqlstore.Migrate(ctx, "postgres", func(ctx context.Context, fn func(sqlstore.Querier) error) error {
		return s.inTx(ctx, pgx.TxOptions{}, fn)
	}, sqlstore.Schema{
		FS:       migrations,
		Lock:     fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d)`, migrationLock),
		Versions: `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
		Record: func(ctx context.Context, q sqlstore.Querier, version int) error {
			_, err := q.Exec(ctx, `INSERT INTO schema_version (version) VALUES (?)`, version)
			return err
		},
	})
}

// listen opens the dedicated listener connection.
func (s *Store) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres: listen: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+NotifyChannel+"; LISTEN "+s.ev.channel); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("postgres: listen: %w", err)
	}
	return conn, nil
}

// listenLoop wakes waiters on notifications and reconnects, with backoff,
// when the connection drops (waking every waiter, since notifications may
// have been missed).
func (s *Store) listenLoop(ctx context.Context, conn *pgx.Conn) {
	defer s.lwg.Done()
	backoff := 100 * time.Millisecond
	for {
		for conn != nil {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				if ctx.Err() != nil {
					return
				}
				s.hub.NotifyAll()
				break
			}
			backoff = 100 * time.Millisecond
			if n.Channel == s.ev.channel {
				s.deliverEvent(n.Payload)
				continue
			}
			s.hub.Notify(n.Payload)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
		c, err := s.listen(ctx)
		if err == nil {
			conn = c
			s.hub.NotifyAll()
		}
	}
}

// Close implements store.Store.
func (s *Store) Close() error {
	return s.gate.Close(func() error {
		s.batch.Close()
		s.syncer.Close()
		s.cancel()
		s.lwg.Wait()
		s.pool.Close()
		return nil
	})
}

func (s *Store) use() (func(), error) { return s.gate.Use() }

// ---- audit ----

// AppendAudit implements store.Store.
func (s *Store) AppendAudit(ctx context.Context, rec *audit.Record) error {
	return s.batch.Append(ctx, rec, store.ErrClosed)
}

const insertAudit = `INSERT INTO audit_records (` + auditrow.Columns + `)
	SELECT * FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[],
		$16::bigint[], $17::text[], $18::text[], $19::text[])`

// flush writes one group commit on one connection: in one round trip when
// the committer's cache is valid and holds all the admission state the
// batch needs, else in two (three when the cache turns out stale).
//
// Every group commit first locks the head row (batches and every other
// writer of admission state, of every process, serialize there; see
// bumpGen). The cache, with the head, is kept from this Store's last
// committed batch and is used only while audit_head.gen is still the
// generation that batch wrote.
//
// One round trip (cache valid, every session and counter of the batch
// cached): the admissions are decided and the records chained from the
// cache, and one pipeline begins, locks the head row and checks the
// generation (armory_expect_head, which fails with SQLSTATE AR001 when it
// or the head moved), inserts the records, writes the counters, moves the
// head, bumps the generation and commits. On AR001 it is rolled back, the cache is
// cleared and the batch is written the other way.
//
// Two round trips: the first begins, locks the head row and reads the head
// and the generation and, for the sessions and counters the cache lacks,
// starts the sessions' clocks (ON CONFLICT DO NOTHING), makes sure every
// counter has a row and locks those rows in a fixed order, and reads the
// starts (FOR SHARE), overrides and counter values. If the generation moved,
// the cache is cleared and what was skipped is read in an extra round trip.
// The admissions are then decided in memory, and the last round trip writes
// as above. A batch that does not commit clears the cache.
func (s *Store) flush(entries []commit.Entry) (err error) {
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		s.dropCache()
		return fmt.Errorf("postgres: append audit: %w", err)
	}
	inTx, committed := false, false
	defer func() {
		if !committed {
			s.dropCache()
		}
		if err != nil && inTx {
			if _, rerr := conn.Exec(ctx, "ROLLBACK"); rerr != nil {
				conn.Hijack().Close(ctx) // a connection in an unknown state is not reused
				return
			}
		}
		conn.Release()
	}()
	now := s.opts.Now()
	sessions, keys := admissionKeys(entries)
	load := &loader{starts: map[string]int64{}, overrides: map[string]map[string]int64{}, counters: map[commit.Key]int64{}}
	var ledger *commit.Ledger
	if len(sessions) > 0 {
		ledger = s.cache.Ledger(load, now) // clears the cache when over its bound
	}
	if !s.cacheValid {
		s.cache.Clear()
	}
	// Read now what the cache lacks; cached keys are read later only if the
	// generation says the cache is stale.
	readS, skipS := split(sessions, s.cache.HasSession)
	readK, skipK := split(keys, s.cache.HasCounter)
	if s.cacheValid && len(readS) == 0 && len(readK) == 0 {
		s.cacheValid = false // until this batch commits: the ledger writes into the cache
		inTx = true
		expect := s.cacheGen
		head, gen, err := s.commitBatch(ctx, conn, entries, ledger, s.cacheHead, &expect)
		if err == nil {
			s.countCommit(entries)
			inTx, committed = false, true
			s.cacheValid, s.cacheGen, s.cacheHead = true, gen, head
			return nil
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != staleGen {
			return fmt.Errorf("postgres: append audit: %w", err)
		}
		// Another writer committed since this Store's last batch.
		if _, err := conn.Exec(ctx, "ROLLBACK"); err != nil {
			return fmt.Errorf("postgres: append audit: %w", err)
		}
		inTx = false
		s.cache.Clear()
		if ledger != nil {
			ledger = s.cache.Ledger(load, now)
		}
		readS, skipS, readK, skipK = sessions, nil, keys, nil
	}
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(`SELECT seq, hash, gen FROM audit_head WHERE id = 1 FOR UPDATE`)
	queueState(b, readS, readK, now)
	inTx = true
	var (
		head audit.Head
		gen  int64
	)
	err = func() error {
		br := conn.SendBatch(ctx, b)
		defer br.Close()
		if _, err := br.Exec(); err != nil {
			return err
		}
		if err := br.QueryRow().Scan(&head.Seq, &head.Hash, &gen); err != nil {
			return fmt.Errorf("read head: %w", err)
		}
		if err := load.read(br, readS, readK); err != nil {
			return err
		}
		return br.Close()
	}()
	if err != nil {
		return fmt.Errorf("postgres: append audit: %w", err)
	}
	if !s.cacheValid || gen != s.cacheGen {
		// Another writer (another Store, process, or this Store's Acquire,
		// SetLimitOverride, ResetSession or SessionStart) committed since
		// this Store's last batch: what the cache holds may be stale.
		s.cache.Clear()
		if len(skipS) > 0 || len(skipK) > 0 {
			b = &pgx.Batch{}
			queueState(b, skipS, skipK, now)
			err = func() error {
				br := conn.SendBatch(ctx, b)
				defer br.Close()
				if err := load.read(br, skipS, skipK); err != nil {
					return err
				}
				return br.Close()
			}()
			if err != nil {
				return fmt.Errorf("postgres: append audit: %w", err)
			}
		}
	}
	s.cacheValid = false // until this batch commits
	head, gen, err = s.commitBatch(ctx, conn, entries, ledger, head, nil)
	if err != nil {
		return fmt.Errorf("postgres: append audit: %w", err)
	}
	s.countCommit(entries)
	inTx, committed = false, true
	s.cacheValid, s.cacheGen, s.cacheHead = true, gen, head
	return nil
}

// staleGen is the SQLSTATE of armory_expect_head (migration 0004).
const staleGen = "AR001"

// commitBatch decides the batch's admissions in order with ledger (nil when
// it has none), chains the records to append after head, and sends one
// pipeline that inserts them (one unnest INSERT), writes the counters and
// session starts the ledger changed, moves the head, bumps the generation
// and commits. With expect it also begins the transaction and first checks
// (armory_expect_head) that the head is head and the generation *expect;
// without, the transaction is open and the head row locked. It returns the new head and
// the generation as committed.
func (s *Store) commitBatch(ctx context.Context, conn *pgxpool.Conn, entries []commit.Entry, ledger *commit.Ledger,
	head audit.Head, expect *int64) (audit.Head, int64, error) {
	from := head
	n := 0
	for _, e := range entries {
		if e.Admit != nil {
			if err := ledger.Decide(e.Admit); err != nil {
				return head, 0, fmt.Errorf("admit: %w", err)
			}
		}
		if e.Appended() {
			n++
		}
	}
	var (
		seq, timeUS, dur = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
		cols             [16][]string
	)
	for i := range cols {
		cols[i] = make([]string, 0, n)
	}
	for _, e := range entries {
		if !e.Appended() {
			continue
		}
		rec, stages := e.Rec, e.Stages
		head = rec.Chain(head)
		seq, timeUS, dur = append(seq, rec.Seq), append(timeUS, rec.Time.UnixMicro()), append(dur, rec.DurationMS)
		for j, v := range [16]string{rec.ID, string(rec.Phase), rec.Agent, rec.Session, rec.Task, rec.Tool,
			string(rec.Args), stages, rec.Permission, rec.ApprovalID, rec.DecidedBy, string(rec.Status),
			rec.Result, rec.Justification, rec.PrevHash, rec.Hash} {
			cols[j] = append(cols[j], v)
		}
	}
	b := &pgx.Batch{}
	if expect != nil {
		b.Queue(`BEGIN`)
		b.Queue(`SELECT armory_expect_head($1, $2, $3)`, from.Seq, from.Hash, *expect)
	}
	if n > 0 {
		b.Queue(insertAudit, seq, cols[0], timeUS, cols[1], cols[2], cols[3], cols[4], cols[5],
			cols[6], cols[7], cols[8], cols[9], cols[10], cols[11], cols[12], dur, cols[13], cols[14], cols[15])
	}
	if ledger != nil {
		keys, values := ledger.Dirty()
		if len(keys) > 0 {
			ks, kn := make([]string, len(keys)), make([]string, len(keys))
			for i, k := range keys {
				ks[i], kn[i] = k.Session, k.Name
			}
			b.Queue(`UPDATE counters c SET value = u.v FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(s, n, v)
				WHERE c.session = u.s AND c.name = u.n`, ks, kn, values)
		}
		if started, us := ledger.Started(); len(started) > 0 {
			// Every session the ledger asked for was inserted before it
			// was read, so this is a safety net.
			b.Queue(`INSERT INTO sessions (id, started_us) SELECT u, $2::bigint FROM unnest($1::text[]) AS u ON CONFLICT (id) DO NOTHING`, started, us)
		}
	}
	writes := b.Len()
	// The last statement on audit_head in this transaction: RETURNING gives
	// the generation as committed (the tables' statement triggers bumped it
	// too, for this batch's own writes).
	b.Queue(`UPDATE audit_head SET seq = $1, hash = $2, gen = gen + 1 WHERE id = 1 RETURNING gen`, head.Seq, head.Hash)
	relaxed := s.relaxed(entries)
	if relaxed {
		// Only NoSync entries, or a Batched Store: COMMIT returns before the WAL is flushed
		// (Postgres flushes it within a few wal_writer_delay, and any later
		// synchronous commit flushes it up to its own, later, position).
		b.Queue(`SET LOCAL synchronous_commit = off`)
	}
	b.Queue(`COMMIT`)
	var gen int64
	err := func() error {
		br := conn.SendBatch(ctx, b)
		defer br.Close()
		for range writes {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := br.QueryRow().Scan(&gen); err != nil {
			return fmt.Errorf("move head: %w", err)
		}
		if relaxed {
			if _, err := br.Exec(); err != nil {
				return fmt.Errorf("relax: %w", err)
			}
		}
		return endCommit(br)
	}()
	return head, gen, err
}

// endCommit reads the result of a pipeline's final COMMIT and closes the
// batch. A transaction that failed earlier answers COMMIT with ROLLBACK,
// which is an error here.
func endCommit(br pgx.BatchResults) error {
	tag, err := br.Exec()
	if err != nil {
		return err
	}
	if tag.String() != "COMMIT" {
		return fmt.Errorf("commit: transaction ended with %q", tag.String())
	}
	return br.Close()
}

// dropCache forgets the committer's cache (committer goroutine only).
func (s *Store) dropCache() {
	s.cacheValid = false
	s.cache.Clear()
}

// admissionKeys returns the sessions and counters of the batch's
// admissions, each once, sorted (the order in which their rows are locked).
func admissionKeys(entries []commit.Entry) ([]string, []commit.Key) {
	var (
		sessions []string
		keys     []commit.Key
	)
	seenS, seenK := map[string]bool{}, map[commit.Key]bool{}
	for _, e := range entries {
		if a := e.Admit; a != nil {
			if !seenS[a.Session] {
				seenS[a.Session] = true
				sessions = append(sessions, a.Session)
			}
			for _, k := range a.Keys() {
				if !seenK[k] {
					seenK[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	slices.Sort(sessions)
	slices.SortFunc(keys, func(a, b commit.Key) int {
		return cmp.Or(cmp.Compare(a.Session, b.Session), cmp.Compare(a.Name, b.Name))
	})
	return sessions, keys
}

// split splits items (keeping their order) into those the cache lacks
// and those it holds (has).
func split[T any](items []T, has func(T) bool) (read, skip []T) {
	for _, it := range items {
		if has(it) {
			skip = append(skip, it)
		} else {
			read = append(read, it)
		}
	}
	return read, skip
}

// queueState queues, inside the flush's transaction (after the head row is
// locked), the reads of the sessions' starts and overrides (starting the
// clock of a session that has none) and of the counters (giving each a row,
// locked in (session, name) order); loader.read reads the results.
func queueState(b *pgx.Batch, sessions []string, keys []commit.Key, now time.Time) {
	if len(sessions) > 0 {
		b.Queue(`INSERT INTO sessions (id, started_us) SELECT u, $2::bigint FROM unnest($1::text[]) AS u ORDER BY u ON CONFLICT (id) DO NOTHING`, sessions, now.UnixMicro())
		b.Queue(`SELECT id, started_us FROM sessions WHERE id = ANY($1::text[]) ORDER BY id FOR SHARE`, sessions)
		b.Queue(`SELECT session, name, max FROM limit_overrides WHERE session = ANY($1::text[])`, sessions)
	}
	if len(keys) > 0 {
		ks, kn := make([]string, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			ks[i], kn[i] = k.Session, k.Name
		}
		b.Queue(`INSERT INTO counters (session, name, value) SELECT s, n, 0 FROM unnest($1::text[], $2::text[]) AS u(s, n)
			ORDER BY s, n ON CONFLICT (session, name) DO NOTHING`, ks, kn)
		b.Queue(`SELECT c.session, c.name, c.value FROM counters c JOIN unnest($1::text[], $2::text[]) AS u(s, n)
			ON c.session = u.s AND c.name = u.n ORDER BY c.session, c.name FOR UPDATE OF c`, ks, kn)
	}
}

// forEach reads the next result of br row by row.
func forEach(br pgx.BatchResults, scans []any, fn func() error) (int64, error) {
	rows, err := br.Query()
	if err != nil {
		return 0, err
	}
	tag, err := pgx.ForEachRow(rows, scans, fn)
	return tag.RowsAffected(), err
}

// loader serves the state that the flush's reads returned.
type loader struct {
	starts    map[string]int64
	overrides map[string]map[string]int64
	counters  map[commit.Key]int64
}

// read reads the results of queueState(b, sessions, keys, …) from br.
func (l *loader) read(br pgx.BatchResults, sessions []string, keys []commit.Key) error {
	var (
		id, name string
		v        int64
	)
	if len(sessions) > 0 {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if _, err := forEach(br, []any{&id, &v}, func() error { l.starts[id] = v; return nil }); err != nil {
			return err
		}
		if _, err := forEach(br, []any{&id, &name, &v}, func() error {
			m := l.overrides[id]
			if m == nil {
				m = map[string]int64{}
				l.overrides[id] = m
			}
			m[name] = v
			return nil
		}); err != nil {
			return err
		}
	}
	if len(keys) > 0 {
		if _, err := br.Exec(); err != nil {
			return err
		}
		if _, err := forEach(br, []any{&id, &name, &v}, func() error {
			l.counters[commit.Key{Session: id, Name: name}] = v
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

func (l *loader) SessionStart(session string) (int64, bool, error) {
	us, ok := l.starts[session]
	return us, ok, nil
}

func (l *loader) Overrides(session string) (map[string]int64, error) {
	return l.overrides[session], nil
}

func (l *loader) Counter(k commit.Key) (int64, error) { return l.counters[k], nil }

// Admit implements store.Store inside the group commit.
func (s *Store) Admit(ctx context.Context, req *store.AdmitRequest) (store.AdmitResult, error) {
	if err := store.CheckAdmit(req); err != nil {
		return store.AdmitResult{}, fmt.Errorf("postgres: admit: %w", err)
	}
	return s.batch.Admit(ctx, req, store.ErrClosed)
}

// ---- approvals ----

// ---- session counters ----

// bumpGen locks the head row and bumps the admission generation. Every write
// of admission state outside the group commit runs it first, in the same
// transaction, so that it serializes with the group commits of every
// process (it waits for a running batch; a batch waits for it) and the
// committers' caches notice it. (The tables' statement triggers, migration
// 0004, bump it as well, for writers that do not.)
const bumpGen = `UPDATE audit_head SET gen = gen + 1 WHERE id = 1`

// admissionWrite runs one write of admission state (sessions,
// limit_overrides, counters) outside the group commit, in one transaction
// sent as one pipelined round trip: BEGIN, bumpGen, the statements queue
// adds, COMMIT. read reads the results of those statements, in order. On
// error the transaction is rolled back (the connection is discarded if it
// cannot be).
func (s *Store) admissionWrite(ctx context.Context, queue func(*pgx.Batch), read func(pgx.BatchResults) error) error {
	release, err := s.use()
	if err != nil {
		return err
	}
	defer release()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release() // the pool discards a connection left in a transaction
	b := &pgx.Batch{}
	b.Queue(`BEGIN`)
	b.Queue(bumpGen)
	queue(b)
	b.Queue(`COMMIT`)
	err = func() error {
		br := conn.SendBatch(ctx, b)
		defer br.Close()
		for range 2 {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := read(br); err != nil {
			return err
		}
		return endCommit(br)
	}()
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
		if _, rerr := conn.Exec(context.Background(), "ROLLBACK"); rerr != nil {
			conn.Hijack().Close(context.Background())
		}
	}
	return err
}

// Acquire implements store.Store with one atomic upsert (concurrent upserts
// of one counter serialize on its row, and the WHERE sees the latest value)
// in a transaction that first locks the head row (see admissionWrite).
func (s *Store) Acquire(ctx context.Context, session, counter string, n, max int64) (int64, bool, error) {
	if n < 0 {
		return 0, false, fmt.Errorf("postgres: acquire: %w: n = %d", store.ErrInvalid, n)
	}
	var (
		cur int64
		ok  bool
	)
	err := s.admissionWrite(ctx, func(b *pgx.Batch) {
		b.Queue(`INSERT INTO counters AS c (session, name, value)
		SELECT $1::text, $2::text, $3::bigint WHERE $3::bigint <= COALESCE((SELECT max FROM limit_overrides WHERE session = $1 AND name = $2), $4::bigint)
		ON CONFLICT (session, name) DO UPDATE SET value = c.value + EXCLUDED.value
		WHERE c.value + EXCLUDED.value <= COALESCE((SELECT max FROM limit_overrides WHERE session = $1 AND name = $2), $4::bigint)
		RETURNING value`, session, counter, n, max)
		b.Queue(`SELECT value FROM counters WHERE session = $1 AND name = $2`, session, counter)
	}, func(br pgx.BatchResults) error {
		took, err := forEach(br, []any{&cur}, func() error { return nil })
		if err != nil {
			return err
		}
		ok = took == 1
		err = br.QueryRow().Scan(&cur)
		if errors.Is(err, pgx.ErrNoRows) {
			cur, err = 0, nil
		}
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrClosed) {
			return 0, false, err
		}
		return 0, false, fmt.Errorf("postgres: acquire: %w", err)
	}
	return cur, ok, nil
}

// wrapWrite prefixes err (unless it is store.ErrClosed).
func wrapWrite(op string, err error) error {
	if err == nil || errors.Is(err, store.ErrClosed) {
		return err
	}
	return fmt.Errorf("postgres: %s: %w", op, err)
}

func execOnly(br pgx.BatchResults) error {
	_, err := br.Exec()
	return err
}

// SetLimitOverride implements store.Store (see admissionWrite).
func (s *Store) SetLimitOverride(ctx context.Context, session, counter string, max int64) error {
	return wrapWrite("set limit override", s.admissionWrite(ctx, func(b *pgx.Batch) {
		if max < 0 {
			b.Queue(`DELETE FROM limit_overrides WHERE session = $1 AND name = $2`, session, counter)
		} else {
			b.Queue(`INSERT INTO limit_overrides (session, name, max) VALUES ($1, $2, $3)
			ON CONFLICT (session, name) DO UPDATE SET max = EXCLUDED.max`, session, counter, max)
		}
	}, execOnly))
}

// ResetSession implements store.Store (see admissionWrite).
func (s *Store) ResetSession(ctx context.Context, session string) error {
	return wrapWrite("reset session", s.admissionWrite(ctx, func(b *pgx.Batch) {
		b.Queue(`DELETE FROM counters WHERE session = $1`, session)
		b.Queue(`DELETE FROM sessions WHERE id = $1`, session)
	}, func(br pgx.BatchResults) error {
		if err := execOnly(br); err != nil {
			return err
		}
		return execOnly(br)
	}))
}

// SessionStart implements store.Store. A session that has a start is only
// read; starting one is a write of admission state (see admissionWrite).
func (s *Store) SessionStart(ctx context.Context, session string) (time.Time, error) {
	release, err := s.use()
	if err != nil {
		return time.Time{}, err
	}
	var us int64
	err = s.pool.QueryRow(ctx, `SELECT started_us FROM sessions WHERE id = $1`, session).Scan(&us)
	release()
	if err == nil {
		return time.UnixMicro(us).UTC(), nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, fmt.Errorf("postgres: session start: %w", err)
	}
	err = s.admissionWrite(ctx, func(b *pgx.Batch) {
		b.Queue(`INSERT INTO sessions (id, started_us) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`, session, s.opts.Now().UnixMicro())
		b.Queue(`SELECT started_us FROM sessions WHERE id = $1`, session)
	}, func(br pgx.BatchResults) error {
		if err := execOnly(br); err != nil {
			return err
		}
		return br.QueryRow().Scan(&us)
	})
	if err != nil {
		return time.Time{}, wrapWrite("session start", err)
	}
	return time.UnixMicro(us).UTC(), nil
}

// Release implements store.Store in a transaction that first locks the head
// row (see admissionWrite), as Acquire does.
func (s *Store) Release(ctx context.Context, session, counter string, n int64) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("postgres: release: %w: n = %d", store.ErrInvalid, n)
	}
	var cur int64
	err := s.admissionWrite(ctx, func(b *pgx.Batch) {
		b.Queue(`UPDATE counters SET value = GREATEST(value - $3::bigint, 0) WHERE session = $1 AND name = $2 RETURNING value`, session, counter, n)
	}, func(br pgx.BatchResults) error {
		_, err := forEach(br, []any{&cur}, func() error { return nil })
		return err
	})
	if err != nil {
		if errors.Is(err, store.ErrClosed) {
			return 0, err
		}
		return 0, fmt.Errorf("postgres: release: %w", err)
	}
	return cur, nil
}
