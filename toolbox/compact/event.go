package compact

import (
	"encoding/json"
	"strings"
)

// evKind classifies one NDJSON line.
type evKind uint8

const (
	evNone    evKind = iota // not an event: not a JSON object with a string "type"
	evDropped               // an event the summary does not use (thinking, user, ...)
	evInit                  // system/init
	evTools                 // one or more tool invocations
	evResult                // the terminal result event
	evError                 // {"type":"error",...}: a failure reported outside a result
)

// toolKind says which summary list a tool invocation belongs to.
type toolKind uint8

const (
	toolOther toolKind = iota
	toolRead
	toolWrite
	toolDelete
	toolShell
)

// toolUse is one tool invocation: a path for file tools, a command for
// shell tools, and the tool's own name (for progress lines).
type toolUse struct {
	kind toolKind
	name string
	arg  string
}

// event is what the summary keeps of one line.
type event struct {
	kind evKind

	// cursorish is set for event types only Cursor emits (thinking,
	// tool_call), a hint for naming the agent.
	cursorish bool

	// evInit
	cwd, model string
	claude     bool // the init event carries Claude Code's own keys

	// evTools
	tools []toolUse

	// evResult (and the message of evError in result)
	subtype      string
	isError      bool
	hasDuration  bool
	durationMS   float64
	hasTokens    bool
	outputTokens float64
	hasCost      bool
	costUSD      float64
	result       string
	errs         []string
}

// parseLine classifies one line (without its newline). When validate is
// true, the line must also be valid JSON to count as an event; the caller
// asks for that only until the first event of a stream is seen, because it
// decides whether the input is NDJSON at all. After that the walker's
// structural checks are enough: lines are only ever skipped or mined for a
// few fields.
func parseLine(line []byte, validate bool) event {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return event{}
	}
	ts, te := -1, -1
	if _, ok := walkObject(line, i, func(key []byte, vs, ve int) bool {
		if string(key) == "type" {
			ts, te = vs, ve
			return false
		}
		return true
	}); !ok || ts < 0 {
		return event{}
	}
	typ, ok := rawString(line, ts, te)
	if !ok {
		return event{}
	}
	if validate && !json.Valid(line) {
		return event{}
	}
	var ev event
	switch string(typ) {
	case "system":
		ev = parseSystem(line, i)
	case "tool_call":
		ev = parseToolCall(line, i)
		ev.cursorish = true
	case "assistant":
		ev = parseAssistant(line, i)
	case "result":
		ev = parseResult(line, i)
	case "error":
		ev = parseError(line, i)
	case "thinking":
		ev = event{kind: evDropped, cursorish: true}
	default:
		ev = event{kind: evDropped}
	}
	return ev
}

// complete reports whether the object walk ended at the end of the line.
func complete(line []byte, end int, ok bool) bool {
	return ok && skipWS(line, end) == len(line)
}

func parseSystem(line []byte, i int) event {
	var subtype []byte
	ev := event{kind: evInit}
	end, ok := walkObject(line, i, func(key []byte, vs, ve int) bool {
		switch string(key) {
		case "subtype":
			subtype, _ = rawString(line, vs, ve)
		case "cwd":
			ev.cwd, _ = stringAt(line, vs, ve)
		case "model":
			ev.model, _ = stringAt(line, vs, ve)
		case "claude_code_version", "mcp_servers", "slash_commands":
			ev.claude = true
		}
		return true
	})
	if !complete(line, end, ok) || string(subtype) != "init" {
		return event{kind: evDropped}
	}
	return ev
}

// parseToolCall reads a Cursor tool_call/started event:
// {"type":"tool_call","subtype":"started","tool_call":{"readToolCall":{"args":{"path":...}}}}.
// Completed events (which echo file contents) are dropped as soon as their
// subtype is seen.
func parseToolCall(line []byte, i int) event {
	started := false
	tcs, tce := -1, -1
	end, ok := walkObject(line, i, func(key []byte, vs, ve int) bool {
		switch string(key) {
		case "subtype":
			st, _ := rawString(line, vs, ve)
			started = string(st) == "started"
			return started
		case "tool_call":
			tcs, tce = vs, ve
		}
		return true
	})
	if !started || !complete(line, end, ok) || tcs < 0 {
		return event{kind: evDropped}
	}
	var tu toolUse
	found := false
	tc := line[:tce]
	walkObject(tc, tcs, func(key []byte, vs, ve int) bool {
		if len(key) == 0 || tc[vs] != '{' {
			return true
		}
		found = true
		if string(key) == "function" {
			tu = toolUse{kind: toolOther}
			walkObject(tc, vs, func(k []byte, s, e int) bool {
				if string(k) == "name" {
					tu.name, _ = stringAt(tc, s, e)
					return false
				}
				return true
			})
			return false
		}
		tu = cursorTool(string(key))
		walkObject(tc, vs, func(k []byte, s, e int) bool {
			if string(k) != "args" || tc[s] != '{' {
				return true
			}
			walkObject(tc, s, func(ak []byte, as, ae int) bool {
				switch string(ak) {
				case "path", "filePath", "file_path", "targetFile":
					if tu.kind != toolShell && tu.arg == "" {
						tu.arg, _ = stringAt(tc, as, ae)
					}
				case "command":
					if tu.kind == toolShell {
						tu.arg, _ = stringAt(tc, as, ae)
					}
				}
				return true
			})
			return false
		})
		return false
	})
	if !found {
		return event{kind: evDropped}
	}
	return event{kind: evTools, tools: []toolUse{tu}}
}

