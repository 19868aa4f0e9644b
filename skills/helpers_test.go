package skills

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/store"
)

// The package's test helpers for the tests that run the module in an
// engine: the worlds they write (packWorld, withFiles), an engine with
// the skills module on a real SQLite file (open), and its calls through
// the one pipeline (run, ok, refused). fetch_test.go tests the archive
// and folder rules on their own.

func TestMain(m *testing.M) {
	// A skill's toolbox tool runs in the sandbox, whose landlock and none
	// backends re-execute this binary as their helper.
	sandbox.MaybeRunHelper()
	os.Exit(m.Run())
}

// The files of the test world (packFiles): agents dev (archetype dev,
// group devops) and guest (archetype guest, no group). World skill text
// has two tools,
// text.count (wc, public) and text.search (grep, in group devops), a
// reference, a large UTF-8 reference, a binary asset and a script;
// skill plain has no tools; archetype dev has its own skill notes.
const (
	textSkillMD = "---\nname: text\ndescription: Count and search text in your workspace.\nlicense: MIT\n---\n# Text\n\nCount lines with text.count.\n"
	textToolbox = `name: text
tools:
  - name: count
    description: Count the lines, words and bytes of a workspace file
    binary: wc
    args:
      - {name: lines, type: flag_bool, flag: -l, description: "lines only"}
      - {name: file, type: positional, required: true, description: "file path relative to the workspace"}
    danger: safe
    capabilities: [read_fs, process_exec]
    category: file_read
    permission: auto
    timeout: 10s
  - name: search
    description: Find the lines of a workspace file that match a pattern
    binary: grep
    args:
      - {name: pattern, type: flag, flag: -nEe, required: true, description: "the pattern"}
      - {name: file, type: positional, required: true, description: "file path relative to the workspace"}
    danger: safe
    capabilities: [read_fs, process_exec]
    category: file_read
    permission: auto
`
)

// binaryAsset is assets/logo.bin: bytes that are not UTF-8.
var binaryAsset = string([]byte{0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe, 0x80})

func packFiles() map[string]string {
	return map[string]string{
		"world-config.yaml": "name: sk\nagents:\n  - {id: dev, archetype: dev}\n  - {id: guest, archetype: guest}\n" +
			"tool_privileges:\n  devops:\n    - text.search\n",
		"archetype/dev/config.md":   "# dev\n\n## Tool Access\nprivilege_groups: devops\n",
		"archetype/guest/config.md": "# guest\n\n## Tool Access\n",

		"skills/text/SKILL.md":                textSkillMD,
		"skills/text/toolbox.yaml":            textToolbox,
		"skills/text/references/guide.md":     "# Guide\n\nUse -l for lines.\n",
		"skills/text/references/wide.md":      wideText,
		"skills/text/assets/logo.bin":         binaryAsset,
		"skills/text/scripts/helper.sh":       "#!/bin/sh\necho hi\n",
		"skills/plain/SKILL.md":               "---\nname: plain\ndescription: Know-how only, no tools.\n---\nRead carefully.\n",
		"archetype/dev/skills/notes/SKILL.md": "---\nname: notes\ndescription: Dev's own way to keep notes.\n---\nKeep notes in notes/.\n",
	}
}

// wideText is a reference larger than one read, made of 3-byte
// characters after one ASCII byte, so that a page of MaxReadBytes bytes
// ends inside a character.
var wideText = "x" + strings.Repeat("€", MaxReadBytes/3*2)

