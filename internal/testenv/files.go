package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFiles writes files (slash-separated path → content) under dir,
// making the folders they need: a world folder, a toolbox, a workspace.
// Files are written 0644.
func WriteFiles(dir string, files map[string]string) error {
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteTree is WriteFiles for a test: it fails t on error and returns dir.
func WriteTree(t testing.TB, dir string, files map[string]string) string {
	t.Helper()
	if err := WriteFiles(dir, files); err != nil {
		t.Fatal(err)
	}
	return dir
}

// ReadFile returns the content of the file p, failing t when it cannot be
// read.
func ReadFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
