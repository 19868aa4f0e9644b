package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/armory-dev/armory/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testTool is a real tool whose effect is counting its runs.
type testTool struct {
	name   string
	man    armory.Manifest
	schema string
	runs   atomic.Int64
	block  chan struct{} // when set, Execute waits for it (or ctx)
	stream int           // progress messages Execute sends (stopping when ctx ends)
	// mark, when set, is a file Execute appends a line to before it blocks:
	// its effect, seen across processes.
	mark string
}

func (t *testTool) Spec() armory.Spec {
	s := t.schema
	if s == "" {
		s = `{"type":"object"}`
	}
	return armory.Spec{Name: t.name, Description: "test tool " + t.name, InputSchema: json.RawMessage(s)}
}
func (t *testTool) Manifest() armory.Manifest { return t.man }
func (t *testTool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	if t.mark != "" {
		f, err := os.OpenFile(t.mark, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return armory.Failf(armory.KindInternal, "mark: %v", err)
		}
		fmt.Fprintf(f, "ran in process %d\n", os.Getpid())
		f.Close()
	}
	if t.block != nil {
		select {
		case <-t.block:
		case <-ctx.Done():
			return armory.Failf(armory.KindTimeout, "cancelled")
		}
	}
	sent := 0
	for i := 0; i < t.stream && ctx.Err() == nil; i++ {
		inv.Report("line %d", i)
		sent++
	}
	if t.stream > 0 {
		t.runs.Add(1)
		return armory.OK(fmt.Sprintf("%s sent %d lines", t.name, sent))
	}
	n := t.runs.Add(1)
	return armory.OK(fmt.Sprintf("%s ran (%d) with %s", t.name, n, inv.Args))
}

// previewTool is a test tool that previews its change (armory.Previewer).
type previewTool struct{ *testTool }

func (t *previewTool) Preview(ctx context.Context, inv armory.Invocation) (string, error) {
	return "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-old\n+" + string(inv.Args) + "\n", nil
}

type fixture struct {
	dir   string
	db    string
	h     *roster.Roster
	st    store.Store
	p     *Pipeline
	tools map[string]*testTool
	now   atomic.Int64 // unix nanos; 0 = real time
}

const worldYAML = `name: t
agents:
  - {id: dev}
  - {id: ops}
  - {id: locked}
  - {id: warden}
  - {id: plain}
permissions:
  test.worlddefault: deny
patterns:
  - {name: no-prod, kind: veto, triggers: [production-db], explanation: "never touch the production database"}
  - {name: careful-net, kind: bias, capabilities: [network], explanation: "network calls need a second look"}
limits:
  tool_invocations: 50
approval_timeout: 300ms
`

var agentConfigs = map[string]string{
	"dev":    "## Tool Access\n## Permissions\nprofile: standard\ntest.override: auto\n",
	"ops":    "## Tool Access\n## Permissions\nprofile: trusted\ntest.shell: auto\n",
	"locked": "## Tool Access\n## Permissions\nprofile: restricted\n",
	"warden": "## Tool Access\n## Capabilities\n- tool_approval: test.always, test.family\n",
	"plain":  "## Tool Access\n## Limits\ntool_invocations: 3\n",
}

