package compact

// This file generates the stream fixtures in testdata/. The event shapes
// follow Cursor CLI's documented stream-json output (system/init, user,
// thinking/delta, thinking/completed, assistant, tool_call/started and
// tool_call/completed with readToolCall/writeToolCall/editToolCall/
// shellToolCall/lsToolCall/grepToolCall payloads, result) and Claude Code's
// stream-json output (system/init with claude_code_version and tools,
// assistant messages with tool_use blocks, user messages with tool_result
// blocks, result with usage and total_cost_usd). Keys are written in the
// order the CLIs write them ("type" first), because the compactor's fast
// path relies on nothing else but benefits from that.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
)

// obj builds a JSON object from alternating keys and values, keeping the
// key order. Values that are json.RawMessage are used as they are.
func obj(kvs ...any) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; i+1 < len(kvs); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(enc(kvs[i].(string)))
		b.WriteByte(':')
		b.Write(enc(kvs[i+1]))
	}
	b.WriteByte('}')
	return b.Bytes()
}

// arr builds a JSON array.
func arr(vs ...any) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, v := range vs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(enc(v))
	}
	b.WriteByte(']')
	return b.Bytes()
}

// enc encodes v the way a JavaScript CLI would: no HTML escaping.
func enc(v any) []byte {
	if r, ok := v.(json.RawMessage); ok {
		return r
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

type gen struct {
	buf     bytes.Buffer
	rng     *rand.Rand
	session string
	ts      int64
	call    int
}

func newGen(seed uint64) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), ts: 1770823434041}
	g.session = g.uuid()
	return g
}

func (g *gen) uuid() string {
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", g.rng.Uint32(), g.rng.Uint32()&0xffff,
		g.rng.Uint32()&0xfff, g.rng.Uint32()&0xfff, g.rng.Uint64()&0xffffffffffff)
}

func (g *gen) emit(line json.RawMessage) {
	g.buf.Write(line)
	g.buf.WriteByte('\n')
}

func (g *gen) tick() int64 {
	g.ts += int64(5 + g.rng.IntN(60))
	return g.ts
}

var words = strings.Fields(`the page layout should match existing navigation header footer
styles so I need to check how index html links the stylesheet and which classes
are used for cards then create a new technologies page listing frameworks tools
and languages with short descriptions keep it accessible semantic markup headings
list items responsive grid reuse the same container and nav component update links
on every page so the new page is reachable also run the tests to make sure nothing
broke maybe the build script validates html let me look at package json first`)

func (g *gen) sentence(n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = words[g.rng.IntN(len(words))]
	}
	return strings.Join(ws, " ")
}

// thinking emits one thinking phase of n token deltas.
func (g *gen) thinking(n int) {
	for range n {
		tok := words[g.rng.IntN(len(words))]
		if g.rng.IntN(4) == 0 {
			tok = tok + ","
		}
		g.emit(obj("type", "thinking", "subtype", "delta", "text", " "+tok,
			"session_id", g.session, "timestamp_ms", g.tick()))
	}
	g.emit(obj("type", "thinking", "subtype", "completed", "session_id", g.session, "timestamp_ms", g.tick()))
}

func (g *gen) assistant(text string, mid bool) {
	msg := obj("role", "assistant", "content", arr(obj("type", "text", "text", text)))
	if mid {
		g.emit(obj("type", "assistant", "message", msg, "session_id", g.session,
			"model_call_id", g.uuid()+"-0", "timestamp_ms", g.tick()))
		return
	}
	g.emit(obj("type", "assistant", "message", msg, "session_id", g.session))
}

// cursorTool emits a tool_call started/completed pair. result == nil leaves
// out the completed event.
func (g *gen) cursorTool(key string, args, result json.RawMessage) {
	g.call++
	id := fmt.Sprintf("toolu_%s\nfc_%x", g.uuid()[:8], g.rng.Uint64())
	mcid := g.uuid() + "-1"
	g.emit(obj("type", "tool_call", "subtype", "started", "call_id", id,
		"tool_call", obj(key, obj("args", args)), "model_call_id", mcid,
		"session_id", g.session, "timestamp_ms", g.tick()))
	if result != nil {
		g.emit(obj("type", "tool_call", "subtype", "completed", "call_id", id,
			"tool_call", obj(key, obj("args", args, "result", result)), "model_call_id", mcid,
			"session_id", g.session, "timestamp_ms", g.tick()))
	}
}

