package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/armory-dev/armory/store"
)

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, session string) (store.SessionInfo, error) {
	release, err := s.use()
	if err != nil {
		return store.SessionInfo{}, err
	}
	defer release()
	var start, active int64
	if err := s.r.QueryRowContext(ctx, store.SessionQuery, session, session).Scan(&start, &active); err != nil {
		return store.SessionInfo{}, fmt.Errorf("sqlite: session: %w", err)
	}
	return store.NewSessionInfo(session, start, active), nil
}

// SessionGenerations implements store.Store.
func (s *Store) SessionGenerations(ctx context.Context, base string, limit int) ([]store.SessionInfo, error) {
	release, err := s.use()
	if err != nil {
		return nil, err
	}
	defer release()
	if limit <= 0 || limit > store.MaxSessionGenerations {
		limit = store.MaxSessionGenerations
	}
	rows, err := s.r.QueryContext(ctx, store.GenerationsQuery, base, base, base, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: session generations: %w", err)
	}
	defer rows.Close()
	var out []store.SessionInfo
	for rows.Next() {
		var id string
		var start, active int64
		if err := rows.Scan(&id, &start, &active); err != nil {
			return nil, fmt.Errorf("sqlite: session generations: %w", err)
		}
		out = append(out, store.NewSessionInfo(id, start, active))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: session generations: %w", err)
	}
	return out, nil
}

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
