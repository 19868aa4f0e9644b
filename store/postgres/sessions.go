package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/armory-dev/armory/store"
)

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