func (g *gen) html(title string, sections int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n  <meta charset=\"utf-8\">\n  <title>%s</title>\n  <link rel=\"stylesheet\" href=\"style.css\">\n</head>\n<body>\n  <nav class=\"nav\">\n    <a href=\"index.html\">Home</a>\n    <a href=\"about.html\">About</a>\n  </nav>\n  <main class=\"container\">\n", title)
	for i := range sections {
		fmt.Fprintf(&b, "    <section class=\"card\" id=\"s%d\">\n      <h2>%s</h2>\n      <p>%s.</p>\n    </section>\n", i, g.sentence(3), g.sentence(18))
	}
	b.WriteString("  </main>\n  <footer>&copy; 2026 Site Demo</footer>\n</body>\n</html>\n")
	return b.String()
}

func (g *gen) css(rules int) string {
	var b strings.Builder
	for i := range rules {
		fmt.Fprintf(&b, ".rule-%d {\n  margin: %dpx;\n  padding: %dpx %dpx;\n  color: #%06x;\n}\n", i, g.rng.IntN(32), g.rng.IntN(16), g.rng.IntN(16), g.rng.IntN(1<<24))
	}
	return b.String()
}

const cursorCWD = "/workspace/repos/site-demo"

// cursorStream generates a realistic Cursor CLI stream-json run of about
// 100 KB: most bytes are thinking deltas and completed tool calls that echo
// file contents. outcome is "success" or "error"; cut > 0 truncates the
// stream to that many bytes (cutting its last line).
func cursorStream(seed uint64, outcome string) []byte {
	g := newGen(seed)
	g.emit(obj("type", "system", "subtype", "init", "apiKeySource", "login", "cwd", cursorCWD,
		"session_id", g.session, "model", "Claude 4.5 Sonnet", "permissionMode", "default"))
	g.emit(obj("type", "user", "message", obj("role", "user", "content", arr(obj("type", "text",
		"text", "Create site/technologies.html matching the layout of the other pages and link it from the nav."))),
		"session_id", g.session))
	g.thinking(90)
	g.assistant("I'll look at the existing pages and stylesheet first.", true)
	g.cursorTool("lsToolCall", obj("path", cursorCWD+"/site", "ignore", arr(), "toolCallId", "call_ls"),
		obj("success", obj("directoryTreeRoot", obj("absPath", cursorCWD+"/site", "childrenFiles",
			arr(obj("name", "index.html"), obj("name", "about.html"), obj("name", "style.css")), "childrenDirs", arr()))))
	index := g.html("Site Demo", 14)
	g.cursorTool("readToolCall", obj("path", cursorCWD+"/site/index.html"),
		obj("success", obj("content", index, "isEmpty", false, "exceededLimit", false,
			"totalLines", strings.Count(index, "\n"), "totalChars", len(index))))
	style := g.css(70)
	g.cursorTool("readToolCall", obj("path", "site/style.css"),
		obj("success", obj("content", style, "isEmpty", false, "exceededLimit", false,
			"totalLines", strings.Count(style, "\n"), "totalChars", len(style))))
	g.thinking(160)
	g.cursorTool("grepToolCall", obj("pattern", "<nav", "path", cursorCWD+"/site", "outputMode", "content"),
		obj("success", obj("workspaceResults", obj(cursorCWD, obj("content", obj("matches", arr(
			obj("file", "site/index.html", "matches", arr(obj("lineNumber", 10, "content", "  <nav class=\"nav\">"))),
			obj("file", "site/about.html", "matches", arr(obj("lineNumber", 10, "content", "  <nav class=\"nav\">"))))))))))
	g.cursorTool("readToolCall", obj("path", cursorCWD+"/site/index.html"),
		obj("success", obj("content", index, "isEmpty", false, "exceededLimit", false,
			"totalLines", strings.Count(index, "\n"), "totalChars", len(index))))
	g.thinking(170)
	g.assistant("Now I'll create the technologies page with the same structure.", true)
	page := g.html("Technologies", 16)
	g.cursorTool("writeToolCall", obj("path", cursorCWD+"/site/technologies.html", "fileText", page, "toolCallId", "call_w1"),
		obj("success", obj("path", cursorCWD+"/site/technologies.html", "linesCreated", strings.Count(page, "\n"), "fileSize", len(page))))
	for _, f := range []string{"index.html", "about.html"} {
		diff := "@@ -10,4 +10,5 @@\n   <nav class=\"nav\">\n     <a href=\"index.html\">Home</a>\n     <a href=\"about.html\">About</a>\n+    <a href=\"technologies.html\">Technologies</a>\n   </nav>\n"
		g.cursorTool("editToolCall", obj("path", cursorCWD+"/site/"+f,
			"strReplace", obj("oldText", "<a href=\"about.html\">About</a>\n", "newText", "<a href=\"about.html\">About</a>\n    <a href=\"technologies.html\">Technologies</a>\n")),
			obj("success", obj("path", cursorCWD+"/site/"+f, "linesAdded", 1, "linesRemoved", 0, "diffString", diff)))
	}
	g.thinking(120)
	g.cursorTool("shellToolCall", obj("command", "npm test", "workingDirectory", cursorCWD, "timeout", 30000,
		"simpleCommands", arr("npm"), "isBackground", false, "timeoutBehavior", "TIMEOUT_BEHAVIOR_BACKGROUND"),
		obj("success", obj("command", "npm test", "exitCode", 0,
			"stdout", "\n> site-demo@1.0.0 test\n> html-validate site/*.html\n\n"+strings.Repeat("✔ site/technologies.html: no errors\n", 6), "stderr", "", "executionTime", 2231)))
	if outcome == "error" {
		g.thinking(40)
		g.cursorTool("shellToolCall", obj("command", "npm run deploy -- --prod", "workingDirectory", cursorCWD),
			obj("failure", obj("command", "npm run deploy -- --prod", "exitCode", 1, "stdout", "", "stderr", "Error: missing DEPLOY_TOKEN\n")))
		g.emit(obj("type", "result", "subtype", "error", "duration_ms", 21877, "duration_api_ms", 21877,
			"is_error", true, "result", "Deployment failed: npm run deploy exited with status 1 (missing DEPLOY_TOKEN). The technologies page was created and linked, but it is not deployed.",
			"session_id", g.session, "request_id", g.uuid()))
		return g.buf.Bytes()
	}
	g.thinking(60)
	final := "Created technologies.html with matching layout and updated nav links."
	g.assistant(final, false)
	g.emit(obj("type", "result", "subtype", "success", "duration_ms", 13412, "duration_api_ms", 13412,
		"is_error", false, "result", final, "session_id", g.session, "request_id", g.uuid(),
		"usage", obj("output_tokens", 1028)))
	return g.buf.Bytes()
}

