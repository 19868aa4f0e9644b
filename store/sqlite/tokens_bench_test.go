package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
)

// BenchmarkLookupToken is the store read every authenticated request makes
// (server.authenticate) when no token cache is set.
func BenchmarkLookupToken(b *testing.B) {
	st, err := OpenWith(filepath.Join(b.TempDir(), "armory.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	hash := strings.Repeat("ab", 32)
	tok := &store.Token{ID: "t1", Hash: hash, Agent: "a", Name: "bench", CreatedAt: time.Now()}
	if err := st.CreateToken(ctx, tok); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := st.LookupToken(ctx, hash); err != nil {
			b.Fatal(err)
		}
	}
}
