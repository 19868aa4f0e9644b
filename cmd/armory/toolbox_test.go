package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/store/sqlite"
)

func TestCLIUpstreamsAndPins(t *testing.T) {
	node := testenv.LookPath(t, "node", "apt-get install nodejs")
	everything, _ := filepath.Abs("../../testdata/mcp-upstreams/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if _, err := os.Stat(everything); err != nil {
		testenv.Missing(t, "npm MCP servers", "(cd testdata/mcp-upstreams && npm ci --no-audit --no-fund)")
	}
	w := initWorld(t, "mcp_servers:\n  everything:\n    command: ["+node+", "+everything+", stdio]\n  broken:\n    command: [/nonexistent/server]")
	world := "--world=" + w

	r := armoryCmd(t, nil, world, "access", "explain", "architect", "mcp.broken.anything")
	if !strings.Contains(r.stdout, `upstream MCP server "broken" is unavailable`) {
		t.Fatalf("explain broken: %+v", r)
	}
	r = armoryCmd(t, nil, world, "tool", "list", "architect")
	if r.code != 0 || !strings.Contains(r.stdout, "mcp.everything.echo") {
		t.Fatalf("tool list: %+v", r)
	}
	r = armoryCmd(t, nil, world, "toolbox", "pins", "list", "everything")
	if r.code != 0 || !strings.Contains(r.stdout, "echo") || strings.Contains(r.stdout, "CHANGED") {
		t.Fatalf("pins list: %+v", r)
	}
	if r := armoryCmd(t, nil, world, "toolbox", "pins", "accept", "everything"); r.code != 3 && r.code != 2 {
		t.Fatalf("accept with nothing pending: %+v", r)
	}

	// The upstream changes echo (simulated in the store: another process
	// saw another definition); it is withheld until accepted.
	st, err := sqlite.OpenWith(filepath.Join(w, ".armory", "armory.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ObservePin(context.Background(), "everything", "echo", strings.Repeat("ab", 32), []byte(`{"name":"echo"}`)); err != nil {
		t.Fatal(err)
	}
	// Make the pinned hash the foreign one, so that the live definition is
	// the pending change.
	if _, err := st.AcceptPin(context.Background(), "everything", "echo", ""); err != nil {
		t.Fatal(err)
	}
	st.Close()
	r = armoryCmd(t, nil, world, "access", "explain", "architect", "mcp.everything.echo")
	if !strings.Contains(r.stdout, "changed since it was pinned; a human must accept it") {
		t.Fatalf("explain changed: %+v", r)
	}
	r = armoryCmd(t, nil, world, "toolbox", "pins", "list")
	if !strings.Contains(r.stdout, "CHANGED") {
		t.Fatalf("pins list after change: %+v", r)
	}
	if r := armoryCmd(t, nil, world, "toolbox", "pins", "accept", "everything", "echo", "--hash", strings.Repeat("cd", 32)); r.code == 0 {
		t.Fatalf("accept with a stale hash: %+v", r)
	}
	r = armoryCmd(t, nil, world, "toolbox", "pins", "accept", "everything", "echo")
	if r.code != 0 || !strings.Contains(r.stdout, "accepted everything/echo") {
		t.Fatalf("accept: %+v", r)
	}
	r = armoryCmd(t, nil, world, "access", "explain", "architect", "mcp.everything.echo")
	if strings.Contains(r.stdout, "changed since") {
		t.Fatalf("explain after accept: %+v", r)
	}
}
