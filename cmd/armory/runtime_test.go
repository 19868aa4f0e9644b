package main

import (
	"context"
	"io"
	"testing"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
)

// A command opens one store, however many parts need it: with upstream MCP
// servers configured, their pins and the pipeline share it (it used to be
// opened twice, once for the pins and once for the pipeline), and it is
// closed once, when the command ends.
func TestOneStorePerCommand(t *testing.T) {
	// A server that cannot start is a warning: the command goes on, and
	// the store was opened for its pins all the same.
	dir := testenv.ExampleWorld(t, "mcp_servers:\n  broken:\n    command: [/nonexistent/server]")
	a := &app{world: dir, stdout: io.Discard, stderr: io.Discard}
	ctx := context.Background()
	p, err := a.pipeline(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.eng == nil || p.Store() != a.eng.Store() {
		t.Fatalf("the pipeline's store %p is not the command's one store", p.Store())
	}
	// The pins' store: the admin commands open the same engine again.
	if e, err := a.engine(ctx, engine.StoreOnly); err != nil || e.Store() != p.Store() {
		t.Fatalf("the admin commands' engine (%v) does not hold the command's one store %p", err, p.Store())
	}
	// A command that opened fewer parts cannot quietly open a second store.
	b2 := &app{world: dir, stdout: io.Discard, stderr: io.Discard}
	defer b2.closeAll()
	if _, err := b2.engine(ctx, engine.StoreOnly); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.pipeline(ctx); err == nil {
		t.Fatal("a second engine (and store) opened for one command")
	}
	a.closeAll()
	if _, err := a.eng.Store().AuditHead(ctx); err == nil {
		t.Fatal("the store is still open after the command ended")
	}
}
