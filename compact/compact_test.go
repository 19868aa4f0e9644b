package compact

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite testdata fixtures and golden summaries")

func TestIsCodingAgent(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"devtools.cursor-agent", true},
		{"devtools.claude-agent", true},
		{"cursor-agent", true},
		{"claude-agent", true},
		{"team.my-cursor-agent", true},
		{"devtools.cursor-agent.v2", false},
		{"devtools.cursor", false},
		{"claude", false},
		{"cursor-agents", false},
		{"", false},
		{"devtools.Cursor-Agent", false},
	} {
		if got := IsCodingAgent(tc.name); got != tc.want {
			t.Errorf("IsCodingAgent(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Event lines used by the table tests.
const (
	initCursor  = `{"type":"system","subtype":"init","apiKeySource":"login","cwd":"/w/repo","session_id":"s","model":"gpt-5","permissionMode":"default"}`
	initClaude  = `{"type":"system","subtype":"init","cwd":"/w/api","session_id":"s","tools":["Read"],"mcp_servers":[],"model":"claude-sonnet-4-5","claude_code_version":"2.0.14"}`
	resultOK    = `{"type":"result","subtype":"success","duration_ms":13412,"duration_api_ms":13412,"is_error":false,"result":"Done.","session_id":"s","usage":{"output_tokens":1028}}`
	resultNoUse = `{"type":"result","subtype":"success","duration_ms":900,"is_error":false,"result":"Done.","session_id":"s"}`
	noResult    = " did not report a result: the stream ended before its final result event, so its work may be incomplete.\n"
)

func started(key, args string) string {
	return `{"type":"tool_call","subtype":"started","call_id":"c","tool_call":{"` + key + `":{"args":` + args + `}},"session_id":"s"}`
}

func completed(key, args, result string) string {
	return `{"type":"tool_call","subtype":"completed","call_id":"c","tool_call":{"` + key + `":{"args":` + args + `,"result":` + result + `}},"session_id":"s"}`
}

func claudeUse(blocks ...string) string {
	return `{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","content":[` + strings.Join(blocks, ",") + `]},"parent_tool_use_id":null,"session_id":"s"}`
}

// extract summarizes a whole output in one Write, as the toolbox does when
// the output arrives at once.
func extract(toolName string, ndjson []byte) (string, bool) {
	s := NewStream(toolName)
	s.Write(ndjson)
	return s.Summary()
}

func lines(ls ...string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

func TestExtractEvents(t *testing.T) {
	const cursorOK = "Cursor agent completed successfully in 13.4s (1028 output tokens).\n"
	for _, tc := range []struct {
		name   string
		tool   string
		in     []byte
		want   string
		wantOK bool
	}{
		{"init and result", "x.cursor-agent", lines(initCursor, resultOK), cursorOK + "Result:\nDone.\n", true},
		{"result without usage", "x.cursor-agent", lines(resultNoUse), "Cursor agent completed successfully in 0.9s.\nResult:\nDone.\n", true},
		{"result without duration", "x.cursor-agent", lines(`{"type":"result","subtype":"success","is_error":false,"result":"ok"}`),
			"Cursor agent completed successfully.\nResult:\nok\n", true},
		{"result with camelCase usage", "x.cursor-agent", lines(`{"type":"result","subtype":"success","duration_ms":2000,"is_error":false,"result":"ok","usage":{"inputTokens":5,"outputTokens":77}}`),
			"Cursor agent completed successfully in 2.0s (77 output tokens).\nResult:\nok\n", true},
		{"result error", "x.cursor-agent", lines(initCursor, `{"type":"result","subtype":"error","duration_ms":5210,"is_error":true,"result":"Rate limited."}`),
			"Cursor agent failed after 5.2s.\nResult:\nRate limited.\n", true},
		{"is_error with success subtype", "x.cursor-agent", lines(`{"type":"result","subtype":"success","duration_ms":100,"is_error":true,"result":"API Error: 529 overloaded"}`),
			"Cursor agent failed after 0.1s.\nResult:\nAPI Error: 529 overloaded\n", true},
		{"empty result text", "x.cursor-agent", lines(`{"type":"result","subtype":"success","duration_ms":100,"is_error":false,"result":"  "}`),
			"Cursor agent completed successfully in 0.1s.\n", true},
		{"last result wins", "x.cursor-agent", lines(resultNoUse, resultOK), cursorOK + "Result:\nDone.\n", true},
		{"read started", "x.cursor-agent", lines(initCursor, started("readToolCall", `{"path":"/w/repo/site/index.html"}`), resultOK),
			cursorOK + "Files read: site/index.html\nResult:\nDone.\n", true},
		{"read completed only is not listed", "x.cursor-agent", lines(initCursor, completed("readToolCall", `{"path":"a.txt"}`, `{"success":{"content":"hi","totalLines":1}}`), resultOK),
			cursorOK + "Result:\nDone.\n", true},
		{"edit", "x.cursor-agent", lines(started("editToolCall", `{"path":"site/a.html","strReplace":{"oldText":"a","newText":"b"}}`), resultOK),
			cursorOK + "Files written: site/a.html\nResult:\nDone.\n", true},
		{"write", "x.cursor-agent", lines(started("writeToolCall", `{"path":"site/t.html","fileText":"<p>\"x\"</p>\n"}`), resultOK),
			cursorOK + "Files written: site/t.html\nResult:\nDone.\n", true},
		{"delete", "x.cursor-agent", lines(started("deleteToolCall", `{"path":"old.html"}`), resultOK),
			cursorOK + "Files deleted: old.html\nResult:\nDone.\n", true},
		{"shell", "x.cursor-agent", lines(started("shellToolCall", `{"command":"npm test","workingDirectory":"/w/repo","timeout":30000}`), resultOK),
			cursorOK + "Commands run: npm test\nResult:\nDone.\n", true},
		{"multi-line command shows first line", "x.cursor-agent", lines(started("shellToolCall", `{"command":"cat <<EOF > a\nhello\nEOF"}`), resultOK),
			cursorOK + "Commands run: cat <<EOF > a …\nResult:\nDone.\n", true},
		{"other tools are not listed", "x.cursor-agent", lines(started("lsToolCall", `{"path":"/w"}`), started("grepToolCall", `{"pattern":"nav"}`),
			`{"type":"tool_call","subtype":"started","tool_call":{"function":{"name":"mcp_fetch","arguments":"{}"}}}`, resultOK),
			cursorOK + "Result:\nDone.\n", true},
		{"thinking and assistant are dropped", "x.cursor-agent", lines(initCursor,
			`{"type":"thinking","subtype":"delta","text":"I should read /etc/passwd","session_id":"s","timestamp_ms":1}`,
			`{"type":"thinking","subtype":"completed","session_id":"s","timestamp_ms":2}`,
			`{"type":"assistant","message":{"role":"assistant","content":[{"type":"text","text":"Reading site/x.html now"}]},"session_id":"s"}`,
			`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"prompt"}]},"session_id":"s"}`,
			resultOK), cursorOK + "Result:\nDone.\n", true},
		{"dedup keeps first-seen order", "x.cursor-agent", lines(initCursor,
			started("readToolCall", `{"path":"b.txt"}`), started("readToolCall", `{"path":"a.txt"}`),
			started("readToolCall", `{"path":"/w/repo/b.txt"}`), started("readToolCall", `{"path":"a.txt"}`),
			started("shellToolCall", `{"command":"make"}`), started("shellToolCall", `{"command":"make test"}`), started("shellToolCall", `{"command":"make"}`),
			resultOK), cursorOK + "Files read: b.txt, a.txt\nCommands run: make; make test\nResult:\nDone.\n", true},
		{"path outside cwd stays absolute", "x.cursor-agent", lines(initCursor, started("readToolCall", `{"path":"/w/repository/x"}`),
			started("readToolCall", `{"path":"/etc/hosts"}`), started("readToolCall", `{"path":"/w/repo"}`), resultOK),
			cursorOK + "Files read: /w/repository/x, /etc/hosts, .\nResult:\nDone.\n", true},
		{"keys in another order", "x.cursor-agent", lines(
			`{"session_id":"s","tool_call":{"readToolCall":{"args":{"toolCallId":"t","path":"z.go"}}},"subtype":"started","type":"tool_call"}`,
			`{"usage":{"output_tokens":5},"result":"r","is_error":false,"duration_ms":1000,"subtype":"success","type":"result"}`),
			"Cursor agent completed successfully in 1.0s (5 output tokens).\nFiles read: z.go\nResult:\nr\n", true},
		{"whitespace and CRLF", "x.cursor-agent", []byte("  " + started("readToolCall", `{ "path" : "w.txt" }`) + " \r\n" + resultOK + "\r\n"),
			cursorOK + "Files read: w.txt\nResult:\nDone.\n", true},
		{"escapes in paths and result", "x.cursor-agent", lines(started("readToolCall", `{"path":"dir\/caf\u00e9 \"q\".txt"}`),
			`{"type":"result","subtype":"success","duration_ms":1000,"is_error":false,"result":"line1\nline2\t\u00e9\u0007"}`),
			"Cursor agent completed successfully in 1.0s.\nFiles read: dir/café \"q\".txt\nResult:\nline1\nline2\té\n", true},
		{"control characters in paths", "x.cursor-agent", lines(started("readToolCall", `{"path":"a\nb\u001b[31m.txt"}`), resultOK),
			cursorOK + "Files read: a b [31m.txt\nResult:\nDone.\n", true},
		{"no result", "x.cursor-agent", lines(initCursor, started("readToolCall", `{"path":"a.txt"}`), started("writeToolCall", `{"path":"b.txt"}`)),
			"Cursor agent" + noResult + "Files read: a.txt\nFiles written: b.txt\n", true},
		{"no result, only thinking", "x.cursor-agent", lines(`{"type":"thinking","subtype":"delta","text":"x"}`),
			"Cursor agent" + noResult, true},
		{"error event without result", "x.cursor-agent", lines(initCursor, started("shellToolCall", `{"command":"ls"}`), `{"type":"error","message":"connection reset"}`),
			"Cursor agent" + noResult + "Commands run: ls\nError: connection reset\n", true},
		{"error event object", "x.cursor-agent", lines(`{"type":"error","error":{"message":"quota exceeded","code":429}}`),
			"Cursor agent" + noResult + "Error: quota exceeded\n", true},
		{"system event other than init", "x.claude-agent", lines(`{"type":"system","subtype":"compact_boundary","cwd":"/elsewhere"}`, started("readToolCall", `{"path":"/elsewhere/a"}`), resultOK),
			"Claude agent completed successfully in 13.4s (1028 output tokens).\nFiles read: /elsewhere/a\nResult:\nDone.\n", true},

		// Claude Code.
		{"claude tools", "x.claude-agent", lines(initClaude,
			claudeUse(`{"type":"text","text":"Let me look."}`, `{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/w/api/main.go"}}`, `{"type":"tool_use","id":"t2","name":"Read","input":{"file_path":"/w/api/go.mod","limit":10}}`),
			`{"type":"user","message":{"role":"user","content":[{"tool_use_id":"t1","type":"tool_result","content":"package main"}]},"session_id":"s"}`,
			claudeUse(`{"type":"tool_use","id":"t3","name":"Edit","input":{"file_path":"/w/api/main.go","old_string":"a","new_string":"b"}}`),
			claudeUse(`{"type":"tool_use","id":"t4","name":"MultiEdit","input":{"file_path":"/w/api/x.go","edits":[]}}`),
			claudeUse(`{"type":"tool_use","id":"t5","name":"Write","input":{"file_path":"/w/api/new.go","content":"package api\n"}}`),
			claudeUse(`{"type":"tool_use","id":"t6","name":"NotebookEdit","input":{"notebook_path":"/w/api/n.ipynb","new_source":""}}`),
			claudeUse(`{"type":"tool_use","id":"t7","name":"Bash","input":{"command":"go test ./...","description":"Run tests"}}`),
			claudeUse(`{"type":"tool_use","id":"t8","name":"Grep","input":{"pattern":"x"}}`, `{"type":"tool_use","id":"t9","name":"Glob","input":{"pattern":"*.go"}}`),
			`{"type":"result","subtype":"success","is_error":false,"duration_ms":48213,"duration_api_ms":51022,"num_turns":8,"result":"Added it.","session_id":"s","total_cost_usd":0.18342,"usage":{"input_tokens":23,"output_tokens":2204}}`),
			"Claude agent completed successfully in 48.2s (2204 output tokens, $0.1834).\nFiles read: main.go, go.mod\nFiles written: main.go, x.go, new.go, n.ipynb\nCommands run: go test ./...\nResult:\nAdded it.\n", true},
		{"claude detected from init", "devtools.cursor-agent", lines(initClaude, resultNoUse),
			"Claude agent completed successfully in 0.9s.\nResult:\nDone.\n", true},
		{"claude error_max_turns", "x.claude-agent", lines(initClaude,
			`{"type":"result","subtype":"error_max_turns","is_error":true,"duration_ms":61840,"num_turns":9,"session_id":"s","total_cost_usd":0.2291,"usage":{"output_tokens":3120},"errors":["Reached maximum number of turns (8)"]}`),
			"Claude agent failed (error_max_turns) after 61.8s (3120 output tokens, $0.2291).\nResult:\nReached maximum number of turns (8)\n", true},
		{"claude error_during_execution without text", "x.claude-agent", lines(
			`{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":1000}`),
			"Claude agent failed (error_during_execution) after 1.0s.\n", true},
		{"claude stream_event lines dropped", "x.claude-agent", lines(
			`{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}},"session_id":"s"}`, resultNoUse),
			"Claude agent completed successfully in 0.9s.\nResult:\nDone.\n", true},
		{"agent named by events when tool name does not say", "tool", lines(`{"type":"thinking","subtype":"delta","text":"x"}`, resultNoUse),
			"Cursor agent completed successfully in 0.9s.\nResult:\nDone.\n", true},
		{"agent unknown", "tool", lines(resultNoUse), "Coding agent completed successfully in 0.9s.\nResult:\nDone.\n", true},

		// Bad lines.
		{"truncated last line skipped", "x.cursor-agent", []byte(initCursor + "\n" + started("readToolCall", `{"path":"a.txt"}`) + "\n" + `{"type":"result","subtype":"success","result":"Do`),
			"Cursor agent" + noResult + "Files read: a.txt\n", true},
		{"broken JSON event skipped", "x.cursor-agent", lines(initCursor, `{"type":"tool_call","subtype":"started","tool_call":{"readToolCall":{"args":{"path":"broken"`,
			started("readToolCall", `{"path":"ok"}`)+` trailing`, `{"type":"tool_call","subtype":"started","tool_call":{"readToolCall":{"args":{"path":"x"}}} }}`, resultOK),
			cursorOK + "Result:\nDone.\n", true},
		{"garbage before events", "x.cursor-agent", lines("Starting cursor-agent...", "{oops", `{"type":"thinking"`, "[1,2,3]", resultNoUse),
			"Cursor agent completed successfully in 0.9s.\nResult:\nDone.\n", true},

		// Not NDJSON.
		{"empty", "x.cursor-agent", nil, "", false},
		{"blank lines", "x.cursor-agent", []byte("\n\n  \r\n"), "", false},
		{"plain text", "x.claude-agent", []byte("I updated the handlers.\nAll tests pass.\n"), "", false},
		{"JSON arrays", "x.cursor-agent", lines(`[{"type":"result"}]`, `[]`), "", false},
		{"objects without type", "x.cursor-agent", lines(`{"result":"x"}`, `{"Type":"result"}`), "", false},
		{"type not a string", "x.cursor-agent", lines(`{"type":1}`, `{"type":null}`, `{"type":{"a":"result"}}`), "", false},
		{"invalid JSON with a type", "x.cursor-agent", lines(`{"type":"result","subtype":"success",}`, `{"type":"thinking" "x"}`, `{"type":"result"} x`), "", false},
		{"number literal garbage", "x.cursor-agent", lines(`{"type":"result","duration_ms":1e,"result":"x"}`), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := extract(tc.tool, tc.in)
			if ok != tc.wantOK || got != tc.want {
				t.Errorf("Extract = %v\n%s\nwant %v\n%s", ok, got, tc.wantOK, tc.want)
			}
			if !ok && got != "" {
				t.Errorf("not ok but summary %q", got)
			}
			// The incremental path agrees, byte by byte.
			s := NewStream(tc.tool)
			for i := range tc.in {
				s.Write(tc.in[i : i+1])
			}
			if got2, ok2 := s.Summary(); got2 != got || ok2 != ok {
				t.Errorf("Stream byte-by-byte = %v\n%s\nwant\n%s", ok2, got2, got)
			}
		})
	}
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("%v (run go test -run TestFixtures -update)", err)
	}
	return b
}

// TestFixtures checks that testdata holds exactly what the generator makes,
// so that fixtures and generator cannot drift apart; -update rewrites them.
func TestFixtures(t *testing.T) {
	for name, want := range fixtures() {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.MkdirAll("testdata", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := readFixture(t, name); !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output; run go test -run TestFixtures -update", path)
		}
	}
}

// TestGolden compares the summary of every NDJSON fixture with its golden
// file; -update rewrites the golden files.
func TestGolden(t *testing.T) {
	names, err := filepath.Glob("testdata/*.ndjson")
	if err != nil || len(names) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, path := range names {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			in := readFixture(t, name)
			got, ok := extract(fixtureTool(name), in)
			if !ok {
				t.Fatalf("fixture %s not recognised as NDJSON", name)
			}
			golden := strings.TrimSuffix(path, ".ndjson") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("summary of %s:\n%s\nwant (%s):\n%s", name, got, golden, want)
			}
			if len(got) > len(in)/10 && len(in) > 20<<10 {
				t.Errorf("summary is %d bytes for %d input bytes: not compact", len(got), len(in))
			}
		})
	}
}

