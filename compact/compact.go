// Package compact turns the NDJSON stream a coding-agent CLI writes into a
// short summary for the orchestrating LLM.
//
// Tools whose name ends in "cursor-agent" or "claude-agent" (see
// [IsCodingAgent]) delegate work to Cursor CLI (--output-format stream-json)
// or Claude Code (--output-format stream-json). Their raw output is 60–130 KB
// of thinking deltas, streamed message fragments and tool results that echo
// whole files; the orchestrator needs only what the agent did and what it
// said at the end. A [Stream] keeps:
//
//   - the terminal result event: success or failure, duration, output
//     tokens, cost (Claude), and the agent's own result text;
//   - a manifest of the files it read, wrote (edited) and deleted and the
//     shell commands it ran, from Cursor's tool_call/started events and
//     Claude Code's assistant tool_use blocks;
//
// and drops everything else. The summary has this shape (lines that would be
// empty are left out):
//
//	Cursor agent completed successfully in 13.4s (1028 output tokens).
//	Files read: site/index.html, site/style.css
//	Files written: site/technologies.html
//	Commands run: npm test
//	Result:
//	Created technologies.html with matching layout and updated nav links.
//
// Lines that are not JSON objects with a string "type" are skipped. Input in
// which no line is such an object is not NDJSON (for example Claude Code run
// with --output-format text): [Stream.Summary] then reports ok == false and the caller
// should use the raw output. A stream cut before its result event still
// yields a summary, which says that the agent did not report a result.
//
// Every part of the summary is bounded (see the Max constants), so the
// summary never exceeds [MaxSummaryBytes] whatever the input; lines longer
// than [MaxLineBytes] are skipped without being buffered.
//
// [Stream] does the same work incrementally, as output arrives, and can
// report a one-line progress description for each event it keeps.
package compact

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits. Each one has a test that shows it holds.
const (
	// MaxLineBytes is the longest line (without its newline) that is parsed.
	// Longer lines are skipped, and Stream discards their bytes as they
	// arrive instead of buffering them.
	MaxLineBytes = 1 << 20
	// MaxListEntries is the number of entries shown in each of the
	// "Files read", "Files written", "Files deleted" and "Commands run"
	// lines; the rest are counted ("and 12 more").
	MaxListEntries = 50
	// MaxListBytes bounds the entries of one such line, in bytes.
	MaxListBytes = 4096
	// MaxEntryBytes bounds one path or command; longer ones are cut with "…".
	MaxEntryBytes = 256
	// MaxResultBytes bounds the result text; a longer one is cut and the
	// number of bytes left out is stated.
	MaxResultBytes = 16 << 10
	// MaxProgressBytes bounds one progress description.
	MaxProgressBytes = 200
	// MaxSummaryBytes bounds the whole summary.
	MaxSummaryBytes = 4*(MaxListBytes+64) + 2*MaxEntryBytes + MaxResultBytes + 1024

	// maxTracked bounds the set used to deduplicate one list. Entries past it
	// are counted without deduplication ("and up to N more").
	maxTracked = 4096
	// maxErrorBytes bounds the error message of an error event.
	maxErrorBytes = MaxEntryBytes
)

// IsCodingAgent reports whether toolName names a delegated coding agent
// whose output should be compacted: its name ends in "cursor-agent" or
// "claude-agent" (for example "devtools.cursor-agent").
func IsCodingAgent(toolName string) bool {
	return strings.HasSuffix(toolName, "cursor-agent") || strings.HasSuffix(toolName, "claude-agent")
}

// Stream summarizes a coding agent's output incrementally: Write the output
// as it arrives (chunks may split lines and UTF-8 sequences anywhere), then
// call Summary. A Stream holds at most one partial line of at most
// MaxLineBytes plus the bounded summary state. It is not safe for concurrent
// use.
type Stream struct {
	toolName   string
	onProgress func(string)

	sawEvent   bool
	claudeInit bool
	cursorish  bool
	cwd        string

	read, written, deleted, commands list

	hasResult bool
	result    event
	lastError string
	longLines int

	pending  []byte
	skipping bool // inside a line longer than MaxLineBytes
}

var _ io.Writer = (*Stream)(nil)

// NewStream returns a Stream for the output of the tool toolName. The tool
// name decides how the agent is named in the summary ("Cursor agent",
// "Claude agent") unless the stream's init event shows it is Claude Code.
func NewStream(toolName string) *Stream {
	return &Stream{toolName: toolName}
}

// OnProgress registers fn to be called, during Write, with a one-line
// description (at most MaxProgressBytes) of each event the summary keeps:
// "started (model gpt-5)", "reading site/index.html", "editing
// site/index.html", "running npm test", "using grep", "completed
// successfully in 13.4s". Call it before the first Write.
func (s *Stream) OnProgress(fn func(desc string)) { s.onProgress = fn }

