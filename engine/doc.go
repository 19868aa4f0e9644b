// Package engine builds Armory's runtime once: the world, the store, the
// modules (upstream MCP servers first), the roster, the JSONL trail's
// follower and the one pipeline. Every surface — the armory command, the
// MCP/REST server, tests — opens an Engine and works from it; nothing else
// opens a store backend or starts upstream servers.
//
// # Lifecycle
//
// An Engine goes through five steps, in this order:
//
//  1. open (Open): load the world (once), open the store (a SQLite file or
//     a postgres:// DSN, in the world's durability mode), provision every
//     Module (each may contribute tools to the catalog and event kinds to
//     the registry, and may ask for the store: upstream MCP servers pin
//     their tool definitions there).
//  2. validate (Open): build the roster over the world, the built-in tools
//     and what the modules contributed — every world error at once, as a
//     *world.InvalidError — then let each module that is a Validator check
//     the roster; start the JSONL trail's follower and build the pipeline.
//  3. start (Start; long-lived processes only): every module that is a
//     Starter starts its background work (timers, watches, delivery of
//     messages) with a Runtime: the pipeline to run what it fires, the
//     store, the events. `armory serve` calls it after Open; the short
//     commands (armory call, approvals, …) never do, so their modules
//     contribute tools and publish events but run nothing in the
//     background. Start runs once; a module's Start error fails it.
//  4. serve: callers run calls (Pipeline().Execute), serve them
//     (server.New(e, …)) or read the store; Subscribe taps the pipeline's
//     and the modules' events, SubscribePeers the other processes'.
//  5. close (Close, once, idempotent): in reverse order of opening — the
//     started modules' background work (its context is cancelled and
//     Close waits for it, bounded by Options.StopTimeout), the follower's
//     last catch-up (bounded by Options.TrailCloseTimeout), then the
//     modules (upstream servers stop) last provisioned first, then the
//     store (unless the caller passed it in Options.Store).
//
// When Open fails midway it closes what it had opened, in the same order,
// and returns the error.
//
// Commands that run no tool skip parts (Options.Skip): the store-only
// commands (approvals, sessions, audit, tokens) skip the modules, and the
// commands that only read the world skip the store — which a module that
// needs it (a world with upstream MCP servers) still opens.
//
// # Modules
//
// A Module is a capability with a lifecycle (Name, Provision, Close): it
// contributes tools through Provision and is closed by Close; a Validator
// also checks the roster, a Starter also works in the background once
// started. A module that publishes events (Env.Publish: a service's
// "message", "task", "timer") declares their kinds
// (Contribution.EventKinds): only declared kinds cross between processes. The upstream
// MCP servers are the first one (Upstreams); the packages that come next
// (services, skills, wasm, containers) plug in the same way through
// Options.Modules. A module's Name is the source its tools show under
// (upstream, services, …); Armory's own sources (built-in, toolbox,
// pipeline, run time) cannot be claimed. A module depends on the engine,
// the pipeline and the store's interfaces, never on a surface.
package engine
