package eventbus

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// The queue holds QueueSize payloads while Send is stuck, refuses and
// counts the rest, sends in batches of at most BatchSize, in order, and
// when stop closes sends what is still queued before the goroutine ends.
func TestPublisherBoundsBatchesAndDrains(t *testing.T) {
	var mu sync.Mutex
	var got []string
	var sizes []int
	gate := make(chan struct{})
	var p Publisher
	p.Send = func(_ context.Context, batch [][]byte) {
		<-gate // stuck until the test lets it go
		mu.Lock()
		defer mu.Unlock()
		sizes = append(sizes, len(batch))
		for _, b := range batch {
			got = append(got, string(b))
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const n = QueueSize + 500
	accepted := 0
	var sent []string // the accepted payloads, in the order published
	for i := range n {
		if p.Publish(fmt.Appendf(nil, "e%d", i), stop, &wg) {
			accepted++
			sent = append(sent, fmt.Sprint("e", i))
		}
	}
	// The goroutine may hold one batch taken from the queue: at most
	// QueueSize+BatchSize accepted, at least QueueSize.
	if accepted < QueueSize || accepted > QueueSize+BatchSize || int64(n-accepted) != p.Dropped() {
		t.Fatalf("accepted %d, dropped %d of %d", accepted, p.Dropped(), n)
	}
	close(stop)
	close(gate)
	wg.Wait()
	if len(got) != accepted {
		t.Fatalf("sent %d of %d accepted", len(got), accepted)
	}
	// Order is kept among the accepted payloads. They need not be e0…eN:
	// the goroutine may take a batch while the queue is full, so a payload
	// refused then can be followed by accepted ones (a loaded machine does
	// this).
	for i, g := range got {
		if g != sent[i] {
			t.Fatalf("payload %d is %q, want %q: out of order", i, g, sent[i])
		}
	}
	for _, s := range sizes {
		if s < 1 || s > BatchSize {
			t.Fatalf("a batch of %d", s)
		}
	}
}

// Add starts the watcher once; Idle stops it only when no subscriber is
// left, and the next Add starts another; Deliver reaches every subscriber
// with every payload, in order; a cancelled subscriber gets nothing more.
func TestSubscribers(t *testing.T) {
	var s Subscribers
	starts := 0
	start := func() { starts++ }
	var a, b []string
	cancelA := s.Add(func(p []byte) { a = append(a, string(p)) }, start)
	cancelB := s.Add(func(p []byte) { b = append(b, string(p)) }, start)
	if starts != 1 {
		t.Fatalf("watcher started %d times for two subscribers", starts)
	}
	s.Deliver([]byte("1"), []byte("2"))
	cancelA()
	cancelA()
	s.Deliver([]byte("3"))
	if fmt.Sprint(a) != "[1 2]" || fmt.Sprint(b) != "[1 2 3]" {
		t.Fatalf("a %v, b %v", a, b)
	}
	if s.Idle() {
		t.Fatal("idle with a subscriber left")
	}
	cancelB()
	if !s.Idle() {
		t.Fatal("not idle with no subscriber")
	}
	s.Add(func([]byte) {}, start)
	if starts != 2 {
		t.Fatalf("no new watcher after idle (%d starts)", starts)
	}
}
