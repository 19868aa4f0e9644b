package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/world"
)

// The benchmarks of this file compare Armory's MCP endpoint with a bare
// go-sdk server serving the same no-op tool, in one run, so that both sides
// see the same machine load:
//
//	go test ./server -run '^$' -bench 'NoopCall|AddedLatency' -benchtime 3000x -count 2
//	go test ./server -run '^$' -bench IdleSession -benchtime 1x -count 3
//
// (BenchmarkMCPIdleSessionMemory starts a client process per op: give it
// -benchtime 1x.)
//
// Armory's side is the production path: bearer-token authentication, the
// Host/Origin checks, the whole guarded pipeline and a durable audit trail
// in a real SQLite store (synchronous=FULL, the default).

// noopTool is a built-in that does nothing.
type noopTool struct{}

func (noopTool) Spec() armory.Spec {
	return armory.Spec{Name: "bench.noop", Description: "does nothing", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (noopTool) Manifest() armory.Manifest { return armory.Manifest{Category: armory.CatOther} }
func (noopTool) Execute(context.Context, armory.Invocation) armory.Result {
	return armory.OK("ok")
}

// benchArmory is an Armory server on 127.0.0.1:0 over a one-agent world
// whose agent has bench.noop with permission auto.
type benchArmory struct {
	url       string
	st        store.Store
	token     string
	workspace string // the agent's workspace folder
}

// armoryConfig varies the Armory side of a benchmark.
type armoryConfig struct {
	opts        server.Options
	synchronous string        // SQLite synchronous setting ("" = FULL, the default)
	noFileSink  bool          // without the JSONL audit trail that armory serve keeps beside the store
	upstream    string        // when set, the world's mcp_servers "up" (url), whose tool noop is mcp.up.noop (auto)
	echoCommand string        // when set, the world's mcp_servers "echo" (command: [echoCommand]), whose tool echo is mcp.echo.echo (auto)
	builtins    []armory.Tool // more built-ins beside bench.noop (workspace.read is auto)
	worldYAML   string        // more top-level lines of world-config.yaml
}

func startBenchArmory(b testing.TB, cfg armoryConfig) *benchArmory {
	b.Helper()
	dir := b.TempDir()
	wc := "name: bench\nagents:\n  - {id: bench}\n"
	wc += cfg.worldYAML
	if cfg.upstream != "" || cfg.echoCommand != "" {
		wc += "mcp_servers:\n"
	}
	if cfg.upstream != "" {
		wc += "  up:\n    url: " + cfg.upstream + "\n"
	}
	if cfg.echoCommand != "" {
		wc += "  echo:\n    command: [" + strconv.Quote(cfg.echoCommand) + "]\n"
	}
	files := map[string]string{
		"world-config.yaml":         wc,
		"archetype/bench/config.md": "## Tool Access\n## Permissions\nprofile: trusted\nbench.noop: auto\nmcp.up.noop: auto\nmcp.echo.echo: auto\nworkspace.read: auto\n",
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	w, err := world.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	// As armory serve: the world's durability mode.
	st, err := sqlite.OpenWith(filepath.Join(b.TempDir(), "armory.db"), sqlite.Options{Synchronous: cfg.synchronous,
		Durability: store.Durability(w.Durability), Window: w.DurabilityWindow})
	if err != nil {
		b.Fatal(err)
	}
	// As armory serve: the upstream servers pinned in the store and the
	// JSONL trail in <world>/.armory/audit, a copy of the store's.
	eopts := engine.Options{World: dir, Store: st, Builtins: append([]armory.Tool{noopTool{}}, cfg.builtins...)}
	if cfg.noFileSink {
		eopts.Skip = engine.Trail
	}
	eng, err := engine.Open(context.Background(), eopts)
	if err != nil {
		b.Fatal(err)
	}
	for tool, on := range map[string]bool{"mcp.up.noop": cfg.upstream != "", "mcp.echo.echo": cfg.echoCommand != ""} {
		if on && !eng.Roster().Catalog.Has(tool) {
			b.Fatalf("upstream tool %s unavailable: %v", tool, eng.Roster().Warnings)
		}
	}
	h := eng.Roster()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	cfg.opts.Addr = ln.Addr().String()
	srv, err := server.New(eng, cfg.opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	b.Cleanup(func() { cancel(); <-done; eng.Close(); st.Close() })
	token, _, err := server.CreateToken(context.Background(), st, "bench", false, "bench")
	if err != nil {
		b.Fatal(err)
	}
	return &benchArmory{url: "http://" + ln.Addr().String() + "/agents/bench/mcp", st: st, token: token, workspace: h.World.Workspace("bench")}
}

// startBenchBare serves a bare go-sdk MCP server with the same no-op tool
// (named noop) on 127.0.0.1:0 and returns its endpoint: stateful (sessions,
// up to 2025-11-25), or, with stateless, the sessionless 2026-07-28.
func startBenchBare(b testing.TB, stateless ...bool) string {
	b.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "noop", Description: "does nothing", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: len(stateless) > 0 && stateless[0]})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	b.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// connectBench opens one MCP client session (go-sdk client, streamable
// HTTP, its own connection pool so sessions do not share connections).
func connectBench(ctx context.Context, endpoint, token string) (*mcp.ClientSession, error) {
	return connectBenchProtocol(ctx, endpoint, token, legacyProtocol)
}

// The protocol revisions the benchmarks compare: the last with sessions
// (initialize, Mcp-Session-Id), and the sessionless one.
const (
	legacyProtocol      = "2025-11-25"
	sessionlessProtocol = "2026-07-28"
)

// connectBenchProtocol opens a session speaking protocol (the go-sdk client
// would otherwise pick the newest the server offers, so that Armory and a
// default, stateful bare server would speak different revisions).
func connectBenchProtocol(ctx context.Context, endpoint, token, protocol string) (*mcp.ClientSession, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	var rt http.RoundTripper = tr
	endpoint, session, _ := strings.Cut(endpoint, "#")
	if token != "" || session != "" {
		rt = benchBearer{token: token, session: session, next: tr}
	}
	return c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   endpoint,
		HTTPClient: &http.Client{Transport: rt},
		MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: protocol})
}

type benchBearer struct {
	token, session string
	next           http.RoundTripper
}

func (b benchBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	if b.session != "" {
		r.Header.Set(server.SessionHeader, b.session)
	}
	return b.next.RoundTrip(r)
}

// openSessions opens n sessions to endpoint. For Armory it lifts the caps
// of each session's pipeline session ("bench:<MCP session id>") so that no
// benchmark run hits them.
func openSessions(b testing.TB, n int, endpoint, token string, st store.Store) []*mcp.ClientSession {
	return openSessionsProtocol(b, n, endpoint, token, st, legacyProtocol)
}

// benchClientSeq numbers the sessionless clients' X-Armory-Session names.
var benchClientSeq atomic.Int64

// openSessionsProtocol is openSessions speaking protocol. A sessionless
// client has no MCP session: it names its caps session with the
// X-Armory-Session header, as a real one would.
func openSessionsProtocol(b testing.TB, n int, endpoint, token string, st store.Store, protocol string) []*mcp.ClientSession {
	b.Helper()
	ctx := context.Background()
	var out []*mcp.ClientSession
	for range n {
		name := ""
		ep := endpoint
		if protocol == sessionlessProtocol {
			name = fmt.Sprintf("c%d", benchClientSeq.Add(1))
			ep += "#" + name // carried to the transport below
		}
		cs, err := connectBenchProtocol(ctx, ep, token, protocol)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		if st != nil {
			if name == "" {
				name = server.SessionRef(cs.ID()) // the server's caps session for a stateful MCP session
			}
			sess := server.ScopeSession("bench", name)
			for _, c := range []string{"tool_invocations", "stream_events", store.LimitSessionRuntime} {
				if err := st.SetLimitOverride(ctx, sess, c, 1<<40); err != nil {
					b.Fatal(err)
				}
			}
		}
		out = append(out, cs)
	}
	return out
}

// Tool names on each side.
const (
	armoryNoop   = "bench.noop"
	bareNoop     = "noop"
	upstreamNoop = "mcp.up.noop"
)

// callNoop makes one tools/call of tool and checks it succeeded.
func callNoop(cs *mcp.ClientSession, tool string, i int64) error {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"i": i}})
	if err != nil {
		return err
	}
	if res.IsError {
		b, _ := json.Marshal(res)
		return fmt.Errorf("tool error: %s", b)
	}
	return nil
}