// TestFixtureShape checks that the success fixture is the kind of stream the
// design describes: about 100 KB, most bytes in thinking deltas and
// completed tool calls.
func TestFixtureShape(t *testing.T) {
	in := readFixture(t, "cursor_success.ndjson")
	if len(in) < 80<<10 || len(in) > 140<<10 {
		t.Errorf("success fixture is %d bytes, want about 100 KB", len(in))
	}
	var thinking, completedBytes int
	for l := range bytes.Lines(in) {
		switch {
		case bytes.HasPrefix(l, []byte(`{"type":"thinking"`)):
			thinking += len(l)
		case bytes.HasPrefix(l, []byte(`{"type":"tool_call","subtype":"completed"`)):
			completedBytes += len(l)
		}
	}
	if share := float64(thinking+completedBytes) / float64(len(in)); share < 0.8 {
		t.Errorf("thinking + completed events are %.0f%% of the fixture, want most of it", share*100)
	}
}

func TestPlainTextFixture(t *testing.T) {
	in := readFixture(t, "claude_text.txt")
	if s, ok := extract("devtools.claude-agent", in); ok || s != "" {
		t.Errorf("text output: Extract = %q, %v; want \"\", false", s, ok)
	}
}

// TestStreamChunks feeds every fixture to a Stream in chunks of random
// sizes and checks that the summary equals Extract's.
func TestStreamChunks(t *testing.T) {
	names, _ := filepath.Glob("testdata/*.ndjson")
	names = append(names, "testdata/claude_text.txt")
	rng := rand.New(rand.NewPCG(1, 2))
	for _, path := range names {
		name := filepath.Base(path)
		in := readFixture(t, name)
		want, wantOK := extract(fixtureTool(name), in)
		for round := range 20 {
			s := NewStream(fixtureTool(name))
			max := []int{1, 7, 64, 4096, 1 << 16}[round%5]
			for rest := in; len(rest) > 0; {
				n := min(1+rng.IntN(max), len(rest))
				if w, err := s.Write(rest[:n]); w != n || err != nil {
					t.Fatalf("Write = %d, %v", w, err)
				}
				rest = rest[n:]
			}
			got, ok := s.Summary()
			if got != want || ok != wantOK {
				t.Fatalf("%s, chunks up to %d: summary\n%s\nwant\n%s", name, max, got, want)
			}
		}
	}
}