func testTools() []*testTool {
	return []*testTool{
		{name: "test.noop", man: armory.Manifest{Category: armory.CatOther}},
		{name: "test.args", man: armory.Manifest{Category: armory.CatOther}, schema: `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`},
		{name: "test.shell", man: armory.Manifest{Category: armory.CatTerminal, Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapProcessExec}, Permission: armory.PermConfirm}, schema: `{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`},
		{name: "test.write", man: armory.Manifest{Category: armory.CatFileWrite, Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapWriteFS}}, schema: `{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string"}}}`},
		{name: "test.confirm", man: armory.Manifest{Category: armory.CatOther, Permission: armory.PermConfirm}},
		{name: "test.always", man: armory.Manifest{Category: armory.CatOther, Permission: armory.PermAlwaysConfirm}},
		{name: "test.deny", man: armory.Manifest{Category: armory.CatOther, Permission: armory.PermDeny}},
		{name: "test.worlddefault", man: armory.Manifest{Category: armory.CatOther}},
		{name: "test.override", man: armory.Manifest{Category: armory.CatFileWrite, Permission: armory.PermDeny}},
		{name: "test.net", man: armory.Manifest{Category: armory.CatOther, Capabilities: []armory.Capability{armory.CapNetwork}}},
		{name: "test.slow", man: armory.Manifest{Category: armory.CatOther}},
		{name: "test.stream", man: armory.Manifest{Category: armory.CatOther}, stream: 100},
		{name: "test.ownjust", man: armory.Manifest{Category: armory.CatOther}, schema: `{"type":"object","properties":{"justification":{"type":"string"}}}`},
		{name: "test.effect", man: armory.Manifest{Category: armory.CatFileWrite, Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapWriteFS}, Permission: armory.PermConfirm}},
	}
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	if err := writeTestWorld(dir); err != nil {
		t.Fatal(err)
	}
	f, err := openFixture(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.st.Close() })
	return f
}

func writeTestWorld(dir string) error {
	files := map[string]string{"world-config.yaml": worldYAML}
	for id, c := range agentConfigs {
		files["archetype/"+id+"/config.md"] = c
	}
	return testenv.WriteFiles(dir, files)
}

// openFixture opens the pipeline of the test world in dir (also used by the
// helper processes of the cross-process tests).
func openFixture(dir string) (*fixture, error) {
	f := &fixture{dir: dir, tools: map[string]*testTool{}}
	var tools []armory.Tool
	for _, tt := range testTools() {
		f.tools[tt.name] = tt
		tools = append(tools, tt)
	}
	f.tools["test.slow"].block = make(chan struct{})
	tools = append(tools, &previewTool{&testTool{name: "test.family.edit", man: armory.Manifest{Category: armory.CatFileWrite,
		Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapWriteFS}, Permission: armory.PermAlwaysConfirm}}})
	f.tools["test.effect"].block = make(chan struct{})
	f.tools["test.effect"].mark = filepath.Join(dir, "effect.log")
	// svc.noop is a module's tool (a world service, say): effect-free by
	// its manifest, but not Armory's own, so it is admitted before it runs.
	svc := &testTool{name: "svc.noop", man: armory.Manifest{Category: armory.CatOther}}
	f.tools[svc.name] = svc
	h, err := roster.Open(f.dir, roster.Options{Builtins: tools, Modules: []roster.ModuleTools{{Source: "services", Tools: []armory.Tool{svc}}}})
	if err != nil {
		return nil, err
	}
	f.h = h
	f.db = filepath.Join(f.dir, ".armory", "armory.db")
	st, err := sqlite.OpenWith(f.db, sqlite.Options{Now: f.clock})
	if err != nil {
		return nil, err
	}
	f.st = st
	f.p, err = New(h, Options{Store: st, PollInterval: 10 * time.Millisecond, Now: f.clock})
	if err != nil {
		st.Close()
		return nil, err
	}
	return f, nil
}

func (f *fixture) clock() time.Time {
	if n := f.now.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Now()
}

func (f *fixture) call(agent, tool, args string) Outcome {
	return f.p.Execute(context.Background(), Call{Agent: agent, Tool: tool, Args: json.RawMessage(args)})
}

