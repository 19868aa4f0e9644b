// Package auditrow converts the parts of an audit record that SQL backends
// store as text.
package auditrow

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/armory-dev/armory/audit"
)

// Columns lists the audit_records columns in the order backends bind and
// scan them.
const Columns = "seq, id, time_us, phase, agent, session, task, tool, args, stages, permission, approval_id, decided_by, status, result, duration_ms, justification, prev_hash, hash"

// NumColumns is the number of names in Columns.
const NumColumns = 19

// EncodeStages returns the stored form of stages: "" for none, else JSON,
// byte for byte what json.Marshal writes (checked by FuzzEncodeStages). It
// is written by hand because it runs twice per call on the pipeline's hot
// path, where json.Marshal's reflection cost about 5 µs a time; the error
// is always nil.
func EncodeStages(stages []audit.Stage) (string, error) {
	if len(stages) == 0 {
		return "", nil
	}
	n := 2
	for _, s := range stages {
		n += 32 + len(s.Name) + len(s.Decision)
		for _, r := range s.Reasons {
			n += 3 + len(r)
		}
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, s := range stages {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, s.Name)
		b = append(b, `,"decision":`...)
		b = appendString(b, s.Decision)
		if len(s.Reasons) > 0 {
			b = append(b, `,"reasons":[`...)
			for j, r := range s.Reasons {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, r)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	return string(b), nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does:
// HTML-safe (<, >, & escaped), U+2028 and U+2029 escaped, invalid UTF-8
// as U+FFFD.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// DecodeStages reverses EncodeStages.
func DecodeStages(s string) ([]audit.Stage, error) {
	if s == "" {
		return nil, nil
	}
	var st []audit.Stage
	if err := json.Unmarshal([]byte(s), &st); err != nil {
		return nil, fmt.Errorf("store: decode stages: %w", err)
	}
	return st, nil
}
