package upstream_test

import (
	"testing"

	"github.com/armory-dev/armory/upstream"
)

// BenchmarkStdioCall measures one tools/call to a stdio upstream (the test
// binary as a go-sdk server) through upstream.Tool.Execute.
func BenchmarkStdioCall(b *testing.B) {
	dir := worldDir(b, "mcp_servers:\n"+selfServer("t", nil), nil)
	st := openStore(b, dir)
	set, _ := start(b, dir, st, upstream.Options{})
	echo := tool(b, set, "mcp.t.echo")
	b.ResetTimer()
	for b.Loop() {
		if r := call(b, echo, `{"text":"hi"}`); !r.Success {
			b.Fatal(r.Text)
		}
	}
}
