package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/armory-dev/armory/example"
)

// A command opens one store, however many parts need it: with upstream MCP
// servers configured, their pins and the pipeline share it (it used to be
// opened twice, once for the pins and once for the pipeline), and it is
// closed once, when the command ends.
func TestOneStorePerCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	if err := example.Write(dir); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "world-config.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A server that cannot start is a warning: the command goes on, and
	// the store was opened for its pins all the same.
	b = append(b, []byte("\nmcp_servers:\n  broken:\n    command: [/nonexistent/server]\n")...)
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	a := &app{world: dir, stdout: io.Discard, stderr: io.Discard}
	p, release, err := a.pipeline(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if a.st == nil || p.Store() != a.st {
		t.Fatalf("the pipeline's store %p is not the command's one store %p", p.Store(), a.st)
	}
	if st, err := a.pinStore(context.Background()); err != nil || st != a.st {
		t.Fatalf("the pins' store %p (%v) is not the command's one store %p", st, err, a.st)
	}
	release()
	// Still open after the pipeline is released: the command may go on
	// using it (approvals, audit) until it ends.
	if _, err := a.st.AuditHead(context.Background()); err != nil {
		t.Fatalf("store closed before the command ended: %v", err)
	}
	a.closeAll()
	if _, err := a.st.AuditHead(context.Background()); err == nil {
		t.Fatal("the store is still open after the command ended")
	}
}
