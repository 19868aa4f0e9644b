package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/postgres"
	"github.com/armory-dev/armory/store/storetest"
)

// benchStore opens a Store on a fresh schema and, beside it, a bare pgx
// pool on the same schema: the yardstick of the services benchmarks.
func benchStore(b *testing.B) (*postgres.Store, *pgxpool.Pool) {
	dsn := freshSchema(b)
	s, err := postgres.OpenWith(context.Background(), dsn, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return s, pool
}

// BenchmarkBroadcast: SendMessages of 1,000 messages against the same
// rows inserted in one bare transaction, as one pipelined pgx batch of
// 1,000 INSERTs (one round trip).
func BenchmarkBroadcast(b *testing.B) {
	s, pool := benchStore(b)
	storetest.BenchmarkBroadcast(b, s, func(ctx context.Context, msgs []*store.Message) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var batch pgx.Batch
			now := time.Now().UnixMicro()
			for _, m := range msgs {
				batch.Queue(`INSERT INTO messages (id, to_agent, from_agent, kind, subject, body, reply_to, chat, created_us)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, audit.NewID(), m.To, m.From, m.Kind, m.Subject, m.Body, m.ReplyTo, m.Chat, now)
			}
			return tx.SendBatch(ctx, &batch).Close()
		})
	})
}

// BenchmarkStateCAS: a compare-and-set WriteState against a bare
// transaction updating the same row.
func BenchmarkStateCAS(b *testing.B) {
	s, pool := benchStore(b)
	storetest.BenchmarkStateCAS(b, s, func(ctx context.Context, key, value string) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE world_state SET value = $1, version = version + 1, updated_us = $2 WHERE key = $3`,
				value, time.Now().UnixMicro(), key)
			return err
		})
	})
}
