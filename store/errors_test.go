package store

import (
	"errors"
	"fmt"
	"testing"

	"github.com/armory-dev/armory"
)

func TestErrKinds(t *testing.T) {
	for _, tc := range []struct {
		err  error
		kind armory.Kind
	}{
		{fmt.Errorf("sqlite: approval x: %w", ErrNotFound), armory.KindNotFound},
		{CheckDecision(StatusApproved, StatusDenied), armory.KindConflict},
		{CheckDecision(StatusPending, "bogus"), armory.KindInvalid},
		{fmt.Errorf("postgres: %w", ErrClosed), armory.KindUnavailable},
		{errors.New("disk I/O error"), armory.KindUnavailable},
	} {
		err := Err("op", tc.err)
		if armory.KindOf(err) != tc.kind || Kind(tc.err) != tc.kind || !errors.Is(err, tc.err) && tc.kind == armory.KindUnavailable {
			t.Errorf("%v: kind %s (%s), want %s", tc.err, armory.KindOf(err), Kind(tc.err), tc.kind)
		}
	}
	if Err("op", nil) != nil {
		t.Error("Err(nil) is not nil")
	}
}
