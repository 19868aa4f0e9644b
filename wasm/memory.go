package wasm

import (
	"sync"

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
// back to the system rather than to Go's heap — soon after, through the
// runtime's unmapper, not on the call's path.
type capAllocator struct {
	cap   uint64
	unmap *unmapper
	mem   *linearMemory // the instance's memory, once made
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
	m := &linearMemory{limit: limit, unmap: a.unmap}
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
	unmap  *unmapper
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
// instance is closed and no code of it runs — for a module that exits,
// within its call (WASI's proc_exit closes the module).
func (m *linearMemory) Free() {
	if m.mapped != nil {
		m.unmap.unmap(m.mapped, m.size)
		m.mapped = nil
	}
	m.heap = nil
}

// unmapper gives the memories of closed instances back to the system in
// a goroutine of the runtime: unmapping the pages a Go module touched
// (a few MiB) costs ≈0.3–0.4 ms, which a call would otherwise wait for as
// its module exits. What it holds is bounded (maxPending bytes of module
// memory); past that, or once closed, a mapping is unmapped at once.
type unmapper struct {
	mu      sync.Mutex
	closed  bool
	pending uint64
	q       chan unmapping
	done    chan struct{}
}

type unmapping struct {
	b    []byte
	size uint64
}

// maxPending bounds the module memory the unmapper holds.
const maxPending = 256 << 20

func newUnmapper() *unmapper {
	u := &unmapper{q: make(chan unmapping, 64), done: make(chan struct{})}
	go u.run()
	return u
}

func (u *unmapper) run() {
	defer close(u.done)
	for m := range u.q {
		_ = unix.Munmap(m.b)
		u.mu.Lock()
		u.pending -= m.size
		u.mu.Unlock()
	}
}

// unmap unmaps b, a mapping of which size bytes may have been touched:
// soon, or at once.
func (u *unmapper) unmap(b []byte, size uint64) {
	if u != nil {
		u.mu.Lock()
		if !u.closed && u.pending+size <= maxPending {
			select {
			case u.q <- unmapping{b, size}:
				u.pending += size
				u.mu.Unlock()
				return
			default:
			}
		}
		u.mu.Unlock()
	}
	_ = unix.Munmap(b)
}

// close unmaps what is held, and stops.
func (u *unmapper) close() {
	u.mu.Lock()
	if !u.closed {
		u.closed = true
		close(u.q)
	}
	u.mu.Unlock()
	<-u.done
}
