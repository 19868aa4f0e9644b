package compact

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Per-event bounds: tool uses kept from one assistant message, and error
// texts kept from one result event.
const (
	maxToolsPerEvent = 64
	maxResultErrors  = 16
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
	kind   toolKind
	name   string
	arg    string
	argKey string // Claude Code: the input member that holds arg
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
// true, the whole line must also be valid JSON (json.Valid) to count as an
// event; the caller asks for that only until the first event of a stream is
// seen, because it decides whether the input is NDJSON at all. After that,
// dropped lines are not examined past their "type", and kept ones are
// walked in full and dropped when malformed.
func parseLine(line []byte, validate bool) event {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return event{}
	}
	var typ []byte
	isString := false
	if _, ok := walkObject(line, i, func(key []byte, vs int) (int, bool) {
		ve, ok := skipValue(line, vs)
		if ok && string(key) == "type" {
			typ, isString = rawString(line, vs, ve)
			return stopWalk, true
		}
		return ve, ok
	}); !ok || !isString {
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

// complete reports whether the object walk ended well at the end of the line.
func complete(line []byte, end int, ok bool) bool {
	return ok && skipWS(line, end) == len(line)
}

func parseSystem(line []byte, i int) event {
	var subtype []byte
	ev := event{kind: evInit}
	end, ok := walkObject(line, i, func(key []byte, vs int) (int, bool) {
		ve, ok := skipValue(line, vs)
		if !ok {
			return ve, false
		}
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
		return ve, true
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
	var tu toolUse
	found := false
	end, ok := walkObject(line, i, func(key []byte, vs int) (int, bool) {
		switch string(key) {
		case "subtype":
			ve, ok := skipValue(line, vs)
			st, _ := rawString(line, vs, ve)
			if started = ok && string(st) == "started"; !started {
				return stopWalk, true
			}
			return ve, ok
		case "tool_call":
			if at(line, vs) == '{' {
				return walkObject(line, vs, func(key []byte, vs int) (int, bool) {
					if found || at(line, vs) != '{' {
						return skipValue(line, vs)
					}
					found = true
					if string(key) == "function" {
						tu = toolUse{kind: toolOther}
						return walkObject(line, vs, func(k []byte, s int) (int, bool) {
							if string(k) != "name" {
								return skipValue(line, s)
							}
							var e int
							var ok bool
							tu.name, e, ok = stringValue(line, s)
							return e, ok
						})
					}
					tu = cursorTool(string(key))
					return walkObject(line, vs, func(k []byte, s int) (int, bool) {
						if string(k) != "args" || at(line, s) != '{' {
							return skipValue(line, s)
						}
						return walkObject(line, s, func(ak []byte, as int) (int, bool) {
							ae, ok := skipValue(line, as)
							if !ok {
								return ae, false
							}
							switch string(ak) {
							case "path", "filePath", "file_path", "targetFile":
								if tu.kind != toolShell && tu.arg == "" {
									tu.arg, _ = stringAt(line, as, ae)
								}
							case "command":
								if tu.kind == toolShell {
									tu.arg, _ = stringAt(line, as, ae)
								}
							}
							return ae, true
						})
					})
				})
			}
		}
		return skipValue(line, vs)
	})
	if !started || !found || !complete(line, end, ok) {
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

// toolUseMarker is present in every assistant line that invokes a tool.
var toolUseMarker = []byte(`"tool_use"`)

// parseAssistant reads the tool_use blocks of a Claude Code assistant
// message: {"type":"assistant","message":{"content":[{"type":"tool_use","name":"Read","input":{"file_path":...}}]}}.
// Assistant text (Cursor's streamed fragments included) is dropped.
func parseAssistant(line []byte, i int) event {
	if !bytes.Contains(line, toolUseMarker) {
		return event{kind: evDropped}
	}
	var tools []toolUse
	end, ok := walkObject(line, i, func(key []byte, vs int) (int, bool) {
		if string(key) != "message" || at(line, vs) != '{' {
			return skipValue(line, vs)
		}
		return walkObject(line, vs, func(key []byte, vs int) (int, bool) {
			if string(key) != "content" || at(line, vs) != '[' {
				return skipValue(line, vs)
			}
			return walkArray(line, vs, func(es int) (int, bool) {
				if at(line, es) != '{' {
					return skipValue(line, es)
				}
				var isToolUse, done bool
				var name string
				var tu toolUse
				var input []byte // the raw input object, when it comes before the name
				ee, ok := walkObject(line, es, func(k []byte, s int) (int, bool) {
					if string(k) == "input" && isToolUse && name != "" {
						// The usual key order (type, id, name, input):
						// read the input in the same pass.
						tu, done = claudeTool(name), true
						return tu.walkInput(line, s)
					}
					e, ok := skipValue(line, s)
					if !ok {
						return e, false
					}
					switch string(k) {
					case "type":
						t, _ := rawString(line, s, e)
						isToolUse = string(t) == "tool_use"
					case "name":
						name, _ = stringAt(line, s, e)
					case "input":
						input = line[s:e]
					}
					return e, true
				})
				if ok && isToolUse && len(tools) < maxToolsPerEvent {
					if !done {
						tu = claudeTool(name)
						tu.walkInput(input, 0)
					}
					tools = append(tools, tu)
				}
				return ee, ok
			})
		})
	})
	if !complete(line, end, ok) || len(tools) == 0 {
		return event{kind: evDropped}
	}
	return event{kind: evTools, tools: tools}
}

// claudeTool maps a Claude Code tool name to a toolUse whose argKey names
// the input field that holds its path or command.
func claudeTool(name string) toolUse {
	tu := toolUse{kind: toolOther, name: name}
	switch name {
	case "Read", "NotebookRead":
		tu.kind, tu.argKey = toolRead, "file_path"
	case "Write", "Edit", "MultiEdit":
		tu.kind, tu.argKey = toolWrite, "file_path"
	case "NotebookEdit":
		tu.kind, tu.argKey = toolWrite, "notebook_path"
	case "Bash":
		tu.kind, tu.argKey = toolShell, "command"
	}
	return tu
}

// walkInput consumes the tool_use input object at b[i], taking tu.arg from
// its tu.argKey member.
func (tu *toolUse) walkInput(b []byte, i int) (int, bool) {
	if tu.argKey == "" || at(b, i) != '{' {
		return skipValue(b, i)
	}
	return walkObject(b, i, func(k []byte, s int) (int, bool) {
		e, ok := skipValue(b, s)
		if ok && string(k) == tu.argKey {
			tu.arg, _ = stringAt(b, s, e)
		}
		return e, ok
	})
}

// parseResult reads the terminal result event of either agent.
func parseResult(line []byte, i int) event {
	ev := event{kind: evResult}
	end, ok := walkObject(line, i, func(key []byte, vs int) (int, bool) {
		switch string(key) {
		case "usage":
			if at(line, vs) == '{' {
				return walkObject(line, vs, func(k []byte, s int) (int, bool) {
					e, ok := skipValue(line, s)
					switch string(k) {
					case "output_tokens", "outputTokens":
						if ok {
							ev.outputTokens, ev.hasTokens = numberAt(line, s, e)
						}
					}
					return e, ok
				})
			}
		case "errors":
			if at(line, vs) == '[' {
				return walkArray(line, vs, func(s int) (int, bool) {
					msg, e, ok := errorValue(line, s)
					if msg != "" && len(ev.errs) < maxResultErrors {
						ev.errs = append(ev.errs, msg)
					}
					return e, ok
				})
			}
		}
		ve, ok := skipValue(line, vs)
		if !ok {
			return ve, false
		}
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
		}
		return ve, true
	})
	if !complete(line, end, ok) {
		return event{kind: evDropped}
	}
	return ev
}

// errorValue consumes an error value at b[vs] and returns its text: a
// string, or an object's "message" (or "error") string. It looks one level
// deep only.
func errorValue(b []byte, vs int) (msg string, ve int, ok bool) {
	if at(b, vs) != '{' {
		return stringValue(b, vs)
	}
	ve, ok = walkObject(b, vs, func(k []byte, s int) (int, bool) {
		m, e, ok := stringValue(b, s)
		if (string(k) == "message" || string(k) == "error") && msg == "" {
			msg = m
		}
		return e, ok
	})
	return msg, ve, ok
}

// parseError reads {"type":"error","message":"..."} (or "error": "..." /
// {"message": ...}).
func parseError(line []byte, i int) event {
	ev := event{kind: evError}
	end, ok := walkObject(line, i, func(key []byte, vs int) (int, bool) {
		switch string(key) {
		case "message", "error":
			m, e, ok := errorValue(line, vs)
			if ev.result == "" {
				ev.result = m
			}
			return e, ok
		}
		return skipValue(line, vs)
	})
	if !complete(line, end, ok) {
		return event{kind: evDropped}
	}
	return ev
}
