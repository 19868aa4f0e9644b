package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
)

// BenchmarkGate measures what the stopped-agent gate adds to a call: the
// same think calls, 64 callers, on one engine's roster and SQLite store,
// through the engine's pipeline (gate on: the services module's) and
// through a pipeline built without gates (off), interleaved in one run.
// One agent is stopped, so the gate's snapshot is not empty.
func BenchmarkGate(b *testing.B) {
	w := open(b, writeWorld(b, agentWorld), "", services.Options{})
	e, mod := w.eng, w.mod
	if _, err := mod.StopAgent(context.Background(), e.Pipeline(), "worker2", "bench"); err != nil {
		b.Fatal(err)
	}
	off, err := pipeline.New(e.Roster(), pipeline.Options{Store: e.Store()})
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    *pipeline.Pipeline
	}{{"off", off}, {"on", e.Pipeline()}} {
		b.Run(tc.name, func(b *testing.B) { benchCalls(b, tc.p) })
	}
}

func benchCalls(b *testing.B, p *pipeline.Pipeline) {
	const callers = 64
	ctx := context.Background()
	var next, failed atomic.Int64
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sess := fmt.Sprintf("bench-%s-%d", b.Name(), c)
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				// Sessions rotate before the default caps (400 calls).
				o := p.Execute(ctx, pipeline.Call{Agent: "worker", Tool: "think", Session: fmt.Sprintf("%s-%d", sess, i/300),
					Args: json.RawMessage(fmt.Sprintf(`{"thought":"%d"}`, i))})
				if o.Status != audit.StatusSuccess {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if failed.Load() > 0 {
		b.Fatalf("%d calls failed", failed.Load())
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
}

// BenchmarkGateAdmit is the gate's own cost per call, from its snapshot.
func BenchmarkGateAdmit(b *testing.B) {
	g := open(b, writeWorld(b, agentWorld), "", services.Options{}).mod.Gate()
	ctx := context.Background()
	if err := g.Admit(ctx, "worker"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := g.Admit(ctx, "worker"); err != nil {
			b.Fatal(err)
		}
	}
}
