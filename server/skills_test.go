package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/skills"
	"github.com/armory-dev/armory/store"
)

// The skills over the server: an agent's MCP clients follow its skill
// tools as they come and go (acquired over REST, by the agent's own
// syscall.skill.acquire, or in another process on the same store), and the
// /api/skills routes answer a person (admin token) and an agent (its own
// syscall.skill.* tools through the pipeline).

// grepTool is the example world's skill tool (skills/text-tools).
const grepTool = "text-tools.grep"

// serveSkills serves world dir with the skills module on db (a SQLite
// file or a Postgres DSN), its background work started as `armory serve`
// starts it (it follows the other processes' skill events). The admin
// token is made on the store's first server; a second server on the same
// store is given it by the test.
func serveSkills(t *testing.T, dir, db string) *env {
	t.Helper()
	e := serve(t, engine.Options{World: dir, DB: db, Modules: []engine.Module{skills.New(skills.Options{})}}, server.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // runs first: the module's work stops before the server and the engine
	if err := e.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.db = db
	if admin, err := server.EnsureAdminToken(context.Background(), e.st); err != nil {
		t.Fatal(err)
	} else if admin != "" {
		e.admin = admin
	}
	return e
}

// skillClient is an MCP client session of an agent that counts the
// server's notifications/tools/list_changed.
type skillClient struct {
	t       *testing.T
	cs      *mcp.ClientSession
	changed chan struct{}
}

func (e *env) skillClient(agent string) *skillClient {
	e.t.Helper()
	changed := make(chan struct{}, 64)
	cs := e.mcp(agent, e.token(agent), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		},
	})
	return &skillClient{t: e.t, cs: cs, changed: changed}
}

// names is the client's tools/list.
func (c *skillClient) names(ctx context.Context) []string {
	c.t.Helper()
	_, n := testenv.MCPTools(c.t, ctx, c.cs)
	return n
}

// drain forgets the notifications received so far.
func (c *skillClient) drain() {
	for {
		select {
		case <-c.changed:
		default:
			return
		}
	}
}

// expectChange waits for the next notifications/tools/list_changed (a
// minute at most: a bound, not a timing check); the tools/list that
// follows it must list tool (has) or not.
func (c *skillClient) expectChange(ctx context.Context, tool string, has bool, what string) {
	c.t.Helper()
	select {
	case <-c.changed:
	case <-time.After(time.Minute):
		c.t.Fatalf("%s: no notifications/tools/list_changed", what)
	}
	if got := c.names(ctx); slices.Contains(got, tool) != has {
		c.t.Fatalf("%s: the tools/list after list_changed has %s = %v: %v", what, tool, !has, got)
	}
}

// decode unmarshals a response body, failing the test on a bad status.
func decode[T any](t *testing.T, what string, status int, body string, want int) T {
	t.Helper()
	var v T
	if status != want || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("%s: %d %s (want %d)", what, status, body, want)
	}
	return v
}

