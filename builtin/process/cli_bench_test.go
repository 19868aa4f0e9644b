package process

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/sandbox"
)

// BenchmarkCLITrueVsBareBwrap interleaves a whole tool.cli call of `true`
// in the bwrap sandbox (argument decoding, policy, namespaces and mounts,
// rlimit handshake, output capture, tree kill and reap, result) with a
// bare `bwrap --ro-bind / / true`, so that machine noise hits both alike,
// and reports the tool's time over bare bwrap's ("ratio"; target <= 1.3).
//
// "warm" is the server's configuration (armory serve and armory mcp enable
// the warm pool, sandbox.EnablePool): the sandbox of each call was set up in
// the background, before the call; "warm-share" is the fraction of calls a
// ready sandbox served. "cold" is the pool off: each call sets up its own.
// "warm-back-to-back" makes tool.cli calls with no gap (no bare bwrap in
// between): the sustained rate, where the warm-ups compete with the calls.
func BenchmarkCLITrueVsBareBwrap(b *testing.B) {
	needBackend(b, sandbox.BackendBwrap)
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"warm", "cold", "warm-back-to-back"} {
		b.Run(mode, func(b *testing.B) {
			before := sandbox.CurrentPoolStats()
			share := func() float64 {
				st := sandbox.CurrentPoolStats()
				return float64(st.Warm-before.Warm) / float64(st.Warm-before.Warm+st.Cold-before.Cold)
			}
			if mode != "cold" {
				sandbox.EnablePool(sandbox.PoolOptions{})
				defer sandbox.ClosePool()
			}
			cli := NewCLI(Options{})
			agent := &armory.AgentEnv{ID: "bench", Workspace: b.TempDir(), Sandbox: armory.SandboxPolicy{Backend: "bwrap"}}
			inv := armory.Invocation{Args: json.RawMessage(`{"command":"true"}`), Agent: agent}
			// `true` is the sh builtin: the shell is the only process.
			var tool, bare time.Duration
			if mode == "warm-back-to-back" {
				for b.Loop() {
					if res := cli.Execute(context.Background(), inv); !res.Success {
						b.Fatalf("tool.cli true: %+v", res)
					}
				}
				b.ReportMetric(share(), "warm-share")
				return
			}
			for b.Loop() {
				t0 := time.Now()
				if err := exec.Command(bwrap, "--ro-bind", "/", "/", "true").Run(); err != nil {
					b.Fatalf("bare bwrap: %v", err)
				}
				t1 := time.Now()
				if res := cli.Execute(context.Background(), inv); !res.Success {
					b.Fatalf("tool.cli true: %+v", res)
				}
				tool += time.Since(t1)
				bare += t1.Sub(t0)
			}
			b.ReportMetric(float64(tool)/float64(bare), "ratio")
			b.ReportMetric(float64(tool.Nanoseconds())/float64(b.N), "tool-ns/op")
			b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N), "bare-ns/op")
			if mode == "warm" {
				b.ReportMetric(share(), "warm-share")
			}
		})
	}
}
