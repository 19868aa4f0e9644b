// Package trail keeps the JSONL audit trail (audit.FileSink's folder) as a
// copy of the store's audit trail. The store is the one durable source of
// truth: a call's records are committed there, and only there, before the
// call is answered. A Follower then copies every committed record, from
// every process that shares the store, into the folder exactly as it was
// committed (the store's Seq, PrevHash and Hash), after the commit and off
// every call's path, fsyncing the files in batches. It catches up from the
// store when it starts (after a crash, a restart, or while another process
// held the folder). Check verifies the copy against the store.
//
// One process writes a folder at a time (the folder's lock); a Follower
// that finds it held tails nothing and tries again every Poll, so that
// when the writer stops another replica takes over and catches up.
package trail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// MaxLine is the longest JSON line a copy may have (a copy is never
// shrunk, so it is larger than a FileSink's default).
const MaxLine = 16 << 20

// Options configure a Follower. The zero value is valid.
type Options struct {
	// Poll is how often the Follower looks for records committed by other
	// processes and, when another process holds the folder, tries to take
	// it over (default 500ms). Records committed in this process wake it
	// at once (Kick).
	Poll time.Duration
	// SyncEvery is how long written records may wait for their fsync
	// (default 10s): the files are synced at most once per SyncEvery, when
	// a file is full (rotation), and on Close. The store holds every record
	// durably before its call is answered, and a Follower catches the files
	// up from it after a crash, so the files' syncs only bound how much
	// copying a restart after a power loss redoes; they cost no call.
	SyncEvery time.Duration
	// Batch is the number of records read from the store at a time
	// (default 1000, at most store.MaxLimit).
	Batch int
	// MaxRecords is the number of records per file (default 1000).
	MaxRecords int
	// Logger receives what the Follower does not return: another process
	// writes the folder, the folder is not a copy of this store, I/O
	// errors (default: discard).
	Logger *slog.Logger
}

