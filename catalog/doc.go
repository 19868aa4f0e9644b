// Package catalog will hold each compatible system's tool table mapped
// onto Armory's tools: the ghost world's syscalls, Thinkroid's tool files,
// akh-medu's tools, Agenthood's tools and seajelly's toolkits — for each,
// the foreign name, the Armory tool it maps to, the parameters' renames
// and the limits it implies (akh-medu's 4 KB read, 256 KB fetch, 64 KB
// shell), as data with one test that every target exists.
//
// It is pure data with no I/O: it plugs into the engine as an
// engine.Module whose Provision contributes alias tools (a foreign name
// that runs the Armory tool it maps to, through the pipeline, audited
// under the Armory name) for the worlds that ask for a compatibility
// table; a roster check (engine.Validator) refuses a mapping to a tool the
// world does not have.
//
// Rules (enforced by internal/archtest): depends only on the root package,
// world and engine's interfaces — never on a surface (server, cmd/armory,
// console) nor a store backend.
package catalog
