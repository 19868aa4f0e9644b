package testenv

import (
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"testing"

	_ "modernc.org/sqlite" // the "sqlite" driver, as the store uses it
)

// SQLiteRows counts the rows of table in the SQLite database file path; a
// file that does not exist (yet) has none.
func SQLiteRows(t testing.TB, path, table string) int {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM "` + table + `"`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
