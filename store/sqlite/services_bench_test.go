package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

// benchStore opens a Store on a fresh file and, beside it, a bare
// database/sql connection to the same file with the Store's settings
// (WAL, synchronous FULL, BEGIN IMMEDIATE): the yardstick of the services
// benchmarks.
func benchStore(b *testing.B) (*sqlite.Store, *sql.DB) {
	path := filepath.Join(b.TempDir(), "bench.db")
	s, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	return s, db
}

// BenchmarkBroadcast: SendMessages of 1,000 messages against the same
// rows inserted one prepared INSERT at a time in one bare transaction.
func BenchmarkBroadcast(b *testing.B) {
	s, db := benchStore(b)
	ins, err := db.Prepare(`INSERT INTO messages (id, to_agent, from_agent, kind, subject, body, reply_to, chat, created_us)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkBroadcast(b, s, func(ctx context.Context, msgs []*store.Message) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		st, now := tx.StmtContext(ctx, ins), time.Now().UnixMicro()
		for _, m := range msgs {
			if _, err := st.ExecContext(ctx, audit.NewID(), m.To, m.From, m.Kind, m.Subject, m.Body, m.ReplyTo, m.Chat, now); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
}

// BenchmarkStateCAS: a compare-and-set WriteState against a bare
// transaction updating the same row.
func BenchmarkStateCAS(b *testing.B) {
	s, db := benchStore(b)
	storetest.BenchmarkStateCAS(b, s, func(ctx context.Context, key, value string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `UPDATE world_state SET value = ?, version = version + 1, updated_us = ? WHERE key = ?`,
			value, time.Now().UnixMicro(), key); err != nil {
			return err
		}
		return tx.Commit()
	})
}
