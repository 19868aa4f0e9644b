package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/armory-dev/armory/store/internal/migrate"
)

// Schema is how a backend keeps its schema: the numbered migrations in the
// folder "migrations" of FS, and the statements that differ by dialect.
type Schema struct {
	FS fs.FS
	// Lock, when set, runs first in the migration's transaction (Postgres:
	// an advisory lock; SQLite's write transaction is lock enough).
	Lock string
	// Versions creates the schema_version table if it does not exist.
	Versions string
	// Record records that version was applied.
	Record func(ctx context.Context, q Querier, version int) error
}

// Migrate applies, in one write transaction (tx), the migrations of s that
// the database lacks; a database newer than the program is an error.
func Migrate(ctx context.Context, name string, tx func(context.Context, func(Querier) error) error, s Schema) error {
	ms, err := migrate.Load(s.FS, "migrations")
	if err != nil {
		return err
	}
	var step string
	err = tx(ctx, func(q Querier) error {
		if s.Lock != "" {
			if _, err := q.Exec(ctx, s.Lock); err != nil {
				return fmt.Errorf("lock: %w", err)
			}
		}
		if _, err := q.Exec(ctx, s.Versions); err != nil {
			return err
		}
		var have int
		if err := q.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&have); err != nil {
			return err
		}
		if have > len(ms) {
			return final(fmt.Errorf("%s: database schema version %d is newer than this program (%d)", name, have, len(ms)))
		}
		for _, m := range ms[have:] {
			step = " " + m.Name
			if _, err := q.Exec(ctx, m.SQL); err != nil {
				return err
			}
			if err := s.Record(ctx, q, m.Version); err != nil {
				return err
			}
		}
		step = ""
		return nil
	})
	var own *opError
	if errors.As(err, &own) {
		return own.err
	}
	if err != nil {
		return fmt.Errorf("%s: migrate%s: %w", name, step, err)
	}
	return nil
}
