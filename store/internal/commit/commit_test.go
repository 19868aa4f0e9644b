package commit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// memLog is a real, in-memory Flush target: a chain in a slice.
type memLog struct {
	mu      sync.Mutex
	recs    []*audit.Record
	head    audit.Head
	batches []int
}

var errBad = errors.New("bad record")

func (m *memLog) flush(entries []Entry) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	head := m.head
	var out []*audit.Record
	for _, e := range entries {
		if e.Rec.Agent == "bad" {
			return errBad // nothing of this batch is kept
		}
		head = e.Rec.Chain(head)
		out = append(out, e.Rec.Clone())
	}
	m.recs = append(m.recs, out...)
	m.head = head
	m.batches = append(m.batches, len(entries))
	return nil
}

func TestBatcherGroupsAndIsolatesFailures(t *testing.T) {
	m := &memLog{}
	b := New(m.flush, 16, 64)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, 200)
	recs := make([]*audit.Record, 200)
	for i := range recs {
		recs[i] = &audit.Record{ID: audit.NewID(), Agent: "a", Tool: "t", Stages: []audit.Stage{{Name: "x"}}}
		if i%50 == 7 {
			recs[i].Agent = "bad"
		}
		wg.Go(func() { errs[i] = b.Append(ctx, recs[i], errors.New("closed")) })
	}
	wg.Wait()
	b.Close()
	for i, err := range errs {
		if (recs[i].Agent == "bad") != errors.Is(err, errBad) {
			t.Fatalf("record %d (%s): err %v", i, recs[i].Agent, err)
		}
		if err == nil && (recs[i].Seq == 0 || recs[i].Hash == "") {
			t.Fatalf("record %d not updated with its committed form", i)
		}
	}
	if len(m.recs) != 196 {
		t.Fatalf("%d records committed, want 196", len(m.recs))
	}
	verifyChain(t, m.recs)
	for _, n := range m.batches {
		if n > 16 {
			t.Fatalf("batch of %d exceeds the bound 16", n)
		}
	}
}

func TestBatcherClose(t *testing.T) {
	m := &memLog{}
	b := New(m.flush, 0, 0)
	closed := errors.New("closed")
	if err := b.Append(context.Background(), &audit.Record{Agent: "a"}, closed); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b.Close()
	if err := b.Append(context.Background(), &audit.Record{Agent: "a"}, closed); !errors.Is(err, closed) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestBatcherBoundedQueue(t *testing.T) {
	// A flush that blocks keeps the queue full: further callers wait (and
	// give up with their context) instead of growing memory.
	release := make(chan struct{})
	m := &memLog{}
	b := New(func(e []Entry) error { <-release; return m.flush(e) }, 1, 2)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { b.Append(ctx, &audit.Record{Agent: "a"}, nil) })
	}
	for len(b.reqs) < cap(b.reqs) {
		runtime.Gosched()
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.Append(canceled, &audit.Record{Agent: "a"}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("append on a full queue: %v", err)
	}
	if len(b.reqs) != 2 {
		t.Fatalf("queue holds %d, bound is 2", len(b.reqs))
	}
	close(release)
	wg.Wait()
	b.Close()
	if len(m.recs) != 10 {
		t.Fatalf("%d records committed, want 10", len(m.recs))
	}
}

// BenchmarkBatcher measures the group-commit machinery alone (64 callers,
// a flush that only chains records in memory): the ceiling that a backend's
// transaction cost then lowers.
func BenchmarkBatcher(b *testing.B) {
	var head audit.Head
	b2 := New(func(es []Entry) error {
		for _, e := range es {
			head = e.Rec.Chain(head)
		}
		return nil
	}, 0, 0)
	defer b2.Close()
	ctx := context.Background()
	rec := &audit.Record{ID: audit.NewID(), Agent: "agent-1", Tool: "file.read",
		Args: []byte(`{"path":"src/file-1.go","limit":4096}`), Stages: []audit.Stage{{Name: "access", Decision: "allow", Reasons: []string{"group dev"}}}}
	b.SetParallelism(32) // 2 CPUs × 32 = 64 callers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r := *rec
			if err := b2.Append(ctx, &r, nil); err != nil {
				b.Error(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// An admission queued with its finish record (store.AdmitRequest.Finish)
// is flushed as two adjacent entries, the finish appended only when the
// admission is admitted; when a batch fails, the retry keeps the two
// together, so a bad finish record fails its own call (neither record
// kept) and no other.
func TestBatcherAdmissionWithFinish(t *testing.T) {
	m := &memLog{}
	flush := func(entries []Entry) error {
		for i := range entries {
			if a := entries[i].Admit; a != nil {
				// Admit every session but "full".
				a.Result = store.AdmitResult{Admitted: a.Session != "full"}
			}
		}
		kept := make([]Entry, 0, len(entries))
		for i, e := range entries {
			if e.Of != nil && (i == 0 || entries[i-1].Admit != e.Of) {
				return errors.New("a finish record not right after its admission")
			}
			if e.Appended() {
				kept = append(kept, e)
			}
		}
		return m.flush(kept)
	}
	b := New(flush, 8, 64)
	ctx := context.Background()
	type call struct {
		start, fin *audit.Record
		res        store.AdmitResult
		err        error
		sess       string
	}
	calls := make([]*call, 120)
	var wg sync.WaitGroup
	for i := range calls {
		c := &call{sess: "s", start: &audit.Record{ID: audit.NewID(), Agent: "a", Tool: "t", Phase: audit.PhaseStart}}
		c.fin = c.start.Clone()
		c.fin.Phase = audit.PhaseFinish
		switch i % 10 {
		case 3:
			c.fin.Agent = "bad"
		case 6:
			c.sess = "full"
		}
		calls[i] = c
		wg.Go(func() {
			c.res, c.err = b.Admit(ctx, &store.AdmitRequest{Session: c.sess, Record: c.start, Finish: c.fin}, errors.New("closed"))
		})
	}
	wg.Wait()
	b.Close()
	want := 0
	for i, c := range calls {
		switch {
		case c.fin.Agent == "bad":
			if !errors.Is(c.err, errBad) || c.start.Seq != 0 {
				t.Fatalf("call %d with a bad finish: err %v, start seq %d", i, c.err, c.start.Seq)
			}
		case c.sess == "full":
			if c.err != nil || c.res.Admitted || c.start.Seq != 0 || c.fin.Seq != 0 {
				t.Fatalf("refused call %d: %+v %v, seqs %d %d", i, c.res, c.err, c.start.Seq, c.fin.Seq)
			}
		default:
			want += 2
			if c.err != nil || !c.res.Admitted || c.fin.Seq != c.start.Seq+1 || c.fin.PrevHash != c.start.Hash {
				t.Fatalf("call %d: %+v %v, seqs %d %d", i, c.res, c.err, c.start.Seq, c.fin.Seq)
			}
		}
	}
	if len(m.recs) != want {
		t.Fatalf("%d records kept, want %d", len(m.recs), want)
	}
	verifyChain(t, m.recs)
}

// verifyChain checks that recs form one hash chain from seq 1.
func verifyChain(t *testing.T, recs []*audit.Record) {
	t.Helper()
	v := audit.NewVerifier(audit.Head{})
	for _, r := range recs {
		if err := v.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := v.End(); err != nil {
		t.Fatal(err)
	}
}
