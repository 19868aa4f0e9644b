// Package commit is the group committer that store backends share: callers
// queue audit records, one goroutine takes whatever is queued (up to a bound)
// and writes it in one transaction, and each caller waits for its batch.
package commit

import (
	"context"
	"runtime"
	"sync"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/internal/auditrow"
)

// Entry is a queued record, normalized, with its stages already encoded
// (auditrow.EncodeStages) in the caller's goroutine. Admit is set for an
// admission (store.Store.Admit): the record is appended only if the flush
// admits it (see Ledger).
type Entry struct {
	Rec    *audit.Record
	Stages string
	Admit  *Admission
	// NoSync: this entry does not need its commit to reach stable storage
	// before its caller goes on (store.AdmitRequest.NoSync).
	NoSync bool
	// Of is set on a finish record queued with its admission
	// (store.AdmitRequest.Finish): it follows that admission's entry in the
	// same batch and is appended only when the admission was admitted.
	Of *Admission
}

// Appended reports whether the flush appends e's record, once every
// admission before it in the batch has been decided: not for a refused
// admission, nor for the finish record of one.
func (e *Entry) Appended() bool {
	return (e.Admit == nil || e.Admit.Result.Admitted) && (e.Of == nil || e.Of.Result.Admitted)
}

// Durable reports whether a batch must be committed durably (fsync): when
// any of its entries needs it. Only a batch of NoSync entries may skip it.
func Durable(entries []Entry) bool {
	for _, e := range entries {
		if !e.NoSync {
			return true
		}
	}
	return false
}

// Flush writes entries, in order, in one transaction. It must decide every
// admission in order (a Ledger), skip the records of refused ones, and
// chain the other records (audit.Record.Chain) after the head it reads
// inside that transaction. On error nothing must be committed.
type Flush func(entries []Entry) error

// Defaults.
const (
	DefaultMaxBatch = 256
	DefaultQueue    = 4096
)

// Batcher group-commits audit records. It is safe for concurrent use.
type Batcher struct {
	flush    Flush
	maxBatch int
	reqs     chan *request
	mu       sync.RWMutex // held for reading while enqueueing; for writing by Close
	closed   bool
	done     chan struct{}
	closeErr error
}

type request struct {
	e Entry // holds the batcher's own copy of the record
	// fin is an admission's finish record (store.AdmitRequest.Finish),
	// flushed right after e in the same batch; fin.Rec is nil without one.
	fin  Entry
	done chan error
}

// entries appends r's entries (one, or an admission and its finish record)
// to dst.
func (r *request) entries(dst []Entry) []Entry {
	dst = append(dst, r.e)
	if r.fin.Rec != nil {
		dst = append(dst, r.fin)
	}
	return dst
}

var reqPool = sync.Pool{New: func() any { return &request{done: make(chan error, 1)} }}

// New starts a Batcher. maxBatch bounds the records per transaction and
// queue the records waiting (callers block beyond it); zero means the
// default.
func New(flush Flush, maxBatch, queue int) *Batcher {
	if maxBatch <= 0 {
		maxBatch = DefaultMaxBatch
	}
	if queue <= 0 {
		queue = DefaultQueue
	}
	b := &Batcher{flush: flush, maxBatch: maxBatch, reqs: make(chan *request, queue), done: make(chan struct{})}
	go b.loop()
	return b
}

// Append queues a copy of rec (normalized in the caller's goroutine) and
// waits until its batch is committed; on success rec receives the committed
// form (Seq, PrevHash, Hash and normalized fields). If ctx ends first it
// returns ctx.Err(), leaves rec alone, and the record may still be
// committed. closedErr is returned after Close.
func (b *Batcher) Append(ctx context.Context, rec *audit.Record, closedErr error) error {
	return b.submit(ctx, rec, nil, nil, false, closedErr)
}