// An agent's MCP client follows its skill tools in one process: acquired
// by a person over REST, then by the agent's own tools/call of
// syscall.skill.acquire, each makes the server send
// notifications/tools/list_changed and the next tools/list lists the
// skill's tool (and the tool runs, in the sandbox); each drop takes it out
// again. Another agent's list never changes.
func TestSkillToolsFollowAcquireAndDrop(t *testing.T) {
	testenv.LookPath(t, "bwrap", "apt-get install bubblewrap")
	e := serveSkills(t, testenv.ExampleWorld(t), filepath.Join(t.TempDir(), "armory.db"))
	ctx := ctx30(t)
	c := e.skillClient("architect")
	other := e.skillClient("reviewer")
	if slices.Contains(c.names(ctx), grepTool) {
		t.Fatal("the skill's tool is listed before the skill is acquired")
	}

	// A person acquires it for the agent (REST, admin token).
	c.drain()
	status, body, _ := e.do("POST", "/api/agents/architect/skills/text-tools/acquire", e.admin, "")
	res := decode[skills.AcquireResult](t, "acquire", status, body, 200)
	if !res.Changed || !slices.Equal(res.Tools, []string{grepTool}) {
		t.Fatalf("acquire: %+v", res)
	}
	c.expectChange(ctx, grepTool, true, "acquired over REST")
	ws := e.h.World.Workspace("architect")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: grepTool, Arguments: map[string]any{"pattern": "^b", "file": "notes.txt"}})
	if err != nil || r.IsError || callText(r) != "2:beta\n" {
		t.Fatalf("call of the skill's tool: %v %+v", err, r)
	}

	// A person drops it.
	c.drain()
	if status, body, _ := e.do("POST", "/api/agents/architect/skills/text-tools/drop", e.admin, ""); status != 200 {
		t.Fatalf("drop: %d %s", status, body)
	}
	c.expectChange(ctx, grepTool, false, "dropped over REST")
	if _, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: grepTool, Arguments: map[string]any{"pattern": "b", "file": "notes.txt"}}); err == nil {
		t.Fatal("a dropped skill's tool still runs")
	}

	// The agent acquires it itself, over MCP.
	c.drain()
	r, err = c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "syscall.skill.acquire", Arguments: map[string]any{"name": "text-tools"}})
	if err != nil || r.IsError || !strings.Contains(callText(r), "Acquired skill text-tools: "+grepTool) {
		t.Fatalf("syscall.skill.acquire: %v %+v", err, r)
	}
	c.expectChange(ctx, grepTool, true, "acquired by the agent")
	// …and drops it.
	c.drain()
	r, err = c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "syscall.skill.drop", Arguments: map[string]any{"name": "text-tools"}})
	if err != nil || r.IsError {
		t.Fatalf("syscall.skill.drop: %v %+v", err, r)
	}
	c.expectChange(ctx, grepTool, false, "dropped by the agent")

	// The reviewer's list never had it, and its client was told nothing.
	if slices.Contains(other.names(ctx), grepTool) {
		t.Fatal("another agent lists the skill's tool")
	}
	select {
	case <-other.changed:
		t.Fatal("another agent's client was told its list changed")
	default:
	}
	// Every change is audited: the person's as the human's, via rest; the
	// agent's as its calls.
	for tool, n := range map[string]int{"skills.acquire": 1, "skills.drop": 1, "syscall.skill.acquire": 2, "syscall.skill.drop": 2} {
		recs, err := e.st.ListAudit(ctx, store.AuditFilter{Tool: tool})
		if err != nil || len(recs) != n {
			t.Fatalf("audit of %s: %d records, %v", tool, len(recs), err)
		}
		if strings.HasPrefix(tool, "skills.") && (recs[0].DecidedBy != pipeline.Human || !strings.Contains(string(recs[0].Args), `"via":"rest"`)) {
			t.Fatalf("audit of %s: %+v", tool, recs[0])
		}
	}
}

// linkPeers waits until an event published by from reaches to's peer
// subscribers. A SQLite store writes events only once it has seen another
// process listen on its file, and it looks again once a listener beat
// (2 s) after its first publish: a server that published before the other
// one listened (its Start acquires the skills of config.md) would skip the
// other's events until then. (Postgres relays every event at once.)
func linkPeers(t *testing.T, from, to *env) {
	t.Helper()
	got := make(chan struct{}, 1)
	tag := "link." + strings.ReplaceAll(from.url[len("http://"):], ":", "-")
	defer to.eng.SubscribePeers(func(ev pipeline.Event) {
		if ev.Kind == pipeline.EventCallFinished && ev.Tool == tag {
			select {
			case got <- struct{}{}:
			default:
			}
		}
	})()
	deadline := time.After(time.Minute) // a bound, not a timing check
	for {
		from.tagCall("architect", tag)
		select {
		case <-got:
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatal("the servers never saw each other's events")
		}
	}
}

// Two servers on one store (SQLite file, Postgres database) and one world
// folder: a skill acquired through one — by a person over REST, or by the
// agent's own tools/call — reaches the other's MCP client of that agent
// as notifications/tools/list_changed with the tool in its next
// tools/list, carried by the skill event; a drop takes it out there too.
func TestSkillToolsCrossReplicas(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		testSkillToolsCrossReplicas(t, filepath.Join(t.TempDir(), "armory.db"))
	})
	t.Run("postgres", func(t *testing.T) { testSkillToolsCrossReplicas(t, postgresSchema(t)) })
}

