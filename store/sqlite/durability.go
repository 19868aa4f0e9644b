package sqlite

import (
	"context"
	"errors"
	"io/fs"
	"os"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/internal/commit"
)

// A Batched Store's writer runs with synchronous=NORMAL: in WAL mode a
// commit appends its frames to the -wal file and returns without an fsync
// (the frames are in the operating system's page cache: every process
// reading the file sees them, and they survive a crash of this process).
// The syncer then fsyncs the -wal file at most Window after a commit; one
// fsync covers every frame written before it, by any connection of any
// process, since fsync flushes the file's cached pages whoever wrote them.
//
// Why an fsync of the file and not PRAGMA wal_checkpoint(PASSIVE): a
// checkpoint fsyncs the WAL only when it has frames to copy back
// (nBackfill < mxFrame and no reader pins them), so it may sync nothing;
// and when it does, it also writes the pages into the database file and
// fsyncs that too: twice the I/O. SQLite itself syncs the WAL before each
// checkpoint, so what a checkpoint (automatic, or the last connection's on
// close) copies back is durable either way.

// syncWAL fsyncs the database's -wal file. A missing file has nothing to
// sync: the last connection to close checkpointed it into the database
// file, fsynced, and deleted it.
func (s *Store) syncWAL() error {
	f, err := os.Open(s.walPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	serr := f.Sync()
	if cerr := f.Close(); serr == nil {
		serr = cerr
	}
	return serr
}

// flushBatched commits a Batched Store's batch with the writer's
// synchronous=NORMAL and leaves its durability to the syncer.
func (s *Store) flushBatched(entries []commit.Entry) error {
	err := s.write(context.Background(), s.w, entries)
	if err == nil {
		s.commits[1].Add(1)
		s.syncer.Committed(commit.LastSeq(entries))
	}
	return err
}

// commitCounts adds the syncer's figures to the commit counts.
func (s *Store) commitCounts() store.CommitCounts {
	return store.CommitCounts{Durable: s.commits[0].Load(), Relaxed: s.commits[1].Load(),
		Syncs: s.syncer.Syncs(), DurableSeq: s.syncer.DurableSeq(), Mode: s.opts.Durability}
}
