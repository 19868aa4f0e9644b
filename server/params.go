package server

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/armory-dev/armory"
)

// checkPath refuses a request path that is not in canonical form: an
// empty segment ("//", a trailing "/"), a "." or ".." segment (plain or
// percent-encoded), an escaped "/" or "\" inside a segment, a control
// character (an encoded NUL) or bytes that are not UTF-8. The router would
// redirect some of these (301/307, with an HTML body) and read others as
// another route's path value; refusing them keeps one reading of every
// path and one error model. Paths that net/http cannot parse at all (a bad
// escape) are refused by net/http before they reach the server.
func checkPath(r *http.Request) error {
	raw := r.URL.EscapedPath()
	if raw == "/" {
		return nil
	}
	bad := func(why string) error {
		return armory.E("", armory.KindInvalid, "malformed path "+quote(raw)+": "+why)
	}
	if !strings.HasPrefix(raw, "/") {
		return bad("it must start with /")
	}
	for _, seg := range strings.Split(raw[1:], "/") {
		if seg == "" {
			return bad("empty segment (// or a trailing /)")
		}
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return bad(err.Error())
		}
		switch {
		case dec == "." || dec == "..":
			return bad("a . or .. segment")
		case strings.ContainsAny(dec, `/\`):
			return bad(`a segment holds an escaped / or \`)
		case !utf8.ValidString(dec):
			return bad("not UTF-8")
		case strings.IndexFunc(dec, unicode.IsControl) >= 0:
			return bad("a control character")
		}
	}
	return nil
}

// strictQuery parses a raw query the way the REST endpoints read it:
// url.ParseQuery's errors (a bad escape, a ";" separator) are errors, not
// pairs silently dropped as r.URL.Query() drops them; a parameter not in
// allowed, a repeated one, an empty value or a value with a control
// character is an error naming the parameter. Every error is KindInvalid.
func strictQuery(raw string, allowed []string) (url.Values, error) {
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, armory.E("", armory.KindInvalid, "malformed query: "+err.Error())
	}
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	slices.Sort(keys) // the same request always names the same parameter
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			takes := "none"
			if len(allowed) > 0 {
				takes = strings.Join(allowed, ", ")
			}
			return nil, armory.E("", armory.KindInvalid, fmt.Sprintf("unknown query parameter %s (this endpoint takes %s)", quote(k), takes))
		}
		vs := q[k]
		switch {
		case len(vs) > 1:
			return nil, armory.E("", armory.KindInvalid, fmt.Sprintf("query parameter %s is repeated; give it once", quote(k)))
		case vs[0] == "":
			return nil, armory.E("", armory.KindInvalid, fmt.Sprintf("query parameter %s is empty; leave it out for no filter", quote(k)))
		case strings.IndexFunc(vs[0], unicode.IsControl) >= 0 || !utf8.ValidString(vs[0]):
			return nil, armory.E("", armory.KindInvalid, fmt.Sprintf("query parameter %s contains a control character or bytes that are not UTF-8", quote(k)))
		}
	}
	return q, nil
}

// badParam is the error of a query parameter whose value is wrong.
func badParam(name, format string, args ...any) error {
	return armory.E("", armory.KindInvalid, fmt.Sprintf("query parameter %s: ", quote(name))+fmt.Sprintf(format, args...))
}

// params wraps a route's handler: the request's query must parse with
// strictQuery and name only the given parameters (none when empty).
// Handlers read the parameters from r.URL.Query() after it, which is then
// the same set.
func (s *Server) params(next http.HandlerFunc, allowed ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := strictQuery(r.URL.RawQuery, allowed); err != nil {
			s.writeError(w, r, err)
			return
		}
		next(w, r)
	}
}
