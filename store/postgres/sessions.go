package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/armory-dev/armory/store"
)

// dollar numbers the ? placeholders of q ($1, $2, …).
func dollar(q string) string {
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

var (
	sessionQuery     = dollar(store.SessionQuery)
	generationsQuery = dollar(store.GenerationsQuery)
)

// GetSession implements store.Store.
func (s *Store) GetSession(ctx context.Context, session string) (store.SessionInfo, error) {
	release, err := s.use()
	if err != nil {
		return store.SessionInfo{}, err
	}
	defer release()
	var start, active int64
	if err := s.pool.QueryRow(ctx, sessionQuery, session, session).Scan(&start, &active); err != nil {
		return store.SessionInfo{}, fmt.Errorf("postgres: session: %w", err)
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
	rows, err := s.pool.Query(ctx, generationsQuery, base, base, base, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: session generations: %w", err)
	}
	defer rows.Close()
	var out []store.SessionInfo
	for rows.Next() {
		var id string
		var start, active int64
		if err := rows.Scan(&id, &start, &active); err != nil {
			return nil, fmt.Errorf("postgres: session generations: %w", err)
		}
		out = append(out, store.NewSessionInfo(id, start, active))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: session generations: %w", err)
	}
	return out, nil
}

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
