package audit

import (
	"errors"
	"fmt"
)

// ChainError reports the first place where a trail stops being a valid
// chain. Seq is the sequence number at which the chain breaks: the record
// whose content or link is wrong, or the first sequence number that is
// missing or out of place.
type ChainError struct {
	Seq    int64
	Reason string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("audit: chain broken at seq %d: %s", e.Seq, e.Reason)
}

// ErrChain matches every *ChainError with errors.Is.
var ErrChain = errors.New("audit: chain broken")

// Is reports whether target is ErrChain.
func (e *ChainError) Is(target error) bool { return target == ErrChain }

// Verifier checks a trail one record at a time, in Seq order, starting at
// Seq 1. Its memory use is constant. The zero value verifies without a
// recorded head (a missing tail goes unnoticed); NewVerifier takes the head
// the writer recorded. A Verifier is not safe for concurrent use.
type Verifier struct {
	want Head
	head Head
	err  error
}

// NewVerifier returns a Verifier that also checks the trail against want,
// the head that the writer recorded: the record with want.Seq must exist and
// have hash want.Hash (records appended after the head was recorded are
// allowed). A zero want checks nothing.
func NewVerifier(want Head) *Verifier { return &Verifier{want: want} }

// Add checks rec against the records added before it. It returns a
// *ChainError for: a hash that does not match the record's content (an
// edited field), a PrevHash that does not match the previous record's Hash
// (a record replaced together with its hash), or a Seq other than the next
// one (a deleted, duplicated or reordered record). After the first error
// every later Add returns that same error.
func (v *Verifier) Add(rec *Record) error {
	if v.err != nil {
		return v.err
	}
	want := v.head.Seq + 1
	switch {
	case rec == nil:
		v.err = &ChainError{Seq: want, Reason: "missing record"}
	case rec.Seq != want:
		reason := fmt.Sprintf("expected seq %d, found seq %d (record deleted, duplicated or reordered)", want, rec.Seq)
		if rec.Seq > want {
			reason = fmt.Sprintf("records %d..%d missing (found seq %d)", want, rec.Seq-1, rec.Seq)
			if rec.Seq == want+1 {
				reason = fmt.Sprintf("record missing or out of order (found seq %d)", rec.Seq)
			}
		}
		v.err = &ChainError{Seq: want, Reason: reason}
	case rec.ComputeHash() != rec.Hash:
		v.err = &ChainError{Seq: rec.Seq, Reason: "hash mismatch"}
	case rec.PrevHash != v.head.Hash:
		v.err = &ChainError{Seq: rec.Seq, Reason: "prev_hash does not match the hash of the previous record"}
	case rec.Seq == v.want.Seq && rec.Hash != v.want.Hash:
		v.err = &ChainError{Seq: rec.Seq, Reason: "hash differs from the recorded head"}
	default:
		v.head = Head{Seq: rec.Seq, Hash: rec.Hash}
	}
	return v.err
}

// Fail records a read error at the next expected sequence number (a record
// that exists but cannot be decoded) and returns it as a *ChainError.
func (v *Verifier) Fail(reason string) error {
	if v.err == nil {
		v.err = &ChainError{Seq: v.head.Seq + 1, Reason: reason}
	}
	return v.err
}

// Head returns the head of the records verified so far.
func (v *Verifier) Head() Head { return v.head }

// End reports, once every record was added, whether the trail was
// truncated: with a recorded head, the trail must reach its Seq. It returns
// the first error seen so far, if any.
func (v *Verifier) End() error {
	if v.err == nil && v.head.Seq < v.want.Seq {
		v.err = &ChainError{Seq: v.head.Seq + 1, Reason: fmt.Sprintf("trail truncated: recorded head is seq %d, trail ends at seq %d", v.want.Seq, v.head.Seq)}
	}
	return v.err
}
