package server

import (
	"net/http"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
)

// TestHTTPStatusEveryKind: the HTTP table has a row for every kind (a new
// kind without one fails here), and the rows are the documented statuses.
func TestHTTPStatusEveryKind(t *testing.T) {
	want := map[armory.Kind]int{
		armory.KindOther: http.StatusBadGateway, armory.KindInvalid: http.StatusBadRequest, armory.KindNotFound: http.StatusNotFound,
		armory.KindPermission: http.StatusForbidden, armory.KindUnauthenticated: http.StatusUnauthorized, armory.KindConflict: http.StatusConflict,
		armory.KindBlocked: http.StatusForbidden, armory.KindDenied: http.StatusForbidden, armory.KindPending: http.StatusAccepted,
		armory.KindTimeout: http.StatusGatewayTimeout, armory.KindUnavailable: http.StatusServiceUnavailable,
		armory.KindInternal: http.StatusInternalServerError, armory.KindUsage: http.StatusBadRequest, armory.KindTooLarge: http.StatusRequestEntityTooLarge,
	}
	for _, k := range armory.Kinds() {
		got, ok := httpStatuses[k]
		if !ok {
			t.Errorf("kind %s has no HTTP status", k)
			continue
		}
		if got != want[k] || httpStatus(k) != got {
			t.Errorf("kind %s: HTTP %d, want %d", k, got, want[k])
		}
		// An outcome of the kind answers with the kind's status; a success
		// with 200 whatever its kind field.
		if s := callStatus(pipeline.Outcome{Status: audit.StatusError, Kind: k}); s != got {
			t.Errorf("outcome of kind %s: %d, want %d", k, s, got)
		}
	}
	if len(httpStatuses) != len(armory.Kinds()) {
		t.Errorf("the table has %d rows for %d kinds", len(httpStatuses), len(armory.Kinds()))
	}
	if callStatus(pipeline.Outcome{Status: audit.StatusSuccess}) != http.StatusOK {
		t.Error("a success is not 200")
	}
}
