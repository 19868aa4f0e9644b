package sqlite

import (
	"context"
	"database/sql"
	"strconv"
	"time"

	"github.com/armory-dev/armory/store/internal/sqlstore"
)

// sqlQuerier is what *sql.DB, *sql.Conn and *sql.Tx have in common.
type sqlQuerier interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
}

// querier adapts database/sql to sqlstore.Querier; stmts are prepared
// statements used in place of their query.
type querier struct {
	q     sqlQuerier
	stmts map[string]*sql.Stmt
}

func (d querier) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	res, err := d.q.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d querier) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	rows, err := d.q.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (d querier) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	if st := d.stmts[q]; st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return d.q.QueryRowContext(ctx, q, args...)
}

// core returns the shared part of the Store (sqlstore) over its
// connections: reads on the readers, writes on the writer, whose write
// transactions take the database's write lock at BEGIN (BEGIN IMMEDIATE),
// so no row needs a lock of its own.
func (s *Store) core() *sqlstore.Core {
	return sqlstore.New(sqlstore.Config{
		Name:  "sqlite",
		Read:  querier{q: s.r, stmts: map[string]*sql.Stmt{sqlstore.LookupTokenQuery: s.lookupToken}},
		Write: querier{q: s.w},
		Tx: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return inTx(ctx, s.w, nil, fn)
		},
		Snapshot: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return inTx(ctx, s.r, &sql.TxOptions{ReadOnly: true}, fn)
		},
		Gate:    s.gate,
		Now:     s.opts.Now,
		Hub:     &s.hub,
		MinPoll: 5 * time.Millisecond,
		PollMax: s.opts.PollMax,
		// Every process is on this machine: the Store's clock measures
		// the leases.
		Claims: func() string { return strconv.FormatInt(s.opts.Now().UnixMicro(), 10) },
	})
}

// inTx runs fn in a transaction of db and commits it when fn returns nil.
func inTx(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, opts *sql.TxOptions, fn func(sqlstore.Querier) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(querier{q: tx}); err != nil {
		return err
	}
	return tx.Commit()
}
