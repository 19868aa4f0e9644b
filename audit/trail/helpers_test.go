package trail_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory/audit"
)

func jsonUnmarshal(line string, v any) error {
	return json.Unmarshal([]byte(strings.TrimSpace(line)), v)
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// writeHead rewrites a folder's head file as a FileSink would.
func writeHead(dir string, h audit.Head) error {
	b, _ := json.Marshal(h)
	return os.WriteFile(filepath.Join(dir, audit.HeadFile), append(b, '\n'), 0o600)
}

func mustHash(t *testing.T, line string) string {
	t.Helper()
	var r audit.Record
	if err := jsonUnmarshal(line, &r); err != nil {
		t.Fatal(err)
	}
	return r.Hash
}
