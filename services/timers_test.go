package services

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// clock is a fixed clock that tests move.
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) now() time.Time  { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) set(t time.Time) { c.ns.Store(t.UnixNano()) }
func (c *clock) opts(name string) Options {
	return Options{Clock: c.now, TimerPoll: 10 * time.Millisecond, LeaseTTL: 3 * time.Second, Replica: name}
}

var t0 = time.Date(2030, 1, 1, 0, 0, 30, 0, time.UTC)

// open opens an engine on world and db with a services module of o.
func open(t *testing.T, world, db string, o Options) (*engine.Engine, *Module) {
	t.Helper()
	m := New(o)
	e, err := engine.Open(context.Background(), engine.Options{World: world, DB: db, Skip: engine.Trail, Modules: []engine.Module{m}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, m
}

// start opens and starts an engine.
func start(t *testing.T, world, db string, o Options) (*engine.Engine, *Module) {
	t.Helper()
	e, m := open(t, world, db, o)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e, m
}

// call runs tool for agent through the pipeline.
func exec(t *testing.T, e *engine.Engine, agent, tool string, args any) pipeline.Outcome {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return e.Pipeline().Execute(context.Background(), pipeline.Call{Agent: agent, Tool: tool, Args: b})
}

// ok runs a call that must succeed.
func ok(t *testing.T, e *engine.Engine, agent, tool string, args any) pipeline.Outcome {
	t.Helper()
	out := exec(t, e, agent, tool, args)
	if out.Status != audit.StatusSuccess {
		t.Fatalf("%s %v: %s: %s", tool, args, out.Status, out.Result)
	}
	return out
}

// refused runs a call that must fail with a result containing want.
func refused(t *testing.T, e *engine.Engine, agent, tool string, args any, want string) {
	t.Helper()
	out := exec(t, e, agent, tool, args)
	if out.Status == audit.StatusSuccess {
		t.Fatalf("%s %v succeeded: %s", tool, args, out.Result)
	}
	if !strings.Contains(out.Result, want) {
		t.Fatalf("%s %v: result %q lacks %q", tool, args, out.Result, want)
	}
}

// inbox returns agent's timer messages.
func inbox(t *testing.T, st store.Store, agent string) []*store.Message {
	t.Helper()
	msgs, _, err := st.ReadInbox(context.Background(), store.InboxQuery{Agent: agent, Page: store.Page{Limit: store.MaxPage}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*store.Message
	for _, m := range msgs {
		if m.Kind == store.KindTimer {
			out = append(out, m)
		}
	}
	return out
}

// waitInbox waits until agent has n timer messages (failing after a
// generous deadline) and returns them.
func waitInbox(t *testing.T, st store.Store, agent string, n int) []*store.Message {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		msgs := inbox(t, st, agent)
		if len(msgs) >= n || time.Now().After(deadline) {
			if len(msgs) != n {
				t.Fatalf("inbox of %s: %d timer messages, want %d: %s", agent, len(msgs), n, subjects(msgs))
			}
			return msgs
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRounds waits until one of ms (the lease holder) has run n more
// scheduler rounds holding the lease: whatever was due then has fired.
func waitRounds(t *testing.T, n int64, ms ...*Module) {
	t.Helper()
	from := make([]int64, len(ms))
	for i, m := range ms {
		from[i] = m.rounds.Load()
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for i, m := range ms {
			if m.rounds.Load()-from[i] >= n {
				return
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no scheduler ran %d rounds holding the lease", n)
}

func subjects(msgs []*store.Message) string {
	var s []string
	for _, m := range msgs {
		s = append(s, m.Subject+"@"+m.Body)
	}
	return strings.Join(s, " | ")
}

// A timer and a cron fire once each per occurrence; closing the engine
// and opening another on the same SQLite file neither loses nor repeats
// one; a cron that missed several occurrences while nobody ran fires once.
func TestTimersExactlyOnceAcrossRestart(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	clk := newClock(t0)
	e, m := start(t, world, db, clk.opts("one"))
	var events atomic.Int64
	defer e.Subscribe(func(ev pipeline.Event) {
		if ev.Kind == EventTimer && ev.Agent == "architect" && ev.Ref != "" {
			events.Add(1)
		}
	})()
	ok(t, e, "architect", "util.timer", map[string]any{"name": "tea", "after": "10m", "message": "tea is ready"})
	ok(t, e, "architect", "util.cron", map[string]any{"action": "create", "name": "standup", "schedule": "*/5 * * * *", "message": "stand up"})

	clk.set(t0.Add(11 * time.Minute)) // timer at 00:10:30; cron's first occurrence 00:05
	msgs := waitInbox(t, e.Store(), "architect", 2)
	waitRounds(t, 5, m)
	if got := inbox(t, e.Store(), "architect"); len(got) != 2 {
		t.Fatalf("after more rounds: %s", subjects(got))
	}
	if n := events.Load(); n != 2 {
		t.Fatalf("%d timer events, want 2", n)
	}
	bodies := subjects(msgs)
	if !strings.Contains(bodies, "tea is ready") || !strings.Contains(bodies, "stand up") {
		t.Fatalf("messages: %s", bodies)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}

	e2, m2 := start(t, world, db, clk.opts("two"))
	waitRounds(t, 5, m2)
	if got := inbox(t, e2.Store(), "architect"); len(got) != 2 {
		t.Fatalf("after a restart: %s", subjects(got))
	}
	clk.set(t0.Add(16 * time.Minute)) // the cron's 00:15
	waitInbox(t, e2.Store(), "architect", 3)
	if err := e2.Close(); err != nil {
		t.Fatal(err)
	}

	// Down from 00:16 to 01:00: ten occurrences missed, one catch-up firing.
	clk.set(t0.Add(time.Hour))
	e3, m3 := start(t, world, db, clk.opts("three"))
	waitInbox(t, e3.Store(), "architect", 4)
	waitRounds(t, 5, m3)
	if got := inbox(t, e3.Store(), "architect"); len(got) != 4 {
		t.Fatalf("catch-up fired more than once: %s", subjects(got))
	}
	views, _, err := m3.ListTimers(context.Background(), "architect", store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 1 || views[0].Name != "standup" || views[0].Fires != 3 || !views[0].NextFire.Equal(time.Date(2030, 1, 1, 1, 5, 0, 0, time.UTC)) {
		t.Fatalf("timers after catch-up (the one-shot is gone, the cron fired 3 times and is next at 01:05): %+v", views)
	}
}

// A timer set by a short command (an engine never started) is fired by
// the started one; the command's engine fires nothing.
func TestShortCommandTimerFiredByServer(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	clk := newClock(t0)
	srv, m := start(t, world, db, clk.opts("server"))

	cmd, _ := open(t, world, db, clk.opts("cmd"))
	ok(t, cmd, "architect", "util.timer", map[string]any{"name": "ping", "at": t0.Add(time.Hour).Format(time.RFC3339), "task": map[string]any{"title": "check the build"}})
	if err := cmd.Close(); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(2 * time.Hour))
	waitRounds(t, 3, m)
	tasks, _, err := srv.Store().ListTasks(context.Background(), store.TaskFilter{Assignee: "architect"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].Title != "check the build" || tasks[0].Creator != "architect" {
		t.Fatalf("tasks: %+v", tasks)
	}
	if got := inbox(t, srv.Store(), "architect"); len(got) != 0 {
		t.Fatalf("a task timer without a message put messages: %s", subjects(got))
	}
}

// Two replicas on one Postgres: each occurrence of a timer and of a cron
// fires once; when the replica holding the lease stops, the other takes
// over and goes on, still once per occurrence.
func TestTimersExactlyOnceTwoReplicasPostgres(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	world := testenv.ExampleWorld(t)
	clk := newClock(t0)
	a, ma := start(t, world, dsn, clk.opts("replica-a"))
	b, mb := start(t, world, dsn, clk.opts("replica-b"))

	ok(t, a, "architect", "util.timer", map[string]any{"name": "once", "after": "10m"})
	ok(t, b, "architect", "util.cron", map[string]any{"action": "create", "name": "every5", "schedule": "*/5 * * * *"})
	clk.set(t0.Add(11 * time.Minute))
	waitInbox(t, a.Store(), "architect", 2)
	waitRounds(t, 10, ma, mb)
	if got := inbox(t, b.Store(), "architect"); len(got) != 2 {
		t.Fatalf("two replicas: %s", subjects(got))
	}

	// Stop whichever holds the lease; the other takes it (released on stop).
	l, err := a.Store().InspectLease(context.Background(), TimerLease)
	if err != nil {
		t.Fatal(err)
	}
	survivor, ms := b, mb
	if l.Holder == "replica-b" {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		survivor, ms = a, ma
	} else if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(16 * time.Minute))
	waitInbox(t, survivor.Store(), "architect", 3)
	waitRounds(t, 5, ms)
	if got := inbox(t, survivor.Store(), "architect"); len(got) != 3 {
		t.Fatalf("after takeover: %s", subjects(got))
	}
}

// A change to a watched workspace folder fires once, after the debounce,
// naming what changed.
func TestWatchFiresOnceAfterDebounce(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	e, m := start(t, world, db, Options{TimerPoll: 10 * time.Millisecond})
	ws := e.World().Workspace("architect")
	if err := os.MkdirAll(filepath.Join(ws, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	ok(t, e, "architect", "util.watch", map[string]any{"path": "notes", "debounce": "300ms", "message": "notes changed"})
	waitRounds(t, 3, m) // armed
	for i := range 5 {
		if err := os.WriteFile(filepath.Join(ws, "notes", "todo.md"), []byte(strings.Repeat("x", i+1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	msgs := waitInbox(t, e.Store(), "architect", 1)
	if !strings.Contains(msgs[0].Body, "notes changed") || !strings.Contains(msgs[0].Body, "todo.md") {
		t.Fatalf("watch message: %q", msgs[0].Body)
	}
	waitRounds(t, 40, m) // well past another debounce
	if got := inbox(t, e.Store(), "architect"); len(got) != 1 {
		t.Fatalf("one burst of writes fired %d times: %s", len(got), subjects(got))
	}
	// A later change fires again.
	if err := os.WriteFile(filepath.Join(ws, "notes", "done.md"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	msgs = waitInbox(t, e.Store(), "architect", 2)
	if !strings.Contains(msgs[1].Body, "done.md") {
		t.Fatalf("second watch message: %q", msgs[1].Body)
	}

	// The watch is durable: the next server arms it again.
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e2, m2 := start(t, world, db, Options{TimerPoll: 10 * time.Millisecond})
	waitRounds(t, 3, m2)
	if err := os.Remove(filepath.Join(ws, "notes", "todo.md")); err != nil {
		t.Fatal(err)
	}
	msgs = waitInbox(t, e2.Store(), "architect", 3)
	if !strings.Contains(msgs[2].Body, "todo.md") {
		t.Fatalf("watch message after a restart: %q", msgs[2].Body)
	}
}

// A replica that died holding the lease (it never released it) is
// replaced once its lease expires; until then nothing fires twice, and
// the survivor fires what came due, once.
func TestDeadReplicaLeasePassesOn(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	clk := newClock(t0)
	cmd, _ := open(t, world, db, clk.opts("cmd"))
	ok(t, cmd, "architect", "util.timer", map[string]any{"name": "late", "after": "1m"})
	// The dead replica: it took the lease (1s) and was never heard of again.
	if _, won, err := cmd.Store().AcquireLease(context.Background(), TimerLease, "dead-replica", time.Second); err != nil || !won {
		t.Fatalf("acquire: %v %v", won, err)
	}
	if err := cmd.Close(); err != nil {
		t.Fatal(err)
	}
	clk.set(t0.Add(2 * time.Minute))
	e, m := start(t, world, db, clk.opts("survivor"))
	waitInbox(t, e.Store(), "architect", 1) // after the dead replica's lease expired
	waitRounds(t, 5, m)
	if got := inbox(t, e.Store(), "architect"); len(got) != 1 {
		t.Fatalf("after takeover: %s", subjects(got))
	}
	l, err := e.Store().InspectLease(context.Background(), TimerLease)
	if err != nil || l.Holder != "survivor" || l.Fence < 2 {
		t.Fatalf("lease: %+v %v", l, err)
	}
}

// util.watch refuses every way out of the caller's workspace.
func TestWatchRefusesEscapes(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	e, _ := open(t, world, db, Options{})
	ws := e.World().Workspace("architect")
	other := e.World().Workspace("scribe")
	outside := t.TempDir()
	for _, d := range []string{filepath.Join(ws, "sub"), other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"out": outside, "etc": "/etc", "secretlink": filepath.Join(outside, "secret"), "peer": other, "sub/up": "../.."} {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"..", "../scribe", "sub/../../scribe", "/etc", "/etc/passwd", other, outside,
		"out", "out/secret", "etc", "etc/passwd", "secretlink", "peer", "sub/up", "sub/up/scribe", "sub/up/architect/../scribe"} {
		out := exec(t, e, "architect", "util.watch", map[string]any{"path": p, "name": "w" + strings.NewReplacer("/", "_", ".", "d").Replace(p)})
		if out.Status == audit.StatusSuccess {
			t.Errorf("watch %q was allowed: %s", p, out.Result)
			continue
		}
		if !strings.Contains(out.Result, "workspace") {
			t.Errorf("watch %q: the refusal does not say why: %s", p, out.Result)
		}
	}
	refused(t, e, "architect", "util.watch", map[string]any{"path": ""}, "path is empty")
	refused(t, e, "architect", "util.watch", map[string]any{"path": "missing.md"}, "does not exist")
	// Inside is fine, by a relative or an absolute path.
	ok(t, e, "architect", "util.watch", map[string]any{"path": "sub"})
	ok(t, e, "architect", "util.watch", map[string]any{"path": filepath.Join(ws, "sub"), "name": "abs"})
	views, _, err := e.Store().ListTimers(context.Background(), "", store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 2 {
		t.Fatalf("only the two allowed watches are stored: %+v", views)
	}
}

// Bad schedules, bad times, too many timers and unknown names are
// readable errors that write nothing.
func TestTimerErrors(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	o := newClock(t0).opts("x")
	o.MaxTimers = 2
	e, _ := open(t, world, db, o)
	cron := func(sched, want string) {
		t.Helper()
		refused(t, e, "architect", "util.cron", map[string]any{"action": "create", "name": "c", "schedule": sched}, want)
	}
	cron("61 * * * *", "above maximum (59)")
	cron("* * *", "expected exactly 5 fields")
	cron("*/5 * * * * *", "expected exactly 5 fields")
	cron("@every 10s", "the shortest interval allowed is 1m0s")
	cron("0 0 31 2 *", "never fires")
	cron("", "schedule is empty")
	cron("bogus", "not valid cron")
	refused(t, e, "architect", "util.cron", map[string]any{"action": "explode", "name": "c"}, "enum")
	refused(t, e, "architect", "util.cron", map[string]any{"action": "delete", "name": "nope"}, `no timer, cron or watch named "nope"`)
	refused(t, e, "architect", "util.cron", map[string]any{"action": "update", "name": "nope", "schedule": "0 * * * *"}, `no timer, cron or watch named "nope"`)
	refused(t, e, "architect", "util.timer", map[string]any{"name": "t", "after": "soon"}, "not a duration")
	refused(t, e, "architect", "util.timer", map[string]any{"name": "t", "after": "1s", "at": "2030-01-01T00:00:00Z"}, "not both")
	refused(t, e, "architect", "util.timer", map[string]any{"name": "t", "at": "2029-01-01T00:00:00Z"}, "must be between")
	refused(t, e, "architect", "util.timer", map[string]any{"name": "t", "at": "tomorrow"}, "not an RFC 3339 time")
	refused(t, e, "architect", "util.timer", map[string]any{"name": "bad name!", "after": "1m"}, "must be 1 to 128")
	refused(t, e, "architect", "util.timer", map[string]any{"name": "t", "after": "1m", "task": map[string]any{"title": " "}}, "task.title is empty")
	refused(t, e, "architect", "util.timer", map[string]any{"name": "t", "after": "1m", "agent": "scribe"}, "additional properties")

	ok(t, e, "architect", "util.timer", map[string]any{"name": "a", "after": "1m"})
	refused(t, e, "architect", "util.timer", map[string]any{"name": "a", "after": "2m"}, `already have a timer named "a"`)
	ok(t, e, "architect", "util.cron", map[string]any{"action": "create", "name": "b", "schedule": "0 9 * * 1-5"})
	refused(t, e, "architect", "util.timer", map[string]any{"name": "c", "after": "1m"}, "the most allowed (2)")
	refused(t, e, "architect", "util.cron", map[string]any{"action": "update", "name": "b", "schedule": "*/0 * * * *"}, "schedule")
	refused(t, e, "architect", "util.cron", map[string]any{"action": "update", "name": "a", "schedule": "0 * * * *"}, "is a timer, not a cron")
	// Another agent has its own bound and does not see architect's.
	ok(t, e, "scribe", "util.timer", map[string]any{"name": "a", "after": "1m"})
	refused(t, e, "scribe", "util.cron", map[string]any{"action": "delete", "name": "b"}, `no timer, cron or watch named "b"`)

	all, _, err := e.Store().ListTimers(context.Background(), "", store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 {
		t.Fatalf("refused calls wrote timers: %d stored", len(all))
	}
	// The cron is updated in place, then listed and deleted.
	out := ok(t, e, "architect", "util.cron", map[string]any{"action": "update", "name": "b", "schedule": "30 8 * * *", "message": "earlier"})
	if !strings.Contains(out.Result, `"spec": "30 8 * * *"`) || !strings.Contains(out.Result, "2030-01-01T08:30:00Z") {
		t.Fatalf("update: %s", out.Result)
	}
	out = ok(t, e, "architect", "util.cron", map[string]any{"action": "list"})
	if !strings.Contains(out.Result, `"name": "a"`) || !strings.Contains(out.Result, `"name": "b"`) || strings.Contains(out.Result, "scribe") {
		t.Fatalf("list: %s", out.Result)
	}
	ok(t, e, "architect", "util.cron", map[string]any{"action": "delete", "name": "a"})
	ok(t, e, "architect", "util.timer", map[string]any{"name": "c", "after": "1m"})
}

// The human API lists and deletes timers; a deletion is audited as a
// human's action.
func TestHumanListDelete(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	e, m := open(t, world, db, newClock(t0).opts("x"))
	ok(t, e, "architect", "util.timer", map[string]any{"name": "a", "after": "1m"})
	ok(t, e, "scribe", "util.cron", map[string]any{"action": "create", "name": "b", "schedule": "@hourly"})
	ctx := context.Background()
	all, _, err := m.ListTimers(ctx, "", store.Page{})
	if err != nil || len(all) != 2 {
		t.Fatalf("list: %v %+v", err, all)
	}
	v, err := m.DeleteTimer(ctx, e.Pipeline(), all[1].ID)
	if err != nil || v.Name != "b" {
		t.Fatalf("delete: %v %+v", err, v)
	}
	if _, err := m.DeleteTimer(ctx, e.Pipeline(), all[1].ID); err == nil || !strings.Contains(err.Error(), "no timer") {
		t.Fatalf("second delete: %v", err)
	}
	recs, err := e.Store().ListAudit(ctx, store.AuditFilter{Tool: "timers.delete"})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].DecidedBy != pipeline.Human || recs[0].Agent != "scribe" {
		t.Fatalf("audit: %+v", recs)
	}
	left, _, _ := m.ListTimers(ctx, "", store.Page{})
	if len(left) != 1 || left[0].Name != "a" {
		t.Fatalf("left: %+v", left)
	}
}

// Every bound of the timers holds at its edge, with a kind and a message
// that names it, and a refused call writes nothing: the delay of a
// one-shot, the sizes of an action, a watch's debounce, the watches of an
// agent, and the watches one process arms (the oldest first).
func TestTimerLimits(t *testing.T) {
	world := testenv.ExampleWorld(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	o := newClock(t0).opts("x")
	o.MaxWatches, o.MaxWatchesTotal = 3, 2
	e, m := open(t, world, db, o)
	kind := func(want armory.Kind, tool string, args map[string]any, says string) {
		t.Helper()
		out := exec(t, e, "architect", tool, args)
		if out.Status == audit.StatusSuccess || out.Kind != want || !strings.Contains(out.Result, says) {
			t.Fatalf("%s %v: %s (%v), want a %v failure saying %q: %s", tool, args, out.Status, out.Kind, want, says, out.Result)
		}
	}
	big := strings.Repeat("m", MaxTimerMessage+1)
	kind(armory.KindInvalid, "util.timer", map[string]any{"name": "t", "after": "999ms"}, "must be between")
	kind(armory.KindInvalid, "util.timer", map[string]any{"name": "t", "after": (MaxTimerDelay + time.Second).String()}, "must be between")
	kind(armory.KindTooLarge, "util.timer", map[string]any{"name": "t", "after": "1m", "message": big}, "the limit is 8192")
	kind(armory.KindTooLarge, "util.timer", map[string]any{"name": "t", "after": "1m", "task": map[string]any{"title": "x", "description": big}}, "task.description")
	kind(armory.KindTooLarge, "util.timer", map[string]any{"name": "t", "after": "1m", "task": map[string]any{"title": strings.Repeat("x", store.MaxSubject+1)}}, "task.title")
	kind(armory.KindTooLarge, "util.cron", map[string]any{"action": "create", "name": "c", "schedule": "@hourly", "message": big}, "the limit is 8192")
	kind(armory.KindInvalid, "util.timer", map[string]any{"name": strings.Repeat("n", 129), "after": "1m"}, "1 to 128")
	ok(t, e, "architect", "util.timer", map[string]any{"name": "edge", "after": MaxTimerDelay.String(), "message": big[1:]})

	ws := e.World().Workspace("architect")
	for _, d := range []string{"a", "b", "c", "d"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	kind(armory.KindInvalid, "util.watch", map[string]any{"path": "a", "debounce": "99ms"}, "out of bounds")
	kind(armory.KindInvalid, "util.watch", map[string]any{"path": "a", "debounce": "1h0m1s"}, "out of bounds")
	kind(armory.KindInvalid, "util.watch", map[string]any{"path": "a", "debounce": "soon"}, "not a duration")
	kind(armory.KindTooLarge, "util.watch", map[string]any{"path": "a", "message": big}, "the limit is 8192")
	ok(t, e, "architect", "util.watch", map[string]any{"path": "a", "debounce": MinDebounce.String()})
	ok(t, e, "architect", "util.watch", map[string]any{"path": "b", "debounce": MaxDebounce.String()})
	ok(t, e, "architect", "util.watch", map[string]any{"path": "c"})
	kind(armory.KindBlocked, "util.watch", map[string]any{"path": "d"}, "you have 3 watches, the most allowed")
	all, _, err := e.Store().ListTimers(context.Background(), "", store.Page{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 4 {
		t.Fatalf("refused calls wrote timers: %d stored", len(all))
	}

	// One process arms at most MaxWatchesTotal watches: the oldest.
	s := &scheduler{m: m, rt: engine.Runtime{Env: engine.Env{World: e.World()}}, st: e.Store(), armed: map[string]*armed{}, dirs: map[string]int{},
		pending: map[string]*pendingFire{}, failed: map[string]int64{}}
	defer s.stop()
	s.syncWatches(context.Background())
	var armedPaths []string
	for _, a := range s.armed {
		armedPaths = append(armedPaths, a.t.Spec)
	}
	slices.Sort(armedPaths)
	if !slices.Equal(armedPaths, []string{"a", "b"}) {
		t.Fatalf("armed watches: %v, want the two oldest (a, b)", armedPaths)
	}
}
