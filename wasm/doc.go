// Package wasm runs WebAssembly tools on wazero
// (github.com/tetratelabs/wazero): the WASM tools of a world's toolboxes
// (toolbox.yaml "wasm:") and of skill packs. A tool is a WASI preview 1
// command; each call runs it in a fresh instance with the arguments as JSON
// on stdin, returns its stdout, and bounds everything it can use: time (the
// tool's timeout stops a spinning or sleeping module), memory (the tool's
// cap, enforced where the module's memory grows), output (max_output; more
// fails the call), stderr (its head and tail are kept), the host's memory
// outside the module (tables, calls at once), and the file system (only the
// granted folders of the agent's workspace, through os.Root: no link leads
// out). Instances are made and started ahead of calls (ahead.go): a
// module runs until it reads stdin, for the agent whose call it will
// serve, so a call only feeds its input and collects its output.
// docs/wasm.md is the user's view; docs/design.md says why.
//
// Runtime is the engine-independent part: NewRuntime, Runtime.Tool (checks
// and compiles a module once, with a compilation cache on disk) and
// Runtime.Close. Module plugs it into the engine as an engine.Module:
// Provision builds the runtime and contributes the world's WASM tools as
// armory.Tool values (run through the one pipeline like any tool); Close
// closes the runtime and its compiled modules; Module.Runtime hands the
// runtime to the skills module.
//
// Rules (enforced by internal/archtest): depends downward only — engine,
// the root package, world, sandbox's confinement types — never on a
// surface (server, cmd/armory, console), a store backend or another room
// but catalog.
package wasm
