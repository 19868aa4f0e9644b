// Package console will hold the web console: HTML templates and static
// assets embedded in the binary (no Node build), and the handlers that
// render them. The console is a human surface: its pages read and act
// through the REST API under /api (the browser calls it with the user's
// token), so it never decides, checks or stores anything itself.
//
// It does not plug into the engine: it exports an http.Handler that the
// server mounts (server may import console; console never imports server).
// What it shows of the runtime it gets over HTTP.
//
// Rules (enforced by internal/archtest): depends on the standard library,
// the root package and its own assets only — never on server, cmd/armory,
// the engine's parts (pipeline, store, roster) nor a store backend; every
// action goes through the REST API, and so through the one pipeline.
package console
