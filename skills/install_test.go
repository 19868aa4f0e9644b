package skills

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// A pack to install: skill "memo" with one tool, memo.count (wc), and a
// reference.
var memoFiles = map[string]string{
	"SKILL.md":          "---\nname: memo\ndescription: Keep memos.\n---\nWrite memos.\n",
	"toolbox.yaml":      "name: memo\ntools:\n  - name: count\n    description: counts\n    binary: wc\n    args:\n      - {name: file, type: positional, required: true}\n    danger: safe\n    permission: auto\n",
	"references/how.md": "# How\n",
	"scripts/helper.sh": "#!/bin/sh\n",
}

// memoV2 is memo again, whose one tool is memo.words instead.
var memoV2 = withFiles(memoFiles, map[string]string{
	"toolbox.yaml": "name: memo\ntools:\n  - name: words\n    description: counts words\n    binary: wc\n    args:\n      - {name: w, type: flag_bool, flag: -w}\n    danger: safe\n    permission: auto\n",
})

// runInstall runs syscall.skill.install's own code for agent (as it runs
// once approved) and returns its result.
func (e *env) runInstall(agent string, req any) armory.Result {
	e.t.Helper()
	b, _ := json.Marshal(req)
	return e.mod.runInstall(context.Background(), e.agent(agent), b)
}

// noLeftovers fails t when an install left a staging or removed folder in
// the world's skills/.
func (e *env) noLeftovers() {
	e.t.Helper()
	if left := incoming(e.t, e.dir); len(left) != 0 {
		e.t.Fatalf("skills/ holds %v", left)
	}
}

// An agent's install waits for an approval; once approved, the resumed
// call installs the pack from its workspace, which then loads like any
// world skill, and the staging folder is gone.
func TestInstallFromWorkspaceAfterApproval(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	ws := e.agent("dev").Env.Workspace
	testenv.WriteTree(t, filepath.Join(ws, "packs", "memo"), memoFiles)
	ctx := context.Background()
	args := `{"source":"folder","path":"packs/memo"}`
	o := e.run("dev", "syscall.skill.install", args)
	if o.Status != audit.StatusPending || o.Kind != armory.KindPending || o.ApprovalID == "" || o.Permission != "confirm" {
		t.Fatalf("install: %+v", o)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "skills", "memo")); !os.IsNotExist(err) {
		t.Fatalf("installed before the approval: %v", err)
	}
	// Asked again while pending: the same request.
	if again := e.run("dev", "syscall.skill.install", args); again.ApprovalID != o.ApprovalID {
		t.Fatalf("a second call opened approval %s besides %s", again.ApprovalID, o.ApprovalID)
	}
	p := e.eng.Pipeline()
	if _, err := p.Decide(ctx, pipeline.ApprovalDecision{ID: o.ApprovalID, Status: store.StatusApproved, Reason: "looks fine", Via: pipeline.ViaCLI}); err != nil {
		t.Fatal(err)
	}
	r := p.Execute(ctx, pipeline.Call{Agent: "dev", Tool: "syscall.skill.install", Resume: o.ApprovalID})
	if r.Status != audit.StatusSuccess || r.DecidedBy != pipeline.Human || !strings.Contains(r.Result, "Installed skill memo (skills/memo)") {
		t.Fatalf("resumed install: %+v", r)
	}
	for _, f := range []string{"SKILL.md", "toolbox.yaml", "references/how.md", "scripts/helper.sh"} {
		if got := testenv.ReadFile(t, filepath.Join(e.dir, "skills", "memo", f)); got != memoFiles[f] {
			t.Fatalf("installed %s = %q", f, got)
		}
	}
	e.noLeftovers()
	// Resumed again: the stored result, not a second install.
	if r2 := p.Execute(ctx, pipeline.Call{Agent: "dev", Tool: "syscall.skill.install", Resume: o.ApprovalID}); r2.Status != audit.StatusSuccess || !strings.Contains(r2.Result, "Installed skill memo") {
		t.Fatalf("second resume: %+v", r2)
	}
	// Every agent sees it now; dev acquires it.
	var acq AcquireResult
	e.ok("guest", "syscall.skill.acquire", `{"name":"memo"}`, &acq)
	if !slices.Equal(acq.Tools, []string{"memo.count"}) || !e.agent("guest").Registry.Has("memo.count") {
		t.Fatalf("acquire the installed skill: %+v", acq)
	}
	// A restart loads it from skills/ like any world skill.
	e2 := open(t, e.dir, "", Options{})
	if !e2.agent("guest").Registry.Has("memo.count") {
		t.Fatal("after a restart the installed skill's tool is not registered")
	}
	// A denied install installs nothing.
	testenv.WriteTree(t, filepath.Join(ws, "packs", "other"), withFiles(memoFiles, map[string]string{"SKILL.md": "---\nname: other\ndescription: d\n---\nx\n", "toolbox.yaml": ""}))
	o = e.run("dev", "syscall.skill.install", `{"source":"folder","path":"packs/other"}`)
	if _, err := p.Decide(ctx, pipeline.ApprovalDecision{ID: o.ApprovalID, Status: store.StatusDenied, Reason: "no", Via: pipeline.ViaCLI}); err != nil {
		t.Fatal(err)
	}
	if r := p.Execute(ctx, pipeline.Call{Agent: "dev", Tool: "syscall.skill.install", Resume: o.ApprovalID}); r.Status != audit.StatusDenied {
		t.Fatalf("denied install: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "skills", "other")); !os.IsNotExist(err) {
		t.Fatalf("a denied install installed: %v", err)
	}
}