// TestStreamSplitEverywhere splits a stream in two at every byte offset,
// including inside multi-byte runes and in the middle of lines.
func TestStreamSplitEverywhere(t *testing.T) {
	in := lines(initCursor,
		started("readToolCall", `{"path":"/w/repo/文档/café.md"}`),
		`{"type":"thinking","subtype":"delta","text":"думаю…"}`,
		started("shellToolCall", `{"command":"echo 'ünïcødé ✓'"}`),
		`{"type":"result","subtype":"success","duration_ms":4200,"is_error":false,"result":"Wrote 文档/café.md ✓","usage":{"output_tokens":12}}`)
	want, ok := extract("x.cursor-agent", in)
	wantText := "Cursor agent completed successfully in 4.2s (12 output tokens).\nFiles read: 文档/café.md\nCommands run: echo 'ünïcødé ✓'\nResult:\nWrote 文档/café.md ✓\n"
	if !ok || want != wantText {
		t.Fatalf("Extract = %v\n%s\nwant\n%s", ok, want, wantText)
	}
	inRune := 0
	for i := 0; i <= len(in); i++ {
		if i < len(in) && !utf8.RuneStart(in[i]) {
			inRune++
		}
		s := NewStream("x.cursor-agent")
		s.Write(in[:i])
		s.Write(in[i:])
		if got, ok := s.Summary(); !ok || got != want {
			t.Fatalf("split at %d: %v\n%s", i, ok, got)
		}
	}
	if inRune == 0 {
		t.Fatal("test input has no multi-byte runes")
	}
}

