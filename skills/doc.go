// Package skills runs skill packs: folders in the open Agent Skills format
// (a SKILL.md with front matter and instructions, references/ and assets/
// read on demand) that may bring tools — a toolbox manifest of binaries and
// WebAssembly modules, or an MCP server (mcp-server.yaml) — which join an
// agent's registry when it acquires the skill (docs/skills.md).
//
// It plugs into the engine as an engine.Module: Provision loads the
// world's packs (world.World.Skills, an archetype's own) and contributes
// the always-on syscall.skill.* tools; Validate makes the module the
// roster's explainer of skill tools and registers, for every agent, the
// tools of the skills the store says it holds; Start (armory serve)
// acquires the skills config.md lists under "## Skills" and follows the
// other processes' changes (Follow, also used by armory mcp). Acquiring
// goes through roster.Register, so a skill's tool meets the same policy as
// any tool; its calls run through the one pipeline like any call.
//
// Skill state (which agent holds which skill) is the store's Skills role;
// the module keeps each process's registries in step with it (reconcile),
// on its own changes, on peers' "skill" events, on a resync, and before a
// skill's tool runs. People reach skills through the exported methods
// (List, Show, Install, Remove, Acquire, Drop), never through the tables.
//
// Rules (enforced by internal/archtest): depends downward only — engine,
// pipeline, roster, registry, world, the root package, toolbox, upstream,
// netguard, the store's interfaces — never on a surface (server,
// cmd/armory, console) nor on a store backend. A skill's WASM tools are
// built on a runtime given in Options (the wasm module's), not by
// importing it.
package skills
