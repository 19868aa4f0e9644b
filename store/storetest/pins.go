package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/armory-dev/armory/store"
)

func pinHash(s string) string { return tokenHash(s) }

func testPins(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	if ps, err := s.ListPins(ctx, ""); err != nil || len(ps) != 0 {
		t.Fatalf("fresh store: %v %v", ps, err)
	}
	v1, v2, v3 := pinHash("v1"), pinHash("v2"), pinHash("v3")
	def1, def2 := json.RawMessage(`{"name":"read","description":"v1"}`), json.RawMessage(`{"name":"read","description":"v2"}`)

	// First sight pins.
	p, err := s.ObservePin(ctx, "fs", "read", v1, def1)
	if err != nil || p.Hash != v1 || p.PendingHash != "" || !bytes.Equal(p.Definition, def1) || p.PinnedAt.IsZero() {
		t.Fatalf("first sight: %+v %v", p, err)
	}
	// The same definition again changes nothing.
	if p, err = s.ObservePin(ctx, "fs", "read", v1, def1); err != nil || p.Hash != v1 || p.PendingHash != "" {
		t.Fatalf("same again: %+v %v", p, err)
	}
	// A changed definition is pending; the pin stays.
	p, err = s.ObservePin(ctx, "fs", "read", v2, def2)
	if err != nil || p.Hash != v1 || p.PendingHash != v2 || !bytes.Equal(p.PendingDefinition, def2) || p.PendingAt.IsZero() {
		t.Fatalf("changed: %+v %v", p, err)
	}
	// Back to the pinned definition clears the pending change.
	if p, err = s.ObservePin(ctx, "fs", "read", v1, def1); err != nil || p.Hash != v1 || p.PendingHash != "" || p.PendingDefinition != nil {
		t.Fatalf("reverted: %+v %v", p, err)
	}
	if _, err := s.AcceptPin(ctx, "fs", "read", ""); !errors.Is(err, store.ErrConflict) {
		t.Errorf("accept with nothing pending: %v", err)
	}
	// A later change replaces an earlier pending one.
	s.ObservePin(ctx, "fs", "read", v2, def2)
	if p, err = s.ObservePin(ctx, "fs", "read", v3, nil); err != nil || p.PendingHash != v3 {
		t.Fatalf("second change: %+v %v", p, err)
	}
	// Accepting another hash than the pending one is refused.
	if _, err := s.AcceptPin(ctx, "fs", "read", v2); !errors.Is(err, store.ErrConflict) {
		t.Errorf("accept stale hash: %v", err)
	}
	if p, err = s.AcceptPin(ctx, "fs", "read", v3); err != nil || p.Hash != v3 || p.PendingHash != "" || p.Definition != nil {
		t.Fatalf("accept: %+v %v", p, err)
	}
	if p, err = s.ObservePin(ctx, "fs", "read", v3, nil); err != nil || p.Hash != v3 || p.PendingHash != "" {
		t.Fatalf("after accept: %+v %v", p, err)
	}
	// Accept without a hash takes the pending one.
	s.ObservePin(ctx, "fs", "read", v1, def1)
	if p, err = s.AcceptPin(ctx, "fs", "read", ""); err != nil || p.Hash != v1 || !bytes.Equal(p.Definition, def1) {
		t.Fatalf("accept pending: %+v %v", p, err)
	}
	if _, err := s.AcceptPin(ctx, "fs", "nope", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("accept unknown: %v", err)
	}

	for _, tc := range []struct {
		name               string
		server, tool, hash string
		def                json.RawMessage
	}{
		{"no server", "", "t", v1, nil},
		{"no tool", "s", "", v1, nil},
		{"short hash", "s", "t", "abc", nil},
		{"upper hash", "s", "t", strings.ToUpper(v1), nil},
		{"definition too large", "s", "t", v1, json.RawMessage(`"` + strings.Repeat("x", store.MaxPinDefinition) + `"`)},
	} {
		if _, err := s.ObservePin(ctx, tc.server, tc.tool, tc.hash, tc.def); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", tc.name, err)
		}
	}

	s.ObservePin(ctx, "alpha", "z", v1, nil)
	s.ObservePin(ctx, "alpha", "a", v1, nil)
	all, err := s.ListPins(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range all {
		names = append(names, p.Server+"/"+p.Tool)
	}
	if got := strings.Join(names, " "); got != "alpha/a alpha/z fs/read" {
		t.Errorf("list order: %s", got)
	}
	if fs, err := s.ListPins(ctx, "fs"); err != nil || len(fs) != 1 || fs[0].Tool != "read" {
		t.Errorf("list fs: %v %v", fs, err)
	}
	s.Close()
	if _, err := s.ObservePin(ctx, "fs", "read", v1, nil); !errors.Is(err, store.ErrClosed) {
		t.Errorf("closed: %v", err)
	}
}

// testPinsRace: two Stores observe different first definitions of the same
// tool at once; exactly one pins and the other sees its definition pending.
func testPinsRace(t *testing.T, open Opener) {
	ctx := ctxT(t)
	a, b := open(t), open(t)
	for i := range 20 {
		tool := fmt.Sprintf("t%d", i)
		var wg sync.WaitGroup
		res := make([]*store.ToolPin, 2)
		errs := make([]error, 2)
		for j, s := range []store.Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[j], errs[j] = s.ObservePin(ctx, "srv", tool, pinHash(fmt.Sprint(j)), nil)
			}()
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
		final, err := a.ListPins(ctx, "srv")
		if err != nil {
			t.Fatal(err)
		}
		p := final[len(final)-1]
		for _, q := range final {
			if q.Tool == tool {
				p = q
			}
		}
		winner := p.Hash
		if winner != pinHash("0") && winner != pinHash("1") {
			t.Fatalf("%s: pinned %s", tool, winner)
		}
		if p.PendingHash == "" || p.PendingHash == winner {
			t.Fatalf("%s: the loser's definition is not pending: %+v", tool, p)
		}
		for j := range 2 {
			if res[j].Hash != winner {
				t.Fatalf("%s: store %d saw pin %s, winner %s", tool, j, res[j].Hash, winner)
			}
		}
	}
}