// A folder install is confined to the agent's workspace, takes the
// pack's name from its SKILL.md, refuses links and invalid packs, and
// never leaves anything behind.
func TestInstallFolderRefusals(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	ws := e.agent("dev").Env.Workspace
	outside := testenv.WriteTree(t, filepath.Join(t.TempDir(), "outside", "memo"), memoFiles)
	testenv.WriteTree(t, filepath.Join(ws, "nomd"), map[string]string{"README.md": "no skill here\n"})
	testenv.WriteTree(t, filepath.Join(ws, "badtool"), withFiles(memoFiles, map[string]string{"toolbox.yaml": "name: memo\ntools:\n  - name: count\n    description: c\n    binary: wc\n    danger: deadly\n"}))
	testenv.WriteTree(t, filepath.Join(ws, "badname"), withFiles(memoFiles, map[string]string{"SKILL.md": "---\nname: Memo_X\ndescription: d\n---\nx\n"}))
	testenv.WriteTree(t, filepath.Join(ws, "linked"), memoFiles)
	testenv.WriteTree(t, filepath.Join(ws, "whatever"), memoFiles)
	if err := os.Symlink("/etc/passwd", filepath.Join(ws, "linked", "references", "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(ws, "up")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  InstallRequest
		kind armory.Kind
		want []string
	}{
		{"parent", InstallRequest{Source: SourceFolder, Path: "../x"}, armory.KindInvalid, []string{`path "../x" must be a folder inside your workspace`}},
		{"absolute", InstallRequest{Source: SourceFolder, Path: outside}, armory.KindInvalid, []string{"must be a folder inside your workspace"}},
		{"cleaned parent", InstallRequest{Source: SourceFolder, Path: "a/../../x"}, armory.KindInvalid, []string{"inside your workspace"}},
		{"a link out of the workspace", InstallRequest{Source: SourceFolder, Path: "escape"}, armory.KindInvalid, []string{`path "escape" leads out of your workspace`}},
		{"a folder behind a link out", InstallRequest{Source: SourceFolder, Path: "up/memo"}, armory.KindInvalid, []string{"leads out of your workspace"}},
		{"missing", InstallRequest{Source: SourceFolder, Path: "nope"}, armory.KindNotFound, []string{`no folder "nope" in your workspace`}},
		{"no path", InstallRequest{Source: SourceFolder}, armory.KindInvalid, []string{"source folder needs a path"}},
		{"no SKILL.md", InstallRequest{Source: SourceFolder, Path: "nomd"}, armory.KindInvalid, []string{"no SKILL.md"}},
		{"a link inside the pack", InstallRequest{Source: SourceFolder, Path: "linked"}, armory.KindBlocked, []string{"symbolic link"}},
		{"an invalid toolbox", InstallRequest{Source: SourceFolder, Path: "badtool"}, armory.KindInvalid, []string{"the skill is not valid: memo/toolbox.yaml:6: tool count: danger"}},
		{"an invalid name", InstallRequest{Source: SourceFolder, Path: "badname"}, armory.KindInvalid, []string{"SKILL.md is not valid", `name "Memo_X" is not valid`}},
		{"not the name asked for", InstallRequest{Source: SourceFolder, Path: "whatever", Name: "other"}, armory.KindInvalid, []string{`the skill is named "memo", not "other"`}},
		{"no source", InstallRequest{}, armory.KindInvalid, []string{"source is required: folder, url, builtin or mcp_server"}},
		{"unknown source", InstallRequest{Source: "git"}, armory.KindInvalid, []string{`unknown source "git"`}},
		{"no url", InstallRequest{Source: SourceURL}, armory.KindInvalid, []string{"source url needs a url"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.runInstall("dev", tc.req)
			if r.Success || r.Kind != tc.kind {
				t.Fatalf("%+v: %v %q, want a %v failure", tc.req, r.Kind, r.Text, tc.kind)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.Text, w) {
					t.Errorf("%q lacks %q", r.Text, w)
				}
			}
			if strings.Contains(r.Text, ".incoming-") {
				t.Errorf("the error names the staging folder: %s", r.Text)
			}
			e.noLeftovers()
			if _, err := os.Stat(filepath.Join(e.dir, "skills", "memo")); !os.IsNotExist(err) {
				t.Fatalf("a refused install left skills/memo: %v", err)
			}
		})
	}
	// A folder of any name installs under its SKILL.md's name.
	if r := e.runInstall("dev", InstallRequest{Source: SourceFolder, Path: "@me/whatever", Name: "memo"}); !r.Success {
		t.Fatalf("install from @me/whatever: %s", r.Text)
	}
	e.noLeftovers()
	if _, err := os.Stat(filepath.Join(e.dir, "skills", "memo", "SKILL.md")); err != nil {
		t.Fatal(err)
	}
}