// records returns the audit records of one call, oldest first.
func (f *fixture) records(t *testing.T, callID string) []*audit.Record {
	t.Helper()
	recs, err := f.st.ListAudit(context.Background(), store.AuditFilter{CallID: callID, Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestSuccessIsAuditedBeforeAndAfter(t *testing.T) {
	f := newFixture(t)
	o := f.call("dev", "test.noop", `{"token":"sk-ant-REDACTME0123456789abcdefghij"}`)
	if o.Status != audit.StatusSuccess || o.Kind != armory.KindOther || o.CallID == "" {
		t.Fatalf("outcome = %+v", o)
	}
	recs := f.records(t, o.CallID)
	if len(recs) != 2 || recs[0].Phase != audit.PhaseStart || recs[0].Status != audit.StatusRunning || recs[1].Phase != audit.PhaseFinish || recs[1].Status != audit.StatusSuccess {
		t.Fatalf("records = %+v", recs)
	}
	if strings.Contains(string(recs[0].Args), "REDACTME") || strings.Contains(recs[1].Result, "REDACTME") {
		t.Fatalf("a secret reached the audit trail: %s / %s", recs[0].Args, recs[1].Result)
	}
	var names []string
	for _, st := range recs[1].Stages {
		names = append(names, st.Name)
	}
	if got := strings.Join(names, ","); got != "lookup,validate,caps,patterns,permission,run" {
		t.Fatalf("stages = %s", got)
	}
	if err := f.st.VerifyAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestRefusals(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, agent, tool, args string
		status                  audit.Status
		kind                    armory.Kind
		text                    string
	}{
		{"unknown tool", "dev", "test.nope", `{}`, audit.StatusError, armory.KindNotFound, "Unknown tool: test.nope"},
		{"unknown agent", "ghost", "test.noop", `{}`, audit.StatusError, armory.KindNotFound, `unknown agent "ghost"`},
		{"schema: missing", "dev", "test.args", `{}`, audit.StatusError, armory.KindInvalid, "Invalid arguments for test.args"},
		{"schema: type", "dev", "test.args", `{"n":"x"}`, audit.StatusError, armory.KindInvalid, "Invalid arguments for test.args"},
		{"schema: extra", "dev", "test.args", `{"n":1,"m":2}`, audit.StatusError, armory.KindInvalid, "Invalid arguments"},
		{"not an object", "dev", "test.noop", `[1]`, audit.StatusError, armory.KindInvalid, "must be a JSON object"},
		{"not JSON", "dev", "test.noop", `{`, audit.StatusError, armory.KindInvalid, "not valid JSON"},
		{"catastrophic, trusted + auto override", "ops", "test.shell", `{"command":"sudo rm -rf / --no-preserve-root"}`, audit.StatusBlocked, armory.KindBlocked, "Blocked catastrophic command: sudo rm -rf / --no-preserve-root"},
		{"catastrophic in a pipeline", "dev", "test.shell", `{"command":"echo hi && git push --force origin main"}`, audit.StatusBlocked, armory.KindBlocked, "Blocked catastrophic command"},
		{"parse error fails closed", "ops", "test.shell", `{"command":"echo 'unclosed"}`, audit.StatusBlocked, armory.KindBlocked, "Blocked"},
		{"veto trigger", "dev", "test.noop", `{"target":"the PRODUCTION-DB host"}`, audit.StatusBlocked, armory.KindBlocked, "VETOED by pattern 'no-prod': never touch the production database"},
		{"veto trigger hidden by JSON escapes", "dev", "test.noop", `{"target":"\u0070roduction\u002ddb"}`, audit.StatusBlocked, armory.KindBlocked, "VETOED by pattern 'no-prod'"},
		{"veto trigger in a key", "dev", "test.noop", `{"production-db":1}`, audit.StatusBlocked, armory.KindBlocked, "VETOED by pattern 'no-prod'"},
		{"veto trigger nested", "dev", "test.noop", `{"a":[{"b":"x production-db y"}]}`, audit.StatusBlocked, armory.KindBlocked, "VETOED by pattern 'no-prod'"},
		{"deny by manifest", "plain", "test.deny", `{}`, audit.StatusDenied, armory.KindDenied, "Denied: test.deny"},
		{"deny by world default", "plain", "test.worlddefault", `{}`, audit.StatusDenied, armory.KindDenied, "world's permission rule"},
		{"restricted profile: terminal", "locked", "test.shell", `{"command":"ls"}`, audit.StatusDenied, armory.KindDenied, "profile restricted"},
		{"restricted profile: file write", "locked", "test.write", `{"path":"a"}`, audit.StatusDenied, armory.KindDenied, "profile restricted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.tools["test.shell"].runs.Load() + f.tools["test.noop"].runs.Load()
			o := f.call(tc.agent, tc.tool, tc.args)
			if o.Status != tc.status || o.Kind != tc.kind || !strings.Contains(o.Result, tc.text) {
				t.Fatalf("outcome = %s %s %q\nwant %s %s containing %q\nreasons %v", o.Status, o.Kind, o.Result, tc.status, tc.kind, tc.text, o.Reasons)
			}
			if after := f.tools["test.shell"].runs.Load() + f.tools["test.noop"].runs.Load(); after != before {
				t.Fatal("a refused call ran")
			}
			recs := f.records(t, o.CallID)
			if len(recs) != 1 || recs[0].Status != tc.status || recs[0].Phase != audit.PhaseFinish {
				t.Fatalf("a refusal is audited once with its status: %+v", recs)
			}
		})
	}
}

func TestPermissionLevels(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		agent, tool, args string
		want              audit.Status
		level             string
	}{
		{"dev", "test.override", `{"path":"x"}`, audit.StatusSuccess, "auto"},           // agent rule beats manifest deny
		{"dev", "test.write", `{"path":"x"}`, audit.StatusPending, "confirm"},           // standard profile: file write confirm
		{"ops", "test.write", `{"path":"x"}`, audit.StatusSuccess, "auto"},              // trusted: file write auto
		{"ops", "test.shell", `{"command":"ls -la"}`, audit.StatusSuccess, "auto"},      // agent rule auto, screen allow
		{"ops", "test.shell", `{"command":"npm test"}`, audit.StatusPending, "confirm"}, // not known safe: at least confirm
		{"dev", "test.shell", `{"command":"ls"}`, audit.StatusSuccess, "auto"},          // standard: terminal safe auto
		{"dev", "test.shell", `{"command":"make build"}`, audit.StatusPending, "confirm"},
		{"plain", "test.confirm", `{}`, audit.StatusPending, "confirm"},
		{"plain", "test.net", `{}`, audit.StatusPending, "confirm"}, // bias pattern raised auto to confirm
	}
	for _, tc := range tests {
		o := f.call(tc.agent, tc.tool, tc.args)
		if o.Status != tc.want || o.Permission != tc.level {
			t.Errorf("%s %s %s: %s at %s, want %s at %s (%v)", tc.agent, tc.tool, tc.args, o.Status, o.Permission, tc.want, tc.level, o.Reasons)
		}
		if o.Status == audit.StatusPending && (o.ApprovalID == "" || o.Kind != armory.KindPending || !strings.Contains(o.Human, "armory call --resume "+o.ApprovalID) || strings.Contains(o.Result, "armory ") || !strings.Contains(o.Result, "call this tool again")) {
			t.Errorf("pending outcome must name the approval and how to resume: %+v", o)
		}
	}
}

// TestSessionNameBounded: a session name over MaxSessionBytes, not UTF-8
// or holding a control character (an escape sequence for the terminals
// that show it) is refused before it reaches the store, and is recorded
// cut, without the control characters.
func TestSessionNameBounded(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, session string
		ok            bool
	}{
		{"at the limit", strings.Repeat("s", MaxSessionBytes), true},
		{"over the limit", strings.Repeat("s", MaxSessionBytes+1), false},
		{"60 KB", strings.Repeat("x", 60<<10), false},
		{"not UTF-8", "run-\xff", false},
		{"an escape sequence", "run-\x1b[2J", false},
		{"a newline", "run\nforged line", false},
		{"a C1 control", "run-\u009b31m", false},
		{"an escape sequence, not UTF-8", "run-\x1b[2J\xff", false},
		{"an escape sequence, over the limit", "\x1b[2J" + strings.Repeat("s", MaxSessionBytes), false},
		{"control characters only", strings.Repeat("\a", MaxSessionBytes), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := f.p.Execute(ctx, Call{Agent: "ops", Tool: "test.noop", Session: tc.session, Args: json.RawMessage(`{}`)})
			if (o.Status == audit.StatusSuccess) != tc.ok {
				t.Fatalf("status %s (%s), want ok=%v", o.Status, o.Result, tc.ok)
			}
			if tc.ok {
				return
			}
			if o.Kind != armory.KindInvalid || !strings.Contains(o.Result, "the limit is 256 bytes") && !strings.Contains(o.Result, "control character") {
				t.Fatalf("refusal: %+v", o)
			}
			recs, err := f.st.ListAudit(ctx, store.AuditFilter{CallID: o.CallID})
			if err != nil || len(recs) != 1 {
				t.Fatalf("audit: %d records, %v", len(recs), err)
			}
			if len(recs[0].Session) > MaxSessionBytes {
				t.Fatalf("audit record keeps a %d-byte session", len(recs[0].Session))
			}
			if strings.IndexFunc(recs[0].Session, unicode.IsControl) >= 0 {
				t.Fatalf("audit record keeps a control character: %q", recs[0].Session)
			}
			if n, err := f.st.Counters(ctx, tc.session); err != nil || len(n) != 0 {
				t.Fatalf("counters of the refused session: %v %v", n, err)
			}
		})
	}
}