// runBatch makes calls tools/calls spread over the sessions (one goroutine
// per session) and returns the wall time it took.
// callSeq numbers every benchmark call of the process.
var callSeq atomic.Int64

func runBatch(b *testing.B, sessions []*mcp.ClientSession, tool string, calls int64) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	start := time.Now()
	for _, cs := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > calls {
					return
				}
				// The argument is unique across batches: identical calls in
				// a row would trip loop detection.
				if err := callNoop(cs, tool, callSeq.Add(1)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return d
}

// BenchmarkMCPNoopCall: no-op tools/call over streamable HTTP, Armory vs a
// bare go-sdk server, 1 and 16 concurrent clients (each its own session),
// per protocol revision: 2025-11-25 (sessions; the bare server stateful)
// and the sessionless 2026-07-28 (the bare server stateless; each Armory
// client names its caps session with X-Armory-Session). Each side makes
// b.N calls, in alternating batches (armory, bare, armory, …); the target
// is armory/bare ≥ 0.9.
func BenchmarkMCPNoopCall(b *testing.B) {
	for _, protocol := range []string{legacyProtocol, sessionlessProtocol} {
		b.Run("protocol="+protocol, func(b *testing.B) {
			a := startBenchArmory(b, armoryConfig{})
			bare := startBenchBare(b, protocol == sessionlessProtocol)
			for _, clients := range []int{1, 16} {
				as := openSessionsProtocol(b, clients, a.url, a.token, a.st, protocol)
				bs := openSessionsProtocol(b, clients, bare, "", nil, protocol)
				b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
					// Warm both sides (connections, caches and pools).
					runBatch(b, as, armoryNoop, int64(2*clients))
					runBatch(b, bs, bareNoop, int64(2*clients))
					const rounds = 10
					per := max(int64(b.N)/rounds, 1)
					var ta, tb time.Duration
					b.ResetTimer()
					for done := int64(0); done < int64(b.N); done += per {
						n := min(per, int64(b.N)-done)
						ta += runBatch(b, as, armoryNoop, n)
						tb += runBatch(b, bs, bareNoop, n)
					}
					b.StopTimer()
					ra := float64(b.N) / ta.Seconds()
					rb := float64(b.N) / tb.Seconds()
					b.ReportMetric(ra, "armory_calls/s")
					b.ReportMetric(rb, "bare_calls/s")
					b.ReportMetric(ra/rb, "ratio")
					b.ReportMetric(0, "ns/op")
				})
			}
		})
	}
}