// withFiles returns files with changes applied ("" deletes a file).
func withFiles(files, changes map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	for k, v := range changes {
		if v == "" {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// writeWorld writes files into a new world folder of t's and returns it.
func writeWorld(t testing.TB, files map[string]string) string {
	t.Helper()
	return testenv.WriteTree(t, filepath.Join(t.TempDir(), "w"), files)
}

// env is an engine with the skills module on one world folder and one
// SQLite file; a second env on the same pair is a second process's view.
type env struct {
	t   testing.TB
	dir string
	db  string
	eng *engine.Engine
	mod *Module
}

// open opens an engine on world folder dir and SQLite file db ("" is the
// world's own) with a skills module of opts and no JSONL trail; it is
// closed when t ends.
func open(t testing.TB, dir, db string, opts Options) *env {
	t.Helper()
	mod := New(opts)
	eng, err := engine.Open(context.Background(), engine.Options{World: dir, DB: db, Skip: engine.Trail, Modules: []engine.Module{mod}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &env{t: t, dir: dir, db: db, eng: eng, mod: mod}
}

// agent returns the roster's agent id.
func (e *env) agent(id string) *roster.Agent {
	e.t.Helper()
	ag, err := e.eng.Roster().Agent(id)
	if err != nil {
		e.t.Fatal(err)
	}
	return ag
}

// run runs tool as agent through the pipeline with args: a string is the
// JSON object itself, anything else is marshalled.
func (e *env) run(agent, tool string, args any) pipeline.Outcome {
	e.t.Helper()
	raw, ok := args.(string)
	if !ok {
		b, err := json.Marshal(args)
		if err != nil {
			e.t.Fatal(err)
		}
		raw = string(b)
	}
	return e.eng.Pipeline().Execute(context.Background(), pipeline.Call{Agent: agent, Tool: tool, Args: json.RawMessage(raw)})
}

// ok runs the call, fails the test unless it succeeded, and decodes its
// value into v (when not nil).
func (e *env) ok(agent, tool string, args, v any) pipeline.Outcome {
	e.t.Helper()
	o := e.run(agent, tool, args)
	if o.Status != audit.StatusSuccess {
		e.t.Fatalf("%s %s %v: %s (%v): %s", agent, tool, args, o.Status, o.Kind, o.Result)
	}
	if v != nil {
		b, _ := json.Marshal(o.Value)
		if err := json.Unmarshal(b, v); err != nil {
			e.t.Fatalf("%s: value %s: %v", tool, b, err)
		}
	}
	return o
}

// refused runs the call and fails the test unless it failed with kind k
// and a result that says each of want; it returns the outcome.
func (e *env) refused(agent, tool string, args any, k armory.Kind, want ...string) pipeline.Outcome {
	e.t.Helper()
	o := e.run(agent, tool, args)
	if o.Status == audit.StatusSuccess || o.Kind != k {
		e.t.Fatalf("%s by %s %v: %s (%v), want a %v failure: %s", tool, agent, args, o.Status, o.Kind, k, o.Result)
	}
	for _, s := range want {
		if !strings.Contains(o.Result, s) {
			e.t.Fatalf("%s by %s %v: result %q lacks %q", tool, agent, args, o.Result, s)
		}
	}
	return o
}

// stage returns the decision of the named stage of o ("" when it did not
// run).
func stage(o pipeline.Outcome, name string) string {
	d := ""
	for _, s := range o.Stages {
		if s.Name == name {
			d = s.Decision
		}
	}
	return d
}

// holds returns the skills the store says agent holds acquired.
func (e *env) holds(agent string) []string {
	e.t.Helper()
	states, _, err := e.eng.Store().ListSkillStates(context.Background(), agent, store.Page{Limit: store.MaxSkillHolds})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, st := range states {
		if st.Acquired {
			out = append(out, st.Skill)
		}
	}
	return out
}

// source returns the source roster.Tools shows for agent's tool name, ""
// when the agent's tools do not list it.
func (e *env) source(agent, name string) string {
	e.t.Helper()
	for _, ti := range e.eng.Roster().Tools(e.agent(agent)) {
		if ti.Name == name {
			return ti.Source
		}
	}
	return ""
}

// explain is the roster's explanation of agent's tool, its reasons
// joined by newlines.
func (e *env) explain(agent, tool string) (bool, string) {
	e.t.Helper()
	ex, err := e.eng.Roster().Explain(agent, tool)
	if err != nil {
		e.t.Fatal(err)
	}
	return ex.Visible, strings.Join(ex.Reasons, "\n")
}

// audit returns the audit records of tool, oldest first.
func (e *env) audit(tool string) []*audit.Record {
	e.t.Helper()
	recs, err := e.eng.Store().ListAudit(context.Background(), store.AuditFilter{Tool: tool, Oldest: true})
	if err != nil {
		e.t.Fatal(err)
	}
	return recs
}

// needSandbox skips (locally) or fails (CI) when no sandbox backend
// works: a skill's binary tool runs in one.
func needSandbox(t testing.TB) {
	t.Helper()
	if err := sandbox.Requirement(""); err != nil {
		testenv.Missing(t, "a process sandbox (bwrap or Landlock)", err.Error())
	}
}

// incoming lists what an install left in the world's skills/ folder
// besides the packs: staged (.incoming-*) or removed (.removed-*) folders.
func incoming(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, "skills"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}
