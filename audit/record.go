// Package audit is Armory's audit trail: the record model, the hash chain that
// links records, verification of a chain, redaction of secrets before they are
// recorded, and an append-only JSONL file sink with rotation.
//
// # Two entries per call
//
// Every tool call is recorded twice: a "start" entry (Status "running", or
// "pending" while it waits for an approval) is appended before the tool runs,
// and a "finish" entry with the final status (success, error, blocked, denied,
// timeout) is appended after it. Both entries carry the same call ID and each
// has its own Seq and Hash, so the trail stays strictly append-only: nothing
// already chained is ever rewritten, a crash between the two leaves a visible
// start entry without a finish, and a call that never ran (blocked before the
// run) has only a finish entry.
//
// # Hash chain
//
// Record.Hash is the hex SHA-256 of a canonical binary encoding of every other
// field of the record, including PrevHash (the Hash of the record with
// Seq-1, empty for Seq 1). See Record.ComputeHash for the exact encoding.
// Verify walks a trail and names the first broken sequence number. What can
// be detected: an edited field, a deleted, duplicated or reordered record,
// and, given a Head recorded elsewhere (the file sink's audit.head, a store's
// head row), a truncated tail. What cannot: someone who rewrites a record AND
// recomputes every hash after it AND the head, i.e. who controls the whole
// storage. Anchor heads outside the trail (export them) to catch that.
package audit

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"
)

// Phase tells which of a call's two entries a record is.
type Phase string

// Phases of a call.
const (
	PhaseStart  Phase = "start"  // written before the call runs
	PhaseFinish Phase = "finish" // written after it ended (or was stopped)
)

// Status is the outcome recorded for a call.
type Status string

// Statuses. Running and Pending appear on start entries; the others on
// finish entries.
const (
	StatusRunning Status = "running"
	StatusPending Status = "pending"
	StatusSuccess Status = "success"
	StatusError   Status = "error"
	StatusBlocked Status = "blocked"
	StatusDenied  Status = "denied"
	StatusTimeout Status = "timeout"
	// StatusInterrupted ends an approved call whose process stopped while
	// the tool ran (its run claim's lease expired): whether the tool had
	// its effect is unknown, and it is not run again. Another process
	// writes this finish entry, under the interrupted call's ID.
	StatusInterrupted Status = "interrupted"
)

// Valid reports whether s is one of the statuses above.
func (s Status) Valid() bool {
	switch s {
	case StatusRunning, StatusPending, StatusSuccess, StatusError, StatusBlocked, StatusDenied, StatusTimeout, StatusInterrupted:
		return true
	}
	return false
}

// Stage is one pipeline stage's decision about a call, with its reasons.
type Stage struct {
	Name     string   `json:"name"`
	Decision string   `json:"decision"`
	Reasons  []string `json:"reasons,omitempty"`
}

// Record is one entry of the audit trail. Seq, PrevHash and Hash are assigned
// by the sink or store that appends it (see Seal); the caller fills the rest.
// Args and Result must already be redacted (see Redact and Summary).
type Record struct {
	ID            string          `json:"id"` // call ID, shared by a call's start and finish entries
	Seq           int64           `json:"seq"`
	Time          time.Time       `json:"time"` // UTC, microsecond precision once sealed
	Phase         Phase           `json:"phase"`
	Agent         string          `json:"agent"`
	Session       string          `json:"session,omitempty"`
	Task          string          `json:"task,omitempty"`
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args"`
	Stages        []Stage         `json:"stages,omitempty"`
	Permission    string          `json:"permission,omitempty"`
	ApprovalID    string          `json:"approval_id,omitempty"`
	DecidedBy     string          `json:"decided_by,omitempty"`
	Status        Status          `json:"status"`
	Result        string          `json:"result,omitempty"`
	DurationMS    int64           `json:"duration_ms"`
	Justification string          `json:"justification,omitempty"`
	PrevHash      string          `json:"prev_hash"`
	Hash          string          `json:"hash"`
}

