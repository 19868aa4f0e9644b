package server

import (
	"net/http"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/internal/testenv"
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
	// An outcome of the kind answers with the kind's status; a success
	// with 200 whatever its kind field.
	testenv.KindTable(t, "HTTP status", httpStatuses, want, httpStatus, func(k armory.Kind) int {
		return callStatus(pipeline.Outcome{Status: audit.StatusError, Kind: k})
	})
	if callStatus(pipeline.Outcome{Status: audit.StatusSuccess}) != http.StatusOK {
		t.Error("a success is not 200")
	}
}
