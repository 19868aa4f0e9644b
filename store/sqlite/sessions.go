package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/armory-dev/armory/store"
)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, session, counter string, n int64) (int64, error) {
	if n < 0 {
		return 0, fmt.Errorf("sqlite: release: %w: n = %d", store.ErrInvalid, n)
	}
	release, err := s.use()
	if err != nil {
		return 0, err
	}
	defer release()
	var cur int64
	err = s.onWriter(ctx, func(c *sql.Conn) error {
		return c.QueryRowContext(ctx, `UPDATE counters SET value = MAX(value - ?3, 0) WHERE session = ?1 AND name = ?2 RETURNING value`,
			session, counter, n).Scan(&cur)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: release: %w", err)
	}
	return cur, nil
}
