package armory

import (
	"errors"
	"strings"
)

// Kind classifies an error (and the outcome of a call that did not
// succeed). Each surface maps kinds in exactly one table: the HTTP status
// in package server, the exit code in the armory command; both tables are
// tested against every kind (Kinds).
type Kind uint8

// Error kinds.
const (
	KindOther           Kind = iota // unclassified; treated as internal
	KindInvalid                     // bad input: argument, flag, file content
	KindNotFound                    // unknown agent, tool, approval, file
	KindPermission                  // the caller may not do this (policy, scope)
	KindUnauthenticated             // no or bad credentials
	KindConflict                    // state does not allow it (already decided, other arguments)
	KindBlocked                     // stopped by screening, a veto or a cap
	KindDenied                      // refused by a permission level or an approver
	KindPending                     // waiting for an approval
	KindTimeout                     // a deadline passed
	KindUnavailable                 // a requirement is not met (missing binary, sandbox)
	KindInternal                    // a bug or an I/O failure of our own
	KindUsage                       // a command line used wrongly
	KindTooLarge                    // input over a size limit (a request body, arguments)
)

var kindNames = [...]string{"other", "invalid", "not_found", "permission", "unauthenticated", "conflict", "blocked", "denied", "pending", "timeout", "unavailable", "internal", "usage", "too_large"}

// Kinds lists every kind, for tables that must map each one. It is exported
// for the tests of every such table (the server's HTTP statuses, the CLI's
// exit codes) and for embedders that map kinds to their own codes: a kind
// added later then fails those tests instead of falling through to a
// default.
func Kinds() []Kind {
	out := make([]Kind, len(kindNames))
	for i := range out {
		out[i] = Kind(i)
	}
	return out
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "other"
}

// MarshalText encodes the kind as its name, for JSON error bodies.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a kind's name; an unknown name is KindOther.
func (k *Kind) UnmarshalText(b []byte) error {
	*k = KindOther
	for i, n := range kindNames {
		if n == string(b) {
			*k = Kind(i)
		}
	}
	return nil
}

// Error is the one error type of Armory. Op names the operation that failed
// ("world.Load", "registry.Lookup"); Kind classifies it; Msg says what
// happened in words a user (or model) can act on; Err is the cause, if any.
type Error struct {
	Op   string
	Kind Kind
	Msg  string
	Err  error
}

// E builds an *Error.
func E(op string, k Kind, msg string, cause ...error) *Error {
	e := &Error{Op: op, Kind: k, Msg: msg}
	if len(cause) > 0 {
		e.Err = cause[0]
	}
	return e
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Op != "" {
		b.WriteString(e.Op)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Err != nil {
		if e.Msg != "" {
			b.WriteString(": ")
		}
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of the first *Error in err's chain whose kind is
// set, KindInternal when there is none, and 0 for a nil error.
func KindOf(err error) Kind {
	if err == nil {
		return KindOther
	}
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			break
		}
		if e.Kind != KindOther {
			return e.Kind
		}
		err = e.Err
	}
	return KindInternal
}

// Message returns the text of err without the op chain, for results a model
// reads. It is Msg (and the cause) of the outermost *Error.
func Message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		if e.Err != nil && e.Msg != "" {
			return e.Msg + ": " + Message(e.Err)
		}
		if e.Msg != "" {
			return e.Msg
		}
		if e.Err != nil {
			return Message(e.Err)
		}
	}
	if err == nil {
		return ""
	}
	return err.Error()
}