// TestStreamSummaryTwice checks that Summary is repeatable and that an
// unterminated final line is used.
func TestStreamSummaryTwice(t *testing.T) {
	s := NewStream("x.cursor-agent")
	s.Write([]byte(initCursor + "\n" + resultOK)) // no final newline
	a, ok1 := s.Summary()
	b, ok2 := s.Summary()
	if !ok1 || !ok2 || a != b || !strings.Contains(a, "completed successfully") {
		t.Errorf("Summary twice: %q %v / %q %v", a, ok1, b, ok2)
	}
}

func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		tool, fixture string
		want          []string
	}{
		{"devtools.cursor-agent", "cursor_success.ndjson", []string{
			"started (model Claude 4.5 Sonnet)",
			"using ls",
			"reading site/index.html",
			"reading site/style.css",
			"using grep",
			"reading site/index.html",
			"writing site/technologies.html",
			"editing site/index.html",
			"editing site/about.html",
			"running npm test",
			"completed successfully in 13.4s (1028 output tokens)",
		}},
		{"devtools.claude-agent", "claude_error.ndjson", []string{
			"started (model claude-sonnet-4-5-20250929)",
			"using Glob",
			"reading handlers/users.go",
			"reading handlers/users_test.go",
			"reading go.mod",
			"using Grep",
			"writing handlers/pagination.go",
			"editing handlers/users.go",
			"running go test ./handlers/...",
			"running go vet ./... …",
			"failed (error_max_turns) after 61.8s (3120 output tokens, $0.2291)",
		}},
	} {
		var got []string
		s := NewStream(tc.tool)
		s.OnProgress(func(d string) { got = append(got, d) })
		s.Write(readFixture(t, tc.fixture))
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s progress:\n%s\nwant\n%s", tc.fixture, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}
}

