package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
)

// The package's test helpers, one place for all its external tests: the
// worlds they write (msgWorld, writeWorld), the databases they run on
// (backends, newDB), and an engine with the services module (open) with
// its calls and checks (world's methods). The internal tests
// (timers_test.go, messages_internal_test.go) need the module's
// unexported state and keep their own few.

// msgWorld writes a world of the agents ids (every one may call the
// services' tools: they are public) and returns its folder.
func msgWorld(t testing.TB, ids ...string) string {
	t.Helper()
	return msgWorldWith(t, "", ids...)
}

// msgWorldWith is msgWorld with config appended to world-config.yaml.
func msgWorldWith(t testing.TB, config string, ids ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("name: msgs\nagents:\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "  - id: %s\n    archetype: member\n", id)
	}
	b.WriteString("tool_privileges:\n  admin:\n    - syscall.resource.usage\n")
	b.WriteString(config)
	return writeWorld(t, map[string]string{
		"world-config.yaml":          b.String(),
		"archetype/member/config.md": "# member\n\n## Tool Access\nprivilege_groups: admin\n",
	})
}

// writeWorld writes files (slash-separated path → content) to a new
// folder of t's and returns it.
func writeWorld(t testing.TB, files map[string]string) string {
	t.Helper()
	return testenv.WriteTree(t, filepath.Join(t.TempDir(), "w"), files)
}

// backendNames are the stores the services run on.
var backendNames = []string{"sqlite", "postgres"}

// newDB returns a new, empty database of backend for t: a SQLite file
// (an absolute path) in a folder of t's, or the DSN of a Postgres schema
// of its own (skipped without ARMORY_TEST_POSTGRES, failing under
// CI=true), dropped when t ends.
func newDB(t testing.TB, backend string) string {
	t.Helper()
	if backend == "postgres" {
		return testenv.PostgresSchema(t)
	}
	return filepath.Join(t.TempDir(), "armory.db")
}

// backends runs f as one subtest (or sub-benchmark) per backend, named
// after it, each on a newDB of its own.
func backends[T interface {
	testing.TB
	Run(name string, f func(T)) bool
}](t T, f func(t T, db string)) {
	for _, be := range backendNames {
		t.Run(be, func(t T) { f(t, newDB(t, be)) })
	}
}

// world is an engine with the services module on one world folder and
// database; a second world on the same pair is a second process's view.
type world struct {
	t   testing.TB
	eng *engine.Engine
	mod *services.Module
}

// open opens an engine on world folder dir and database db ("" is the
// world's own SQLite file) with a services module of opts, and no JSONL
// trail; it is closed when t ends.
func open(t testing.TB, dir, db string, opts services.Options) *world {
	t.Helper()
	mod := services.New(opts)
	eng, err := engine.Open(context.Background(), engine.Options{World: dir, DB: db, Skip: engine.Trail, Modules: []engine.Module{mod}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &world{t: t, eng: eng, mod: mod}
}

// run runs c through the pipeline with args as its Args: a string is the
// JSON object itself, anything else is marshalled.
func (w *world) run(c pipeline.Call, args any) pipeline.Outcome {
	w.t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			w.t.Fatal(err)
		}
		raw = string(b)
	}
	c.Args = json.RawMessage(raw)
	return w.eng.Pipeline().Execute(context.Background(), c)
}

// call runs tool as agent (in its default session) with args (as run).
func (w *world) call(agent, tool string, args any) pipeline.Outcome {
	w.t.Helper()
	return w.run(pipeline.Call{Agent: agent, Tool: tool}, args)
}

// callIn is call in session.
func (w *world) callIn(agent, session, tool string, args any) pipeline.Outcome {
	w.t.Helper()
	return w.run(pipeline.Call{Agent: agent, Session: session, Tool: tool}, args)
}

// ok runs call and fails the test unless it succeeded; it decodes the
// outcome's value into v (when not nil).
func (w *world) ok(agent, tool string, args, v any) pipeline.Outcome {
	w.t.Helper()
	o := w.call(agent, tool, args)
	if o.Status != audit.StatusSuccess {
		w.t.Fatalf("%s %s %v: %s (%v): %s", agent, tool, args, o.Status, o.Kind, o.Result)
	}
	if v != nil {
		b, _ := json.Marshal(o.Value)
		if err := json.Unmarshal(b, v); err != nil {
			w.t.Fatalf("%s: value %s: %v", tool, b, err)
		}
	}
	return o
}

// fails runs call and fails the test unless it failed with an outcome
// whose result contains want.
func (w *world) fails(agent, tool string, args any, want string) pipeline.Outcome {
	w.t.Helper()
	o := w.call(agent, tool, args)
	if o.Status == audit.StatusSuccess {
		w.t.Fatalf("%s %s %v succeeded: %s", agent, tool, args, o.Result)
	}
	if !strings.Contains(o.Result, want) {
		w.t.Fatalf("%s %s %v: %q does not say %q", agent, tool, args, o.Result, want)
	}
	return o
}

// refused runs call and fails the test unless it failed with kind k and a
// result containing each of want; it returns the result.
func (w *world) refused(agent, tool string, args any, k armory.Kind, want ...string) string {
	w.t.Helper()
	o := w.call(agent, tool, args)
	if o.Status == audit.StatusSuccess || o.Kind != k {
		w.t.Fatalf("%s by %s: %s (%v), want a %v failure: %s", tool, agent, o.Status, o.Kind, k, o.Result)
	}
	for _, s := range want {
		if !strings.Contains(o.Result, s) {
			w.t.Fatalf("%s by %s: result %q lacks %q", tool, agent, o.Result, s)
		}
	}
	return o.Result
}
