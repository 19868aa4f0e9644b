package server_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/skills"
)

// How soon an acquired skill's tool is in an MCP client's tools/list:
//
//	go test ./server -run '^$' -bench 'SkillAcquire' -benchtime 200x -count 1
//
// (with ARMORY_TEST_POSTGRES set for the Postgres rows). Each op acquires
// text-tools for architect (the example world's skill), measures, then
// drops it and waits until the client saw the drop, so that ops do not
// overlap. ns/op is that whole cycle; the figures are the metrics.
//
// One process (BenchmarkSkillAcquireOneProcess): the agent's MCP client
// calls syscall.skill.acquire (through the pipeline: admission, the
// store's skill state, the audit records) and lists its tools at once;
// next_list_ms is from the call's start to that tools/list's answer (the
// tool must be in it). notified_ms is from the call's start to the answer
// of the tools/list the client makes when notifications/tools/list_changed
// arrives (the go-sdk sends it 10 ms after the last change, debounced).
// list_rtt_ms is one tools/list alone, timed in the same ops.
//
// Two replicas (BenchmarkSkillAcquireAcrossReplicas): servers A and B, each
// its own engine, store handle and HTTP server over one world folder and
// one database, in one process (events cross through the store as between
// processes: Postgres LISTEN/NOTIFY, SQLite's events file). The agent's
// call of syscall.skill.acquire runs through A's pipeline; B's MCP client
// of the agent waits for list_changed and lists. Measured from the moment
// A published the skill event (its Event.Time):
//
//	relay_ms      the event reaches B's peer subscribers: the event relay delay
//	registered_ms B's registry holds the tool
//	next_list_ms  a tools/list B's client sends then (not waiting to be
//	              told) has answered with the tool
//	notified_ms   B's client, told by list_changed, has it in its tools/list
//
// list_rtt_ms is one tools/list of B's client alone, timed in the same
// ops; and registered_ratio, next_list_ratio, notified_ratio: those ÷ relay_ms
// (medians, same run). e2e_ms is from the start of A's acquire to
// notified.

// skillReplica is a server with the skills module, started as armory
// serve starts it, for benchmarks.
type skillReplica struct {
	eng *engine.Engine
	url string
}

func startSkillReplica(b testing.TB, dir, db string) *skillReplica {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	eng, err := engine.Open(ctx, engine.Options{World: dir, DB: db, Modules: []engine.Module{skills.New(skills.Options{})}})
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv, err := server.New(eng, server.Options{Addr: ln.Addr().String()})
	if err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	b.Cleanup(func() { cancel(); <-done; srv.Close(); eng.Close() })
	return &skillReplica{eng: eng, url: "http://" + ln.Addr().String()}
}

// client connects an MCP client of agent whose list_changed notifications
// go to changed (their arrival time).
func (r *skillReplica) client(b testing.TB, agent string, changed chan time.Time) *mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	tok, _, err := server.CreateToken(ctx, r.eng.Store(), agent, false, "bench")
	if err != nil {
		b.Fatal(err)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "armory-bench", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- time.Now():
			default:
			}
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url + "/agents/" + agent + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: tok}}, MaxRetries: -1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

// skillBackends are the stores the benchmarks run on: a SQLite file, and
// a Postgres schema when ARMORY_TEST_POSTGRES is set.
func skillBackends(b *testing.B, run func(b *testing.B, db string)) {
	b.Run("sqlite", func(b *testing.B) { run(b, filepath.Join(b.TempDir(), "armory.db")) })
	b.Run("postgres", func(b *testing.B) { run(b, testenv.PostgresSchema(b)) })
}

// waitChange waits for the next time on ch, at most a minute.
func waitChange(b testing.TB, ch chan time.Time, what string) time.Time {
	b.Helper()
	select {
	case at := <-ch:
		return at
	case <-time.After(time.Minute):
		b.Fatalf("no %s", what)
		return time.Time{}
	}
}

func drainTimes(ch chan time.Time) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// lists reports whether the session's tools/list has tool.
func lists(b testing.TB, ctx context.Context, cs *mcp.ClientSession, tool string) bool {
	b.Helper()
	_, names := testenv.MCPTools(b, ctx, cs)
	return slices.Contains(names, tool)
}

// skillCall runs syscall.skill.acquire or .drop of text-tools over MCP.
func skillCall(b testing.TB, ctx context.Context, cs *mcp.ClientSession, tool string) {
	b.Helper()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"name": "text-tools"}})
	if err != nil || r.IsError {
		b.Fatalf("%s: %v %+v", tool, err, r)
	}
}