// cutStream truncates a stream in the middle of the line that holds
// byte at fraction f of it, as when output is capped.
func cutStream(b []byte, f float64) []byte {
	n := int(float64(len(b)) * f)
	if i := bytes.IndexByte(b[n:], '\n'); i >= 0 {
		n += i / 2
	}
	return append([]byte(nil), b[:n]...)
}

const claudeCWD = "/workspace/repos/api"

func (g *gen) claudeAssistant(content ...any) {
	g.emit(obj("type", "assistant", "message", obj("id", "msg_"+g.uuid()[:24], "type", "message", "role", "assistant",
		"model", "claude-sonnet-4-5-20250929", "content", arr(content...), "stop_reason", nil, "stop_sequence", nil,
		"usage", obj("input_tokens", 4, "cache_creation_input_tokens", g.rng.IntN(3000), "cache_read_input_tokens", 12000+g.rng.IntN(9000), "output_tokens", 30+g.rng.IntN(400), "service_tier", "standard")),
		"parent_tool_use_id", nil, "session_id", g.session, "uuid", g.uuid()))
}

func (g *gen) toolUse(name string, input json.RawMessage) (json.RawMessage, string) {
	id := fmt.Sprintf("toolu_01%s", strings.ReplaceAll(g.uuid(), "-", "")[:22])
	return obj("type", "tool_use", "id", id, "name", name, "input", input), id
}

func (g *gen) toolResult(id, content string, isError bool) {
	g.emit(obj("type", "user", "message", obj("role", "user", "content", arr(obj("tool_use_id", id, "type", "tool_result", "content", content, "is_error", isError))),
		"parent_tool_use_id", nil, "session_id", g.session, "uuid", g.uuid()))
}

func (g *gen) goFile(pkg string, funcs int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\nimport (\n\t\"encoding/json\"\n\t\"net/http\"\n)\n\n", pkg)
	for i := range funcs {
		fmt.Fprintf(&b, "// Handle%d %s.\nfunc Handle%d(w http.ResponseWriter, r *http.Request) {\n\tq := r.URL.Query().Get(\"q%d\")\n\tjson.NewEncoder(w).Encode(map[string]string{\"q\": q})\n}\n\n", i, g.sentence(8), i, i)
	}
	return b.String()
}

