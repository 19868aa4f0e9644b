package skills

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
)

// An agent lists, activates, acquires and drops skills through its
// syscall.skill.* tools and the one pipeline: each sees the skills of the
// world and of its archetype, acquiring changes its registry, briefing
// and tool list at once (the tool's source is the skill), a second
// acquire changes nothing, and the errors say what there is.
func TestSyscallsListActivateAcquireDrop(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})

	var list struct{ Skills []SkillInfo }
	e.ok("dev", "syscall.skill.list", `{}`, &list)
	var names []string
	for _, s := range list.Skills {
		names = append(names, s.Name+"/"+s.Scope)
		if s.Acquired || s.Active {
			t.Errorf("fresh agent: %+v", s)
		}
	}
	if got := strings.Join(names, ","); got != "notes/archetype dev,plain/world,text/world" {
		t.Fatalf("dev sees %s", got)
	}
	e.ok("guest", "syscall.skill.list", `{}`, &list)
	if len(list.Skills) != 2 || list.Skills[0].Name != "plain" || list.Skills[1].Name != "text" || !slices.Equal(list.Skills[1].Tools, []string{"text.count", "text.search"}) {
		t.Fatalf("guest sees %+v", list.Skills)
	}

	// Activate: the instructions and the files, twice the same.
	for range 2 {
		o := e.ok("dev", "syscall.skill.activate", `{"name":"text"}`, nil)
		for _, want := range []string{"# Skill text", "Count lines with text.count.", "- references/guide.md", "- assets/logo.bin", `syscall.skill.acquire {"name": "text"} makes them yours`} {
			if !strings.Contains(o.Result, want) {
				t.Fatalf("activate: %q lacks %q", o.Result, want)
			}
		}
		if strings.Contains(o.Result, "scripts/") {
			t.Fatalf("activate lists a script: %s", o.Result)
		}
	}
	e.ok("dev", "syscall.skill.list", `{}`, &list)
	if s := list.Skills[2]; s.Name != "text" || !s.Active || s.Acquired {
		t.Fatalf("after activate: %+v", s)
	}
	if e.agent("dev").Registry.Has("text.count") {
		t.Fatal("activating registered the skill's tools")
	}

	// Acquire: the tools join the registry before the call returns.
	var acq AcquireResult
	e.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, &acq)
	if !acq.Changed || !slices.Equal(acq.Tools, []string{"text.count", "text.search"}) || len(acq.Withheld) != 0 {
		t.Fatalf("acquire: %+v", acq)
	}
	dev := e.agent("dev")
	if !dev.Registry.Has("text.count") || !dev.Registry.Has("text.search") {
		t.Fatalf("registry after acquire: %v", dev.Registry.Specs())
	}
	if b := e.eng.Roster().Briefing(dev); !strings.Contains(b, "text.count") || !strings.Contains(b, "Count the lines, words and bytes") {
		t.Fatalf("<tools> briefing lacks the skill's tool:\n%s", b)
	}
	for _, n := range []string{"text.count", "text.search"} {
		if src := e.source("dev", n); src != "skill text" {
			t.Errorf("source of %s = %q, want \"skill text\"", n, src)
		}
	}
	if src := e.source("dev", "syscall.skill.list"); src != Name {
		t.Errorf("source of syscall.skill.list = %q", src)
	}
	o := e.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, &acq)
	if acq.Changed || !strings.HasPrefix(o.Result, "You hold skill text already.") || len(acq.Tools) != 2 {
		t.Fatalf("second acquire: %+v\n%s", acq, o.Result)
	}
	if got := e.holds("dev"); !slices.Equal(got, []string{"text"}) {
		t.Fatalf("store holds %v", got)
	}
	e.ok("dev", "syscall.skill.list", `{}`, &list)
	if s := list.Skills[2]; !s.Acquired || !s.Active {
		t.Fatalf("list after acquire: %+v", s)
	}
	if o := e.ok("dev", "syscall.skill.activate", `{"name":"text"}`, nil); !strings.Contains(o.Result, "Tools (yours, acquired): text.count, text.search") {
		t.Fatalf("activate after acquire: %s", o.Result)
	}

	// Errors a model can act on.
	e.refused("dev", "syscall.skill.acquire", `{"name":"txet"}`, armory.KindNotFound, `no skill "txet"`, "skills you can acquire: notes, plain, text")
	e.refused("guest", "syscall.skill.acquire", `{"name":"notes"}`, armory.KindNotFound, `no skill "notes"`, "skills you can acquire: plain, text")
	e.refused("dev", "syscall.skill.activate", `{"name":"nope"}`, armory.KindNotFound, "skills you can acquire: notes, plain, text")
	e.refused("dev", "syscall.skill.acquire", `{}`, armory.KindInvalid, "name")
	e.refused("dev", "syscall.skill.acquire", `{"name":"text","extra":1}`, armory.KindInvalid, "extra")

	// Drop: gone at once; a second drop, or a drop of a skill never
	// acquired, says there is nothing to drop.
	o = e.ok("dev", "syscall.skill.drop", `{"name":"text"}`, nil)
	if !strings.Contains(o.Result, "Dropped skill text") {
		t.Fatalf("drop: %s", o.Result)
	}
	if dev.Registry.Has("text.count") || dev.Registry.Has("text.search") || e.source("dev", "text.count") != "" {
		t.Fatal("the dropped skill's tools are still registered")
	}
	if b := e.eng.Roster().Briefing(dev); strings.Contains(b, "text.count") {
		t.Fatalf("<tools> briefing still shows the dropped tool:\n%s", b)
	}
	if got := e.holds("dev"); len(got) != 0 {
		t.Fatalf("store holds %v after the drop", got)
	}
	e.refused("dev", "syscall.skill.drop", `{"name":"text"}`, armory.KindNotFound, `you do not hold skill "text"`, "skills you hold: none")
	e.refused("dev", "syscall.skill.drop", `{"name":"nope"}`, armory.KindNotFound, `you do not hold skill "nope"`)
	e.refused("dev", "text.count", `{"file":"a"}`, armory.KindNotFound, "Unknown tool: text.count")

	// A skill the agent only activated (read) is held too (it counts
	// toward the bound): dropping it releases it, and says it gave no
	// tools.
	e.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, nil)
	e.ok("dev", "syscall.skill.activate", `{"name":"plain"}`, nil)
	e.refused("dev", "syscall.skill.drop", `{"name":"notes"}`, armory.KindNotFound, `you do not hold skill "notes"`, "skills you hold: plain, text")
	o = e.ok("dev", "syscall.skill.drop", `{"name":"plain"}`, nil)
	if !strings.Contains(o.Result, "you had activated it, not acquired it: it gave you no tools") {
		t.Fatalf("drop of an activated skill: %s", o.Result)
	}
	e.ok("dev", "syscall.skill.list", `{}`, &list)
	if s := list.Skills[1]; s.Name != "plain" || s.Active || s.Acquired {
		t.Fatalf("after the drop: %+v", s)
	}
	if !dev.Registry.Has("text.count") {
		t.Fatal("dropping one skill dropped another's tools")
	}

	// The archetype's own skill: dev acquires it (it has no tools).
	e.ok("dev", "syscall.skill.acquire", `{"name":"notes"}`, &acq)
	if !acq.Changed || len(acq.Tools) != 0 {
		t.Fatalf("acquire notes: %+v", acq)
	}
}