// A call of a tool that cannot change anything commits once: its
// admission, start and finish records in one durable commit
// (store.AdmitRequest.Finish); with a progress listener (a streaming call,
// admitted before it runs) its start record is committed without an fsync
// of its own (store.AdmitRequest.NoSync). Every other tool's start and
// finish records are two durable commits.
func TestEffectFreeCallCommitsOnce(t *testing.T) {
	f := newFixture(t)
	st := f.st.(*sqlite.Store)
	for _, tc := range []struct {
		agent, tool, args string
		progress          bool
		relaxed, durable  int64
	}{
		{"dev", "test.noop", `{}`, false, 0, 1},
		{"dev", "test.args", `{"n":1}`, false, 0, 1},
		{"dev", "test.args", `{"n":2}`, true, 1, 1},
		{"dev", "svc.noop", `{}`, false, 1, 1}, // a module's tool: admitted (relaxed) before it runs, then finished
		{"ops", "test.write", `{"path":"a","content":"x"}`, false, 0, 2},
		{"ops", "test.shell", `{"command":"ls"}`, false, 0, 2},
	} {
		c0 := st.CommitCounts()
		c := Call{Agent: tc.agent, Tool: tc.tool, Session: "commits", Args: json.RawMessage(tc.args)}
		if tc.progress {
			c.Progress = func(string) {}
		}
		o := f.p.Execute(context.Background(), c)
		if o.Status != audit.StatusSuccess {
			t.Fatalf("%s: %+v", tc.tool, o)
		}
		c1 := st.CommitCounts()
		if c1.Relaxed-c0.Relaxed != tc.relaxed || c1.Durable-c0.Durable != tc.durable {
			t.Errorf("%s: commits %+v → %+v, want %d relaxed and %d durable", tc.tool, c0, c1, tc.relaxed, tc.durable)
		}
		if recs := f.records(t, o.CallID); len(recs) != 2 || recs[0].Phase != audit.PhaseStart || recs[1].Phase != audit.PhaseFinish || recs[1].Seq != recs[0].Seq+1 {
			t.Errorf("%s: records %+v", tc.tool, recs)
		}
	}
	if err := f.st.VerifyAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEffectFree(t *testing.T) {
	caps := func(c ...armory.Capability) []armory.Capability { return c }
	for _, tc := range []struct {
		name string
		m    armory.Manifest
		want bool
	}{
		{"no capability", armory.Manifest{Category: armory.CatOther}, true},
		{"file read", armory.Manifest{Category: armory.CatFileRead, Danger: armory.DangerCautious, Capabilities: caps(armory.CapReadFS)}, true},
		{"state read", armory.Manifest{Category: armory.CatAgent, Capabilities: caps(armory.CapReadState)}, true},
		{"dangerous", armory.Manifest{Category: armory.CatOther, Danger: armory.DangerDangerous}, false},
		{"writes files", armory.Manifest{Category: armory.CatOther, Capabilities: caps(armory.CapReadFS, armory.CapWriteFS)}, false},
		{"writes state", armory.Manifest{Category: armory.CatAgent, Capabilities: caps(armory.CapWriteState)}, false},
		{"network", armory.Manifest{Category: armory.CatOther, Capabilities: caps(armory.CapNetwork)}, false},
		{"runs processes", armory.Manifest{Category: armory.CatOther, Capabilities: caps(armory.CapProcessExec)}, false},
		{"asks the user", armory.Manifest{Category: armory.CatOther, Capabilities: caps(armory.CapUserInteraction)}, false},
		{"controls agents", armory.Manifest{Category: armory.CatOther, Capabilities: caps(armory.CapAgentControl)}, false},
		{"upstream MCP tool claiming only reads", armory.Manifest{Category: armory.CatMCP, Capabilities: caps(armory.CapReadFS)}, false},
		{"web category", armory.Manifest{Category: armory.CatWeb}, false},
		{"terminal category", armory.Manifest{Category: armory.CatTerminal}, false},
		{"git category", armory.Manifest{Category: armory.CatGit, Capabilities: caps(armory.CapReadFS)}, false},
		{"write category", armory.Manifest{Category: armory.CatFileWrite}, false},
		{"delete category", armory.Manifest{Category: armory.CatFileDelete}, false},
	} {
		if got := effectFree(tc.m); got != tc.want {
			t.Errorf("%s: effectFree = %v, want %v", tc.name, got, tc.want)
		}
	}
	// An upstream server's tool never is, whatever its annotations claim.
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}
	for _, stdio := range []bool{false, true} {
		if m := upstream.Manifest(stdio, ro); effectFree(m) {
			t.Errorf("upstream tool (stdio %v) annotated read-only counts as effect-free: %+v", stdio, m)
		}
	}
}