// serveArchive serves data at /memo.tgz on 127.0.0.1.
func serveArchive(t *testing.T, data []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/memo.tgz" {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/memo.tgz"
}

// memoArchive is memo as a tar.gz with a top folder.
func memoArchive(t *testing.T) []byte {
	var es []ent
	for _, name := range []string{"SKILL.md", "toolbox.yaml", "references/how.md"} {
		es = append(es, file("memo/"+name, memoFiles[name]))
	}
	return makeTgz(t, append(es, exe("memo/scripts/helper.sh", memoFiles["scripts/helper.sh"]))...)
}

// An install from an archive URL is fetched through the network guard:
// the loopback test server is refused by the default policy, reached once
// the test opens it or the world's network allow-list lists it, and
// refused again when the allow-list applies and does not list it.
func TestInstallFromURL(t *testing.T) {
	url := serveArchive(t, memoArchive(t))
	broken := serveArchive(t, makeTgz(t, file("memo/SKILL.md", "---\nname: memo\n---\nno description\n")))
	t.Run("test guard", func(t *testing.T) {
		opts := Options{}
		opts.fetch.Guard = localGuard()
		e := open(t, writeWorld(t, packFiles()), "", opts)
		if r := e.runInstall("dev", InstallRequest{Source: SourceURL, URL: broken}); r.Success || r.Kind != armory.KindInvalid || !strings.Contains(r.Text, "description is required") {
			t.Fatalf("an invalid archive: %+v", r)
		}
		e.noLeftovers()
		r := e.runInstall("dev", InstallRequest{Source: SourceURL, URL: url})
		if !r.Success {
			t.Fatalf("install: %s", r.Text)
		}
		if fi, err := os.Stat(filepath.Join(e.dir, "skills", "memo", "scripts", "helper.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
			t.Fatalf("the script: %v %v", fi, err)
		}
		e.noLeftovers()
	})
	for _, tc := range []struct {
		name, network string
		ok            bool
	}{
		{"default policy", "", false},
		{"world allow-list opens loopback", "network:\n  allow: [\"127.0.0.1\"]\n", true},
		{"world allow-list without it", "network:\n  allow: [\"example.com\"]\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := packFiles()
			files["world-config.yaml"] += tc.network
			e := open(t, writeWorld(t, files), "", Options{})
			r := e.runInstall("dev", InstallRequest{Source: SourceURL, URL: url})
			_, err := e.mod.Install(context.Background(), e.eng.Pipeline(), InstallRequest{Source: SourceURL, URL: url, Replace: true}, "test")
			if tc.ok {
				if !r.Success || err != nil {
					t.Fatalf("agent: %s; person: %v", r.Text, err)
				}
			} else {
				if r.Success || r.Kind != armory.KindBlocked || !strings.Contains(r.Text, "127.0.0.1") {
					t.Fatalf("agent's install: %+v", r)
				}
				if armory.KindOf(err) != armory.KindBlocked {
					t.Fatalf("person's install: %v", err)
				}
			}
			e.noLeftovers()
		})
	}
}

