// Package sqlstore is the part of the SQL backends (store/sqlite,
// store/postgres) that is the same in both: the statements and the logic of
// the roles that do not depend on how a database locks, clocks or notifies.
// A backend adapts its driver to Querier (database/sql, pgx), says what
// differs in Config (its transactions, its row lock, its clock, its
// notifications) and embeds the Core, whose methods implement those roles.
//
// Statements are written with ? placeholders; the Postgres adapter numbers
// them (Dollar).
package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/armory-dev/armory/store/internal/notify"
)

// Row is one row to scan.
type Row interface {
	Scan(dest ...any) error
}

// Rows is a result set; Close is idempotent.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close() error
}

// Querier runs statements: a connection pool, a connection or a
// transaction. A query that finds no row returns an error matching
// sql.ErrNoRows (pgx's does too).
type Querier interface {
	Exec(ctx context.Context, q string, args ...any) (rowsAffected int64, err error)
	Query(ctx context.Context, q string, args ...any) (Rows, error)
	QueryRow(ctx context.Context, q string, args ...any) Row
}

// HotReads and HotWrites are the statements worth keeping prepared (the
// syscall.ask round trip's, an authenticated request's token lookup, an
// agent's skill changes and the read of its skills): a fixed set, so that
// a backend whose driver prepares every statement afresh (SQLite through
// database/sql) can prepare these once, on its readers and its writer, and
// run a statement of the set through its prepared form (sql.Tx.StmtContext
// inside a transaction), closing them on Close. pgx (Postgres) caches the
// statements it prepares on each connection already.
func HotReads() []string { return []string{LookupTokenQuery, getMessageQuery, agentSkillsQuery} }

// HotWrites: see HotReads.
func HotWrites() []string {
	return []string{sendMessageQuery, takeReplyQuery, sendReplyQuery, ackAnsweredQuery,
		skillRowQuery, countSkillsQuery, upsertSkillQuery, deleteSkillQuery}
}

// Config is what a backend tells the Core.
type Config struct {
	// Name prefixes errors ("sqlite", "postgres").
	Name string
	// Read runs reads; Write runs writes of one statement.
	Read, Write Querier
	// Tx runs fn in a write transaction and commits when fn returns nil.
	Tx func(ctx context.Context, fn func(Querier) error) error
	// Snapshot runs fn in a read-only transaction: one consistent view.
	Snapshot func(ctx context.Context, fn func(Querier) error) error
	// Gate guards every call against Close.
	Gate *Gate
	// Now is the clock of approval, decision, token and pin times.
	Now func() time.Time
	// ForUpdate is appended to a SELECT of a row that a write transaction
	// goes on to change: " FOR UPDATE" where rows are locked one by one
	// (Postgres); "" where a write transaction holds the database's write
	// lock from its start (SQLite, BEGIN IMMEDIATE).
	ForUpdate string
	// Hub wakes WaitApproval in this process on a decision.
	Hub *notify.Hub
	// MinPoll and PollMax bound WaitApproval's polling for decisions made
	// by other processes.
	MinPoll, PollMax time.Duration
	// Decided, when set, runs in a decision's transaction (Postgres: the
	// NOTIFY that wakes the other processes).
	Decided func(ctx context.Context, q Querier, id string) error
	// Claims measures run claims' and leases' time (see ClaimClock).
	Claims ClaimClock
	// Serialize, when set, is a statement with one text argument, a key,
	// that a write transaction runs first to serialize itself with every
	// other transaction running it for the same key, where rows are locked
	// one by one (Postgres: a transaction advisory lock); "" where a write
	// transaction holds the database's write lock from its start (SQLite).
	Serialize string
}

// Core implements the roles' shared statements over a Config.
type Core struct {
	c Config
}

// New returns the Core of a backend.
func New(c Config) *Core { return &Core{c: c} }

// errf wraps err with the backend's name and op.
func (c *Core) errf(op string, err error) error {
	return fmt.Errorf("%s: %s: %w", c.c.Name, op, err)
}

// Dollar numbers the ? placeholders of q ($1, $2, …) for Postgres. The
// statements of this package have no ? in literals.
func Dollar(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// list runs the read q under the gate and scans every row with scan;
// errors are prefixed with op.
func list[T any](ctx context.Context, c *Core, op string, scan func(Row) (T, error), q string, args ...any) ([]T, error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return nil, err
	}
	defer release()
	out, err := collect(ctx, c.c.Read, scan, q, args...)
	if err != nil {
		return nil, c.errf(op, err)
	}
	return out, nil
}

// noRows reports whether err is a query's "no row".
func noRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// collect runs q on db and scans every row with scan.
func collect[T any](ctx context.Context, db Querier, scan func(Row) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.Query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// MicrosOrZero is t in Unix µs, 0 for the zero time.
func MicrosOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// TimeOrZero is the UTC time of us Unix µs, the zero time for 0.
func TimeOrZero(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}

// filter builds a WHERE clause from conditions and their arguments.
type filter struct {
	conds []string
	args  []any
}

func (f *filter) add(cond string, v any) {
	f.conds, f.args = append(f.conds, cond), append(f.args, v)
}

// eq adds col = v unless v is empty (a zero field does not filter).
func (f *filter) eq(col, v string) {
	if v != "" {
		f.add(col+" = ?", v)
	}
}

// where is the WHERE clause ("" for none).
func (f *filter) where() string {
	if len(f.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(f.conds, " AND ")
}
