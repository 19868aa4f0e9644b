package postgres

import (
	"context"
	"fmt"
	"strings"

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
