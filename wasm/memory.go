package wasm

import (
	"github.com/tetratelabs/wazero/experimental"
	"golang.org/x/sys/unix"
)

// capAllocator makes the linear memory of one instance and enforces the
// tool's memory cap on it. wazero's own limit (RuntimeConfig
// WithMemoryLimitPages) is per runtime, and a grow it refuses never
// reaches the allocator; so the runtime keeps WebAssembly's 4 GiB and
// each tool's cap is enforced here, where every memory.grow of an
// instance arrives (wazero uses the allocator of the context an instance
// is made with; newInstance is the one place instances are made): growing
// past the cap fails in the module (memory.grow returns -1, a Go program
// dies with "out of memory") and the refusal is recorded, so the call's
// error says what the module asked for. The memory cannot exceed the
// allocator's reservation whatever happens: the cap (or the initial size,
// which inspect holds to the cap) is all there is.
//
// The memory is one anonymous private mapping reserved at the cap up front
// (MAP_NORESERVE: address space, not memory, until the module touches
// it): growing never copies, and closing the instance gives the pages
// back to the system at once rather than to Go's heap.
type capAllocator struct {
	cap uint64
	mem *linearMemory // the instance's memory, once made
}

// Allocate implements experimental.MemoryAllocator. wazero calls it once
// per memory of an instance (a module has at most one: inspect), with the
// initial size as capBytes.
func (a *capAllocator) Allocate(capBytes, maxBytes uint64) experimental.LinearMemory {
	limit := min(maxBytes, a.cap)
	// The initial size is checked against the cap before a module is
	// compiled (inspect); should it ever exceed it, the instance still
	// gets its initial memory (wazero cannot take a refusal here) and no
	// more.
	limit = max(limit, capBytes)
	m := &linearMemory{limit: limit}
	if limit > 0 {
		if b, err := unix.Mmap(-1, 0, int(limit), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE); err == nil {
			m.mapped = b
		}
	}
	a.mem = m
	return m
}

// linearMemory is a module's memory: a mapping reserved at its limit, or a
// slice of Go's heap when the mapping could not be made.
type linearMemory struct {
	limit  uint64
	mapped []byte // the whole reservation, when mapped
	heap   []byte
	// size is the memory's size; refused is the largest size asked for
	// beyond the limit (0: none).
	size, refused uint64
}

// Reallocate implements experimental.LinearMemory: the memory at size
// bytes, or nil past the limit.
func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		m.refused = max(m.refused, size)
		return nil
	}
	m.size = size
	if m.mapped != nil {
		return m.mapped[:size:size]
	}
	if size > uint64(cap(m.heap)) {
		b := make([]byte, size, min(m.limit, max(size, 2*uint64(cap(m.heap)))))
		copy(b, m.heap)
		m.heap = b
	}
	m.heap = m.heap[:size]
	return m.heap
}

// Free implements experimental.LinearMemory. wazero calls it once the
// instance is closed and no code of it runs.
func (m *linearMemory) Free() {
	if m.mapped != nil {
		_ = unix.Munmap(m.mapped)
		m.mapped = nil
	}
	m.heap = nil
}