func (o *Options) defaults() {
	if o.Poll <= 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.SyncEvery <= 0 {
		o.SyncEvery = 10 * time.Second
	}
	if o.Batch <= 0 || o.Batch > store.MaxLimit {
		o.Batch = 1000
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// minGap is the shortest time between two reads of the store that a
// Kick causes: commits in quick succession share one read.
const minGap = 20 * time.Millisecond

// retryBroken is how often a Follower whose folder is not a copy of the
// store (or failed) tries it again.
const retryBroken = 30 * time.Second

// Status is what a Follower is doing.
type Status struct {
	// Writer says this process holds the folder and writes it.
	Writer bool `json:"writer"`
	// Written is the last Seq written to the files (by this process, or
	// found there when it took the folder over); Synced the last one
	// fsynced.
	Written int64 `json:"written"`
	Synced  int64 `json:"synced"`
	// Err is why the Follower does not write, if it is not just another
	// process holding the folder.
	Err string `json:"error,omitempty"`
}

// Follower copies the store's audit trail into a folder. It is safe for
// concurrent use.
type Follower struct {
	dir  string
	st   Store
	opts Options

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	// pending holds records committed in this process, handed over by
	// Committed, by Seq (at most maxPending): the copy takes them from
	// here instead of reading them back from the store.
	pmu     sync.Mutex
	pending map[int64]*audit.Record
	pbytes  int         // size of the pending records' variable parts
	writing atomic.Bool // this process holds the folder (pending is kept)
	hole    int64       // the first missing Seq the last step found (0: none; under mu)

	mu       sync.Mutex
	sink     *audit.FileSink // nil while not the writer
	status   Status
	lastSync time.Time
	nextTry  time.Time
	said     bool // logged that another process writes the folder
	changed  *sync.Cond
}

// Start opens the folder dir (created when needed) and starts copying
// st's trail into it; it catches up at once if it can take the folder.
// Close stops it.
func Start(dir string, st Store, opts Options) *Follower {
	opts.defaults()
	f := &Follower{dir: dir, st: st, opts: opts, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	f.changed = sync.NewCond(&f.mu)
	current.Store(f)
	go f.loop()
	return f
}

// storeError is a failed read of the store (retried at the next step,
// without giving the folder up).
type storeError struct{ err error }

func (e *storeError) Error() string { return "trail: read the store: " + e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// current is the process's last started Follower (Current).
var current atomic.Pointer[Follower]

// Current returns the status of the Follower this process started last
// and not yet closed, and false when there is none (for metrics).
func Current() (Status, bool) {
	f := current.Load()
	if f == nil {
		return Status{}, false
	}
	return f.Status(), true
}

// maxPending and maxPendingBytes bound the records handed over by
// Committed and not yet copied; past them, records are read back from the
// store.
const (
	maxPending      = 8192
	maxPendingBytes = 32 << 20
)

// recSize approximates the memory a record holds beyond its fixed fields.
func recSize(r *audit.Record) int {
	n := len(r.Args) + len(r.Result) + len(r.Justification) + 256
	for _, st := range r.Stages {
		n += len(st.Name) + len(st.Decision)
		for _, re := range st.Reasons {
			n += len(re)
		}
	}
	return n
}

// Committed hands the Follower a record this process just committed
// (sealed by the store; it is not modified) and wakes it. It never
// blocks. The record is only a shortcut: the copy checks that it continues
// the chain, and reads whatever it lacks from the store.
func (f *Follower) Committed(rec *audit.Record) {
	if rec != nil && rec.Seq > 0 && f.writing.Load() {
		n := recSize(rec)
		f.pmu.Lock()
		if f.pending == nil {
			f.pending = map[int64]*audit.Record{}
		}
		if len(f.pending) < maxPending && f.pbytes+n <= maxPendingBytes {
			f.pending[rec.Seq] = rec
			f.pbytes += n
		}
		f.pmu.Unlock()
	}
	f.Kick()
}

// fromPending returns the records after seq held in pending, in order and
// without a gap, and drops those at or before seq. more says pending holds
// a later record past a gap.
func (f *Follower) fromPending(seq int64, limit int) (recs []*audit.Record, more bool) {
	f.pmu.Lock()
	defer f.pmu.Unlock()
	for s, r := range f.pending {
		if s <= seq {
			delete(f.pending, s)
			f.pbytes -= recSize(r)
		}
	}
	for len(recs) < limit {
		r, ok := f.pending[seq+1]
		if !ok {
			break
		}
		delete(f.pending, seq+1)
		f.pbytes -= recSize(r)
		recs = append(recs, r)
		seq++
	}
	return recs, len(f.pending) > 0
}

// setWriting records whether this process writes the folder; records
// handed over are kept only while it does.
func (f *Follower) setWriting(on bool) {
	f.writing.Store(on)
	if !on {
		f.pmu.Lock()
		f.pending, f.pbytes = nil, 0
		f.pmu.Unlock()
	}
}

// Kick wakes the Follower: a record was committed. It never blocks.
func (f *Follower) Kick() {
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// Status returns what the Follower is doing.
func (f *Follower) Status() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

// WaitWritten waits until the files hold every record up to seq or ctx
// ends; it returns ctx.Err() then. (Only a writing Follower gets there.)
//
// It is exported for whoever hands the folder on once it holds a given
// record (a backup or an export after a call, a check across processes
// such as the server's replica tests) without polling Status; the copy
// itself never waits on it.
func (f *Follower) WaitWritten(ctx context.Context, seq int64) error {
	stop := context.AfterFunc(ctx, func() {
		f.mu.Lock()
		f.changed.Broadcast()
		f.mu.Unlock()
	})
	defer stop()
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.status.Written < seq {
		if err := ctx.Err(); err != nil {
			return err
		}
		f.Kick()
		f.changed.Wait()
	}
	return nil
}

// Close stops the Follower. A writing Follower first copies what the
// store committed until then (bounded by ctx) and syncs the files; then it
// releases the folder. It returns the error of that last copy or sync.
func (f *Follower) Close(ctx context.Context) error {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	current.CompareAndSwap(f, nil)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sink == nil {
		return nil
	}
	err := f.copyLocked(ctx, true)
	f.setWriting(false)
	err = errors.Join(err, f.sink.Close())
	if err == nil {
		f.status.Synced = f.status.Written
	}
	f.sink = nil
	f.status.Writer = false
	f.changed.Broadcast()
	return err
}

func (f *Follower) loop() {
	defer close(f.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	poll := time.NewTicker(f.opts.Poll)
	defer poll.Stop()
	for {
		f.step(ctx)
		select {
		case <-f.stop:
			return
		case <-f.kick:
		case <-poll.C:
		}
		// Let commits in quick succession share one read.
		select {
		case <-f.stop:
			return
		case <-time.After(minGap):
		}
	}
}

// step takes the folder if it can, copies what is new and syncs when due.
func (f *Follower) step(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.changed.Broadcast()
	if f.sink == nil && !f.takeLocked(ctx) {
		return
	}
	if err := f.copyLocked(ctx, false); err != nil {
		var se *storeError
		switch {
		case ctx.Err() != nil:
		case errors.As(err, &se):
			// The store may be back at the next step; the files are fine.
			f.opts.Logger.Warn("the JSONL audit trail cannot read the store; retrying", "err", err)
			f.status.Err = err.Error()
		default:
			f.breakLocked(err)
		}
		return
	}
	if f.status.Synced < f.status.Written && time.Since(f.lastSync) >= f.opts.SyncEvery {
		if err := f.sink.Sync(); err != nil {
			f.breakLocked(err)
			return
		}
		f.lastSync = time.Now()
		f.status.Synced = f.status.Written
	}
}

// breakLocked gives the folder up after an error (the sink is closed: a
// failed write or sync needs a reopen) and retries later.
func (f *Follower) breakLocked(err error) {
	f.setWriting(false)
	f.opts.Logger.Error("the JSONL audit trail stopped following the store; it is retried later and `armory audit verify` reports how far behind it is", "dir", f.dir, "err", err)
	f.sink.Close()
	f.sink = nil
	f.status.Writer = false
	f.status.Err = err.Error()
	f.nextTry = time.Now().Add(retryBroken)
}

// takeLocked opens the folder and checks that it is a copy of the store.
func (f *Follower) takeLocked(ctx context.Context) bool {
	if time.Now().Before(f.nextTry) {
		return false
	}
	sink, err := audit.OpenFile(f.dir, audit.FileOptions{MaxRecords: f.opts.MaxRecords, MaxLine: MaxLine})
	if errors.Is(err, audit.ErrLocked) {
		if !f.said {
			f.said = true
			f.opts.Logger.Info("another process writes the JSONL audit trail; this one records in the store only and takes the trail over if that process stops", "dir", f.dir)
		}
		return false
	}
	if err == nil {
		err = f.matches(ctx, sink.Head())
		if err != nil {
			sink.Close()
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return false
		}
		f.opts.Logger.Error("cannot write the JSONL audit trail; it is retried later", "dir", f.dir, "err", err)
		f.status.Err = err.Error()
		f.nextTry = time.Now().Add(retryBroken)
		return false
	}
	if f.said {
		f.opts.Logger.Info("this process now writes the JSONL audit trail", "dir", f.dir)
		f.said = false
	}
	f.sink = sink
	f.setWriting(true)
	h := sink.Head()
	f.status = Status{Writer: true, Written: h.Seq, Synced: h.Seq}
	f.lastSync = time.Now()
	return true
}

// matches checks that the files' last record is the store's record with
// that Seq (else the folder holds another trail: an older format, another
// database, or an edit).
func (f *Follower) matches(ctx context.Context, h audit.Head) error {
	if h.Seq == 0 {
		return nil
	}
	recs, err := f.st.ListAudit(ctx, store.AuditFilter{AfterSeq: h.Seq - 1, Oldest: true, Limit: 1})
	if err != nil {
		return fmt.Errorf("trail: read the store: %w", err)
	}
	if len(recs) == 0 || recs[0].Seq != h.Seq {
		return &audit.ChainError{Seq: h.Seq, Reason: "the JSONL trail goes past the store's trail: it is not a copy of this store (move the folder aside to start a new copy)"}
	}
	if recs[0].Hash != h.Hash {
		return &audit.ChainError{Seq: h.Seq, Reason: "the JSONL trail differs from the store's record: it is not a copy of this store (move the folder aside to start a new copy)"}
	}
	return nil
}

// copyLocked appends every record the store committed after the files'
// head, a batch at a time, without syncing: the records this process
// handed over (Committed) as they are, the others read from the store.
// A gap among the handed-over records (a commit whose hand-over is still
// on its way) is read from the store only if it is still there at the next
// step, or at once when closing.
func (f *Follower) copyLocked(ctx context.Context, closing bool) error {
	for {
		h := f.sink.Head()
		recs, more := f.fromPending(h.Seq, f.opts.Batch)
		fromStore := len(recs) == 0
		if fromStore {
			if more && !closing && f.hole != h.Seq+1 {
				f.hole = h.Seq + 1
				return nil
			}
			var err error
			recs, err = f.st.ListAudit(ctx, store.AuditFilter{AfterSeq: h.Seq, Oldest: true, Limit: f.opts.Batch})
			if err != nil {
				return &storeError{err}
			}
		}
		f.hole = 0
		if len(recs) == 0 {
			return nil
		}
		if err := f.sink.AppendSealed(recs); err != nil {
			return err
		}
		f.status.Written = recs[len(recs)-1].Seq
		f.status.Err = ""
		f.changed.Broadcast()
		switch {
		case len(recs) == f.opts.Batch, more, closing && !fromStore:
			// More may be waiting: in pending past a gap, in the store.
		default:
			return nil
		}
	}
}
