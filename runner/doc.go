// Package runner will hold the agent runner: the loop that gives a model
// an agent's briefing and tool specs, sends its tool calls through the
// pipeline and feeds the outcomes back, until the model stops or a cap
// does; with providers/ (openai, anthropic, over their official Go SDKs)
// and activation (which agents run, when, on which trigger).
//
// It plugs into the engine as an engine.Module without tools: Provision
// reads the world's agents and providers, the runner then works from the
// engine's roster (registry.Registry specs, renderers' name maps) and
// calls pipeline.Pipeline.Execute for every tool call — the same one
// enforcement path every surface uses; Close stops the running loops.
//
// Rules (enforced by internal/archtest): depends downward only — engine,
// pipeline, roster, registry, world, the root package — never on a surface
// (server, cmd/armory, console) nor on a store backend. Surfaces start,
// stop and observe runs through this package's methods, never its state.
package runner
