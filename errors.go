package armory

import (
	"errors"
	"net/http"
	"strings"
)

// Kind classifies an error. Surfaces map kinds to HTTP statuses, MCP errors
// and exit codes in exactly one place: HTTPStatus and ExitCode below.
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

// HTTPStatus maps a kind to an HTTP status code.
func HTTPStatus(k Kind) int {
	switch k {
	case KindInvalid, KindUsage:
		return http.StatusBadRequest
	case KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case KindNotFound:
		return http.StatusNotFound
	case KindPermission, KindBlocked, KindDenied:
		return http.StatusForbidden
	case KindUnauthenticated:
		return http.StatusUnauthorized
	case KindConflict:
		return http.StatusConflict
	case KindPending:
		return http.StatusAccepted
	case KindTimeout:
		return http.StatusGatewayTimeout
	case KindUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// Exit codes of the armory command.
const (
	ExitOK      = 0  // success
	ExitFailure = 1  // a tool ran and failed, or an internal error
	ExitInvalid = 2  // bad world, unknown agent or tool, bad input
	ExitBlocked = 3  // blocked or denied by policy
	ExitPending = 4  // waiting for an approval
	ExitUsage   = 64 // command line used wrongly (BSD EX_USAGE)
)

// ExitCode maps a kind to the exit code of the armory command.
func ExitCode(k Kind) int {
	switch k {
	case KindOther:
		return ExitFailure
	case KindUsage:
		return ExitUsage
	case KindInvalid, KindNotFound, KindConflict, KindUnauthenticated, KindTooLarge:
		return ExitInvalid
	case KindPermission, KindBlocked, KindDenied:
		return ExitBlocked
	case KindPending:
		return ExitPending
	}
	return ExitFailure
}