// numbered renders file content the way Claude Code's Read tool returns it.
func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		fmt.Fprintf(&b, "%6d→%s\n", i+1, l)
	}
	return b.String()
}

// claudeStream generates a Claude Code stream-json run (--verbose
// --output-format stream-json). outcome is "success" or "error_max_turns".
func claudeStream(seed uint64, outcome string) []byte {
	g := newGen(seed)
	g.emit(obj("type", "system", "subtype", "init", "cwd", claudeCWD, "session_id", g.session,
		"tools", arr("Task", "Bash", "Glob", "Grep", "ExitPlanMode", "Read", "Edit", "MultiEdit", "Write", "NotebookEdit", "WebFetch", "TodoWrite", "WebSearch", "BashOutput", "KillShell"),
		"mcp_servers", arr(), "model", "claude-sonnet-4-5-20250929", "permissionMode", "acceptEdits",
		"slash_commands", arr("compact", "context", "cost", "init", "review"), "apiKeySource", "none",
		"claude_code_version", "2.0.14", "output_style", "default", "agents", arr("general-purpose"), "uuid", g.uuid()))
	tu, id := g.toolUse("Glob", obj("pattern", "handlers/**/*.go"))
	g.claudeAssistant(obj("type", "text", "text", "I'll start by finding the handler files."), tu)
	g.toolResult(id, claudeCWD+"/handlers/users.go\n"+claudeCWD+"/handlers/users_test.go\n"+claudeCWD+"/handlers/orders.go", false)
	users := g.goFile("handlers", 12)
	tu, id = g.toolUse("Read", obj("file_path", claudeCWD+"/handlers/users.go"))
	g.claudeAssistant(tu)
	g.toolResult(id, numbered(users), false)
	tests := g.goFile("handlers", 6)
	tu1, id1 := g.toolUse("Read", obj("file_path", claudeCWD+"/handlers/users_test.go"))
	tu2, id2 := g.toolUse("Read", obj("file_path", claudeCWD+"/go.mod"))
	g.claudeAssistant(tu1, tu2)
	g.toolResult(id1, numbered(tests), false)
	g.toolResult(id2, numbered("module example.com/api\n\ngo 1.26\n"), false)
	tu, id = g.toolUse("Grep", obj("pattern", "Limit", "path", claudeCWD, "output_mode", "files_with_matches"))
	g.claudeAssistant(tu)
	g.toolResult(id, "No files found", false)
	page := g.goFile("handlers", 4)
	tu, id = g.toolUse("Write", obj("file_path", claudeCWD+"/handlers/pagination.go", "content", page))
	g.claudeAssistant(obj("type", "text", "text", "I'll add a pagination helper and use it in the users handler."), tu)
	g.toolResult(id, "File created successfully at: "+claudeCWD+"/handlers/pagination.go", false)
	tu, id = g.toolUse("Edit", obj("file_path", claudeCWD+"/handlers/users.go", "old_string", "\tq := r.URL.Query().Get(\"q0\")", "new_string", "\tq := r.URL.Query().Get(\"q0\")\n\tp := ParsePage(r)", "replace_all", false))
	g.claudeAssistant(tu)
	g.toolResult(id, "The file "+claudeCWD+"/handlers/users.go has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n"+numbered(users[:600]), false)
	tu, id = g.toolUse("Bash", obj("command", "go test ./handlers/...", "description", "Run handler tests"))
	g.claudeAssistant(tu)
	g.toolResult(id, "ok  \texample.com/api/handlers\t0.412s", false)
	if outcome != "success" {
		tu, id = g.toolUse("Bash", obj("command", "go vet ./...\ngo build ./...", "description", "Vet and build"))
		g.claudeAssistant(tu)
		g.toolResult(id, "", false)
		g.emit(obj("type", "result", "subtype", outcome, "is_error", true, "duration_ms", 61840, "duration_api_ms", 64210,
			"num_turns", 9, "session_id", g.session, "total_cost_usd", 0.2291,
			"usage", obj("input_tokens", 40, "cache_creation_input_tokens", 9120, "cache_read_input_tokens", 140220, "output_tokens", 3120, "service_tier", "standard"),
			"permission_denials", arr(), "errors", arr("Reached maximum number of turns (8)"), "uuid", g.uuid()))
		return g.buf.Bytes()
	}
	final := "Added handlers/pagination.go with ParsePage and used it in the users handler; go test ./handlers/... passes."
	g.claudeAssistant(obj("type", "text", "text", final))
	g.emit(obj("type", "result", "subtype", "success", "is_error", false, "duration_ms", 48213, "duration_api_ms", 51022,
		"num_turns", 8, "result", final, "session_id", g.session, "total_cost_usd", 0.18342,
		"usage", obj("input_tokens", 23, "cache_creation_input_tokens", 8123, "cache_read_input_tokens", 120442, "output_tokens", 2204,
			"server_tool_use", obj("web_search_requests", 0), "service_tier", "standard"),
		"permission_denials", arr(), "uuid", g.uuid()))
	return g.buf.Bytes()
}

