package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// The test binary doubles as a stdio MCP server (one tool, echo) when
// envServer is set; it writes its pid to the file envPID names.
const (
	envServer = "ARMORY_ENGINE_TEST_SERVER"
	envPID    = "ARMORY_ENGINE_TEST_PID"
)

func TestMain(m *testing.M) {
	if os.Getenv(envServer) == "1" {
		os.WriteFile(os.Getenv(envPID), []byte(strconv.Itoa(os.Getpid())), 0o644)
		srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
		srv.AddTool(&mcp.Tool{Name: "echo", Description: "says its text back", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
			func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				var in struct{ Text string }
				json.Unmarshal(req.Params.Arguments, &in)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil
			})
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// upstreamWorld writes a world whose one agent may call the tools of one
// stdio upstream server, this test binary; pidFile receives its pid.
func upstreamWorld(t *testing.T) (dir, pidFile string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "w")
	pidFile = filepath.Join(t.TempDir(), "pid")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"world-config.yaml": "name: e\nagents:\n  - {id: a}\nmcp_servers:\n  up:\n    command: [" + strconv.Quote(self) + "]\n" +
			"    env:\n      " + envServer + ": \"1\"\n      " + envPID + ": " + strconv.Quote(pidFile) + "\n",
		"archetype/a/config.md": "## Tool Access\n## Permissions\nprofile: trusted\nmcp.up.echo: auto\n",
	}
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, pidFile
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// Open builds every part once: the upstream module's tool is in the
// catalog and runs through the pipeline, its pin and the call's audit
// records are in the one store, the trail copies them; Close stops the
// upstream server, closes the store and is idempotent.
func TestOpenRunsAnUpstreamToolAndCloses(t *testing.T) {
	dir, pidFile := upstreamWorld(t)
	ctx := context.Background()
	e, err := engine.Open(ctx, engine.Options{World: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if !e.Roster().Catalog.Has("mcp.up.echo") {
		t.Fatalf("the upstream tool is not in the catalog; warnings: %v", e.Roster().Warnings)
	}
	o := e.Pipeline().Execute(ctx, pipeline.Call{Agent: "a", Tool: "mcp.up.echo", Args: json.RawMessage(`{"text":"hi"}`)})
	if o.Status != audit.StatusSuccess || o.Result != "hi" {
		t.Fatalf("outcome %+v", o)
	}
	st := e.Store()
	pins, err := st.ListPins(ctx, "up")
	if err != nil || len(pins) != 1 || pins[0].Tool != "echo" {
		t.Fatalf("pins in the engine's store: %v %v", pins, err)
	}
	recs, err := st.ListAudit(ctx, store.AuditFilter{Tool: "mcp.up.echo"})
	if err != nil || len(recs) != 2 {
		t.Fatalf("audit records: %d %v", len(recs), err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(string(b))
	if !alive(pid) {
		t.Fatal("the upstream server is not running")
	}
	if err := e.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if alive(pid) {
		// Close waits for the server to exit, then kills its group.
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if alive(pid) {
			t.Fatalf("upstream server %d still runs after Close", pid)
		}
	}
	if _, err := st.AuditHead(ctx); err == nil {
		t.Fatal("the store is open after Close")
	}
	if err := e.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	// The trail's last catch-up copied both records.
	ents, err := os.ReadDir(filepath.Join(dir, ".armory", "audit"))
	if err != nil || len(ents) == 0 {
		t.Fatalf("no JSONL trail after Close: %v", err)
	}
}

// probe is a module that records its lifecycle into log, may fail its
// Provision, asks for the store, and checks at Close that the store is
// still open (Close runs in reverse order: modules before the store).
type probe struct {
	name      string
	log       *[]string
	fail      error
	st        store.Store
	storeOpen bool // at Close
	tools     []armory.Tool
}

func (m *probe) Name() string { return m.name }

func (m *probe) Provision(ctx context.Context, env engine.Env) (engine.Contribution, error) {
	*m.log = append(*m.log, "provision "+m.name)
	st, err := env.Store(ctx)
	if err != nil {
		return engine.Contribution{}, err
	}
	m.st = st
	if m.fail != nil {
		return engine.Contribution{}, m.fail
	}
	return engine.Contribution{Tools: m.tools, Unavailable: map[string]string{"probe." + m.name: "switched off by the test"}}, nil
}

func (m *probe) Close() error {
	*m.log = append(*m.log, "close "+m.name)
	_, err := m.st.AuditHead(context.Background())
	m.storeOpen = err == nil
	return nil
}

// Modules are provisioned in order and closed in reverse order, before
// the store; a module's unavailable reason reaches Explain.
func TestModulesCloseInReverseOrderBeforeTheStore(t *testing.T) {
	var log []string
	a, b := &probe{name: "a", log: &log}, &probe{name: "b", log: &log}
	e, err := engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Modules: []engine.Module{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := e.Roster().Explain("architect", "probe.b.x")
	if err != nil || !strings.Contains(strings.Join(ex.Reasons, " "), "switched off by the test") {
		t.Fatalf("explain: %+v %v", ex, err)
	}
	e.Close()
	if want := []string{"provision a", "provision b", "close b", "close a"}; !slices.Equal(log, want) {
		t.Fatalf("lifecycle %v, want %v", log, want)
	}
	if !a.storeOpen || !b.storeOpen {
		t.Fatal("the store was closed before a module")
	}
	if _, err := a.st.AuditHead(context.Background()); err == nil {
		t.Fatal("the store is open after Close")
	}
}

// When Open fails midway it closes what it opened: the modules provisioned
// so far (the failing one too) and the store.
func TestOpenFailureReleasesWhatItOpened(t *testing.T) {
	var log []string
	boom := errors.New("boom")
	a, b, c := &probe{name: "a", log: &log}, &probe{name: "b", log: &log, fail: boom}, &probe{name: "c", log: &log}
	_, err := engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Modules: []engine.Module{a, b, c}})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "module b") {
		t.Fatalf("Open: %v", err)
	}
	if want := []string{"provision a", "provision b", "close b", "close a"}; !slices.Equal(log, want) {
		t.Fatalf("lifecycle %v, want %v", log, want)
	}
	if _, err := a.st.AuditHead(context.Background()); err == nil {
		t.Fatal("the store stayed open after a failed Open")
	}
	// A world error (a duplicate tool from a module) also releases them.
	log = nil
	dup := &probe{name: "d", log: &log, tools: []armory.Tool{dupTool{}}}
	_, err = engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Modules: []engine.Module{dup}})
	if err == nil || !slices.Equal(log, []string{"provision d", "close d"}) {
		t.Fatalf("Open with a duplicate tool: %v, lifecycle %v", err, log)
	}
	if _, err := dup.st.AuditHead(context.Background()); err == nil {
		t.Fatal("the store stayed open after a failed Open")
	}
}

// dupTool has the name of a built-in tool.
// A module's tools show under its name; a module named like one of
// Armory's own sources (built-in) cannot open, and what it started is
// released.
func TestModuleNameIsItsToolsSource(t *testing.T) {
	var log []string
	svc := &probe{name: "services", log: &log, tools: []armory.Tool{namedTool("world.clock")}}
	e, err := engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Modules: []engine.Module{svc}})
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := e.Roster().Agent("architect")
	if src := e.Roster().Source(ag, "world.clock"); src != "services" {
		t.Errorf("source of world.clock = %q, want services", src)
	}
	e.Close()

	log = nil
	fake := &probe{name: "built-in", log: &log, tools: []armory.Tool{namedTool("world.clock")}}
	_, err = engine.Open(context.Background(), engine.Options{World: testenv.ExampleWorld(t), Modules: []engine.Module{fake}})
	if armory.KindOf(err) != armory.KindInvalid || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("a module named built-in: %v", err)
	}
	if !slices.Equal(log, []string{"provision built-in", "close built-in"}) {
		t.Fatalf("lifecycle %v", log)
	}
}

