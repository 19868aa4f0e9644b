package main

import (
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
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
	for _, k := range armory.Kinds() {
		got, ok := exitCodes[k]
		if !ok {
			t.Errorf("kind %s has no exit code", k)
			continue
		}
		if got != want[k] || exitCodeOf(k) != got {
			t.Errorf("kind %s: exit %d, want %d", k, got, want[k])
		}
		if o := outcomeExit(pipeline.Outcome{Status: audit.StatusError, Kind: k}); o != got {
			t.Errorf("outcome of kind %s: exit %d, error of that kind: exit %d", k, o, got)
		}
	}
	if len(exitCodes) != len(armory.Kinds()) {
		t.Errorf("the table has %d rows for %d kinds", len(exitCodes), len(armory.Kinds()))
	}
	if outcomeExit(pipeline.Outcome{Status: audit.StatusSuccess}) != exitOK {
		t.Error("a success does not exit 0")
	}
}
