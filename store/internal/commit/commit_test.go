package commit

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"

	"github.com/armory-dev/armory/audit"
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
	v := audit.NewVerifier(audit.Head{})
	for _, r := range m.recs {
		if err := v.Add(r); err != nil {
			t.Fatal(err)
		}
	}
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