// namedTool is a tool that does nothing, under a name.
type namedTool string

func (n namedTool) Spec() armory.Spec {
	return armory.Spec{Name: string(n), Description: "does nothing", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (namedTool) Manifest() armory.Manifest { return armory.Manifest{} }
func (namedTool) Execute(context.Context, armory.Invocation) armory.Result {
	return armory.Result{Success: true}
}

type dupTool struct{}

func (dupTool) Spec() armory.Spec {
	return armory.Spec{Name: "workspace.read", Description: "a second workspace.read", InputSchema: json.RawMessage(`{"type":"object"}`)}
}
func (dupTool) Manifest() armory.Manifest { return armory.Manifest{} }
func (dupTool) Execute(context.Context, armory.Invocation) armory.Result {
	return armory.Result{Success: true}
}

// The parts a command skips are not built: a store-only engine provisions
// no module and has no trail nor pipeline; an engine that skips the store
// opens it only when a module asks for it, and closes it then.
func TestSkip(t *testing.T) {
	ctx := context.Background()
	var log []string
	m := &probe{name: "m", log: &log}
	e, err := engine.Open(ctx, engine.Options{World: testenv.ExampleWorld(t), Skip: engine.StoreOnly, Modules: []engine.Module{m}})
	if err != nil {
		t.Fatal(err)
	}
	if e.Store() == nil || e.Pipeline() != nil || e.Trail() != nil || len(log) != 0 {
		t.Fatalf("store-only: store %v pipeline %v trail %v modules %v", e.Store(), e.Pipeline(), e.Trail(), log)
	}
	e.Close()

	dir := testenv.ExampleWorld(t)
	e, err = engine.Open(ctx, engine.Options{World: dir, Skip: engine.Store | engine.Trail | engine.Pipeline})
	if err != nil {
		t.Fatal(err)
	}
	if e.Store() != nil || e.Roster() == nil {
		t.Fatal("a store was opened that no part needed")
	}
	e.Close()
	if _, err := os.Stat(filepath.Join(dir, ".armory", "armory.db")); err == nil {
		t.Fatal("the store file was created")
	}
	e, err = engine.Open(ctx, engine.Options{World: dir, Skip: engine.Store | engine.Trail | engine.Pipeline, Modules: []engine.Module{m}})
	if err != nil {
		t.Fatal(err)
	}
	if e.Store() == nil || m.st != e.Store() {
		t.Fatal("the module did not get the engine's store")
	}
	e.Close()
	if _, err := m.st.AuditHead(ctx); err == nil {
		t.Fatal("the store a module opened stays open after Close")
	}
}

// A store passed in stays the caller's; subscribers get the pipeline's
// events until they unsubscribe.
func TestGivenStoreAndSubscribe(t *testing.T) {
	ctx := context.Background()
	first, err := engine.Open(ctx, engine.Options{World: testenv.ExampleWorld(t), Skip: engine.StoreOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	st := first.Store()
	e, err := engine.Open(ctx, engine.Options{World: testenv.ExampleWorld(t), Store: st, Skip: engine.Trail})
	if err != nil {
		t.Fatal(err)
	}
	var got []pipeline.Event
	unsub := e.Subscribe(func(ev pipeline.Event) { got = append(got, ev) })
	// workspace.delete is at level confirm in the example world: the call
	// asks for an approval and says so as an event, then finishes pending.
	o := e.Pipeline().Execute(ctx, pipeline.Call{Agent: "architect", Tool: "workspace.delete", Args: json.RawMessage(`{"path":"x"}`)})
	if o.ApprovalID == "" || len(got) != 2 || got[0].Kind != pipeline.EventApprovalRequested ||
		got[1].Kind != pipeline.EventCallFinished || got[1].Status != "pending" || got[1].Session != o.Session || got[1].Message != "call "+o.CallID {
		t.Fatalf("outcome %+v, events %+v", o, got)
	}
	unsub()
	unsub()
	e.Pipeline().Execute(ctx, pipeline.Call{Agent: "architect", Tool: "workspace.delete", Args: json.RawMessage(`{"path":"y"}`)})
	if len(got) != 2 {
		t.Fatalf("an event after unsubscribe: %+v", got)
	}
	e.Close()
	if _, err := st.AuditHead(ctx); err != nil {
		t.Fatalf("Close closed the caller's store: %v", err)
	}
}

// Two engines on one database are two processes of one system: an
// approval that one asks for and the other decides (a human's `armory
// approvals approve`, which closes right after) shows on both as events:
// each engine's own events to its Subscribe, never as a peer's; the
// other's to its SubscribePeers. On SQLite (the world's own file) as on
// Postgres.
func TestEventsCrossProcesses(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testEventsCrossProcesses(t, "") })
	t.Run("postgres", func(t *testing.T) { testEventsCrossProcesses(t, testenv.PostgresSchema(t)) })
}

func testEventsCrossProcesses(t *testing.T, dsn string) {
	ctx := context.Background()
	dir := testenv.ExampleWorld(t)
	srv, err := engine.Open(ctx, engine.Options{World: dir, DB: dsn, Skip: engine.Trail})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	type got struct {
		ev   pipeline.Event
		peer bool
	}
	evs := make(chan got, 64)
	defer srv.Subscribe(func(ev pipeline.Event) { evs <- got{ev, false} })()
	defer srv.SubscribePeers(func(ev pipeline.Event) { evs <- got{ev, true} })()
	o := srv.Pipeline().Execute(ctx, pipeline.Call{Agent: "architect", Tool: "workspace.delete", Args: json.RawMessage(`{"path":"x"}`)})
	if o.ApprovalID == "" {
		t.Fatalf("no approval: %+v", o)
	}

	cli, err := engine.Open(ctx, engine.Options{World: dir, DB: dsn, Skip: engine.Trail})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Pipeline().Decide(ctx, pipeline.ApprovalDecision{ID: o.ApprovalID, Status: store.StatusDenied, Reason: "not now", Via: pipeline.ViaCLI}); err != nil {
		t.Fatal(err)
	}
	cli.Close() // at once, as a CLI command does

	deadline := time.After(time.Minute) // a bound, not a timing check
	for {
		select {
		case g := <-evs:
			if g.ev.Kind == pipeline.EventApprovalRequested && g.peer {
				t.Fatalf("the engine's own event came back as a peer's: %+v", g.ev)
			}
			if g.ev.Kind == pipeline.EventApprovalDecided && g.ev.ApprovalID == o.ApprovalID {
				if !g.peer || g.ev.Status != string(store.StatusDenied) {
					t.Fatalf("decision event %+v (peer %v)", g.ev, g.peer)
				}
				return
			}
		case <-deadline:
			t.Fatal("the decision made by the other engine never showed")
		}
	}
}
