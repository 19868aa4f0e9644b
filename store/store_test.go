package store

import (
	"errors"
	"testing"
)

func TestEffectiveLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{-1, DefaultLimit}, {0, DefaultLimit}, {1, 1}, {MaxLimit, MaxLimit}, {MaxLimit + 1, MaxLimit}, {1 << 40, MaxLimit},
	} {
		if got := EffectiveLimit(tc.in); got != tc.want {
			t.Errorf("EffectiveLimit(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestCheckDecision(t *testing.T) {
	all := []ApprovalStatus{StatusPending, StatusApproved, StatusDenied, StatusEscalated, StatusExpired}
	for _, from := range all {
		for _, to := range append(all, "bogus") {
			err := CheckDecision(from, to)
			var want error
			switch {
			case to == StatusPending || to == "bogus":
				want = ErrInvalid
			case from == StatusPending, from == StatusEscalated && to != StatusEscalated:
				want = nil
			default:
				want = ErrConflict
			}
			if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
				t.Errorf("%s → %s: got %v, want %v", from, to, err, want)
			}
		}
	}
}
