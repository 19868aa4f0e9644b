package wasm

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The unmapper holds at most maxPending bytes of module memory in at most
// 64 mappings; past either, and once closed, it unmaps at once. Closing
// gives back what it holds.
func TestUnmapperIsBounded(t *testing.T) {
	u := &unmapper{q: make(chan unmapping, 64), done: make(chan struct{})} // not running yet: what it holds stays
	mapping := func() []byte {
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			t.Fatal(err)
		}
		b[0] = 1
		return b
	}
	u.unmap(mapping(), maxPending-4096)
	u.unmap(mapping(), 4096)
	u.unmap(mapping(), 1) // past maxPending
	if len(u.q) != 2 || u.pending != maxPending {
		t.Fatalf("holds %d mappings, %d bytes", len(u.q), u.pending)
	}
	for range 70 {
		u.unmap(mapping(), 0)
	}
	if len(u.q) != cap(u.q) {
		t.Fatalf("holds %d mappings", len(u.q))
	}
	go u.run()
	u.close()
	if u.pending != 0 || len(u.q) != 0 {
		t.Fatalf("after close: %d mappings, %d bytes held", len(u.q), u.pending)
	}
	u.unmap(mapping(), 4096) // closed: at once
	if u.pending != 0 {
		t.Fatal("a closed unmapper holds a mapping")
	}
}
