package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

// opener returns a storetest.Opener that gives each test its own database
// file, and the path of that file for a test.
func opener() (storetest.Opener, func(t *testing.T) string) {
	var (
		mu    sync.Mutex
		paths = map[*testing.T]string{}
	)
	pathFor := func(t *testing.T) string {
		mu.Lock()
		defer mu.Unlock()
		p, ok := paths[t]
		if !ok {
			p = filepath.Join(t.TempDir(), "nested", "dir", "armory.db")
			paths[t] = p
		}
		return p
	}
	open := func(t *testing.T) store.Store {
		s, err := sqlite.Open(pathFor(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open, pathFor
}

func TestConformance(t *testing.T) {
	open, _ := opener()
	storetest.Run(t, open)
}

func TestTamper(t *testing.T) {
	open, pathFor := opener()
	storetest.Tamper(t, open, func(t *testing.T, query string) {
		db, err := sql.Open("sqlite", pathFor(t)+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec(query); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
	})
}

func openDSN(dsn string) (store.Store, error) { return sqlite.Open(dsn) }

func TestHelperProcess(t *testing.T) { storetest.HelperProcess(t, openDSN) }

func TestCrossProcess(t *testing.T) {
	storetest.CrossProcess(t, filepath.Join(t.TempDir(), "armory.db"), openDSN)
}

func BenchmarkAppendAudit(b *testing.B) {
	for _, sync := range []string{"FULL", "NORMAL"} {
		b.Run("synchronous="+sync, func(b *testing.B) {
			s, err := sqlite.OpenWith(filepath.Join(b.TempDir(), "bench.db"), sqlite.Options{Synchronous: sync})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchmarkAppend(b, s)
		})
	}
}
