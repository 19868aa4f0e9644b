package postgres

import (
	"context"
	"time"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/internal/commit"
)

// A Batched Store commits every batch with synchronous_commit = off: COMMIT
// returns once the commit record is in the server's WAL buffers (visible to
// every session; a crash of this process or of a Postgres backend loses
// nothing, the server's WAL holds it), before the WAL is flushed. Postgres
// flushes it by itself within 3 × wal_writer_delay (200 ms by default: the
// server's setting, not ours), so the syncer does not rely on it: at most
// Window after a commit it runs one durable no-op commit (syncWAL), whose
// WAL flush covers every record before it in the WAL, this Store's and
// every other session's.

// syncTimeout bounds one sync's round trip.
const syncTimeout = 30 * time.Second

// syncWAL commits a transaction that has a transaction ID (txid_current
// assigns one) with synchronous_commit on: its COMMIT waits until the WAL
// is flushed up to its commit record, so every earlier commit is durable
// too. A transaction without an ID writes no commit record and flushes
// nothing, so a bare BEGIN/COMMIT would not do.
func (s *Store) syncWAL() error {
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, `BEGIN; SET LOCAL synchronous_commit = on; SELECT txid_current(); COMMIT`)
	return err
}

// relaxed reports whether a batch is committed without waiting for the WAL
// flush: every batch of a Batched Store, else only a batch of NoSync
// admissions.
func (s *Store) relaxed(entries []commit.Entry) bool {
	return s.opts.Durability == store.Batched || !commit.Durable(entries)
}

// countCommit counts a committed batch as durable or relaxed and tells the
// syncer.
func (s *Store) countCommit(entries []commit.Entry) {
	switch {
	case s.opts.Durability == store.Batched:
		s.commits[1].Add(1)
		s.syncer.Committed(commit.LastSeq(entries))
	case commit.Durable(entries):
		s.commits[0].Add(1)
		s.syncer.MarkDurable(commit.LastSeq(entries))
	default:
		s.commits[1].Add(1)
	}
}

// CommitCounts reports how many group commits this Store's committer has
// made: Durable ones (COMMIT waits for the WAL flush, with the server's
// synchronous_commit) and Relaxed ones (committed with synchronous_commit
// off: only NoSync entries, or every batch of a Batched Store), and the
// syncer's figures.
func (s *Store) CommitCounts() store.CommitCounts {
	return store.CommitCounts{Durable: s.commits[0].Load(), Relaxed: s.commits[1].Load(),
		Syncs: s.syncer.Syncs(), DurableSeq: s.syncer.DurableSeq(), Mode: s.opts.Durability}
}
