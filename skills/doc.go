// Package skills will hold skill packs: a folder with a SKILL.md and tool
// manifests (CLI tools as JSON manifests, WASM tools), acquired from a
// world's skills/ folder, activated for an agent and dropped again, with
// durable skill state in the store (which agent holds which skill since
// when).
//
// It plugs into the engine as an engine.Module: Provision reads the packs
// and contributes their always-on skill syscalls (skill.acquire,
// skill.activate, skill.drop) as tools; activating a skill registers its
// tools in the agent's registry at run time (registry.Registry.Register),
// where the pipeline governs them like any tool. A pack's WASM tools run
// on the wasm module. The state's persistence is an interface declared
// here and implemented by the store backends.
//
// Rules (enforced by internal/archtest): depends downward only — engine,
// pipeline, roster, registry, world, the root package, wasm, the store's
// interfaces — never on a surface (server, cmd/armory, console) nor on a
// store backend. Surfaces list and change skills through this package's
// methods or through Execute, never through its tables.
package skills