func testSkillToolsCrossReplicas(t *testing.T, db string) {
	dir := testenv.ExampleWorld(t)
	a := serveSkills(t, dir, db)
	b := serveSkills(t, dir, db)
	b.admin = a.admin
	linkPeers(t, a, b)
	linkPeers(t, b, a)
	ctx := ctx30(t)
	onA, onB := a.skillClient("architect"), b.skillClient("architect")
	if slices.Contains(onB.names(ctx), grepTool) {
		t.Fatal("listed before the skill is acquired")
	}

	onB.drain()
	if status, body, _ := a.do("POST", "/api/agents/architect/skills/text-tools/acquire", a.admin, ""); status != 200 {
		t.Fatalf("acquire through A: %d %s", status, body)
	}
	onB.expectChange(ctx, grepTool, true, "B, after a person's acquire through A")
	onB.drain()
	if status, body, _ := a.do("POST", "/api/agents/architect/skills/text-tools/drop", a.admin, ""); status != 200 {
		t.Fatalf("drop through A: %d %s", status, body)
	}
	onB.expectChange(ctx, grepTool, false, "B, after a person's drop through A")

	// The agent's own call on A.
	onB.drain()
	r, err := onA.cs.CallTool(ctx, &mcp.CallToolParams{Name: "syscall.skill.acquire", Arguments: map[string]any{"name": "text-tools"}})
	if err != nil || r.IsError {
		t.Fatalf("syscall.skill.acquire on A: %v %+v", err, r)
	}
	onB.expectChange(ctx, grepTool, true, "B, after the agent's acquire on A")
	// B's REST listing and the agent's view there say the same.
	if names := b.restTools("architect", b.admin); !slices.Contains(names, grepTool) {
		t.Fatalf("B's GET /api/agents/architect/tools: %v", names)
	}
	status, body, _ := b.do("GET", "/api/agents/architect/skills", b.admin, "")
	view := decode[struct{ Skills []skills.SkillInfo }](t, "B's skills of architect", status, body, 200)
	if len(view.Skills) != 1 || !view.Skills[0].Acquired {
		t.Fatalf("B's view: %s", body)
	}
	// And back: a drop by the agent through B reaches A's client.
	onA.drain()
	r, err = b.skillClient("architect").cs.CallTool(ctx, &mcp.CallToolParams{Name: "syscall.skill.drop", Arguments: map[string]any{"name": "text-tools"}})
	if err != nil || r.IsError {
		t.Fatalf("syscall.skill.drop on B: %v %+v", err, r)
	}
	onA.expectChange(ctx, grepTool, false, "A, after the agent's drop on B")

	// A skill removed through A leaves B's agents too: held again, then
	// removed, its tool goes from B's client.
	onB.drain()
	if status, body, _ := a.do("POST", "/api/agents/architect/skills/text-tools/acquire", a.admin, ""); status != 200 {
		t.Fatalf("acquire through A: %d %s", status, body)
	}
	onB.expectChange(ctx, grepTool, true, "B, after the acquire before the removal")
	onB.drain()
	status, body, _ = a.do("DELETE", "/api/skills/text-tools", a.admin, "")
	if rm := decode[struct {
		HeldBy []string `json:"held_by"`
	}](t, "remove through A", status, body, 200); !slices.Equal(rm.HeldBy, []string{"architect", "researcher"}) {
		t.Fatalf("remove through A: %s", body)
	}
	onB.expectChange(ctx, grepTool, false, "B, after the removal through A")
	status, body, _ = b.do("GET", "/api/skills", b.admin, "")
	if l := decode[struct{ Skills []skills.SkillSummary }](t, "B's list after the removal", status, body, 200); len(l.Skills) != 0 {
		t.Fatalf("B still lists the removed skill: %s", body)
	}
}

