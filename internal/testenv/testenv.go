// Package testenv decides what a test does when a real component it needs
// (a binary such as bwrap or chromium, a Postgres server, Node) is missing.
//
// Locally such a test skips, saying how to get the component. In CI
// (environment variable CI=true) it fails instead: CI installs every
// component itself, so a missing one is a broken CI script, never a reason to
// pass quietly.
//
// It also holds the helpers that tests of several packages share (a
// process marker, a TCP peer, a locked buffer, a folder snapshot, a fixed
// host table). It is imported by tests only, so `deadcode ./...` lists all
// of it; `deadcode -test ./...` does not.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Strict reports whether missing components must fail tests (CI=true).
func Strict() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// Missing skips t (locally) or fails it (in CI) because component is not
// available. how tells a developer how to get it.
func Missing(t testing.TB, component, how string) {
	t.Helper()
	if Strict() {
		t.Fatalf("%s is required in CI but missing: %s", component, how)
	}
	t.Skipf("%s not available (%s); skipping", component, how)
}

// LookPath returns the absolute path of binary, or calls Missing when it is
// not on PATH. how tells a developer how to install it.
func LookPath(t testing.TB, binary, how string) string {
	t.Helper()
	p, err := exec.LookPath(binary)
	if err != nil {
		Missing(t, binary, how)
	}
	return p
}