func TestProgressBounded(t *testing.T) {
	long := strings.Repeat("é", 1000)
	var got []string
	s := NewStream("x.cursor-agent")
	s.OnProgress(func(d string) { got = append(got, d) })
	s.Write(lines(started("shellToolCall", `{"command":"`+long+`"}`), `{"type":"error","message":"`+long+`"}`,
		`{"type":"system","subtype":"init","model":"`+long+`"}`))
	if len(got) != 3 {
		t.Fatalf("got %d progress lines", len(got))
	}
	for _, d := range got {
		if len(d) > MaxProgressBytes || !utf8.ValidString(d) {
			t.Errorf("progress line of %d bytes (valid UTF-8: %v)", len(d), utf8.ValidString(d))
		}
	}
}

func TestLimitListEntries(t *testing.T) {
	var ls []string
	for i := range MaxListEntries + 12 {
		ls = append(ls, started("readToolCall", fmt.Sprintf(`{"path":"f%d.go"}`, i)))
		ls = append(ls, started("readToolCall", fmt.Sprintf(`{"path":"f%d.go"}`, i))) // duplicates are not counted
	}
	got, _ := extract("x.cursor-agent", lines(append(ls, resultOK)...))
	line := strings.Split(got, "\n")[1]
	if n := strings.Count(line, ", ") + 1; n != MaxListEntries {
		t.Errorf("%d entries shown, want %d: %s", n, MaxListEntries, line)
	}
	if !strings.HasSuffix(line, fmt.Sprintf("f%d.go and 12 more", MaxListEntries-1)) {
		t.Errorf("line does not end with the count of the rest: %s", line)
	}
}

