package sqlite

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// RevokeToken implements store.Tokens. Besides the database it replaces
// the token epoch file (TokenEpoch) before and after the revocation, so that
// servers caching tokens by epoch notice it at their next request. If the
// file cannot be replaced beforehand nothing is revoked; if only the second
// replacement fails the token is revoked in the store and the error says
// that caching servers may not have noticed.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	if err := s.bumpTokenEpoch(); err != nil {
		return fmt.Errorf("sqlite: revoke token: %w", err)
	}
	if err := s.Core.RevokeToken(ctx, id); err != nil {
		return err
	}
	if err := s.bumpTokenEpoch(); err != nil {
		return fmt.Errorf("sqlite: token %s is revoked in the store, but servers that cache tokens may not have noticed (restart them): %w", id, err)
	}
	return nil
}

// TokenEpoch returns a value that changes whenever a token of this
// database is revoked (by any process, through RevokeToken): the content of
// the token epoch file next to the database, a random value that every
// revocation replaces (a file's inode and time could repeat). Reading it is
// an open and a read of a few bytes, for servers that cache tokens: a
// cached token stays valid while the epoch it was read under is current
// (server.tokenCache).
func (s *Store) TokenEpoch() (string, error) {
	f, err := os.Open(s.tokenEpochFile)
	if errors.Is(err, os.ErrNotExist) {
		return "none", nil
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: token epoch: %w", err)
	}
	defer f.Close()
	var b [64]byte
	n, err := io.ReadFull(f, b[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return "", fmt.Errorf("sqlite: token epoch: %w", err)
	}
	if n == 0 {
		return "", fmt.Errorf("sqlite: token epoch: %s is empty", s.tokenEpochFile)
	}
	return string(b[:n]), nil
}

// bumpTokenEpoch replaces the token epoch file with a new random value,
// atomically (rename).
func (s *Store) bumpTokenEpoch() error {
	f, err := os.CreateTemp(filepath.Dir(s.tokenEpochFile), filepath.Base(s.tokenEpochFile)+".*")
	if err != nil {
		return fmt.Errorf("token epoch: %w", err)
	}
	_, werr := f.WriteString(rand.Text())
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(f.Name(), s.tokenEpochFile)
	}
	if werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("token epoch: %w", werr)
	}
	return nil
}
