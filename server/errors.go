package server

import (
	"net/http"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
)

// httpStatuses is the one table of the HTTP surface: the status of an
// error (and of a call's outcome) of each kind. Every kind has a row
// (TestHTTPStatusEveryKind).
var httpStatuses = map[armory.Kind]int{
	// KindOther is a tool failure the tool did not classify: the tool
	// behind the gateway failed. (An error is never KindOther: armory.KindOf
	// reads an unclassified error as KindInternal.)
	armory.KindOther:           http.StatusBadGateway,
	armory.KindInvalid:         http.StatusBadRequest,
	armory.KindNotFound:        http.StatusNotFound,
	armory.KindPermission:      http.StatusForbidden,
	armory.KindUnauthenticated: http.StatusUnauthorized,
	armory.KindConflict:        http.StatusConflict,
	armory.KindBlocked:         http.StatusForbidden,
	armory.KindDenied:          http.StatusForbidden,
	armory.KindPending:         http.StatusAccepted,
	armory.KindTimeout:         http.StatusGatewayTimeout,
	armory.KindUnavailable:     http.StatusServiceUnavailable,
	armory.KindInternal:        http.StatusInternalServerError,
	armory.KindUsage:           http.StatusBadRequest,
	armory.KindTooLarge:        http.StatusRequestEntityTooLarge,
}

// httpStatus is the HTTP status of kind k (500 for a kind without a row).
func httpStatus(k armory.Kind) int {
	if s, ok := httpStatuses[k]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// callStatus is the HTTP status of a call's outcome: 200 for a success,
// else the status of the outcome's kind (202 pending, 403 blocked or
// denied, 400 invalid arguments, 404 unknown tool, 504 timeout, 502 a tool
// failure, …). The body is the outcome either way.
func callStatus(o pipeline.Outcome) int {
	if o.Status == audit.StatusSuccess {
		return http.StatusOK
	}
	return httpStatus(o.Kind)
}
