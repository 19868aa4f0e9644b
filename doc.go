// Package armory is the vocabulary of Armory, a tool runtime and gateway for
// LLM agents: tools, their specs and manifests, calls and results, and the one
// error type that every package returns.
//
// This package does no I/O. The pieces that do live in their own packages and
// follow one direction of data:
//
//	world files (world/) → access policy (access/) → per-agent registry (registry/)
//	→ guarded pipeline → tools (builtin/, toolbox/) → audit and store
//
// and every surface (CLI, MCP, REST, console, library) calls the same pipeline.
package armory
