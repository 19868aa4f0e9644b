// Package services holds the world's shared services on the store:
// messages (ask, broadcast), chats (gated ones too), the conversations of
// external channels (channel.*), tasks, knowledge, memory, the world's
// shared state, the agents' control tools (syscall.agent.*, reflect) and
// timers (util.watch, util.timer, util.cron), each a small file set with
// its own methods and tables.
//
// It plugs into the engine as an engine.Module: Provision contributes the
// services' syscall tools (syscall.task.create, channel.send, …) to the
// catalog, so agents call them through the one pipeline like any tool;
// Start (engine.Starter, `armory serve` only) runs the timers' scheduler,
// which the engine stops before Close. The rows and role contracts the
// services persist through are declared in package store (store.Agents,
// Inboxes, Chats, Tasks, Knowledge, Memory, State, Timers, Leases),
// because the backends that implement them may not import a room; this
// package declares the small sets of those roles it uses, and the
// backends (store/sqlite, store/postgres) run one conformance suite for
// them (docs/design.md).
//
// Rules (enforced by internal/archtest): a service depends downward only —
// on engine, pipeline, roster, world, the root package and the store's
// interfaces — never on a surface (server, cmd/armory, console) nor on a
// store backend. Surfaces reach a service in two ways only: its exported
// methods (humans: REST, SSE, CLI) or pipeline.Pipeline.Execute (agents);
// never its tables.
package services