func TestLimitListBytes(t *testing.T) {
	var ls []string
	for i := range 40 {
		ls = append(ls, started("writeToolCall", fmt.Sprintf(`{"path":"%s/%d.txt"}`, strings.Repeat("d", 200), i)))
	}
	got, _ := extract("x.cursor-agent", lines(ls...))
	line := strings.Split(got, "\n")[1]
	if !strings.HasPrefix(line, "Files written: ") || len(line) > len("Files written: ")+MaxListBytes+32 {
		t.Errorf("line of %d bytes, want at most %d: %.80s", len(line), MaxListBytes, line)
	}
	shown := strings.Count(line, ", ") + 1
	if !strings.HasSuffix(line, fmt.Sprintf(" and %d more", 40-shown)) {
		t.Errorf("rest not counted: ...%s", line[len(line)-40:])
	}
}

func TestLimitEntryBytes(t *testing.T) {
	long := strings.Repeat("ü", MaxEntryBytes) // 2 bytes each
	got, _ := extract("x.cursor-agent", lines(started("readToolCall", `{"path":"`+long+`"}`), started("shellToolCall", `{"command":"`+long+`"}`)))
	for _, l := range strings.Split(got, "\n")[1:3] {
		entry := l[strings.Index(l, ": ")+2:]
		if len(entry) > MaxEntryBytes || !strings.HasSuffix(entry, "…") || !utf8.ValidString(entry) {
			t.Errorf("entry of %d bytes: %.40q…", len(entry), entry)
		}
	}
}