// With the JSONL trail following the store (as the CLI and armory serve
// run), the file trail is a copy of the store's — start and finish of each
// call, refusals included, with the store's Seq and hashes — whatever mix
// of relaxed and durable records concurrent calls write, and both verify.
func TestFileTrailMatchesStore(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(f.dir, ".armory", "audit")
	fol := trail.Start(dir, f.st, trail.Options{MaxRecords: 10})
	var err error
	if f.p, err = New(f.h, Options{Store: f.st, AfterAudit: fol.Committed, PollInterval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	calls := []struct{ agent, tool, args string }{
		{"dev", "test.noop", `{}`},                          // effect-free: relaxed start
		{"ops", "test.write", `{"path":"a","content":"x"}`}, // durable start
		{"dev", "test.deny", `{}`},                          // refused: finish only
		{"dev", "test.args", `{"n":"not a number"}`},        // invalid arguments
	}
	var wg sync.WaitGroup
	for i := range 40 {
		c := calls[i%len(calls)]
		wg.Go(func() {
			f.p.Execute(context.Background(), Call{Agent: c.agent, Tool: c.tool, Session: fmt.Sprint("s", i%8), Args: json.RawMessage(c.args)})
		})
	}
	wg.Wait()
	if err := fol.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep, err := trail.Check(context.Background(), f.st, dir); err != nil || rep.Behind != 0 {
		t.Fatalf("check: %+v, %v", rep, err)
	}
	if _, err := audit.VerifyDir(dir, 0, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.st.VerifyAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
	key := func(r *audit.Record) string {
		return fmt.Sprint(r.Seq, " ", r.Hash, " ") + r.ID + " " + string(r.Phase) + " " + string(r.Status) + " " + r.Tool + " " + string(r.Args)
	}
	var fromFile, fromStore []string
	for r, err := range audit.ReadDir(dir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		fromFile = append(fromFile, key(r))
	}
	if err := f.st.IterAudit(context.Background(), func(r *audit.Record) error {
		fromStore = append(fromStore, key(r))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(fromFile)
	slices.Sort(fromStore)
	if len(fromStore) < 40 || !slices.Equal(fromFile, fromStore) {
		t.Fatalf("trails differ: %d records in the file, %d in the store", len(fromFile), len(fromStore))
	}
}
