package trail

import (
	"testing"

	"github.com/armory-dev/armory/audit"
)

// Records handed over are kept only while the process writes the folder,
// and never more than maxPending of them or maxPendingBytes.
func TestPendingBounded(t *testing.T) {
	f := &Follower{kick: make(chan struct{}, 1)}
	rec := func(seq int64, args int) *audit.Record {
		return &audit.Record{Seq: seq, Args: make([]byte, args)}
	}
	f.Committed(rec(1, 10))
	if len(f.pending) != 0 {
		t.Fatal("a follower that does not write kept a record")
	}
	f.setWriting(true)
	for i := range int64(maxPending + 10) {
		f.Committed(rec(i+1, 10))
	}
	if len(f.pending) != maxPending {
		t.Fatalf("%d records pending", len(f.pending))
	}
	f.setWriting(false)
	f.setWriting(true)
	for i := range int64(100) {
		f.Committed(rec(i+1, 1<<20))
	}
	if f.pbytes > maxPendingBytes || len(f.pending) >= 100 {
		t.Fatalf("%d bytes in %d records pending", f.pbytes, len(f.pending))
	}
	recs, more := f.fromPending(0, 1000)
	if len(recs) != len(f.pending)+len(recs) || more || f.pbytes != 0 {
		t.Fatalf("took %d, %d left, %d bytes", len(recs), len(f.pending), f.pbytes)
	}
}
