package compact

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds a small skip-oriented JSON walker. It exists because the
// compactor must read a few fields out of a few event kinds at hundreds of
// megabytes a second, while most bytes of a stream sit inside string values
// (thinking tokens, echoed file contents) that are never decoded: skipping a
// string is one bytes.IndexByte per quote, which encoding/json cannot offer.
// The walker checks the syntax of the objects and arrays it walks into
// (members, separators, literals, numbers); nested values it skips are only
// bracket-matched, and escapes inside strings are not checked. Whether the
// input is NDJSON at all is decided with json.Valid, and every string that
// reaches the summary is decoded by encoding/json whenever it holds an
// escape.

// skipWS returns the index of the first byte at or after i that is not JSON
// whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString expects b[i] == '"' and returns the index just past the closing
// quote. ok is false when the string is not terminated.
func skipString(b []byte, i int) (end int, ok bool) {
	i++
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b), false
		}
		k := i + j
		n := 0
		for m := k - 1; m >= i && b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return k + 1, true
		}
		i = k + 1
	}
}

// skipNested expects b[i] to be '{' or '[' and returns the index just past the
// matching close bracket.
func skipNested(b []byte, i int) (int, bool) {
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			end, ok := skipString(b, i)
			if !ok {
				return len(b), false
			}
			i = end
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return i + 1, true
			}
		}
		i++
	}
	return len(b), false
}

// skipValue returns the index just past the JSON value that starts at b[i].
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; c {
	case '"':
		return skipString(b, i)
	case '{', '[':
		return skipNested(b, i)
	}
	j := i
	for j < len(b) {
		c := b[j]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			break
		}
		j++
	}
	if j == i || !validScalar(b[i:j]) {
		return j, false
	}
	return j, true
}

// validScalar reports whether lit is a JSON literal or number.
func validScalar(lit []byte) bool {
	switch string(lit) {
	case "true", "false", "null":
		return true
	}
	// number = [-] int [frac] [exp]
	i := 0
	if i < len(lit) && lit[i] == '-' {
		i++
	}
	switch {
	case i < len(lit) && lit[i] == '0':
		i++
	case i < len(lit) && lit[i] >= '1' && lit[i] <= '9':
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(lit) && lit[i] == '.' {
		i++
		if i >= len(lit) || lit[i] < '0' || lit[i] > '9' {
			return false
		}
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
	}
	if i < len(lit) && (lit[i] == 'e' || lit[i] == 'E') {
		i++
		if i < len(lit) && (lit[i] == '+' || lit[i] == '-') {
			i++
		}
		if i >= len(lit) || lit[i] < '0' || lit[i] > '9' {
			return false
		}
		for i < len(lit) && lit[i] >= '0' && lit[i] <= '9' {
			i++
		}
	}
	return i == len(lit)
}

// stopWalk, returned by a walk callback as the value's end, ends the walk
// early; the walk then reports ok == true.
const stopWalk = -1

// walkObject calls fn for every member of the object whose '{' is at b[i],
// with the raw key (escapes are not decoded) and the index vs of the value.
// fn consumes the value, by skipValue or by walking into it, and returns the
// index just past it and whether it was well formed, or stopWalk to end the
// walk. Each byte is thus scanned once however deep the caller descends.
// walkObject returns the index just past the object and whether it was well
// formed (or stopped).
func walkObject(b []byte, i int, fn func(key []byte, vs int) (ve int, ok bool)) (int, bool) {
	return walkItems(b, i, '{', '}', func(i int) (vs, ve int, ok bool) {
		if i >= len(b) || b[i] != '"' {
			return 0, i, false
		}
		ke, ok := skipString(b, i)
		if !ok {
			return 0, ke, false
		}
		key := b[i+1 : ke-1]
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, i, false
		}
		vs = skipWS(b, i+1)
		ve, ok = fn(key, vs)
		return vs, ve, ok
	})
}

// walkArray calls fn for every element of the array whose '[' is at b[i];
// fn consumes the element as for walkObject.
func walkArray(b []byte, i int, fn func(vs int) (ve int, ok bool)) (int, bool) {
	return walkItems(b, i, '[', ']', func(i int) (int, int, bool) {
		ve, ok := fn(i)
		return i, ve, ok
	})
}

// walkItems walks the members of the object or array whose open is at b[i]:
// item consumes the member at i and returns where its value starts and ends
// (or stopWalk, which ends the walk) and whether it was well formed; a
// malformed member's end is where the walk stopped.
func walkItems(b []byte, i int, open, close byte, item func(i int) (vs, ve int, ok bool)) (int, bool) {
	if i >= len(b) || b[i] != open {
		return i, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == close {
		return i + 1, true
	}
	for {
		vs, ve, ok := item(i)
		if ve == stopWalk {
			return vs, ok
		}
		if !ok {
			return ve, false
		}
		var more bool
		if i, more, ok = nextItem(b, ve, close); !more {
			return i, ok
		}
	}
}

// nextItem reads what follows a member or element that ends at ve in an
// object or array closed by end: a ',' (more: i is the next one's start)
// or end (i is just past it); anything else is malformed.
func nextItem(b []byte, ve int, end byte) (i int, more, ok bool) {
	i = skipWS(b, ve)
	switch {
	case i >= len(b):
		return i, false, false
	case b[i] == ',':
		return skipWS(b, i+1), true, true
	case b[i] == end:
		return i + 1, false, true
	}
	return i, false, false
}

// stringValue consumes a string value at b[vs] and decodes it; ok is false
// only when the value is malformed (a well-formed non-string gives "").
func stringValue(b []byte, vs int) (s string, ve int, ok bool) {
	ve, ok = skipValue(b, vs)
	if ok {
		s, _ = stringAt(b, vs, ve)
	}
	return s, ve, ok
}

// rawString returns the undecoded contents of the string value b[vs:ve]
// (without quotes) and whether the value is a string at all.
func rawString(b []byte, vs, ve int) ([]byte, bool) {
	if ve-vs < 2 || b[vs] != '"' {
		return nil, false
	}
	return b[vs+1 : ve-1], true
}

// stringAt decodes the string value b[vs:ve]. Invalid UTF-8 becomes U+FFFD.
func stringAt(b []byte, vs, ve int) (string, bool) {
	raw, ok := rawString(b, vs, ve)
	if !ok {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		if utf8.Valid(raw) {
			return string(raw), true
		}
		return strings.ToValidUTF8(string(raw), "\uFFFD"), true
	}
	var s string
	if json.Unmarshal(b[vs:ve], &s) != nil {
		return "", false
	}
	return s, true
}

// numberAt decodes the number value b[vs:ve].
func numberAt(b []byte, vs, ve int) (float64, bool) {
	if vs >= ve || (b[vs] != '-' && (b[vs] < '0' || b[vs] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b[vs:ve]), 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// boolAt decodes the boolean value b[vs:ve].
func boolAt(b []byte, vs, ve int) (v, ok bool) {
	switch string(b[vs:ve]) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// at returns b[i], or 0 when i is past the end.
func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}
