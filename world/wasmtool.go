package world

import "encoding/json"

// WasmTool is what a toolbox tool that runs a WebAssembly module declares
// instead of a binary (toolbox.yaml "wasm:"): the module (WASI preview 1),
// its input schema (arguments reach it as JSON on stdin), and what it may
// touch. Package wasm runs it; ToolboxTool.Wasm is nil for a binary tool.
type WasmTool struct {
	// Module is the .wasm file as written, relative to the toolbox folder;
	// ModulePath is its absolute path.
	Module     string
	ModulePath string
	// InputSchema is the tool's JSON Schema (type object).
	InputSchema json.RawMessage
}
