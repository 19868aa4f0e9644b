package workspace

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

func preview(t *testing.T, p armory.Previewer, env *armory.AgentEnv, args map[string]any) (string, error) {
	t.Helper()
	b, _ := json.Marshal(args)
	return p.Preview(context.Background(), armory.Invocation{Args: b, Agent: env})
}

// Previews of writes and edits: a unified diff against the file (from
// /dev/null for a new one), nothing changed on disk, the edit's failure
// modes named, large files described by size, the diff bounded.
func TestPreviewDiffs(t *testing.T) {
	f := newWS(t)
	mustWrite(t, filepath.Join(f.ws, "a.txt"), "one\ntwo\nthree\n")
	d, err := preview(t, &Write{}, f.env, map[string]any{"path": "new.txt", "content": "hi\n"})
	if err != nil || d != "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hi\n" {
		t.Fatalf("new file: %q %v", d, err)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "new.txt")); !os.IsNotExist(err) {
		t.Fatal("a preview created the file")
	}
	d, err = preview(t, &Edit{}, f.env, map[string]any{"path": "a.txt", "old_string": "two", "new_string": "2"})
	if err != nil || d != "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n" {
		t.Fatalf("edit: %q %v", d, err)
	}
	if testenv.ReadFile(t, filepath.Join(f.ws, "a.txt")) != "one\ntwo\nthree\n" {
		t.Fatal("a preview changed the file")
	}
	if _, err := preview(t, &Edit{}, f.env, map[string]any{"path": "a.txt", "old_string": "four", "new_string": "4"}); err == nil || !strings.Contains(armory.Message(err), "the edit would fail") {
		t.Fatalf("absent old_string: %v", err)
	}
	d, err = preview(t, &Delete{}, f.env, map[string]any{"path": "a.txt"})
	if err != nil || d != "--- a/a.txt\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-one\n-two\n-three\n" {
		t.Fatalf("delete: %q %v", d, err)
	}
	mustWrite(t, filepath.Join(f.ws, "big.txt"), strings.Repeat("x", PreviewLimit+1))
	if d, err := preview(t, &Write{}, f.env, map[string]any{"path": "big.txt", "content": "y"}); err != nil || !strings.Contains(d, "too large to show a diff") {
		t.Fatalf("large file: %q %v", d, err)
	}
	var many strings.Builder
	for i := range 20000 {
		many.WriteString(strings.Repeat("line ", 3) + string(rune('a'+i%26)) + "\n")
	}
	if d, err := preview(t, &Write{}, f.env, map[string]any{"path": "many.txt", "content": many.String()}); err != nil || len(d) > MaxPreviewBytes+200 || !strings.Contains(d, "diff cut at") {
		t.Fatalf("long diff: %d bytes %v", len(d), err)
	}
}

// A preview reads only what the tool could write: no path outside the
// workspace, no symbolic link (to a file outside or a folder outside).
func TestPreviewConfined(t *testing.T) {
	f := newWS(t)
	if err := os.Symlink(filepath.Join(f.evil, "secret.txt"), filepath.Join(f.ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(f.evil, filepath.Join(f.ws, "dir")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"../ws-evil/secret.txt", "link.txt", "dir/secret.txt", "/etc/passwd", "@project:web/../../ws-evil/secret.txt"} {
		for _, tool := range []armory.Previewer{&Write{}, &Edit{}, &Delete{}} {
			d, err := preview(t, tool, f.env, map[string]any{"path": p, "content": "x", "old_string": "TOP", "new_string": "x"})
			if strings.Contains(d, "TOP-SECRET") || (err != nil && strings.Contains(err.Error(), "TOP-SECRET")) {
				t.Fatalf("%T %s leaked the file: %q %v", tool, p, d, err)
			}
			if err == nil && !strings.HasPrefix(d, "--- /dev/null") {
				t.Errorf("%T %s: %q", tool, p, d)
			}
		}
	}
}
