// Package containers will hold container tools over the Docker Engine API
// (the official Go client; Podman's socket is compatible): create, start,
// exec, logs, stop and remove containers, each call bounded (output bytes,
// time, the images and mounts the world allows) and every container
// labelled with the agent that made it.
//
// It plugs into the engine as an engine.Module: Provision connects to the
// socket the world names and contributes the container tools (a socket
// that does not answer makes them unavailable, with the reason, not an
// error); Close closes the client and removes the containers the engine's
// agents left running if the world says so.
//
// Rules (enforced by internal/archtest): depends downward only — engine,
// the root package, world, netguard — never on a surface (server,
// cmd/armory, console) nor a store backend. Surfaces act on containers
// through Execute (agents) or this package's methods (humans).
package containers
