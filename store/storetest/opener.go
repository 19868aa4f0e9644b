package storetest

import (
	"sync"
	"testing"

	"github.com/armory-dev/armory/store"
)

// OpenerOf returns the Opener of a backend: each test gets its own
// database, which fresh makes (a file path, a DSN) the first time the test
// asks, and open opens a Store on it, closed when the test ends. dbFor
// returns a test's database (for the tests that also reach it directly).
func OpenerOf(fresh func(t *testing.T) string, open func(db string) (store.Store, error)) (o Opener, dbFor func(*testing.T) string) {
	var (
		mu  sync.Mutex
		dbs = map[*testing.T]string{}
	)
	dbFor = func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		d, ok := dbs[t]
		if !ok {
			d = fresh(t)
			dbs[t] = d
		}
		return d
	}
	o = func(t *testing.T) store.Store {
		s, err := open(dbFor(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return o, dbFor
}
