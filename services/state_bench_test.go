package services_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver the SQLite store uses, for the bare transaction

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
)

// BenchmarkStateCAS compares one compare-and-set of a state key through
// the service (syscall.state.write with expect_version: argument decoding,
// bounds, the store's one-statement CAS, the JSON result) with the same
// row updated by a bare transaction (BEGIN; UPDATE … WHERE version = ?
// RETURNING version; COMMIT) on the same database, both on one
// connection's worth of work at a time. "pipeline" is the same call
// through Pipeline.Execute (lookup, caps, audit: the pipeline's own cost,
// benchmarked in package pipeline), for reference.
//
//	go test -run '^$' -bench StateCAS -benchtime 2s ./services/
func BenchmarkStateCAS(b *testing.B) {
	for _, be := range backendNames {
		b.Run(be, func(b *testing.B) {
			db := newDB(b, be)
			f := open(b, writeWorld(b, worldFiles), db, services.Options{})
			ctx := context.Background()
			tool, ok := f.eng.Roster().Catalog.Lookup("syscall.state.write")
			if !ok {
				b.Fatal("no syscall.state.write")
			}
			write := func(key string, v int64, i int) int64 {
				args, _ := json.Marshal(map[string]any{"key": key, "value": fmt.Sprint(i), "expect_version": v})
				res := tool.Execute(ctx, armory.Invocation{Args: args, Agent: &armory.AgentEnv{ID: "ann"}})
				if !res.Success {
					b.Fatal(res.Text)
				}
				var out struct{ Version int64 }
				json.Unmarshal([]byte(res.Text), &out)
				return out.Version
			}
			// Warm up: until the WAL has reached its steady size (SQLite
			// checkpoints every 1,000 pages), a commit that grows the file
			// costs more than one that reuses it, which would favour
			// whichever sub-benchmark runs last.
			if _, err := f.eng.Store().WriteState(ctx, "warm", "0", 0); err != nil {
				b.Fatal(err)
			}
			for i := range 3000 {
				if _, err := f.eng.Store().WriteState(ctx, "warm", fmt.Sprint(i), -1); err != nil {
					b.Fatal(err)
				}
			}
			run := 0
			key := func(name string) string { run++; return fmt.Sprintf("%s-%d", name, run) }
			b.Run("service", func(b *testing.B) {
				k := key("svc")
				v, i := write(k, 0, 0), 0
				for b.Loop() {
					i++
					v = write(k, v, i)
				}
			})
			b.Run("store", func(b *testing.B) {
				k := key("store")
				v, i := write(k, 0, 0), 0
				for b.Loop() {
					i++
					var err error
					if v, err = f.eng.Store().WriteState(ctx, k, fmt.Sprint(i), v); err != nil {
						b.Fatal(err)
					}
				}
			})
			bare := bareCAS(b, be, db)
			b.Run("bare", func(b *testing.B) {
				k := key("bare")
				v, i := write(k, 0, 0), 0
				for b.Loop() {
					i++
					v = bare(ctx, k, fmt.Sprint(i), v)
				}
			})
			b.Run("pipeline", func(b *testing.B) {
				k := key("pipe")
				v, i := write(k, 0, 0), 0
				for b.Loop() {
					i++
					args, _ := json.Marshal(map[string]any{"key": k, "value": fmt.Sprint(i), "expect_version": v})
					// A session per 300 calls keeps under the invocation cap.
					o := f.eng.Pipeline().Execute(ctx, pipeline.Call{Agent: "ann", Session: fmt.Sprintf("%s-%d", k, i/300), Tool: "syscall.state.write", Args: args})
					if o.Status != audit.StatusSuccess {
						b.Fatal(o.Result)
					}
					v++
				}
			})
		})
	}
}

// bareCAS returns a bare compare-and-set transaction on the test
// database: the same table and row shape as the store's, with the SQLite
// store's pragmas (WAL, synchronous FULL).
func bareCAS(b *testing.B, backend, db string) func(ctx context.Context, key, value string, version int64) int64 {
	const q = `UPDATE world_state SET value = %s, updated_us = %s, version = version + 1 WHERE key = %s AND version = %s RETURNING version`
	if backend == "sqlite" {
		d, err := sql.Open("sqlite", "file:"+db+"?"+url.Values{"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(FULL)"}}.Encode())
		if err != nil {
			b.Fatal(err)
		}
		d.SetMaxOpenConns(1)
		b.Cleanup(func() { d.Close() })
		stmt := fmt.Sprintf(q, "?", "?", "?", "?")
		return func(ctx context.Context, key, value string, version int64) int64 {
			tx, err := d.BeginTx(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			var v int64
			if err := tx.QueryRowContext(ctx, stmt, value, time.Now().UnixMicro(), key, version).Scan(&v); err != nil {
				b.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			return v
		}
	}
	conn, err := pgx.Connect(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	stmt := fmt.Sprintf(q, "$1", "$2", "$3", "$4")
	return func(ctx context.Context, key, value string, version int64) int64 {
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var v int64
		if err := tx.QueryRow(ctx, stmt, value, time.Now().UnixMicro(), key, version).Scan(&v); err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		return v
	}
}
