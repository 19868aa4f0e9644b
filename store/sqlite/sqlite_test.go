package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/store/storetest"
)

// opener opens Stores with opts, each test on its own database file (in
// directories that do not exist yet).
func opener(opts sqlite.Options) (storetest.Opener, func(t *testing.T) string) {
	return storetest.OpenerOf(func(t *testing.T) string { return filepath.Join(t.TempDir(), "nested", "dir", "armory.db") },
		func(path string) (store.Store, error) { return sqlite.OpenWith(path, opts) })
}

func TestConformance(t *testing.T) {
	open, _ := opener(sqlite.Options{})
	storetest.Run(t, open)
}

func TestTamper(t *testing.T) {
	open, pathFor := opener(sqlite.Options{})
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

func openDSN(dsn string) (store.Store, error) { return sqlite.OpenWith(dsn, sqlite.Options{}) }

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