// An acquired skill's binary tool runs through the pipeline in the
// sandbox, in the agent's workspace, and is audited like any tool.
func TestSkillToolRuns(t *testing.T) {
	needSandbox(t)
	e := open(t, e2eWorkspace(t), "", Options{})
	e.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, nil)
	o := e.ok("dev", "text.count", `{"lines":true,"file":"notes.txt"}`, nil)
	if !strings.Contains(o.Result, "3 notes.txt") {
		t.Fatalf("text.count: %s", o.Result)
	}
	if stage(o, "validate") != "ok" || o.Permission != "auto" {
		t.Fatalf("stages: %+v", o.Stages)
	}
	o = e.ok("dev", "text.search", `{"pattern":"^b","file":"notes.txt"}`, nil)
	if strings.TrimSpace(o.Result) != "2:beta" {
		t.Fatalf("text.search: %q", o.Result)
	}
	if recs := e.audit("text.count"); len(recs) != 2 || recs[0].Phase != audit.PhaseStart || recs[1].Status != audit.StatusSuccess {
		t.Fatalf("audit of text.count: %+v", recs)
	}
}

// e2eWorkspace writes the test world with dev's workspace holding
// notes.txt (three lines) and returns the world folder.
func e2eWorkspace(t *testing.T) string {
	t.Helper()
	dir := writeWorld(t, packFiles())
	ws := filepath.Join(dir, "workspaces", "dev")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("alpha\nbeta\ngamma\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// syscall.skill.read serves the files of references/ and assets/ only,
// at most MaxReadBytes a call: text as text, never cut inside a UTF-8
// character, binary as base64, paged by offset and next_offset.
func TestSkillRead(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	read := func(path string, offset int64) ReadResult {
		t.Helper()
		var r ReadResult
		e.ok("guest", "syscall.skill.read", map[string]any{"name": "text", "path": path, "offset": offset}, &r)
		return r
	}
	r := read("references/guide.md", 0)
	if r.Content != "# Guide\n\nUse -l for lines.\n" || r.Truncated || r.NextOffset != 0 || r.ContentBase64 != "" || r.Size != int64(len(r.Content)) {
		t.Fatalf("guide: %+v", r)
	}
	if r := read("./references/../references/guide.md", 0); r.Path != "references/guide.md" {
		t.Fatalf("a path that cleans to a listed file: %+v", r)
	}
	if r := read("references/guide.md", 9); r.Content != "Use -l for lines.\n" || r.Offset != 9 {
		t.Fatalf("guide from 9: %+v", r)
	}

	// Binary: base64, all of it.
	r = read("assets/logo.bin", 0)
	if r.Content != "" || r.ContentBase64 != base64.StdEncoding.EncodeToString([]byte(binaryAsset)) {
		t.Fatalf("binary asset: %+v", r)
	}
	if o := e.ok("guest", "syscall.skill.read", `{"name":"text","path":"assets/logo.bin"}`, nil); !strings.Contains(o.Result, "is binary") {
		t.Fatalf("binary asset's text: %s", o.Result)
	}

	// Paging a large text: every page at most MaxReadBytes, valid UTF-8,
	// the pages joined are the file.
	var got strings.Builder
	offset, pages := int64(0), 0
	for {
		r := read("references/wide.md", offset)
		pages++
		if len(r.Content) > MaxReadBytes || r.ContentBase64 != "" || !utf8.ValidString(r.Content) {
			t.Fatalf("page at %d: %d bytes, base64 %d, valid %v", offset, len(r.Content), len(r.ContentBase64), utf8.ValidString(r.Content))
		}
		if r.Offset != offset || r.Size != int64(len(wideText)) {
			t.Fatalf("page at %d: %+v", offset, r.Offset)
		}
		got.WriteString(r.Content)
		if !r.Truncated {
			if r.NextOffset != 0 {
				t.Fatalf("last page has next_offset %d", r.NextOffset)
			}
			break
		}
		if r.NextOffset != offset+int64(len(r.Content)) || r.NextOffset <= offset {
			t.Fatalf("page at %d: next_offset %d after %d bytes", offset, r.NextOffset, len(r.Content))
		}
		offset = r.NextOffset
	}
	if got.String() != wideText || pages < 2 {
		t.Fatalf("%d pages joined are %d bytes, want the file's %d", pages, got.Len(), len(wideText))
	}
	if o := e.ok("guest", "syscall.skill.read", `{"name":"text","path":"references/wide.md"}`, nil); !strings.Contains(o.Result, "read on with offset") {
		t.Fatalf("a truncated page's text does not say how to read on: ...%s", o.Result[len(o.Result)-80:])
	}

	// Refusals: what is not a listed file of references/ or assets/.
	for _, tc := range []struct {
		args string
		kind armory.Kind
		want []string
	}{
		{`{"name":"text","path":"../SKILL.md"}`, armory.KindNotFound, []string{`no file "../SKILL.md"`, "its files: assets/logo.bin, references/guide.md, references/wide.md"}},
		{`{"name":"text","path":"SKILL.md"}`, armory.KindNotFound, []string{`no file "SKILL.md"`}},
		{`{"name":"text","path":"/etc/passwd"}`, armory.KindNotFound, []string{`no file "/etc/passwd"`}},
		{`{"name":"text","path":"scripts/helper.sh"}`, armory.KindNotFound, []string{`no file "scripts/helper.sh"`}},
		{`{"name":"text","path":"toolbox.yaml"}`, armory.KindNotFound, []string{`no file "toolbox.yaml"`}},
		{`{"name":"text","path":"references/missing.md"}`, armory.KindNotFound, []string{`no file "references/missing.md"`}},
		{`{"name":"text","path":"references/../../../world-config.yaml"}`, armory.KindNotFound, []string{"no file"}},
		{`{"name":"plain","path":"references/guide.md"}`, armory.KindNotFound, []string{"skill plain has no file", "it has none"}},
		{`{"name":"nope","path":"references/guide.md"}`, armory.KindNotFound, []string{`no skill "nope"`}},
		{`{"name":"text","path":"references/guide.md","offset":-1}`, armory.KindInvalid, []string{"offset"}},
		{`{"name":"text","path":"references/guide.md","offset":1000}`, armory.KindInvalid, []string{"past the end"}},
	} {
		e.refused("guest", "syscall.skill.read", tc.args, tc.kind, tc.want...)
	}
}