// listRTT times one tools/list of the session (its round trip, the
// floor of any "next tools/list" figure).
func listRTT(b testing.TB, ctx context.Context, cs *mcp.ClientSession) time.Duration {
	b.Helper()
	start := time.Now()
	lists(b, ctx, cs, grepTool)
	return time.Since(start)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func BenchmarkSkillAcquireOneProcess(b *testing.B) {
	skillBackends(b, func(b *testing.B, db string) {
		r := startSkillReplica(b, testenv.ExampleWorld(b), db)
		ctx := context.Background()
		changed := make(chan time.Time, 16)
		cs := r.client(b, "architect", changed)
		var next, notified, rtt []time.Duration
		b.ResetTimer()
		for range b.N {
			drainTimes(changed)
			start := time.Now()
			skillCall(b, ctx, cs, "syscall.skill.acquire")
			if !lists(b, ctx, cs, grepTool) {
				b.Fatal("the tools/list right after the acquire does not have the tool")
			}
			next = append(next, time.Since(start))
			waitChange(b, changed, "list_changed after the acquire")
			if !lists(b, ctx, cs, grepTool) {
				b.Fatal("the tools/list after list_changed does not have the tool")
			}
			notified = append(notified, time.Since(start))
			skillCall(b, ctx, cs, "syscall.skill.drop")
			waitChange(b, changed, "list_changed after the drop")
			rtt = append(rtt, listRTT(b, ctx, cs))
		}
		b.StopTimer()
		b.ReportMetric(ms(pct(rtt, 50)), "list_rtt_ms_p50")
		b.ReportMetric(ms(pct(next, 50)), "next_list_ms_p50")
		b.ReportMetric(ms(pct(next, 99)), "next_list_ms_p99")
		b.ReportMetric(ms(pct(notified, 50)), "notified_ms_p50")
		b.ReportMetric(ms(pct(notified, 99)), "notified_ms_p99")
	})
}

func BenchmarkSkillAcquireAcrossReplicas(b *testing.B) {
	skillBackends(b, func(b *testing.B, db string) {
		dir := testenv.ExampleWorld(b)
		a, r := startSkillReplica(b, dir, db), startSkillReplica(b, dir, db)
		ctx := context.Background()
		benchLinkPeers(b, a, r)
		benchLinkPeers(b, r, a)

		// B's view: when the skill event arrives (and when A published
		// it), when B's registry gains or loses the tool, when B's client
		// is told.
		type stamp struct{ at, published time.Time }
		events := make(chan stamp, 16)
		defer r.eng.SubscribePeers(func(ev pipeline.Event) {
			if ev.Kind == skills.EventSkill && ev.Ref == "agent:architect" {
				select {
				case events <- stamp{time.Now(), ev.Time}:
				default:
				}
			}
		})()
		registered := make(chan time.Time, 16)
		ag, err := r.eng.Roster().Agent("architect")
		if err != nil {
			b.Fatal(err)
		}
		defer ag.Registry.OnChange(func(name string, added bool) {
			if name == grepTool {
				select {
				case registered <- time.Now():
				default:
				}
			}
		})()
		changed := make(chan time.Time, 16)
		cs := r.client(b, "architect", changed)
		acquire := json.RawMessage(`{"name":"text-tools"}`)
		call := func(tool string) {
			if o := a.eng.Pipeline().Execute(ctx, pipeline.Call{Agent: "architect", Tool: tool, Args: acquire}); o.Status != "success" {
				b.Fatalf("%s on A: %+v", tool, o)
			}
		}

		var relay, reg, next, notified, e2e, rtt []time.Duration
		b.ResetTimer()
		for range b.N {
			drainTimes(changed)
			drainTimes(registered)
			for len(events) > 0 {
				<-events
			}
			start := time.Now()
			call("syscall.skill.acquire")
			var ev stamp
			select {
			case ev = <-events:
			case <-time.After(time.Minute):
				b.Fatal("the skill event never reached B")
			}
			regAt := waitChange(b, registered, "registration on B")
			// A tools/list sent now (before list_changed) must show it.
			for !lists(b, ctx, cs, grepTool) {
				if time.Since(regAt) > time.Minute {
					b.Fatal("B's tools/list never showed the registered tool")
				}
			}
			listAt := time.Now()
			waitChange(b, changed, "list_changed on B")
			if !lists(b, ctx, cs, grepTool) {
				b.Fatal("B's tools/list after list_changed does not have the tool")
			}
			end := time.Now()
			relay = append(relay, ev.at.Sub(ev.published))
			reg = append(reg, regAt.Sub(ev.published))
			next = append(next, listAt.Sub(ev.published))
			notified = append(notified, end.Sub(ev.published))
			e2e = append(e2e, end.Sub(start))

			call("syscall.skill.drop")
			waitChange(b, changed, "list_changed on B after the drop")
			rtt = append(rtt, listRTT(b, ctx, cs))
		}
		b.StopTimer()
		p := func(d []time.Duration) float64 { return ms(pct(d, 50)) }
		b.ReportMetric(p(relay), "relay_ms_p50")
		b.ReportMetric(p(rtt), "list_rtt_ms_p50")
		b.ReportMetric(p(reg), "registered_ms_p50")
		b.ReportMetric(p(next), "next_list_ms_p50")
		b.ReportMetric(p(notified), "notified_ms_p50")
		b.ReportMetric(ms(pct(notified, 99)), "notified_ms_p99")
		b.ReportMetric(p(e2e), "e2e_ms_p50")
		b.ReportMetric(p(reg)/p(relay), "registered_ratio")
		b.ReportMetric(p(next)/p(relay), "next_list_ratio")
		b.ReportMetric(p(notified)/p(relay), "notified_ratio")
	})
}

// benchLinkPeers is linkPeers for benchmarks: it waits until a pipeline
// event of from reaches to's peer subscribers (see linkPeers).
func benchLinkPeers(b testing.TB, from, to *skillReplica) {
	b.Helper()
	got := make(chan struct{}, 1)
	var once sync.Once
	defer to.eng.SubscribePeers(func(ev pipeline.Event) {
		if ev.Kind == pipeline.EventCallFinished && ev.Tool == "link.peers" {
			once.Do(func() { got <- struct{}{} })
		}
	})()
	deadline := time.After(time.Minute)
	for {
		from.eng.Pipeline().Execute(context.Background(), pipeline.Call{Agent: "architect", Tool: "link.peers"})
		select {
		case <-got:
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			b.Fatal("the replicas never saw each other's events")
		}
	}
}