// The built-in packs install by name; an unknown name lists them.
func TestInstallBuiltin(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	if got := e.mod.BuiltinNames(); !slices.Equal(got, []string{"python", "web-research"}) {
		t.Fatalf("built-in packs: %v", got)
	}
	for _, name := range []string{"python", "web-research"} {
		r := e.runInstall("dev", InstallRequest{Source: SourceBuiltin, Name: name})
		if !r.Success {
			t.Fatalf("install %s: %s", name, r.Text)
		}
	}
	var r ReadResult
	e.ok("dev", "syscall.skill.read", `{"name":"web-research","path":"references/citing.md"}`, &r)
	if r.Content == "" {
		t.Fatal("web-research's reference is empty")
	}
	for _, tc := range []struct {
		name string
		kind armory.Kind
		want string
	}{
		{"nope", armory.KindNotFound, `no built-in skill "nope" (built-in skills: python, web-research)`},
		{"", armory.KindInvalid, "source builtin needs the name of a built-in skill (python, web-research)"},
		{"../python", armory.KindInvalid, "python, web-research"},
		{"python", armory.KindConflict, `the world has a skill "python" already; ask again with replace`},
	} {
		r := e.runInstall("dev", InstallRequest{Source: SourceBuiltin, Name: tc.name})
		if r.Success || r.Kind != tc.kind || !strings.Contains(r.Text, tc.want) {
			t.Errorf("builtin %q: %v %q", tc.name, r.Kind, r.Text)
		}
	}
	e.noLeftovers()
}

// replace: false refuses a skill of the same name; replace: true swaps
// the pack, and an agent holding it gets the new tools at once.
func TestInstallReplace(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	ctx := context.Background()
	p := e.eng.Pipeline()
	v1 := testenv.WriteTree(t, filepath.Join(t.TempDir(), "v1", "memo"), memoFiles)
	v2 := testenv.WriteTree(t, filepath.Join(t.TempDir(), "v2", "memo"), memoV2)
	if res, err := e.mod.Install(ctx, p, InstallRequest{Source: SourceFolder, Path: v1}, "test"); err != nil || res.Replaced {
		t.Fatalf("install v1: %+v %v", res, err)
	}
	e.ok("dev", "syscall.skill.acquire", `{"name":"memo"}`, nil)
	dev := e.agent("dev")
	if !dev.Registry.Has("memo.count") {
		t.Fatal("memo.count is not registered")
	}
	_, err := e.mod.Install(ctx, p, InstallRequest{Source: SourceFolder, Path: v2}, "test")
	if armory.KindOf(err) != armory.KindConflict || !strings.Contains(err.Error(), "ask again with replace") {
		t.Fatalf("install v2 without replace: %v", err)
	}
	if !dev.Registry.Has("memo.count") || testenv.ReadFile(t, filepath.Join(e.dir, "skills", "memo", "toolbox.yaml")) != memoFiles["toolbox.yaml"] {
		t.Fatal("a refused replace changed the skill")
	}
	res, err := e.mod.Install(ctx, p, InstallRequest{Source: SourceFolder, Path: v2, Replace: true}, "test")
	if err != nil || !res.Replaced || !slices.Equal(res.Skill.Tools, []string{"memo.words"}) {
		t.Fatalf("replace: %+v %v", res, err)
	}
	if dev.Registry.Has("memo.count") || !dev.Registry.Has("memo.words") {
		t.Fatalf("after the replace dev holds %v", dev.Registry.Specs())
	}
	if src := e.source("dev", "memo.words"); src != "skill memo" {
		t.Fatalf("source %q", src)
	}
	e.refused("dev", "memo.count", `{"file":"x"}`, armory.KindNotFound, "Unknown tool: memo.count")
	e.noLeftovers()
	// An invalid replacement leaves the installed pack as it was.
	bad := testenv.WriteTree(t, filepath.Join(t.TempDir(), "v3", "memo"), withFiles(memoV2, map[string]string{"toolbox.yaml": "name: other\n"}))
	if _, err := e.mod.Install(ctx, p, InstallRequest{Source: SourceFolder, Path: bad, Replace: true}, "test"); armory.KindOf(err) != armory.KindInvalid {
		t.Fatalf("an invalid replacement: %v", err)
	}
	if !dev.Registry.Has("memo.words") || testenv.ReadFile(t, filepath.Join(e.dir, "skills", "memo", "toolbox.yaml")) != memoV2["toolbox.yaml"] {
		t.Fatal("an invalid replacement changed the installed skill")
	}
	e.noLeftovers()
}

