package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// PostgresDSN returns the test database's DSN (ARMORY_TEST_POSTGRES), or
// calls Missing when it is not set.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("ARMORY_TEST_POSTGRES")
	if dsn == "" {
		Missing(t, "postgres", "set ARMORY_TEST_POSTGRES (scripts/setup-components writes it to .armory-test.env)")
	}
	return dsn
}

// PostgresSchema creates a schema with a random name in the test database,
// drops it when t ends, and returns a DSN whose connections use it
// (search_path): each test gets a database of its own that every Store,
// process and replica of the test can share.
func PostgresSchema(t testing.TB) string {
	t.Helper()
	base := PostgresDSN(t)
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	schema := "armory_test_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect %s: %v", base, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(t, base, schema)
}

// WithSearchPath returns dsn (a URL or key=value DSN) with its connections'
// search_path set to schema.
func WithSearchPath(t testing.TB, dsn, schema string) string {
	t.Helper()
	if strings.Contains(dsn, "://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		u.RawQuery = q.Encode()
		return u.String()
	}
	return dsn + " search_path=" + schema
}