// Admit queues an admission (store.Store.Admit) and waits until its batch is
// committed. On admission req.Record receives its committed form. The
// request must have passed store.CheckAdmit.
func (b *Batcher) Admit(ctx context.Context, req *store.AdmitRequest, closedErr error) (store.AdmitResult, error) {
	a := &Admission{Session: req.Session, Acquire: append([]store.Acquisition(nil), req.Acquire...), MaxRuntime: req.MaxRuntime}
	if req.Repeat != nil {
		r := *req.Repeat
		a.Repeat = &r
	}
	if err := b.submit(ctx, req.Record, a, req.Finish, req.NoSync, closedErr); err != nil {
		return store.AdmitResult{}, err
	}
	return a.Result, nil
}

func (b *Batcher) submit(ctx context.Context, rec *audit.Record, adm *Admission, finish *audit.Record, noSync bool, closedErr error) error {
	c := rec.Clone()
	c.Normalize()
	stages, err := auditrow.EncodeStages(c.Stages)
	if err != nil {
		return err
	}
	var fin Entry
	if finish != nil {
		f := finish.Clone()
		f.Normalize()
		fst, err := auditrow.EncodeStages(f.Stages)
		if err != nil {
			return err
		}
		fin = Entry{Rec: f, Stages: fst, Of: adm, NoSync: noSync}
	}
	r := reqPool.Get().(*request)
	r.e, r.fin = Entry{Rec: c, Stages: stages, Admit: adm, NoSync: noSync}, fin
	b.mu.RLock()
	if b.closed {
		b.mu.RUnlock()
		r.e, r.fin = Entry{}, Entry{}
		reqPool.Put(r)
		return closedErr
	}
	select {
	case b.reqs <- r:
		b.mu.RUnlock()
	case <-ctx.Done():
		b.mu.RUnlock()
		r.e, r.fin = Entry{}, Entry{}
		reqPool.Put(r)
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		if err == nil && (adm == nil || adm.Result.Admitted) {
			*rec = *r.e.Rec
			if finish != nil {
				*finish = *r.fin.Rec
			}
		}
		r.e, r.fin = Entry{}, Entry{}
		reqPool.Put(r)
		return err
	case <-ctx.Done():
		// The committer still owns r and will send on r.done: leave r to
		// the garbage collector instead of the pool.
		return ctx.Err()
	}
}

func (b *Batcher) loop() {
	defer close(b.done)
	batch := make([]*request, 0, b.maxBatch)
	entries := make([]Entry, 0, b.maxBatch)
	for {
		r, ok := <-b.reqs
		if !ok {
			return
		}
		batch = append(batch[:0], r)
		batch = b.gather(batch)
		entries = entries[:0]
		for _, r := range batch {
			entries = r.entries(entries)
		}
		err := b.flush(entries)
		if err != nil && len(batch) > 1 {
			// One bad record must not fail its neighbours: retry one by one
			// (an admission with its finish record, together).
			for _, r := range batch {
				r.done <- b.flush(r.entries(nil))
			}
			continue
		}
		for _, r := range batch {
			r.done <- err
		}
	}
}

// gather adds queued requests to batch, up to maxBatch. When the queue is
// empty it yields the processor (runtime.Gosched) and looks again, for as
// long as yielding brought new requests: callers woken by the previous
// commit are runnable but may not have run yet, and letting them enqueue
// first turns many tiny transactions into one. With no runnable callers a
// yield returns at once, so a lone caller pays next to nothing.
func (b *Batcher) gather(batch []*request) []*request {
	for len(batch) < b.maxBatch {
		select {
		case r, ok := <-b.reqs:
			if !ok {
				return batch
			}
			batch = append(batch, r)
			continue
		default:
		}
		before := len(b.reqs)
		runtime.Gosched()
		if len(b.reqs) == before {
			return batch
		}
	}
	return batch
}

// Close stops accepting records, commits the ones already queued, and waits
// for the committer to finish. It is idempotent.
func (b *Batcher) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.reqs)
	}
	b.mu.Unlock()
	<-b.done
}