// Head identifies the end of a chain: the last record's Seq and Hash. The
// zero Head is the empty chain.
type Head struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// NewID returns a fresh call ID: a UUIDv7-shaped string (48-bit millisecond
// timestamp, then random bits), so IDs sort by creation time.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	ms := uint64(time.Now().UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	b[6] = b[6]&0x0f | 0x70 // version 7
	b[8] = b[8]&0x3f | 0x80 // RFC 9562 variant
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// Normalize puts r into the form that survives every storage round trip
// byte for byte (JSON lines, SQLite, Postgres TEXT), so that a hash computed
// now still matches after reading the record back:
//   - Time becomes UTC, truncated to microseconds (Postgres precision); a zero
//     Time becomes the current time;
//   - every string becomes valid UTF-8 without NUL bytes (invalid bytes and
//     NUL are replaced by U+FFFD);
//   - Args is compact JSON as json.Marshal writes it (HTML characters
//     escaped), so any JSON round trip keeps it; empty Args becomes null, and Args that is not
//     valid JSON is stored as a JSON string holding its text.
//
// Normalize never modifies memory it shares with the caller's slices: Stages
// and Args are copied when they change. It is idempotent.
func (r *Record) Normalize() {
	if r.Time.IsZero() {
		r.Time = time.Now()
	}
	r.Time = r.Time.UTC().Truncate(time.Microsecond)
	r.ID = cleanString(r.ID)
	r.Phase = Phase(cleanString(string(r.Phase)))
	r.Agent = cleanString(r.Agent)
	r.Session = cleanString(r.Session)
	r.Task = cleanString(r.Task)
	r.Tool = cleanString(r.Tool)
	r.Args = normalizeArgs(r.Args)
	if len(r.Stages) > 0 {
		if !stagesClean(r.Stages) {
			st := make([]Stage, len(r.Stages))
			for i, s := range r.Stages {
				st[i] = Stage{Name: cleanString(s.Name), Decision: cleanString(s.Decision)}
				if len(s.Reasons) > 0 {
					st[i].Reasons = make([]string, len(s.Reasons))
					for j, re := range s.Reasons {
						st[i].Reasons[j] = cleanString(re)
					}
				}
			}
			r.Stages = st
		} else {
			// Already clean: kept as they are (an empty Reasons becomes
			// nil, as a copy would make it, without touching the caller's
			// slice).
			for i := range r.Stages {
				if r.Stages[i].Reasons != nil && len(r.Stages[i].Reasons) == 0 {
					r.Stages = stagesWithNilReasons(r.Stages)
					break
				}
			}
		}
	} else {
		r.Stages = nil
	}
	r.Permission = cleanString(r.Permission)
	r.ApprovalID = cleanString(r.ApprovalID)
	r.DecidedBy = cleanString(r.DecidedBy)
	r.Status = Status(cleanString(string(r.Status)))
	r.Result = cleanString(r.Result)
	r.Justification = cleanString(r.Justification)
	r.PrevHash = cleanString(r.PrevHash)
}

// stagesClean reports whether every string of st is already clean
// (cleanString would return it unchanged).
func stagesClean(st []Stage) bool {
	for _, s := range st {
		if !isClean(s.Name) || !isClean(s.Decision) {
			return false
		}
		for _, re := range s.Reasons {
			if !isClean(re) {
				return false
			}
		}
	}
	return true
}

// stagesWithNilReasons returns a copy of st (sharing the non-empty Reasons)
// in which every empty Reasons is nil.
func stagesWithNilReasons(st []Stage) []Stage {
	out := make([]Stage, len(st))
	copy(out, st)
	for i := range out {
		if len(out[i].Reasons) == 0 {
			out[i].Reasons = nil
		}
	}
	return out
}

func isClean(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }

func cleanString(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

var jsonNull = json.RawMessage("null")

func normalizeArgs(a json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(a)) == 0 {
		return jsonNull
	}
	if !json.Valid(a) {
		b, _ := json.Marshal(string(a)) // a string always marshals
		return b
	}
	if !utf8.Valid(a) {
		// Invalid bytes can only sit inside JSON strings, so replacing them
		// keeps the text valid JSON.
		a = bytes.ToValidUTF8(a, []byte("\uFFFD"))
	}
	// The canonical form is what json.Marshal produces for a RawMessage:
	// compact, with <, >, &, U+2028 and U+2029 escaped. Any later
	// json.Marshal of the record therefore reproduces it byte for byte.
	if canonicalJSON(a) {
		return a
	}
	out, err := json.Marshal(json.RawMessage(a))
	if err != nil {
		b, _ := json.Marshal(string(a))
		return b
	}
	if bytes.Equal(out, a) {
		return a
	}
	return out
}

