package main

import (
	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
)

// Exit codes of the armory command.
const (
	exitOK      = 0  // success
	exitFailure = 1  // a tool ran and failed, or an internal error
	exitInvalid = 2  // bad world, unknown agent or tool, bad input, a conflict
	exitBlocked = 3  // blocked or denied by policy, or not permitted
	exitPending = 4  // waiting for an approval
	exitUsage   = 64 // command line used wrongly (BSD EX_USAGE)
)

// exitCodes is the one table of the command line: the exit code of an
// error (and of a call's outcome) of each kind. Every kind has a row
// (TestExitCodeEveryKind).
var exitCodes = map[armory.Kind]int{
	armory.KindOther:           exitFailure, // a tool failure the tool did not classify
	armory.KindInvalid:         exitInvalid,
	armory.KindNotFound:        exitInvalid,
	armory.KindPermission:      exitBlocked,
	armory.KindUnauthenticated: exitInvalid,
	armory.KindConflict:        exitInvalid,
	armory.KindBlocked:         exitBlocked,
	armory.KindDenied:          exitBlocked,
	armory.KindPending:         exitPending,
	armory.KindTimeout:         exitFailure,
	armory.KindUnavailable:     exitFailure,
	armory.KindInternal:        exitFailure,
	armory.KindUsage:           exitUsage,
	armory.KindTooLarge:        exitInvalid,
}

// exitCodeOf is the exit code of kind k (exitFailure for a kind without a
// row).
func exitCodeOf(k armory.Kind) int {
	if c, ok := exitCodes[k]; ok {
		return c
	}
	return exitFailure
}

// outcomeExit is the exit code of a call's outcome: 0 for a success, else
// the code of the outcome's kind.
func outcomeExit(o pipeline.Outcome) int {
	if o.Status == audit.StatusSuccess {
		return exitOK
	}
	return exitCodeOf(o.Kind)
}