// garbageStream mixes a short valid Cursor run with lines that must be
// skipped: wrapper output, ANSI colour codes, JSON that is not an event
// object, broken JSON, binary bytes and CRLF line ends.
func garbageStream() []byte {
	g := newGen(7)
	g.buf.WriteString("+ cursor-agent --print --output-format stream-json --force\n")
	g.buf.WriteString("\x1b[32mUsing workspace " + cursorCWD + "\x1b[0m\n")
	g.buf.WriteString("\n   \n")
	g.buf.WriteString("[{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"array, not an object\"}]\n")
	g.buf.WriteString("{\"notype\":true}\n")
	g.buf.WriteString("{\"type\":42,\"subtype\":\"init\"}\n")
	g.buf.WriteString("\"just a string\"\n")
	g.buf.WriteString("\xff\xfe\x00binary\x00\n")
	g.emit(obj("type", "system", "subtype", "init", "apiKeySource", "login", "cwd", cursorCWD,
		"session_id", g.session, "model", "gpt-5", "permissionMode", "default"))
	g.buf.WriteString("{\"type\":\"tool_call\",\"subtype\":\"started\",\"tool_call\":{\"readToolCall\":{\"args\":{\"path\":\"broken.txt\"\n")
	g.thinking(5)
	g.cursorTool("readToolCall", obj("path", cursorCWD+"/README.md"), obj("success", obj("content", "# Site demo\n", "totalLines", 1)))
	g.buf.WriteString("npm WARN deprecated inflight@1.0.6: This module is not supported\n")
	line := obj("type", "tool_call", "subtype", "started", "call_id", "c9", "tool_call",
		obj("editToolCall", obj("args", obj("path", "site/about.html"))), "session_id", g.session)
	g.buf.Write(line)
	g.buf.WriteString("\r\n")
	g.buf.WriteString("{\"type\":\"tool_call\",\"subtype\":\"started\",\"tool_call\":{\"shellToolCall\":{\"args\":{\"command\":\"rm -rf /\"}}}} trailing garbage\n")
	g.buf.WriteString("{\"type\":\"result\",\"subtype\":\"success\",\"result\":\"truncated result\n")
	g.cursorTool("shellToolCall", obj("command", "npx prettier --check site"), nil)
	g.emit(obj("type", "result", "subtype", "success", "duration_ms", 5321, "duration_api_ms", 5321,
		"is_error", false, "result", "Fixed the about page heading levels.", "session_id", g.session))
	g.buf.WriteString("cursor-agent exited with status 0\n")
	return g.buf.Bytes()
}

// fixtures lists the generated testdata files.
func fixtures() map[string][]byte {
	success := cursorStream(1, "success")
	return map[string][]byte{
		"cursor_success.ndjson":   success,
		"cursor_error.ndjson":     cursorStream(2, "error"),
		"cursor_truncated.ndjson": cutStream(success, 0.8),
		"cursor_garbage.ndjson":   garbageStream(),
		"claude_success.ndjson":   claudeStream(3, "success"),
		"claude_error.ndjson":     claudeStream(4, "error_max_turns"),
		"claude_text.txt": []byte("I added handlers/pagination.go with a ParsePage helper and used it in the users handler.\n" +
			"`go test ./handlers/...` passes.\n\nLet me know if you want the orders handler paginated too.\n"),
	}
}

// fixtureTool is the tool name a fixture's output came from.
func fixtureTool(name string) string {
	if strings.HasPrefix(name, "claude") {
		return "devtools.claude-agent"
	}
	return "devtools.cursor-agent"
}
