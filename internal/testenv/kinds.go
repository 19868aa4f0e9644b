package testenv

import (
	"testing"

	"github.com/armory-dev/armory"
)

// KindTable checks a surface's table from error kind to code (an exit code,
// an HTTP status): it has a row for every kind (a new kind without one fails
// here) and no other, each row is the wanted code, of (the lookup the surface
// uses) agrees with the table, and so does outcome (the code the surface gives
// a failed call outcome of the kind). what names the code in messages.
func KindTable(t testing.TB, what string, table, want map[armory.Kind]int, of, outcome func(armory.Kind) int) {
	t.Helper()
	for _, k := range armory.Kinds() {
		got, ok := table[k]
		if !ok {
			t.Errorf("kind %s has no %s", k, what)
			continue
		}
		if got != want[k] || of(k) != got {
			t.Errorf("kind %s: %s %d, want %d", k, what, got, want[k])
		}
		if o := outcome(k); o != got {
			t.Errorf("outcome of kind %s: %s %d, error of that kind: %d", k, what, o, got)
		}
	}
	if len(table) != len(armory.Kinds()) {
		t.Errorf("the %s table has %d rows for %d kinds", what, len(table), len(armory.Kinds()))
	}
}
