package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// benchSessions lifts the caps of the benchmark's sessions.
func benchSessions(b *testing.B, st store.Store, sessions ...string) {
	for _, s := range sessions {
		for _, c := range []string{"tool_invocations", "session_runtime", "stream_events"} {
			if err := st.SetLimitOverride(context.Background(), s, c, 1<<40); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// responder answers every ask to bob that reaches w's engine — its own
// (subscribe) or another process's (subscribePeers) — with a
// syscall.reply through w's pipeline, until the returned func is called.
func responder(b *testing.B, w *world, peers bool) (stop func()) {
	refs := make(chan string, 1024)
	f := func(ev pipeline.Event) {
		if ev.Kind == services.EventMessage && ev.Agent == "bob" {
			select {
			case refs <- ev.Ref:
			default:
			}
		}
	}
	var unsub func()
	if peers {
		unsub = w.eng.SubscribePeers(f)
	} else {
		unsub = w.eng.Subscribe(f)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ref := range refs {
			args, _ := json.Marshal(map[string]string{"message_id": ref, "message": "ok"})
			o := w.eng.Pipeline().Execute(context.Background(), pipeline.Call{Agent: "bob", Session: "bob:bench", Tool: "syscall.reply", Args: args})
			if o.Status != audit.StatusSuccess {
				b.Errorf("reply: %s", o.Result)
			}
		}
	}()
	return func() { unsub(); close(refs); <-done }
}

// benchAsk runs b.N asks from alice (in asker's engine) to bob (answered
// in replier's) and reports the round trip's p50 and p99.
func benchAsk(b *testing.B, asker, replier *world, peers bool) {
	benchSessions(b, asker.eng.Store(), "alice:bench", "bob:bench")
	defer responder(b, replier, peers)()
	ctx := context.Background()
	// Warm up: the first ask subscribes and lets the stores find each other.
	ask := func(i int) time.Duration {
		args, _ := json.Marshal(map[string]any{"to": "bob", "message": fmt.Sprintf("q%d", i), "timeout_secs": 30})
		start := time.Now()
		o := asker.eng.Pipeline().Execute(ctx, pipeline.Call{Agent: "alice", Session: "alice:bench", Tool: "syscall.ask", Args: args})
		d := time.Since(start)
		var v struct{ Status string }
		bv, _ := json.Marshal(o.Value)
		json.Unmarshal(bv, &v)
		if o.Status != audit.StatusSuccess || v.Status != "answered" {
			b.Fatalf("ask %d: %s", i, o.Result)
		}
		return d
	}
	for i := range 3 {
		ask(-1 - i)
	}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ds = append(ds, ask(i))
	}
	b.StopTimer()
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100])/1e6, "p99-ms")
}

// BenchmarkAsk: syscall.ask round trip through the pipeline (ask call,
// reply call by a responder woken by the "message" event, the asker
// woken by the reply's), in one engine and across two engines on one
// database. Targets: ≤ 1 ms in one process; p50 ≤ 20 ms across two
// processes on Postgres.
func BenchmarkAsk(b *testing.B) {
	for _, be := range backendNames {
		dsnOf := func(b *testing.B) string { return newDB(b, be) }
		b.Run(be+"/one-engine", func(b *testing.B) {
			w := open(b, msgWorld(b, "alice", "bob"), dsnOf(b), services.Options{})
			benchAsk(b, w, w, false)
		})
		b.Run(be+"/one-engine-batched", func(b *testing.B) {
			w := open(b, msgWorldWith(b, "durability: batched\n", "alice", "bob"), dsnOf(b), services.Options{})
			benchAsk(b, w, w, false)
		})
		b.Run(be+"/two-engines", func(b *testing.B) {
			dir, dsn := msgWorld(b, "alice", "bob"), dsnOf(b)
			benchAsk(b, open(b, dir, dsn, services.Options{}), open(b, dir, dsn, services.Options{}), true)
		})
	}
}

// BenchmarkBroadcastTool: syscall.broadcast to 999 other agents through
// the pipeline against the bare SendMessages of the same 999 messages on
// the same store (target: ≥ 0.5× the bare transaction's rate).
func BenchmarkBroadcastTool(b *testing.B) {
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("agent%04d", i)
	}
	backends(b, func(b *testing.B, dsn string) {
		w := open(b, msgWorld(b, ids...), dsn, services.Options{})
		st := w.eng.Store()
		benchSessions(b, st, "agent0000:bench")
		ctx := context.Background()
		b.Run("tool", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				args, _ := json.Marshal(map[string]string{"message": fmt.Sprintf("news %d", i)})
				o := w.eng.Pipeline().Execute(ctx, pipeline.Call{Agent: "agent0000", Session: "agent0000:bench", Tool: "syscall.broadcast", Args: args})
				if o.Status != audit.StatusSuccess {
					b.Fatal(o.Result)
				}
			}
		})
		b.Run("bare", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				msgs := make([]*store.Message, 0, len(ids)-1)
				for _, id := range ids[1:] {
					msgs = append(msgs, &store.Message{To: id, From: "agent0000", Kind: store.KindMessage, Subject: "broadcast", Body: fmt.Sprintf("news %d", i)})
				}
				if err := st.SendMessages(ctx, msgs); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
