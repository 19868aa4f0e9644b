package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
)

// msgWorld writes a world of the agents ids (every one may call the
// services' tools: they are public) and returns its folder.
func msgWorld(t testing.TB, ids ...string) string {
	t.Helper()
	return msgWorldWith(t, "", ids...)
}

// msgWorldWith is msgWorld with config appended to world-config.yaml.
func msgWorldWith(t testing.TB, config string, ids ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	var b strings.Builder
	b.WriteString("name: msgs\nagents:\n")
	for _, id := range ids {
		fmt.Fprintf(&b, "  - id: %s\n    archetype: member\n", id)
	}
	b.WriteString("tool_privileges:\n  admin:\n    - syscall.resource.usage\n")
	b.WriteString(config)
	testenv.WriteTree(t, dir, map[string]string{
		"world-config.yaml":          b.String(),
		"archetype/member/config.md": "# member\n\n## Tool Access\nprivilege_groups: admin\n",
	})
	return dir
}

// world is an engine with the services module, opened on a world folder
// and a database.
type world struct {
	t   testing.TB
	eng *engine.Engine
	mod *services.Module
}

// open opens an engine on dir and dsn ("" is the world's SQLite file)
// with a services module of opts; it is closed when t ends.
func open(t testing.TB, dir, dsn string, opts services.Options) *world {
	t.Helper()
	mod := services.New(opts)
	eng, err := engine.Open(context.Background(), engine.Options{World: dir, DB: dsn, Skip: engine.Trail, Modules: []engine.Module{mod}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &world{t: t, eng: eng, mod: mod}
}

// call runs tool as agent through the pipeline with args (a JSON object
// or a value to marshal) and returns the outcome.
func (w *world) call(agent, tool string, args any) pipeline.Outcome {
	w.t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			w.t.Fatal(err)
		}
		raw = string(b)
	}
	return w.eng.Pipeline().Execute(context.Background(), pipeline.Call{Agent: agent, Tool: tool, Args: json.RawMessage(raw)})
}

// ok runs call and fails the test unless it succeeded; it decodes the
// outcome's value into v (when not nil).
func (w *world) ok(agent, tool string, args any, v any) pipeline.Outcome {
	w.t.Helper()
	o := w.call(agent, tool, args)
	if o.Status != audit.StatusSuccess {
		w.t.Fatalf("%s %s %v: %s %s", agent, tool, args, o.Status, o.Result)
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

// backends runs f on SQLite (the world's file) and on Postgres (a schema
// of its own).
func backends(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, "") })
	t.Run("postgres", func(t *testing.T) { f(t, testenv.PostgresSchema(t)) })
}