// cursorTool maps a Cursor tool_call key ("readToolCall") to its kind and a
// short name ("read").
func cursorTool(key string) toolUse {
	name := strings.TrimSuffix(key, "ToolCall")
	switch key {
	case "readToolCall":
		return toolUse{kind: toolRead, name: name}
	case "editToolCall", "writeToolCall", "multiEditToolCall", "searchReplaceToolCall", "applyPatchToolCall":
		return toolUse{kind: toolWrite, name: name}
	case "deleteToolCall":
		return toolUse{kind: toolDelete, name: name}
	case "shellToolCall":
		return toolUse{kind: toolShell, name: name}
	}
	return toolUse{kind: toolOther, name: name}
}

// parseAssistant reads the tool_use blocks of a Claude Code assistant
// message: {"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read","input":{"file_path":...}}]}}.
// Assistant text (Cursor's streamed fragments included) is dropped.
func parseAssistant(line []byte, i int) event {
	ms, me := -1, -1
	end, ok := walkObject(line, i, func(key []byte, vs, ve int) bool {
		if string(key) == "message" {
			ms, me = vs, ve
		}
		return true
	})
	if !complete(line, end, ok) || ms < 0 || line[ms] != '{' {
		return event{kind: evDropped}
	}
	msg := line[:me]
	var tools []toolUse
	walkObject(msg, ms, func(key []byte, vs, ve int) bool {
		if string(key) != "content" || msg[vs] != '[' {
			return true
		}
		walkArray(msg, vs, func(es, ee int) bool {
			if msg[es] != '{' {
				return true
			}
			var isToolUse bool
			var name string
			is, ie := -1, -1
			walkObject(msg, es, func(k []byte, s, e int) bool {
				switch string(k) {
				case "type":
					t, _ := rawString(msg, s, e)
					isToolUse = string(t) == "tool_use"
				case "name":
					name, _ = stringAt(msg, s, e)
				case "input":
					is, ie = s, e
				}
				return true
			})
			if isToolUse {
				tools = append(tools, claudeTool(msg, name, is, ie))
			}
			return true
		})
		return false
	})
	if len(tools) == 0 {
		return event{kind: evDropped}
	}
	return event{kind: evTools, tools: tools}
}

// claudeTool maps a Claude Code tool_use block to a toolUse, taking the path
// or command out of its input object b[is:ie] (is < 0: no input).
func claudeTool(b []byte, name string, is, ie int) toolUse {
	tu := toolUse{kind: toolOther, name: name}
	var argKey string
	switch name {
	case "Read", "NotebookRead":
		tu.kind, argKey = toolRead, "file_path"
	case "Write", "Edit", "MultiEdit":
		tu.kind, argKey = toolWrite, "file_path"
	case "NotebookEdit":
		tu.kind, argKey = toolWrite, "notebook_path"
	case "Bash":
		tu.kind, argKey = toolShell, "command"
	default:
		return tu
	}
	if is < 0 || b[is] != '{' {
		return tu
	}
	in := b[:ie]
	walkObject(in, is, func(k []byte, s, e int) bool {
		if string(k) == argKey || (argKey == "notebook_path" && string(k) == "file_path" && tu.arg == "") {
			tu.arg, _ = stringAt(in, s, e)
		}
		return true
	})
	return tu
}

// parseResult reads the terminal result event of either agent.
func parseResult(line []byte, i int) event {
	ev := event{kind: evResult}
	end, ok := walkObject(line, i, func(key []byte, vs, ve int) bool {
		switch string(key) {
		case "subtype":
			ev.subtype, _ = stringAt(line, vs, ve)
		case "is_error":
			ev.isError, _ = boolAt(line, vs, ve)
		case "duration_ms":
			ev.durationMS, ev.hasDuration = numberAt(line, vs, ve)
		case "result":
			ev.result, _ = stringAt(line, vs, ve)
		case "total_cost_usd":
			ev.costUSD, ev.hasCost = numberAt(line, vs, ve)
		case "usage":
			if line[vs] != '{' {
				return true
			}
			walkObject(line[:ve], vs, func(k []byte, s, e int) bool {
				switch string(k) {
				case "output_tokens", "outputTokens":
					ev.outputTokens, ev.hasTokens = numberAt(line, s, e)
				}
				return true
			})
		case "errors":
			if line[vs] != '[' {
				return true
			}
			walkArray(line[:ve], vs, func(s, e int) bool {
				if msg := errorText(line, s, e); msg != "" && len(ev.errs) < 16 {
					ev.errs = append(ev.errs, msg)
				}
				return true
			})
		}
		return true
	})
	if !complete(line, end, ok) {
		return event{kind: evDropped}
	}
	return ev
}

// errorText returns the text of an error value: a string, or an object's
// "message" (or "error") string. It looks one level deep only, so that a
// deeply nested value cannot make the walk quadratic.
func errorText(b []byte, vs, ve int) string {
	if s, ok := stringAt(b, vs, ve); ok {
		return s
	}
	if b[vs] != '{' {
		return ""
	}
	var msg string
	walkObject(b[:ve], vs, func(k []byte, s, e int) bool {
		switch string(k) {
		case "message", "error":
			if m, ok := stringAt(b, s, e); ok && m != "" && msg == "" {
				msg = m
			}
		}
		return true
	})
	return msg
}

// parseError reads {"type":"error","message":"..."} (or "error": "..." /
// {"message": ...}).
func parseError(line []byte, i int) event {
	ev := event{kind: evError}
	end, ok := walkObject(line, i, func(key []byte, vs, ve int) bool {
		switch string(key) {
		case "message", "error":
			if m := errorText(line[:ve], vs, ve); m != "" && ev.result == "" {
				ev.result = m
			}
		}
		return true
	})
	if !complete(line, end, ok) {
		return event{kind: evDropped}
	}
	return ev
}