// Write consumes the next chunk of output. It always returns len(p), nil.
func (s *Stream) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		nl := bytes.IndexByte(p, '\n')
		if nl < 0 {
			switch {
			case s.skipping:
			case len(s.pending)+len(p) > MaxLineBytes:
				s.dropPending()
				s.skipping = true
				s.longLines++
			default:
				s.pending = append(s.pending, p...)
			}
			break
		}
		chunk := p[:nl]
		p = p[nl+1:]
		switch {
		case s.skipping:
			s.skipping = false
		case len(s.pending) > 0:
			if len(s.pending)+len(chunk) > MaxLineBytes {
				s.longLines++
			} else {
				s.pending = append(s.pending, chunk...)
				s.line(s.pending)
			}
			s.dropPending()
		case len(chunk) > MaxLineBytes:
			s.longLines++
		default:
			s.line(chunk)
		}
	}
	return n, nil
}

// dropPending empties the partial-line buffer, releasing a large one.
func (s *Stream) dropPending() {
	if cap(s.pending) > 64<<10 {
		s.pending = nil
	} else {
		s.pending = s.pending[:0]
	}
}

// line handles one complete line.
func (s *Stream) line(b []byte) {
	ev := parseLine(b, !s.sawEvent)
	if ev.kind == evNone {
		return
	}
	s.sawEvent = true
	if ev.cursorish {
		s.cursorish = true
	}
	switch ev.kind {
	case evInit:
		if ev.claude {
			s.claudeInit = true
		}
		if s.cwd == "" {
			s.cwd = strings.TrimRight(ev.cwd, "/")
		}
		if ev.model != "" {
			s.progress("started (model " + ev.model + ")")
		} else {
			s.progress("started")
		}
	case evTools:
		for _, t := range ev.tools {
			s.tool(t)
		}
	case evResult:
		s.hasResult = true
		s.result = ev
		s.progress(s.outcome(false))
	case evError:
		s.lastError = ev.result
		s.progress("error: " + ev.result)
	}
}

// tool records one tool invocation.
func (s *Stream) tool(t toolUse) {
	switch t.kind {
	case toolRead:
		p := s.path(t.arg)
		s.read.add(p)
		s.progress("reading " + p)
	case toolWrite:
		p := s.path(t.arg)
		s.written.add(p)
		verb := "writing "
		if strings.Contains(strings.ToLower(t.name), "edit") || strings.Contains(t.name, "Replace") || strings.Contains(t.name, "Patch") {
			verb = "editing "
		}
		s.progress(verb + p)
	case toolDelete:
		p := s.path(t.arg)
		s.deleted.add(p)
		s.progress("deleting " + p)
	case toolShell:
		c := command(t.arg)
		s.commands.add(c)
		s.progress("running " + c)
	default:
		if t.name != "" {
			s.progress("using " + clean(t.name, MaxEntryBytes))
		}
	}
}

// path makes p relative to the agent's working directory when it lies
// inside it, and bounds and cleans it.
func (s *Stream) path(p string) string {
	if s.cwd != "" && strings.HasPrefix(p, s.cwd) {
		switch rest := p[len(s.cwd):]; {
		case rest == "":
			p = "."
		case rest[0] == '/':
			p = strings.TrimLeft(rest, "/")
		}
	}
	return clean(p, MaxEntryBytes)
}

// command shows the first line of a shell command, bounded.
func command(c string) string {
	c = strings.TrimSpace(c)
	if i := strings.IndexByte(c, '\n'); i >= 0 {
		c = strings.TrimSpace(c[:i]) + " …"
	}
	return clean(c, MaxEntryBytes)
}

// clean replaces control characters with spaces, trims, and cuts s to at
// most max bytes (ending in "…" when cut) at a rune boundary.
func clean(s string, max int) string {
	if strings.IndexFunc(s, isControl) >= 0 {
		s = strings.Map(func(r rune) rune {
			if isControl(r) {
				return ' '
			}
			return r
		}, s)
	}
	s = strings.TrimSpace(s)
	return cut(s, max)
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// cut shortens s to at most max bytes, ending in "…" when cut, without
// splitting a rune.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const ell = "…"
	n := max - len(ell)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + ell
}

// progress sends a bounded description to the progress callback.
func (s *Stream) progress(desc string) {
	if s.onProgress != nil {
		s.onProgress(cut(strings.TrimSpace(desc), MaxProgressBytes))
	}
}

// agent names the agent for the summary.
func (s *Stream) agent() string {
	switch {
	case s.claudeInit:
		return "Claude agent"
	case strings.HasSuffix(s.toolName, "claude-agent"):
		return "Claude agent"
	case strings.HasSuffix(s.toolName, "cursor-agent"), s.cursorish:
		return "Cursor agent"
	}
	return "Coding agent"
}