func TestLimitResultBytes(t *testing.T) {
	text := strings.Repeat("ж", MaxResultBytes) // 2 bytes each: twice the limit
	got, _ := extract("x.cursor-agent", lines(`{"type":"result","subtype":"success","is_error":false,"result":"`+text+`"}`))
	res := got[strings.Index(got, "Result:\n")+len("Result:\n"):]
	body, note, found := strings.Cut(res, "\n… [result truncated: ")
	if !found || len(body) > MaxResultBytes || !utf8.ValidString(body) {
		t.Fatalf("result of %d bytes, truncation note found: %v", len(body), found)
	}
	if want := fmt.Sprintf("%d more bytes]\n", len(text)-len(body)); note != want {
		t.Errorf("note %q, want %q", note, want)
	}
}

func TestLimitTracked(t *testing.T) {
	var b bytes.Buffer
	for i := range maxTracked + 100 {
		b.WriteString(started("readToolCall", fmt.Sprintf(`{"path":"p%d"}`, i)))
		b.WriteByte('\n')
	}
	b.WriteString(started("readToolCall", `{"path":"p1"}`) + "\n") // duplicate of a shown entry: still deduplicated
	s := NewStream("x.cursor-agent")
	s.Write(b.Bytes())
	if len(s.read.seen) > maxTracked {
		t.Errorf("dedup set holds %d entries, limit %d", len(s.read.seen), maxTracked)
	}
	got, _ := s.Summary()
	if want := fmt.Sprintf(" and up to %d more\n", maxTracked+100-MaxListEntries); !strings.Contains(got, want) {
		t.Errorf("summary lacks %q:\n%.300s", want, got)
	}
}

// TestLimitLineBytes: a line longer than MaxLineBytes is skipped, whole or
// in chunks, without being buffered; a line of exactly MaxLineBytes is
// parsed.
func TestLimitLineBytes(t *testing.T) {
	pad := func(line string, n int) string { // pad line to n bytes inside its last string
		return line[:len(line)-2] + strings.Repeat("x", n-len(line)) + line[len(line)-2:]
	}
	exact := pad(`{"type":"result","subtype":"success","is_error":false,"result":"big"}`, MaxLineBytes)
	over := pad(`{"type":"result","subtype":"success","is_error":false,"result":"big"}`, MaxLineBytes+1)
	if len(exact) != MaxLineBytes || len(over) != MaxLineBytes+1 {
		t.Fatal("bad padding")
	}
	huge := pad(started("readToolCall", `{"path":"huge"}`), 5*MaxLineBytes)
	for _, tc := range []struct {
		name, in, want string
	}{
		{"exact", initCursor + "\n" + exact + "\n", "completed successfully"},
		{"over", initCursor + "\n" + over + "\n", noResult + "Skipped 1 line(s) longer than"},
		{"over, unterminated", initCursor + "\n" + over, noResult + "Skipped 1 line(s) longer than"},
		{"huge then more", initCursor + "\n" + huge + "\n" + started("readToolCall", `{"path":"after"}`) + "\n", "Files read: after\nSkipped 1 line(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, _ := extract("x.cursor-agent", []byte(tc.in))
			if !strings.Contains(whole, tc.want) || strings.Contains(whole, "huge") {
				t.Errorf("Extract:\n%.400s\nwant it to contain %q", whole, tc.want)
			}
			s := NewStream("x.cursor-agent")
			maxPending := 0
			for rest := []byte(tc.in); len(rest) > 0; {
				n := min(64<<10, len(rest))
				s.Write(rest[:n])
				rest = rest[n:]
				maxPending = max(maxPending, cap(s.pending))
			}
			if maxPending > 2*MaxLineBytes {
				t.Errorf("Stream buffered %d bytes for one line", maxPending)
			}
			if got, _ := s.Summary(); got != whole {
				t.Errorf("Stream:\n%.400s\nwant\n%.400s", got, whole)
			}
		})
	}
}

