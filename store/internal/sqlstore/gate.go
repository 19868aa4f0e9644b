package sqlstore

import (
	"sync"

	"github.com/armory-dev/armory/store"
)

// Gate guards a Store's calls against its Close: a call holds the gate
// (Use) while it runs, and Close waits for the calls holding it, then
// refuses new ones with store.ErrClosed.
type Gate struct {
	once    sync.Once
	mu      sync.RWMutex
	closed  bool
	closing chan struct{}
}

// NewGate returns an open gate.
func NewGate() *Gate { return &Gate{closing: make(chan struct{})} }

// Use returns a release to call when the call ends, or store.ErrClosed.
func (g *Gate) Use() (release func(), err error) {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return nil, store.ErrClosed
	}
	return g.mu.RUnlock, nil
}

// Closing is closed when Close starts (it ends waits).
func (g *Gate) Closing() <-chan struct{} { return g.closing }

// Close, the first time, waits for the calls holding the gate, refuses
// later ones, closes Closing and runs release (the Store's own teardown),
// returning its error; later calls return nil.
func (g *Gate) Close(release func() error) error {
	var err error
	g.once.Do(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		close(g.closing)
		err = release()
	})
	return err
}
