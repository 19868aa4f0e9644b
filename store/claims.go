package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// RunClaims are leased claims on running an approved call, so that the call
// runs at most once across every process sharing the database, and a call
// whose runner died is resolved instead of waited for forever.
//
// The first caller to claim an approval runs its tool and holds the claim
// for a lease (ttl) that it renews while the tool runs; when the tool ends
// it stores the result and finishes the claim in one transaction. Any other
// caller reads the claim: while the lease is live it waits for the stored
// result; once the lease has expired without a result, the holder is taken
// to have died, and the caller resolves the claim as interrupted, storing
// the result it is given (the tool is never run a second time).
//
// Lease times are measured by one clock per backend: the SQLite store's
// clock (every process is on one machine), the Postgres server's clock (so
// that replicas on other machines need not agree on the time).
type RunClaims interface {
	// ClaimRun claims approval id's run for holder (a process's id) and
	// callID (the call that will run the tool), with a lease of ttl. It
	// returns the claim as it now stands and whether holder won it. A
	// claim that exists is never replaced, whatever its lease: it is
	// returned with won false. Errors: ErrNotFound (no such approval),
	// ErrConflict (the approval is not approved, or its result is already
	// stored), ErrInvalid (empty holder or callID, ttl ≤ 0).
	ClaimRun(ctx context.Context, id, holder, callID string, ttl time.Duration) (c *RunClaim, won bool, err error)
	// RenewRun extends holder's lease on id's running claim to ttl from
	// now. Errors: ErrNotFound (no claim), ErrConflict (holder does not
	// hold it, or it is resolved: the caller has lost it), ErrInvalid.
	RenewRun(ctx context.Context, id, holder string, ttl time.Duration) error
	// FinishRun stores result as approval id's result (as SetApprovalResult
	// does) and marks holder's claim finished, in one transaction. It is
	// allowed while the claim is running and held by holder, even past its
	// lease, as long as no one resolved it. Errors: ErrNotFound (no claim),
	// ErrConflict (not held by holder, already resolved, or a result is
	// already stored).
	FinishRun(ctx context.Context, id, holder string, result json.RawMessage) error
	// InterruptRun resolves id's claim as interrupted, by resolver, iff it
	// is running and its lease has expired: it stores result as the
	// approval's result and marks the claim, in one transaction, and
	// returns the claim as resolved (Holder and CallID still name the call
	// that was interrupted). Errors: ErrNotFound (no claim), ErrConflict
	// (the lease is live, the claim is resolved, or a result is already
	// stored).
	InterruptRun(ctx context.Context, id, resolver string, result json.RawMessage) (*RunClaim, error)
	// InspectRun returns id's claim, or ErrNotFound.
	InspectRun(ctx context.Context, id string) (*RunClaim, error)
}

// RunState is the state of a run claim.
type RunState string

// Run claim states. Running is open; the others are final.
const (
	RunRunning     RunState = "running"
	RunFinished    RunState = "finished"    // the holder stored the result
	RunInterrupted RunState = "interrupted" // the lease expired; resolved without a result
)

// RunClaim is the claim on running one approved call.
type RunClaim struct {
	ApprovalID string    `json:"approval_id"`
	Holder     string    `json:"holder"`
	CallID     string    `json:"call_id"`
	ClaimedAt  time.Time `json:"claimed_at"`
	// Expires is when the lease ends unless renewed.
	Expires time.Time `json:"expires"`
	State   RunState  `json:"state"`
	// ResolvedBy is who resolved an interrupted claim; ResolvedAt is when
	// the claim left Running.
	ResolvedBy string    `json:"resolved_by,omitempty"`
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
	// Expired reports whether, when the claim was read, it was running with
	// its lease ended (by the backend's clock): InterruptRun would take it.
	Expired bool `json:"expired"`
}

// CheckClaim validates ClaimRun's and RenewRun's arguments; backends call
// it. It returns an error wrapping ErrInvalid.
func CheckClaim(id, holder, callID string, ttl time.Duration, needCall bool) error {
	if id == "" || holder == "" || (needCall && callID == "") {
		return fmt.Errorf("%w: a run claim needs an approval id, a holder and a call id", ErrInvalid)
	}
	if ttl <= 0 {
		return fmt.Errorf("%w: a run claim's lease must be positive, got %s", ErrInvalid, ttl)
	}
	return nil
}
