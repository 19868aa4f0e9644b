package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/armory-dev/armory/store/internal/sqlstore"
)

// pgQuerier is what *pgxpool.Pool, *pgxpool.Conn and pgx.Tx have in common.
type pgQuerier interface {
	Exec(ctx context.Context, q string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, q string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, q string, args ...any) pgx.Row
}

// querier adapts pgx to sqlstore.Querier, numbering the ? placeholders.
type querier struct{ q pgQuerier }

func (d querier) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	tag, err := d.q.Exec(ctx, sqlstore.Dollar(q), args...)
	return tag.RowsAffected(), err
}

func (d querier) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	rows, err := d.q.Query(ctx, sqlstore.Dollar(q), args...)
	if err != nil {
		return nil, err
	}
	return pgRows{rows}, nil
}

func (d querier) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	return d.q.QueryRow(ctx, sqlstore.Dollar(q), args...)
}

// pgRows gives pgx.Rows the Close of sqlstore.Rows.
type pgRows struct{ pgx.Rows }

func (r pgRows) Close() error {
	r.Rows.Close()
	return nil
}

// dbNowUS is the database server's clock in microseconds: every lease is
// measured by it, so replicas on machines whose clocks disagree still agree
// on which leases have expired.
const dbNowUS = `(extract(epoch FROM clock_timestamp()) * 1000000)::bigint`

// core returns the shared part of the Store (sqlstore) over its pool: rows
// that a write transaction changes are locked (FOR UPDATE), decisions are
// announced with NOTIFY in their transaction, and leases are measured by the
// server's clock.
func (s *Store) core() *sqlstore.Core {
	return sqlstore.New(sqlstore.Config{
		Name:  "postgres",
		Read:  querier{s.pool},
		Write: querier{s.pool},
		Tx: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return s.inTx(ctx, pgx.TxOptions{}, fn)
		},
		Snapshot: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return s.inTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
		},
		Gate:      s.gate,
		Now:       s.opts.Now,
		ForUpdate: " FOR UPDATE",
		Hub:       &s.hub,
		MinPoll:   50 * time.Millisecond,
		PollMax:   s.opts.PollMax,
		Decided: func(ctx context.Context, q sqlstore.Querier, id string) error {
			_, err := q.Exec(ctx, `SELECT pg_notify(CAST(? AS TEXT), CAST(? AS TEXT))`, NotifyChannel, id)
			return err
		},
		Claims: func() string { return dbNowUS },
		// Rows are locked one by one: a write that checks a bound over
		// several rows (an agent's memory keys) serializes on its key.
		Serialize: `SELECT pg_advisory_xact_lock(hashtextextended(CAST(? AS TEXT), 0))`,
	})
}

// inTx runs fn in a transaction with opts and commits it when fn returns
// nil.
func (s *Store) inTx(ctx context.Context, opts pgx.TxOptions, fn func(sqlstore.Querier) error) error {
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if err := fn(querier{tx}); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