// A person's install, removal, acquire and drop are audited as the
// person's (decided_by human); removing a skill forgets every agent's
// hold on it and unregisters its tools.
func TestHumanChangesAuditedAndRemove(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	ctx := context.Background()
	p := e.eng.Pipeline()
	src := testenv.WriteTree(t, filepath.Join(t.TempDir(), "memo"), memoFiles)
	if _, err := e.mod.Install(ctx, p, InstallRequest{Source: SourceFolder, Path: src}, "cli"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"dev", "guest"} {
		res, err := e.mod.Acquire(ctx, p, id, "memo", "rest")
		if err != nil || !slices.Equal(res.Tools, []string{"memo.count"}) {
			t.Fatalf("acquire for %s: %+v %v", id, res, err)
		}
	}
	if _, err := e.mod.Acquire(ctx, p, "dev", "nope", "rest"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("acquire an unknown skill: %v", err)
	}
	if _, err := e.mod.Acquire(ctx, p, "nobody", "memo", "rest"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("acquire for an unknown agent: %v", err)
	}
	if err := e.mod.Drop(ctx, p, "guest", "memo", "cli"); err != nil {
		t.Fatal(err)
	}
	if err := e.mod.Drop(ctx, p, "guest", "memo", "cli"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("second drop: %v", err)
	}
	e.ok("guest", "syscall.skill.acquire", `{"name":"memo"}`, nil)
	agents, err := e.mod.Remove(ctx, p, "memo", "cli")
	if err != nil || !slices.Equal(agents, []string{"dev", "guest"}) {
		t.Fatalf("remove: %v %v", agents, err)
	}
	for _, id := range []string{"dev", "guest"} {
		if e.agent(id).Registry.Has("memo.count") {
			t.Errorf("%s still holds memo.count", id)
		}
		if h := e.holds(id); slices.Contains(h, "memo") {
			t.Errorf("the store says %s holds memo", id)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "skills", "memo")); !os.IsNotExist(err) {
		t.Fatalf("skills/memo: %v", err)
	}
	e.noLeftovers()
	e.refused("dev", "syscall.skill.acquire", `{"name":"memo"}`, armory.KindNotFound, `no skill "memo"`)
	if _, err := e.mod.Remove(ctx, p, "memo", "cli"); armory.KindOf(err) != armory.KindNotFound {
		t.Fatalf("second remove: %v", err)
	}
	if _, err := e.mod.Remove(ctx, p, "notes", "cli"); armory.KindOf(err) != armory.KindNotFound || !strings.Contains(err.Error(), "an archetype's own skills") {
		t.Fatalf("remove an archetype's skill: %v", err)
	}

	// The trail: one entry per change, each the human's.
	for tool, want := range map[string]int{"skills.install": 1, "skills.acquire": 2, "skills.drop": 1, "skills.remove": 1} {
		recs := e.audit(tool)
		if len(recs) != want {
			t.Errorf("%s: %d audit entries, want %d", tool, len(recs), want)
		}
		for _, r := range recs {
			if r.DecidedBy != pipeline.Human || r.Status != audit.StatusSuccess || r.Phase != audit.PhaseFinish {
				t.Errorf("%s entry: decided_by %q status %s", tool, r.DecidedBy, r.Status)
			}
		}
	}
	if recs := e.audit("skills.remove"); len(recs) == 1 && !strings.Contains(recs[0].Result, "held by: dev, guest") {
		t.Errorf("remove entry: %q", recs[0].Result)
	}
	if recs := e.audit("skills.acquire"); len(recs) == 2 && (recs[0].Agent != "dev" || !strings.Contains(recs[0].Result, "via rest")) {
		t.Errorf("acquire entry: %+v", recs[0])
	}
	if err := e.eng.Store().VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// A pack may be called anything a skill may: "old" and "pack" too, the
// words an install could use for its own staging.
func TestInstallReplaceAnyName(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	ctx := context.Background()
	for _, name := range []string{"old", "pack", "incoming"} {
		files := map[string]string{"SKILL.md": "---\nname: " + name + "\ndescription: d\n---\nx\n"}
		src := testenv.WriteTree(t, filepath.Join(t.TempDir(), name), files)
		for _, replace := range []bool{false, true} {
			res, err := e.mod.Install(ctx, e.eng.Pipeline(), InstallRequest{Source: SourceFolder, Path: src, Replace: replace}, "test")
			if err != nil || res.Replaced != replace || res.Dir != "skills/"+name {
				t.Fatalf("install %s (replace %v): %+v %v", name, replace, res, err)
			}
			e.noLeftovers()
		}
	}
}
