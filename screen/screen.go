package screen

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/syntax"
)

// Verdict is the outcome of screening a command. Verdicts are ordered by
// severity: Allow < Confirm < Block.
type Verdict int

const (
	// Allow means every simple command is a known-safe read-only command
	// and nothing is written to a file.
	Allow Verdict = iota
	// Confirm means the command is not known to be safe, or the parser
	// cannot see through it; a human (or approval policy) must decide.
	Confirm
	// Block means the command is catastrophic (or could not be analysed).
	// It is refused in every profile and cannot be overridden.
	Block
)

// String returns "allow", "confirm" or "block".
func (v Verdict) String() string {
	switch v {
	case Allow:
		return "allow"
	case Confirm:
		return "confirm"
	case Block:
		return "block"
	}
	return fmt.Sprintf("Verdict(%d)", int(v))
}

// MarshalJSON encodes the verdict as its String form.
func (v Verdict) MarshalJSON() ([]byte, error) {
	switch v {
	case Allow, Confirm, Block:
		return json.Marshal(v.String())
	}
	return nil, fmt.Errorf("screen: invalid verdict %d", int(v))
}

// UnmarshalJSON decodes "allow", "confirm" or "block". Any other value is an
// error.
func (v *Verdict) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("screen: verdict must be a string: %w", err)
	}
	switch s {
	case "allow":
		*v = Allow
	case "confirm":
		*v = Confirm
	case "block":
		*v = Block
	default:
		return fmt.Errorf("screen: unknown verdict %q", s)
	}
	return nil
}

// Report is the result of Check.
type Report struct {
	Verdict Verdict `json:"verdict"`
	// Commands holds every simple command's argv as resolved: wrappers
	// (sudo, env, timeout, xargs, ...) seen through, quotes and escapes
	// removed. Words that cannot be resolved statically are kept as written.
	Commands [][]string `json:"commands"`
	// Reasons holds one human-readable line per finding, e.g.
	// "rm: recursive forced removal of /". It is empty for Allow.
	Reasons []string `json:"reasons"`
}

// Message returns the text to show the caller: for Block
// "Blocked catastrophic command: <command>" (or, for a command blocked only
// because it could not be screened, why), otherwise a short text.
func (r Report) Message(command string) string {
	switch r.Verdict {
	case Block:
		if r.unscreened() {
			return "Blocked: the command could not be screened (" + strings.Join(r.Reasons, "; ") + "); a command runs only once it parses within the screening limits"
		}
		return "Blocked catastrophic command: " + command
	case Confirm:
		if len(r.Reasons) == 0 {
			return "Command requires confirmation"
		}
		return "Command requires confirmation: " + strings.Join(r.Reasons, "; ")
	default:
		return "Command is known safe (read-only)"
	}
}

// unscreened reports whether a Block comes only from failing closed: a
// command the parser rejects, a screening limit or an internal error, not
// a command found catastrophic. A '#' glued to a word (where the parser and
// bash disagree, the shape of a hidden command) is not among them.
func (r Report) unscreened() bool {
	for _, why := range r.Reasons {
		parser := strings.HasPrefix(why, "parse error") && !strings.Contains(why, "'#' inside a word")
		if !parser && !strings.Contains(why, "screening limit") && !strings.HasPrefix(why, "internal error") {
			return false
		}
	}
	return len(r.Reasons) > 0
}

// Limits. Exceeding any of them never yields Allow.
const (
	// MaxCommandBytes is the largest command Check analyses; a longer one
	// is blocked (fail closed).
	MaxCommandBytes = 64 << 10
	// MaxNesting bounds the nesting depth of statements and brackets; a
	// deeper command is blocked.
	MaxNesting = 200
	// MaxScriptDepth bounds how many nested literal scripts (sh -c '…',
	// eval '…', ssh host '…', …) are parsed inside one another; deeper
	// nesting is blocked.
	MaxScriptDepth = 8
	// maxExpansions bounds brace expansions and xargs items per word.
	maxExpansions = 64
)

var parsers = sync.Pool{New: func() any {
	// Comments are kept to detect where the parser and bash disagree
	// about them (see collectVars).
	return syntax.NewParser(syntax.Variant(syntax.LangBash), syntax.KeepComments(true))
}}

// Check screens a shell command (bash syntax) and returns its verdict, the
// resolved simple commands and the reasons. A parse error, a command longer
// than MaxCommandBytes or nested deeper than MaxNesting/MaxScriptDepth is
// Block. Check is safe for concurrent use and never panics: an internal
// failure is reported as Block.
func Check(command string) (rep Report) {
	a := &analyzer{}
	defer func() {
		if p := recover(); p != nil {
			a.flag(Block, fmt.Sprintf("internal error while screening: %v", p))
		}
		rep = a.report()
	}()
	a.script(command, false, nil)
	return rep
}

// bracketDepth is a cheap pre-parse bound on nesting: the highest count of
// unclosed '(' '{' '[' and backquote-free nesting, ignoring quoting. It
// over-approximates real nesting for brackets inside quotes, which only
// makes the limit stricter.
func bracketDepth(s string) int {
	depth, max := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '{', '[':
			depth++
			if depth > max {
				max = depth
			}
		case ')', '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return max
}