// canonicalJSON reports whether valid JSON a is already what json.Marshal
// writes for it as a RawMessage: no white space outside strings, and none
// of the characters it escapes (<, >, &, U+2028, U+2029) anywhere.
func canonicalJSON(a []byte) bool {
	in, esc := false, false
	for i := 0; i < len(a); i++ {
		c := a[i]
		switch {
		case c == '<' || c == '>' || c == '&':
			return false
		case c == 0xE2 && i+2 < len(a) && a[i+1] == 0x80 && (a[i+2] == 0xA8 || a[i+2] == 0xA9):
			return false
		case in:
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				in = false
			}
		case c == '"':
			in = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			return false
		}
	}
	return true
}

// Seal normalizes r, links it after prev (Seq = prev.Seq+1, PrevHash =
// prev.Hash) and sets its Hash. It returns the new head.
func (r *Record) Seal(prev Head) Head {
	r.Normalize()
	return r.Chain(prev)
}

// Chain links an already normalized record after prev and sets its Hash,
// returning the new head. Sinks call Normalize early (in the caller's
// goroutine) and Chain late (inside the serialized append).
func (r *Record) Chain(prev Head) Head {
	r.Seq = prev.Seq + 1
	r.PrevHash = prev.Hash
	r.Hash = r.ComputeHash()
	return Head{Seq: r.Seq, Hash: r.Hash}
}

// hashVersion starts every canonical encoding; a change of encoding gets a
// new version string.
const hashVersion = "armory.audit.v1"

// ComputeHash returns the hex SHA-256 of r's canonical encoding. The encoding
// is the concatenation, in this order, of: the string "armory.audit.v1";
// ID, Seq, Time, Phase, Agent, Session, Task, Tool, Args, Stages, Permission,
// ApprovalID, DecidedBy, Status, Result, DurationMS, Justification, PrevHash.
// A string (and Args) is its length as a uvarint followed by its bytes; an
// integer is 8 bytes big-endian (two's complement); Time is its Unix time in
// microseconds as an integer; Stages is its length as a uvarint followed by
// each stage's Name, Decision, number of reasons (uvarint) and reasons. The
// encoding is unambiguous (every variable-length part is length-prefixed).
// Hash itself is not part of it. ComputeHash does not normalize r.
func (r *Record) ComputeHash() string {
	buf := make([]byte, 0, 256+len(r.Args)+len(r.Result))
	buf = appendString(buf, hashVersion)
	buf = appendString(buf, r.ID)
	buf = binary.BigEndian.AppendUint64(buf, uint64(r.Seq))
	buf = binary.BigEndian.AppendUint64(buf, uint64(r.Time.UnixMicro()))
	buf = appendString(buf, string(r.Phase))
	buf = appendString(buf, r.Agent)
	buf = appendString(buf, r.Session)
	buf = appendString(buf, r.Task)
	buf = appendString(buf, r.Tool)
	buf = binary.AppendUvarint(buf, uint64(len(r.Args)))
	buf = append(buf, r.Args...)
	buf = binary.AppendUvarint(buf, uint64(len(r.Stages)))
	for _, s := range r.Stages {
		buf = appendString(buf, s.Name)
		buf = appendString(buf, s.Decision)
		buf = binary.AppendUvarint(buf, uint64(len(s.Reasons)))
		for _, re := range s.Reasons {
			buf = appendString(buf, re)
		}
	}
	buf = appendString(buf, r.Permission)
	buf = appendString(buf, r.ApprovalID)
	buf = appendString(buf, r.DecidedBy)
	buf = appendString(buf, string(r.Status))
	buf = appendString(buf, r.Result)
	buf = binary.BigEndian.AppendUint64(buf, uint64(r.DurationMS))
	buf = appendString(buf, r.Justification)
	buf = appendString(buf, r.PrevHash)
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:])
}

func appendString(buf []byte, s string) []byte {
	buf = binary.AppendUvarint(buf, uint64(len(s)))
	return append(buf, s...)
}

// Clone returns a deep copy of r.
func (r *Record) Clone() *Record {
	c := *r
	if r.Args != nil {
		c.Args = append(json.RawMessage(nil), r.Args...)
	}
	if r.Stages != nil {
		c.Stages = make([]Stage, len(r.Stages))
		for i, s := range r.Stages {
			c.Stages[i] = s
			if s.Reasons != nil {
				c.Stages[i].Reasons = append([]string(nil), s.Reasons...)
			}
		}
	}
	return &c
}
