package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
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

// toolbox pins list and accept ask the world's upstream servers for their
// tools first: an upstream whose tool changed since the last load shows it
// CHANGED to the first command a human runs, and accept SERVER takes it.
// The upstream is a real one: this binary serving another world over stdio.
func TestCLIPinsSeeAChangeFirst(t *testing.T) {
	up := initWorld(t)
	w := initWorld(t, "mcp_servers:\n  self:\n    command: ["+binary+", --world, "+up+", mcp, reviewer]")
	world := "--world=" + w
	if r := armoryCmd(t, nil, world, "tool", "list", "architect"); r.code != 0 || !strings.Contains(r.stdout, "mcp.self.devtools.word-count") {
		t.Fatalf("tool list: %+v", r)
	}
	manifest := filepath.Join(up, "toolbox", "devtools", "toolbox.yaml")
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(b), "Count lines, words and bytes of a workspace file", "Count lines, words and bytes (changed)", 1)
	if changed == string(b) {
		t.Fatal("the example toolbox has no word-count description to change")
	}
	if err := os.WriteFile(manifest, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	r := armoryCmd(t, nil, world, "toolbox", "pins", "list", "self")
	if r.code != 0 || !regexp.MustCompile(`self\s+devtools\.word-count\s+CHANGED`).MatchString(r.stdout) {
		t.Fatalf("pins list after the upstream changed: %+v", r)
	}
	r = armoryCmd(t, nil, world, "toolbox", "pins", "accept", "self")
	if r.code != 0 || !strings.Contains(r.stdout, "accepted self/devtools.word-count") {
		t.Fatalf("accept: %+v", r)
	}
	if r := armoryCmd(t, nil, world, "access", "explain", "architect", "mcp.self.devtools.word-count"); r.code != 0 || !strings.Contains(r.stdout, ": visible") {
		t.Errorf("explain after accept: %+v", r)
	}
}
