package store

import (
	"errors"
	"strings"

	"github.com/armory-dev/armory"
)

// Kind classifies a store error as an armory.Kind: ErrNotFound is
// KindNotFound, ErrConflict KindConflict, ErrInvalid KindInvalid, and any
// other failure (a closed store, a lost database) KindUnavailable. It is the
// one mapping of the store's errors; every surface uses it (through Err).
func Kind(err error) armory.Kind {
	switch {
	case err == nil:
		return armory.KindOther
	case errors.Is(err, ErrNotFound):
		return armory.KindNotFound
	case errors.Is(err, ErrConflict):
		return armory.KindConflict
	case errors.Is(err, ErrInvalid):
		return armory.KindInvalid
	}
	return armory.KindUnavailable
}

// Err wraps a store error as an *armory.Error of op with the kind Kind
// gives it. The message of a classified error is the store's own words
// without the "store: " prefix; any other failure reads "the store failed"
// with the cause. Err(op, nil) is nil.
func Err(op string, err error) error {
	if err == nil {
		return nil
	}
	k := Kind(err)
	if k == armory.KindUnavailable {
		return armory.E(op, k, "the store failed", err)
	}
	return armory.E(op, k, strings.TrimPrefix(err.Error(), "store: "))
}
