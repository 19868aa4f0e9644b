// Package wasm will hold the WASM tool runtime on wazero
// (github.com/tetratelabs/wazero): one compilation cache per engine,
// per-call limits (memory pages, fuel or a deadline, output bytes) and
// WASI grants limited to the agent's confined workspace, mapped from a
// tool's manifest (akh-medu's WASM tools, skill packs' tools).
//
// It plugs into the engine as an engine.Module: Provision builds the
// runtime and its cache and contributes the world's WASM tools as
// armory.Tool values (run through the one pipeline like any tool); Close
// closes the runtime and its compiled modules.
//
// Rules (enforced by internal/archtest): depends downward only — engine,
// the root package, world, sandbox's confinement types — never on a
// surface (server, cmd/armory, console), a store backend or another room
// but catalog.
package wasm
