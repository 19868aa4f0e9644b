package compact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func addSeeds(f *testing.F, add func(in []byte)) {
	for _, name := range []string{"cursor_garbage.ndjson", "claude_success.ndjson", "claude_error.ndjson", "claude_text.txt"} {
		add(readFixture(f, name))
	}
	tail := readFixture(f, "cursor_error.ndjson")
	add(tail[len(tail)-8000:])
	for _, l := range []string{initCursor, initClaude, resultOK, resultNoUse,
		started("readToolCall", `{"path":"/w/repo/a"}`), started("shellToolCall", `{"command":"x\ny"}`),
		claudeUse(`{"type":"tool_use","id":"t","name":"Bash","input":{"command":"ls"}}`),
		`{"type":"error","error":{"message":"m"}}`,
		`{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["e",{"message":"f"}],"usage":{"output_tokens":-1},"duration_ms":-5}`} {
		add([]byte(l + "\n"))
	}
}

// FuzzExtract: Extract never panics, its summary is bounded, valid UTF-8
// and empty exactly when ok is false, and a Stream fed the same bytes in two
// chunks split anywhere agrees.
func FuzzExtract(f *testing.F) {
	addSeeds(f, func(in []byte) { f.Add(in, uint16(len(in)/3)) })
	f.Fuzz(func(t *testing.T, in []byte, split uint16) {
		for _, tool := range []string{"devtools.cursor-agent", "devtools.claude-agent"} {
			got, ok := extract(tool, in)
			if len(got) > MaxSummaryBytes {
				t.Fatalf("summary of %d bytes > %d", len(got), MaxSummaryBytes)
			}
			if ok != (got != "") {
				t.Fatalf("ok = %v with summary %q", ok, got)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("summary is not valid UTF-8: %q", got)
			}
			if ok && !strings.HasSuffix(got, "\n") {
				t.Fatalf("summary does not end in a newline: %q", got)
			}
			at := 0
			if len(in) > 0 {
				at = int(split) % (len(in) + 1)
			}
			s := NewStream(tool)
			var progress []string
			s.OnProgress(func(d string) {
				if len(d) > MaxProgressBytes || !utf8.ValidString(d) {
					t.Fatalf("bad progress line %q", d)
				}
				progress = append(progress, d)
			})
			s.Write(in[:at])
			s.Write(in[at:])
			if got2, ok2 := s.Summary(); got2 != got || ok2 != ok {
				t.Fatalf("split at %d: Stream gives\n%q\nExtract gives\n%q", at, got2, got)
			}
		}
	})
}

// FuzzWalker: the skip-oriented walker accepts every valid JSON object, and
// reaches its end, so that no well-formed event is ever dropped as broken.
func FuzzWalker(f *testing.F) {
	addSeeds(f, func(in []byte) {
		for l := range bytes.Lines(in) {
			f.Add(bytes.TrimSuffix(l, []byte("\n")))
		}
	})
	f.Add([]byte(`{"a":[1,-0.5e+3,true,null,{"b":"\"\\"}],"c":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		i := skipWS(line, 0)
		if !json.Valid(line) || i >= len(line) || line[i] != '{' {
			return
		}
		end, ok := walkObject(line, i, func(_ []byte, vs int) (int, bool) { return skipValue(line, vs) })
		if !complete(line, end, ok) {
			t.Fatalf("walker rejects valid JSON %q (stopped at %d, ok %v)", line, end, ok)
		}
		// Extract recognises a single valid object with a string "type"
		// (keys are compared unescaped, and the first of duplicate keys
		// counts, so the check is limited to lines without either).
		var m map[string]any
		if json.Unmarshal(line, &m) != nil || bytes.ContainsAny(line, "\\\n") || bytes.Count(line, []byte(`"type"`)) != 1 {
			return
		}
		if _, isString := m["type"].(string); isString {
			if _, ok := extract("x.cursor-agent", line); !ok {
				t.Fatalf("valid event %q not recognised", line)
			}
		}
	})
}
