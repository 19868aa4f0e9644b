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
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/armory-dev/armory/example"
	"github.com/modelcontextprotocol/go-sdk/mcp"
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

// ExampleWorld writes the built-in example world into a new folder below
// t.TempDir() and returns it; each of config is appended to its
// world-config.yaml on a line of its own (extra top-level keys).
func ExampleWorld(t testing.TB, config ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	if err := example.Write(dir); err != nil {
		t.Fatal(err)
	}
	if len(config) == 0 {
		return dir
	}
	f, err := os.OpenFile(filepath.Join(dir, "world-config.yaml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range config {
		if _, err := f.WriteString("\n" + c + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// MCPTools lists the tools of an MCP session, and their names in the order
// listed.
func MCPTools(t testing.TB, ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, []string) {
	t.Helper()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return res.Tools, names
}
