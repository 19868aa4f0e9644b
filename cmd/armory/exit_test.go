package main

import (
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
)

// TestExitCodeEveryKind: the exit-code table has a row for every kind (a
// new kind without one fails here), the rows are the documented codes, and
// an error and an outcome of one kind end with the same code.
func TestExitCodeEveryKind(t *testing.T) {
	want := map[armory.Kind]int{
		armory.KindOther: exitFailure, armory.KindInvalid: exitInvalid, armory.KindNotFound: exitInvalid,
		armory.KindPermission: exitBlocked, armory.KindUnauthenticated: exitInvalid, armory.KindConflict: exitInvalid,
		armory.KindBlocked: exitBlocked, armory.KindDenied: exitBlocked, armory.KindPending: exitPending,
		armory.KindTimeout: exitFailure, armory.KindUnavailable: exitFailure, armory.KindInternal: exitFailure,
		armory.KindUsage: exitUsage, armory.KindTooLarge: exitInvalid,
	}
	testenv.KindTable(t, "exit code", exitCodes, want, exitCodeOf, func(k armory.Kind) int {
		return outcomeExit(pipeline.Outcome{Status: audit.StatusError, Kind: k})
	})
	if outcomeExit(pipeline.Outcome{Status: audit.StatusSuccess}) != exitOK {
		t.Error("a success does not exit 0")
	}
}