// BenchmarkMCPAddedLatency: the latency one client sees for a no-op
// tools/call through Armory and straight to the bare go-sdk server, calls
// alternating one by one; added_us_p50 is the difference of the medians.
// The sub-benchmarks:
//
//   - upstream_hop: client → Armory → the bare server as an upstream MCP
//     server (mcp_servers url:, tool mcp.up.noop) vs client → the bare
//     server. This is the hop the target (≤ 150 µs) is about.
//   - builtin: Armory's own no-op built-in vs the bare server: what the
//     gateway adds without the second MCP round trip.
//   - builtin_tokencache=1s, builtin_sync=NORMAL, builtin_nofilesink: the
//     same with a time-based token cache, with SQLite synchronous=NORMAL (no
//     fsync per commit), and without the JSONL audit trail (which Armory
//     keeps, as armory serve does, in every other case), to show where the
//     time goes.
func BenchmarkMCPAddedLatency(b *testing.B) {
	bare := startBenchBare(b)
	cases := []struct {
		name string
		cfg  armoryConfig
		tool string
	}{
		{"upstream_hop", armoryConfig{upstream: bare}, upstreamNoop},
		{"builtin", armoryConfig{}, armoryNoop},
		{"builtin_tokencache=1s", armoryConfig{opts: server.Options{TokenCacheTTL: time.Second}}, armoryNoop},
		{"builtin_sync=NORMAL", armoryConfig{synchronous: "NORMAL"}, armoryNoop},
		{"builtin_nofilesink", armoryConfig{noFileSink: true}, armoryNoop},
	}
	for _, tc := range cases {
		a := startBenchArmory(b, tc.cfg)
		as := openSessions(b, 1, a.url, a.token, a.st)[0]
		bs := openSessions(b, 1, bare, "", nil)[0]
		b.Run(tc.name, func(b *testing.B) {
			for i := range 20 {
				if err := callNoop(as, tc.tool, int64(i)); err != nil {
					b.Fatal(err)
				}
				callNoop(bs, bareNoop, int64(i))
			}
			la := make([]time.Duration, 0, b.N)
			lb := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				t0 := time.Now()
				if err := callNoop(as, tc.tool, int64(i)); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := callNoop(bs, bareNoop, int64(i)); err != nil {
					b.Fatal(err)
				}
				la = append(la, t1.Sub(t0))
				lb = append(lb, time.Since(t1))
			}
			b.StopTimer()
			pa, pb := pct(la, 50), pct(lb, 50)
			b.ReportMetric(float64(pa.Microseconds()), "armory_us_p50")
			b.ReportMetric(float64(pb.Microseconds()), "bare_us_p50")
			b.ReportMetric(float64((pa - pb).Microseconds()), "added_us_p50")
			b.ReportMetric(float64(pct(la, 99).Microseconds()), "armory_us_p99")
			b.ReportMetric(float64(pct(lb, 99).Microseconds()), "bare_us_p99")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[(len(s)-1)*p/100]
}

// idleHelperEnv makes the test binary a client process holding idle MCP
// sessions (TestIdleSessionsHelper), so that the server's process measures
// only the server's memory.
const idleHelperEnv = "ARMORY_BENCH_IDLE_CLIENTS"

// TestIdleSessionsHelper is not a test: run by BenchmarkMCPIdleSessionMemory
// as a separate process, it opens N sessions to ENDPOINT (with TOKEN),
// prints "ready" and holds them until its stdin closes.
func TestIdleSessionsHelper(t *testing.T) {
	spec := os.Getenv(idleHelperEnv)
	if spec == "" {
		t.Skip("helper process of BenchmarkMCPIdleSessionMemory")
	}
	var n int
	var endpoint, token string
	fmt.Sscanf(spec, "%d %s %s", &n, &endpoint, &token)
	if token == "-" {
		token = ""
	}
	ctx := context.Background()
	for range n {
		cs, err := connectBench(ctx, endpoint, token)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		defer cs.Close()
	}
	fmt.Println("ready")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// serverFootprint returns the heap in use after GC and the goroutine count.
func serverFootprint() (heap uint64, goroutines int) {
	var m runtime.MemStats
	for range 2 {
		runtime.GC()
	}
	time.Sleep(50 * time.Millisecond)
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}

// idleSessions has a client process open n idle sessions to endpoint and
// returns the growth of this (the server's) process per session.
func idleSessions(b *testing.B, n int, endpoint, token string) (bytesPer, goroutinesPer float64) {
	h0, g0 := serverFootprint()
	if token == "" {
		token = "-"
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleSessionsHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), idleHelperEnv+"="+strconv.Itoa(n)+" "+endpoint+" "+token)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		stdin.Close()
		cmd.Wait()
		b.Fatalf("helper: %q %v", line, err)
	}
	// Let the standalone SSE streams (GETs sent after initialization) arrive.
	time.Sleep(300 * time.Millisecond)
	h1, g1 := serverFootprint()
	stdin.Close()
	cmd.Wait()
	return (float64(h1) - float64(h0)) / float64(n), float64(g1-g0) / float64(n)
}

// BenchmarkMCPIdleSessionMemory: the server's heap (after GC) and
// goroutines per idle MCP client session, each held by a go-sdk client in
// another process with its standalone SSE stream open, Armory vs bare.
func BenchmarkMCPIdleSessionMemory(b *testing.B) {
	const n = 200
	// Every round's sessions stay open until they idle out: the session
	// limits (64 per token by default) are lifted for this count.
	a := startBenchArmory(b, armoryConfig{opts: server.Options{MCPSessionsPerToken: 1 << 20, MCPSessions: 1 << 20}})
	bare := startBenchBare(b)
	var ab, ag, bb, bg float64
	for range b.N {
		x, y := idleSessions(b, n, a.url, a.token)
		ab, ag = ab+x, ag+y
		x, y = idleSessions(b, n, bare, "")
		bb, bg = bb+x, bg+y
	}
	N := float64(b.N)
	b.ReportMetric(ab/N, "armory_bytes/session")
	b.ReportMetric(ag/N, "armory_goroutines/session")
	b.ReportMetric(bb/N, "bare_bytes/session")
	b.ReportMetric(bg/N, "bare_goroutines/session")
	b.ReportMetric(0, "ns/op")
}