// TestSummaryBound builds the largest summary the limits allow and checks
// it stays under MaxSummaryBytes.
func TestSummaryBound(t *testing.T) {
	var ls []string
	long := strings.Repeat("ñ", MaxEntryBytes)
	for i := range 3 * MaxListEntries {
		for _, key := range []string{"readToolCall", "writeToolCall", "deleteToolCall"} {
			ls = append(ls, started(key, fmt.Sprintf(`{"path":"%d%s"}`, i, long)))
		}
		ls = append(ls, started("shellToolCall", fmt.Sprintf(`{"command":"%d%s"}`, i, long)))
	}
	ls = append(ls, `{"type":"error","message":"`+strings.Repeat("e", 10000)+`"}`)
	ls = append(ls, `{"type":"result","subtype":"`+strings.Repeat("s", 1000)+`","is_error":true,"duration_ms":1e300,"total_cost_usd":1e300,"usage":{"output_tokens":1e300},"result":"`+strings.Repeat("r", 4*MaxResultBytes)+`"}`)
	got, ok := extract("x.cursor-agent", lines(ls...))
	if !ok || len(got) > MaxSummaryBytes {
		t.Errorf("summary of %d bytes, bound %d", len(got), MaxSummaryBytes)
	}
	got2, _ := extract("x.cursor-agent", lines(ls[:len(ls)-1]...)) // no result: the error line is shown
	if len(got2) > MaxSummaryBytes || !strings.Contains(got2, "Error: eee") {
		t.Errorf("no-result summary of %d bytes, bound %d", len(got2), MaxSummaryBytes)
	}
}

// TestDeepNesting: adversarial nesting is walked in linear time and does not
// overflow anything.
func TestDeepNesting(t *testing.T) {
	deep := strings.Repeat(`{"message":`, 40000) + `"x"` + strings.Repeat("}", 40000)
	in := lines(initCursor, `{"type":"error","error":`+deep+`}`,
		`{"type":"result","subtype":"error","errors":[`+deep+`],"usage":`+deep+`}`,
		`{"type":"tool_call","subtype":"started","tool_call":{"readToolCall":{"args":`+deep+`}}}`,
		`{"type":"assistant","message":{"content":[`+strings.Repeat("[", 40000)+strings.Repeat("]", 40000)+`]}}`)
	got, ok := extract("x.cursor-agent", in)
	if !ok || !strings.HasPrefix(got, "Cursor agent failed.") {
		t.Errorf("got %v %q", ok, got)
	}
}

// TestLimitPerEvent: one assistant event yields at most maxToolsPerEvent
// tool uses, one result event at most maxResultErrors error texts.
func TestLimitPerEvent(t *testing.T) {
	var blocks, errs []string
	for i := range 3 * maxToolsPerEvent {
		blocks = append(blocks, fmt.Sprintf(`{"type":"tool_use","id":"t%d","name":"Read","input":{"file_path":"f%d"}}`, i, i))
		errs = append(errs, fmt.Sprintf(`"e%d"`, i))
	}
	ev := parseLine([]byte(claudeUse(blocks...)), true)
	if ev.kind != evTools || len(ev.tools) != maxToolsPerEvent {
		t.Errorf("assistant event: kind %d, %d tools, want %d", ev.kind, len(ev.tools), maxToolsPerEvent)
	}
	ev = parseLine([]byte(`{"type":"result","subtype":"error_during_execution","is_error":true,"errors":[`+strings.Join(errs, ",")+`]}`), true)
	if ev.kind != evResult || len(ev.errs) != maxResultErrors {
		t.Errorf("result event: kind %d, %d errors, want %d", ev.kind, len(ev.errs), maxResultErrors)
	}
}