// The /api/skills routes: a person's (admin token) list, show, install,
// remove, acquire and drop, each change audited as the human's; an agent
// token's the agent's own syscall.skill.* calls (an install waits for its
// approval: 202, and does not run without one); an agent token acting for
// another agent, or on a person's route, is 403; error statuses.
func TestSkillsREST(t *testing.T) {
	dir := testenv.ExampleWorld(t)
	e := serveSkills(t, dir, filepath.Join(t.TempDir(), "armory.db"))
	ctx := ctx30(t)
	admin, rev := e.admin, e.token("reviewer")

	type list struct{ Skills []skills.SkillSummary }
	status, body, _ := e.do("GET", "/api/skills", admin, "")
	l := decode[list](t, "GET /api/skills", status, body, 200)
	// researcher's config.md lists it under "## Skills": held from the start.
	if len(l.Skills) != 1 || l.Skills[0].Name != "text-tools" || l.Skills[0].Scope != "world" || !slices.Equal(l.Skills[0].Holders, []string{"researcher"}) ||
		!slices.Equal(l.Skills[0].Tools, []string{grepTool, "text-tools.wordstats"}) {
		t.Fatalf("list: %s", body)
	}
	status, body, _ = e.do("GET", "/api/skills/text-tools", admin, "")
	d := decode[skills.SkillDetail](t, "GET /api/skills/text-tools", status, body, 200)
	if !strings.HasPrefix(d.Instructions, "# Text tools") || !slices.Equal(d.Files, []string{"references/patterns.md"}) || d.File != "skills/text-tools/SKILL.md" {
		t.Fatalf("show: %s", body)
	}

	// Acquire and drop for people; the holders follow.
	status, body, _ = e.do("POST", "/api/agents/scribe/skills/text-tools/acquire", admin, "")
	res := decode[skills.AcquireResult](t, "acquire for scribe", status, body, 200)
	if !res.Changed || len(res.Tools) != 0 || !strings.Contains(res.Withheld[grepTool], "devops") {
		t.Fatalf("scribe's acquire: the privileged tool must be withheld with the reason: %s", body)
	}
	status, body, _ = e.do("POST", "/api/agents/researcher/skills/text-tools/acquire", admin, "")
	if res := decode[skills.AcquireResult](t, "acquire again", status, body, 200); res.Changed {
		t.Fatalf("acquiring a skill held already changed something: %s", body)
	}
	status, body, _ = e.do("GET", "/api/skills", admin, "")
	if l := decode[list](t, "list", status, body, 200); !slices.Equal(l.Skills[0].Holders, []string{"researcher", "scribe"}) {
		t.Fatalf("holders: %s", body)
	}
	status, body, _ = e.do("GET", "/api/agents/scribe/skills", admin, "")
	type agentView struct {
		Agent  string
		Skills []skills.SkillInfo
	}
	if v := decode[agentView](t, "scribe's skills", status, body, 200); v.Agent != "scribe" || len(v.Skills) != 1 || !v.Skills[0].Acquired || v.Skills[0].Withheld[grepTool] == "" {
		t.Fatalf("scribe's skills: %s", body)
	}
	if status, body, _ := e.do("POST", "/api/agents/scribe/skills/text-tools/drop", admin, ""); status != 200 || !strings.Contains(body, `"dropped":true`) {
		t.Fatalf("drop: %d %s", status, body)
	}

	// Error statuses.
	for _, c := range []struct {
		method, path, body string
		status             int
		kind               string
	}{
		{"GET", "/api/skills/nope", "", 404, "not_found"},
		{"GET", "/api/skills/text-tools?archetype=architect", "", 404, "not_found"},
		{"POST", "/api/agents/architect/skills/nope/acquire", "", 404, "not_found"},
		{"POST", "/api/agents/ghost/skills/text-tools/acquire", "", 404, "not_found"},
		{"POST", "/api/agents/architect/skills/text-tools/drop", "", 404, "not_found"}, // not held
		{"DELETE", "/api/skills/nope", "", 404, "not_found"},
		{"POST", "/api/skills", "{", 400, "invalid"},
		{"POST", "/api/skills", "", 400, "invalid"},
		{"POST", "/api/skills", `{"source":"builtin","name":"python","extra":1}`, 400, "invalid"},
		{"POST", "/api/skills", `{"source":"tape"}`, 400, "invalid"},
		{"POST", "/api/skills", `{"source":"builtin"}`, 400, "invalid"},
		{"POST", "/api/skills", `{"source":"builtin","name":"cobol"}`, 404, "not_found"},
		{"POST", "/api/skills", `{"source":"folder","path":"/nonexistent/skill"}`, 404, "not_found"},
	} {
		status, body, _ := e.do(c.method, c.path, admin, c.body)
		if status != c.status || kindOf(t, body) != c.kind {
			t.Errorf("%s %s %s: %d %s; want %d %s", c.method, c.path, c.body, status, body, c.status, c.kind)
		}
	}

	// A person installs a built-in skill; a second install conflicts.
	status, body, _ = e.do("POST", "/api/skills", admin, `{"source":"builtin","name":"python"}`)
	inst := decode[skills.Installed](t, "install python", status, body, 200)
	if inst.Skill.Name != "python" || inst.Dir != "skills/python" || inst.Replaced {
		t.Fatalf("install: %s", body)
	}
	if _, err := os.Stat(filepath.Join(dir, "skills", "python", "SKILL.md")); err != nil {
		t.Fatalf("the installed skill's folder: %v", err)
	}
	if status, body, _ := e.do("POST", "/api/skills", admin, `{"source":"builtin","name":"python"}`); status != 409 || kindOf(t, body) != "conflict" {
		t.Fatalf("second install: %d %s", status, body)
	}
	status, body, _ = e.do("POST", "/api/skills", admin, `{"source":"builtin","name":"python","replace":true}`)
	if inst := decode[skills.Installed](t, "replace python", status, body, 200); !inst.Replaced {
		t.Fatalf("replace: %s", body)
	}
	status, body, _ = e.do("GET", "/api/skills", admin, "")
	if l := decode[list](t, "list", status, body, 200); len(l.Skills) != 2 || l.Skills[0].Name != "python" {
		t.Fatalf("list after the install: %s", body)
	}
	// Removing it answers who held it.
	if status, body, _ := e.do("POST", "/api/agents/architect/skills/python/acquire", admin, ""); status != 200 {
		t.Fatalf("acquire python: %d %s", status, body)
	}
	status, body, _ = e.do("DELETE", "/api/skills/python", admin, "")
	if rm := decode[struct {
		Skill  string
		HeldBy []string `json:"held_by"`
	}](t, "remove", status, body, 200); rm.Skill != "python" || !slices.Equal(rm.HeldBy, []string{"architect"}) {
		t.Fatalf("remove: %s", body)
	}
	if _, err := os.Stat(filepath.Join(dir, "skills", "python")); err == nil {
		t.Fatal("the removed skill's folder is still there")
	}
	if status, _, _ := e.do("DELETE", "/api/skills/python", admin, ""); status != 404 {
		t.Fatalf("second remove: %d", status)
	}
	for _, tool := range []string{"skills.acquire", "skills.drop", "skills.install", "skills.remove"} {
		recs, err := e.st.ListAudit(ctx, store.AuditFilter{Tool: tool})
		if err != nil || len(recs) == 0 || recs[0].DecidedBy != pipeline.Human || recs[0].Status != audit.StatusSuccess || !strings.Contains(string(recs[0].Args), `"via":"rest"`) {
			t.Fatalf("audit of %s: %+v %v", tool, recs, err)
		}
	}

	// An agent token: its own view and changes, through its tools.
	status, body, _ = e.do("GET", "/api/skills", rev, "")
	if v := decode[struct{ Skills []skills.SkillInfo }](t, "agent's GET /api/skills", status, body, 200); len(v.Skills) != 1 || v.Skills[0].Acquired {
		t.Fatalf("agent's list: %s", body)
	}
	status, body, _ = e.do("POST", "/api/agents/reviewer/skills/text-tools/acquire", rev, "")
	if r := decode[skills.AcquireResult](t, "agent's own acquire", status, body, 200); !r.Changed || r.Withheld[grepTool] == "" {
		t.Fatalf("agent's acquire: %s", body)
	}
	status, body, _ = e.do("GET", "/api/agents/reviewer/skills", rev, "")
	if v := decode[struct{ Skills []skills.SkillInfo }](t, "agent's own skills", status, body, 200); len(v.Skills) != 1 || !v.Skills[0].Acquired {
		t.Fatalf("agent's skills: %s", body)
	}
	if status, body, _ := e.do("POST", "/api/agents/reviewer/skills/text-tools/drop", rev, ""); status != 200 {
		t.Fatalf("agent's own drop: %d %s", status, body)
	}
	if status, body, _ := e.do("POST", "/api/agents/reviewer/skills/text-tools/drop", rev, ""); status != 404 || kindOf(t, body) != "not_found" {
		t.Fatalf("agent's drop of a skill it does not hold: %d %s", status, body)
	}
	for _, tool := range []string{"syscall.skill.list", "syscall.skill.acquire", "syscall.skill.drop"} {
		if recs, err := e.st.ListAudit(ctx, store.AuditFilter{Agent: "reviewer", Tool: tool}); err != nil || len(recs) == 0 {
			t.Fatalf("the agent's %s is not audited: %v", tool, err)
		}
	}
	// …never for another agent, never on a person's route.
	for _, c := range [][2]string{
		{"GET", "/api/agents/architect/skills"},
		{"POST", "/api/agents/architect/skills/text-tools/acquire"},
		{"POST", "/api/agents/architect/skills/text-tools/drop"},
		{"POST", "/api/agents/ghost/skills/text-tools/acquire"},
		{"GET", "/api/skills/text-tools"},
		{"DELETE", "/api/skills/text-tools"},
	} {
		if status, body, _ := e.do(c[0], c[1], rev, ""); status != 403 || kindOf(t, body) != "permission" {
			t.Errorf("agent token %s %s: %d %s", c[0], c[1], status, body)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "skills", "text-tools")); err != nil {
		t.Fatal("an agent token removed a skill")
	}
	status, body, _ = e.do("GET", "/api/agents/architect/skills", admin, "")
	if v := decode[agentView](t, "architect's skills", status, body, 200); v.Skills[0].Acquired {
		t.Fatalf("another agent's token acquired for architect: %s", body)
	}

	// An agent's install waits for an approval (202) and does not run
	// without one; approved, it runs once when the agent resumes it.
	status, body, _ = e.do("POST", "/api/skills", rev, `{"source":"builtin","name":"web-research"}`)
	if status != 202 || kindOf(t, body) != "pending" {
		t.Fatalf("agent's install: %d %s", status, body)
	}
	if status, body, _ := e.do("POST", "/api/skills", rev, `{`); status != 400 {
		t.Fatalf("agent's install with a bad body: %d %s", status, body)
	}
	aps, err := e.st.ListApprovals(ctx, store.ApprovalFilter{Status: store.StatusPending})
	if err != nil || len(aps) != 1 || aps[0].Tool != "syscall.skill.install" || aps[0].Agent != "reviewer" {
		t.Fatalf("pending approvals: %+v %v", aps, err)
	}
	id := aps[0].ID
	resume := `{"resume":"` + id + `"}`
	status, body, _ = e.do("POST", "/api/agents/reviewer/calls", rev, resume)
	if o := decode[pipeline.Outcome](t, "resume before the approval", status, body, 202); o.Status != audit.StatusPending {
		t.Fatalf("resume before the approval: %s", body)
	}
	if _, err := os.Stat(filepath.Join(dir, "skills", "web-research")); err == nil {
		t.Fatal("the install ran without its approval")
	}
	if status, body, _ := e.do("POST", "/api/approvals/"+id+"/approve", admin, `{"reason":"ok"}`); status != 200 {
		t.Fatalf("approve: %d %s", status, body)
	}
	status, body, _ = e.do("POST", "/api/agents/reviewer/calls", rev, resume)
	if o := decode[pipeline.Outcome](t, "resume after the approval", status, body, 200); o.Status != audit.StatusSuccess || !strings.Contains(o.Result, "Installed skill web-research") {
		t.Fatalf("resume after the approval: %s", body)
	}
	if _, err := os.Stat(filepath.Join(dir, "skills", "web-research", "SKILL.md")); err != nil {
		t.Fatalf("the approved install: %v", err)
	}
}

