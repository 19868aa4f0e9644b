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
// statements (of the pool that q is or that tx was begun on) used in
// place of their query, through tx.StmtContext inside a transaction.
type querier struct {
	q     sqlQuerier
	tx    *sql.Tx
	stmts map[string]*sql.Stmt
}

// stmt returns the prepared form of q, or nil.
func (d querier) stmt(ctx context.Context, q string) *sql.Stmt {
	st := d.stmts[q]
	if st != nil && d.tx != nil {
		// Reuses the statement prepared on the transaction's connection
		// (prepares it there once if need be); closed with the transaction.
		return d.tx.StmtContext(ctx, st)
	}
	return st
}

func (d querier) Exec(ctx context.Context, q string, args ...any) (int64, error) {
	var res sql.Result
	var err error
	if st := d.stmt(ctx, q); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = d.q.ExecContext(ctx, q, args...)
	}
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (d querier) Query(ctx context.Context, q string, args ...any) (sqlstore.Rows, error) {
	var rows *sql.Rows
	var err error
	if st := d.stmt(ctx, q); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = d.q.QueryContext(ctx, q, args...)
	}
	if err != nil {
		return nil, err
	}
	return rows, nil
}

func (d querier) QueryRow(ctx context.Context, q string, args ...any) sqlstore.Row {
	if st := d.stmt(ctx, q); st != nil {
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
		Read:  querier{q: s.r, stmts: s.hotReads},
		Write: querier{q: s.w, stmts: s.hotWrites},
		Tx: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return inTx(ctx, s.w, nil, s.hotWrites, fn)
		},
		Snapshot: func(ctx context.Context, fn func(sqlstore.Querier) error) error {
			return inTx(ctx, s.r, &sql.TxOptions{ReadOnly: true}, s.hotReads, fn)
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

// inTx runs fn in a transaction of db and commits it when fn returns nil;
// stmts are statements prepared on db (querier).
func inTx(ctx context.Context, db interface {
	BeginTx(context.Context, *sql.TxOptions) (*sql.Tx, error)
}, opts *sql.TxOptions, stmts map[string]*sql.Stmt, fn func(sqlstore.Querier) error) error {
	tx, err := db.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := fn(querier{q: tx, tx: tx, stmts: stmts}); err != nil {
		return err
	}
	return tx.Commit()
}