// outcome describes the result event: "completed successfully in 13.4s
// (1028 output tokens)" or "failed (error_max_turns) after 2.0s". With
// agent set it is prefixed by the agent's name.
func (s *Stream) outcome(withAgent bool) string {
	r := &s.result
	var b strings.Builder
	if withAgent {
		b.WriteString(s.agent())
		b.WriteByte(' ')
	}
	failed := r.isError || strings.HasPrefix(r.subtype, "error")
	if failed {
		b.WriteString("failed")
		if st := clean(r.subtype, 64); st != "" && st != "error" && st != "success" {
			b.WriteString(" (" + st + ")")
		}
		if r.hasDuration {
			b.WriteString(" after " + seconds(r.durationMS))
		}
	} else {
		b.WriteString("completed successfully")
		if r.hasDuration {
			b.WriteString(" in " + seconds(r.durationMS))
		}
	}
	var extra []string
	if r.hasTokens && r.outputTokens >= 0 {
		extra = append(extra, strconv.FormatFloat(r.outputTokens, 'f', 0, 64)+" output tokens")
	}
	if r.hasCost && r.costUSD >= 0 {
		extra = append(extra, "$"+strconv.FormatFloat(r.costUSD, 'f', 4, 64))
	}
	if len(extra) > 0 {
		b.WriteString(" (" + strings.Join(extra, ", ") + ")")
	}
	return b.String()
}

// seconds formats milliseconds as "13.4s".
func seconds(ms float64) string {
	if ms < 0 || ms > 1e15 {
		ms = 0
	}
	return strconv.FormatFloat(ms/1000, 'f', 1, 64) + "s"
}

// Summary returns the summary of everything written so far; ok is false
// (and summary empty) when no line was an NDJSON event. An unterminated
// final line is treated as complete, so call Summary after the last Write.
// Summary may be called more than once.
func (s *Stream) Summary() (summary string, ok bool) {
	if len(s.pending) > 0 && !s.skipping {
		s.line(s.pending)
	}
	s.dropPending()
	s.skipping = false
	if !s.sawEvent {
		return "", false
	}
	var b strings.Builder
	if s.hasResult {
		b.WriteString(s.outcome(true))
		b.WriteString(".\n")
	} else {
		b.WriteString(s.agent())
		b.WriteString(" did not report a result: the stream ended before its final result event, so its work may be incomplete.\n")
	}
	s.read.write(&b, "Files read: ", ", ")
	s.written.write(&b, "Files written: ", ", ")
	s.deleted.write(&b, "Files deleted: ", ", ")
	s.commands.write(&b, "Commands run: ", "; ")
	if !s.hasResult && s.lastError != "" {
		b.WriteString("Error: " + clean(s.lastError, maxErrorBytes) + "\n")
	}
	if s.longLines > 0 {
		fmt.Fprintf(&b, "Skipped %d line(s) longer than %d bytes.\n", s.longLines, MaxLineBytes)
	}
	if s.hasResult {
		text := s.result.result
		if strings.TrimSpace(text) == "" && len(s.result.errs) > 0 {
			text = strings.Join(s.result.errs, "\n")
		}
		if text = resultText(text); text != "" {
			b.WriteString("Result:\n")
			b.WriteString(text)
			b.WriteByte('\n')
		}
	}
	return b.String(), true
}

// resultText cleans the agent's result text (drops control characters other
// than newline and tab, trims) and bounds it to MaxResultBytes.
func resultText(t string) string {
	t = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if isControl(r) {
			return -1
		}
		return r
	}, t)
	t = strings.TrimSpace(t)
	if len(t) <= MaxResultBytes {
		return t
	}
	n := MaxResultBytes
	for n > 0 && !utf8.RuneStart(t[n]) {
		n--
	}
	return t[:n] + fmt.Sprintf("\n… [result truncated: %d more bytes]", len(t)-n)
}

// list is one bounded, deduplicated, first-seen-ordered summary list.
type list struct {
	items  []string
	size   int // bytes of items, separators included
	full   bool
	seen   map[string]struct{}
	more   int
	approx bool // some of more were counted without deduplication
}

func (l *list) add(v string) {
	if v == "" {
		return
	}
	if _, dup := l.seen[v]; dup {
		return
	}
	if len(l.seen) >= maxTracked {
		l.more++
		l.approx = true
		return
	}
	if l.seen == nil {
		l.seen = make(map[string]struct{})
	}
	l.seen[v] = struct{}{}
	if !l.full && len(l.items) < MaxListEntries && l.size+len(v)+2 <= MaxListBytes {
		l.items = append(l.items, v)
		l.size += len(v) + 2
		return
	}
	l.full = true
	l.more++
}

func (l *list) write(b *strings.Builder, label, sep string) {
	if len(l.items) == 0 && l.more == 0 {
		return
	}
	b.WriteString(label)
	b.WriteString(strings.Join(l.items, sep))
	if l.more > 0 {
		if l.approx {
			fmt.Fprintf(b, " and up to %d more", l.more)
		} else {
			fmt.Fprintf(b, " and %d more", l.more)
		}
	}
	b.WriteByte('\n')
}
