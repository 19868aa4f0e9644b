package postgres

// TokenEpoch returns "": a revocation is seen by the next lookup, as the
// Postgres store keeps no cheap revocation epoch, so a server caches tokens
// only by time (server.Options.TokenCacheTTL).
func (s *Store) TokenEpoch() (string, error) { return "", nil }