// The MCP initialize instructions hold a toolkit's policy text only while
// a tool of that toolkit is in the agent's registry: a toolkit whose one
// tool is a skill's says nothing until the skill is acquired, and stops
// again once it is dropped (each initialize computes them afresh).
func TestSkillToolkitInstructions(t *testing.T) {
	dir := testenv.ExampleWorld(t)
	cfg := filepath.Join(dir, "world-config.yaml")
	b, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const policy = "Quote the line numbers text-tools.grep gives."
	b = []byte(strings.Replace(string(b), "\ntoolkits:\n", "\ntoolkits:\n  text:\n    tools: [text-tools.grep]\n    default: true\n    policy: \""+policy+"\"\n", 1))
	if err := os.WriteFile(cfg, b, 0o644); err != nil {
		t.Fatal(err)
	}
	e := serveSkills(t, dir, filepath.Join(t.TempDir(), "armory.db"))
	instructions := func() string {
		t.Helper()
		cs := e.mcp("architect", e.token("architect"), nil)
		defer cs.Close()
		return cs.InitializeResult().Instructions
	}
	if got := instructions(); strings.Contains(got, policy) || !strings.Contains(got, "Toolkit inspect: ") {
		t.Fatalf("instructions before the acquire: %q", got)
	}
	if status, body, _ := e.do("POST", "/api/agents/architect/skills/text-tools/acquire", e.admin, ""); status != 200 {
		t.Fatalf("acquire: %d %s", status, body)
	}
	if got := instructions(); !strings.Contains(got, "Toolkit text: "+policy) || !strings.Contains(got, "Toolkit inspect: ") {
		t.Fatalf("instructions with the skill acquired: %q", got)
	}
	// An agent holding the skill whose policy withholds the tool (researcher:
	// config.md's "## Skills") gets no policy text for it.
	cs := e.mcp("researcher", e.token("researcher"), nil)
	if got := cs.InitializeResult().Instructions; strings.Contains(got, policy) {
		t.Fatalf("researcher's instructions name a tool it does not have: %q", got)
	}
	if status, body, _ := e.do("POST", "/api/agents/architect/skills/text-tools/drop", e.admin, ""); status != 200 {
		t.Fatalf("drop: %d %s", status, body)
	}
	if got := instructions(); strings.Contains(got, policy) {
		t.Fatalf("instructions after the drop: %q", got)
	}
}

