package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory/store"
)

// TestTokenEpoch: the epoch changes with every revocation, by this Store or
// another on the same file, and not otherwise.
func TestTokenEpoch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "armory.db")
	a, err := OpenWith(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := OpenWith(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	e0, err := a.TokenEpoch()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 2 {
		tok := &store.Token{Hash: strings.Repeat(string(rune('a'+i)), 64), Agent: "dev"}
		if err := a.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tok.ID)
	}
	if e, _ := b.TokenEpoch(); e != e0 {
		t.Fatalf("creating tokens changed the epoch: %q -> %q", e0, e)
	}
	if err := b.RevokeToken(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	e1, _ := a.TokenEpoch()
	if e1 == e0 {
		t.Fatal("a revocation by another store left the epoch unchanged")
	}
	if err := a.RevokeToken(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	if e2, _ := b.TokenEpoch(); e2 == e1 {
		t.Fatal("a second revocation left the epoch unchanged")
	}
	if fi, err := os.Stat(path + "-tokens"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("epoch file: %v %v", fi, err)
	}
	// Revocations in quick succession never repeat an epoch (a cache must
	// not see an old epoch come back).
	seen := map[string]bool{}
	for i := range 50 {
		tok := &store.Token{Hash: fmt.Sprintf("%064x", i+100), Agent: "dev"}
		if err := a.CreateToken(ctx, tok); err != nil {
			t.Fatal(err)
		}
		if err := a.RevokeToken(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		e, err := b.TokenEpoch()
		if err != nil || seen[e] {
			t.Fatalf("revocation %d: epoch %q repeated or unreadable (%v)", i, e, err)
		}
		seen[e] = true
	}
}
