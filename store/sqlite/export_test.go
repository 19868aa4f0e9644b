package sqlite

import "context"

// WriterSynchronous returns the writer connection's PRAGMA synchronous
// (1 NORMAL, 2 FULL), for tests.
func WriterSynchronous(s *Store) (int, error) {
	var v int
	err := s.w.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&v)
	return v, err
}