// A drop the store refuses is an error (503), never "dropped": the agent
// keeps the skill's tool. (A drop that was made but could not be audited
// is a 503 too, whose message says it was done.) Every other route says
// 503 as well when the store fails.
func TestSkillDropWithoutStore(t *testing.T) {
	e := serveSkills(t, testenv.ExampleWorld(t), filepath.Join(t.TempDir(), "armory.db"))
	if status, body, _ := e.do("POST", "/api/agents/architect/skills/text-tools/acquire", e.admin, ""); status != 200 {
		t.Fatalf("acquire: %d %s", status, body)
	}
	e.st.Close()
	status, body, _ := e.do("POST", "/api/agents/architect/skills/text-tools/drop", e.admin, "")
	if status != 503 || kindOf(t, body) != "unavailable" || strings.Contains(body, `"dropped"`) {
		t.Fatalf("drop on a closed store: %d %s", status, body)
	}
	if !slices.Contains(regNames(t, e.h, "architect"), grepTool) {
		t.Fatal("the failed drop took the tool away")
	}
	// The store's failure is the store's (503), not a bug of the server's.
	for _, c := range [][2]string{{"POST", "/api/agents/scribe/skills/text-tools/acquire"}, {"GET", "/api/skills"}, {"DELETE", "/api/skills/text-tools"}} {
		if status, body, _ := e.do(c[0], c[1], e.admin, ""); status != 503 || kindOf(t, body) != "unavailable" {
			t.Errorf("%s %s on a closed store: %d %s", c[0], c[1], status, body)
		}
	}
}

// A change another process makes while a server is being built — after
// its engine read the skill state (Open), before its module listens to
// the other processes (Start) — reaches the server when it starts, not
// only at the next resync (here an hour away).
func TestSkillChangeBeforeStart(t *testing.T) {
	dsn := postgresSchema(t)
	dir := testenv.ExampleWorld(t)
	a := serveSkills(t, dir, dsn)
	b := serve(t, engine.Options{World: dir, DB: dsn, Modules: []engine.Module{skills.New(skills.Options{Resync: time.Hour})}}, server.Options{})
	if status, body, _ := a.do("POST", "/api/agents/architect/skills/text-tools/acquire", a.admin, ""); status != 200 {
		t.Fatalf("acquire through A: %d %s", status, body)
	}
	if slices.Contains(regNames(t, b.h, "architect"), grepTool) {
		t.Fatal("B has the tool before it started: the test shows nothing")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := b.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); !slices.Contains(regNames(t, b.h, "architect"), grepTool); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // a bound, not a timing check
			t.Fatal("B never registered the skill acquired while it was being built")
		}
	}
}
