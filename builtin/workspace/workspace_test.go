package workspace

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

// wsFixture is a real folder layout for the workspace tools:
//
//	base/ws        the agent's workspace (@me/)
//	base/ws-evil   a sibling whose name extends the workspace's (never reachable)
//	base/proj      granted as @project:web/
type wsFixture struct {
	base, ws, evil, proj string
	env                  *armory.AgentEnv
}

func newWS(t *testing.T) *wsFixture {
	t.Helper()
	base := t.TempDir()
	f := &wsFixture{base: base, ws: filepath.Join(base, "ws"), evil: filepath.Join(base, "ws-evil"), proj: filepath.Join(base, "proj")}
	for _, d := range []string{f.ws, f.evil, f.proj} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(f.evil, "secret.txt"), "TOP-SECRET")
	f.env = &armory.AgentEnv{ID: "a1", Workspace: f.ws, Roots: map[string]string{"project:web": f.proj}}
	return f
}

func mustWrite(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// run calls tool with args (a map or a raw JSON string) as agent env.
func run(t testing.TB, tool armory.Tool, env *armory.AgentEnv, args any) armory.Result {
	t.Helper()
	var raw json.RawMessage
	switch a := args.(type) {
	case string:
		raw = json.RawMessage(a)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		raw = b
	}
	return tool.Execute(context.Background(), armory.Invocation{Args: raw, Agent: env})
}

type M = map[string]any

// modes runs f once with openat2 and once with the no-follow fallback.
func modes(t *testing.T, f func(t *testing.T)) {
	for _, fallback := range []bool{false, true} {
		name := "openat2"
		if fallback {
			name = "fallback"
		}
		t.Run(name, func(t *testing.T) {
			old := noOpenat2.Load()
			noOpenat2.Store(fallback)
			defer noOpenat2.Store(old)
			f(t)
		})
	}
}

// runOK runs tool and fails t unless the call succeeded.
func runOK(t *testing.T, tool armory.Tool, env *armory.AgentEnv, args any) armory.Result {
	t.Helper()
	r := run(t, tool, env, args)
	wantOK(t, r)
	return r
}

func wantOK(t *testing.T, r armory.Result) {
	t.Helper()
	if !r.Success {
		t.Fatalf("want success, got %v: %s", r.Kind, r.Text)
	}
}

func wantFail(t *testing.T, r armory.Result, k armory.Kind, contains string) {
	t.Helper()
	if r.Success {
		t.Fatalf("want failure %v, got success: %.200s", k, r.Text)
	}
	if k != 0 && r.Kind != k {
		t.Fatalf("want kind %v, got %v: %s", k, r.Kind, r.Text)
	}
	if !strings.Contains(r.Text, contains) {
		t.Fatalf("want message containing %q, got %q", contains, r.Text)
	}
}

func allWorkspaceTools() []armory.Tool {
	return []armory.Tool{&Read{}, &Write{}, &Edit{}, &Search{}, &List{}, &Delete{}}
}

func TestWorkspaceSpecsAndManifests(t *testing.T) {
	want := map[string]struct {
		cat  armory.Category
		perm armory.Permission
		cap  armory.Capability
	}{
		"workspace.read":   {armory.CatFileRead, armory.PermAuto, armory.CapReadFS},
		"workspace.list":   {armory.CatFileRead, armory.PermAuto, armory.CapReadFS},
		"workspace.search": {armory.CatFileRead, armory.PermAuto, armory.CapReadFS},
		"workspace.write":  {armory.CatFileWrite, armory.PermAuto, armory.CapWriteFS},
		"workspace.edit":   {armory.CatFileWrite, armory.PermAuto, armory.CapWriteFS},
		"workspace.delete": {armory.CatFileDelete, armory.PermConfirm, armory.CapWriteFS},
	}
	for _, tool := range allWorkspaceTools() {
		s, m := tool.Spec(), tool.Manifest()
		t.Run(s.Name, func(t *testing.T) {
			w, ok := want[s.Name]
			if !ok || !armory.ValidToolName(s.Name) {
				t.Fatalf("unexpected tool name %q", s.Name)
			}
			if m.Category != w.cat || m.Permission != w.perm || !m.Has(w.cap) {
				t.Fatalf("manifest %+v, want category %v permission %v capability %v", m, w.cat, w.perm, w.cap)
			}
			an := m.Annotations()
			if ro := w.cat == armory.CatFileRead; an.ReadOnly != ro {
				t.Fatalf("read-only annotation %v, want %v", an.ReadOnly, ro)
			}
			if w.cat == armory.CatFileDelete && !an.Destructive {
				t.Fatal("delete must be destructive")
			}
			var sch struct {
				Type       string                     `json:"type"`
				Properties map[string]json.RawMessage `json:"properties"`
				Required   []string                   `json:"required"`
				Additional bool                       `json:"additionalProperties"`
			}
			if err := json.Unmarshal(s.InputSchema, &sch); err != nil {
				t.Fatalf("schema: %v\n%s", err, s.InputSchema)
			}
			if sch.Type != "object" || sch.Additional || len(sch.Properties) == 0 {
				t.Fatalf("schema must be a closed object with properties: %s", s.InputSchema)
			}
			for name, raw := range sch.Properties {
				var p struct {
					Type        string `json:"type"`
					Description string `json:"description"`
				}
				if err := json.Unmarshal(raw, &p); err != nil || p.Type == "" || p.Description == "" {
					t.Fatalf("property %s needs a type and a description: %s", name, raw)
				}
			}
			for _, r := range sch.Required {
				if _, ok := sch.Properties[r]; !ok {
					t.Fatalf("required %q is not a property", r)
				}
			}
			if s.Description == "" {
				t.Fatal("empty description")
			}
		})
	}
}

func TestWorkspaceStrictArguments(t *testing.T) {
	f := newWS(t)
	for _, tool := range allWorkspaceTools() {
		name := tool.Spec().Name
		for _, args := range []string{`{"path":"a","bogus":1}`, `{"path":42}`, `[1]`, `{"path":"a"} {}`} {
			r := run(t, tool, f.env, args)
			if r.Success || r.Kind != armory.KindInvalid {
				t.Errorf("%s %s: want invalid, got %v %q", name, args, r.Kind, r.Text)
			}
		}
	}
}

func TestParseTarget(t *testing.T) {
	env := &armory.AgentEnv{Workspace: "/srv/ws", Roots: map[string]string{"project:web": "/srv/web", "org:acme": "/srv/acme", "project:rel": "relative/dir"}}
	cases := []struct {
		in, prefix, rel string
		kind            armory.Kind
		msg             string
	}{
		{in: "", rel: "."},
		{in: "a.txt", rel: "a.txt"},
		{in: "./a//b/./c", rel: "a/b/c"},
		{in: "a/../b", rel: "b"},
		{in: "a/../.git/hooks/x", rel: ".git/hooks/x"},
		{in: "@me", rel: "."},
		{in: "@me/", rel: "."},
		{in: "@me/x/y", rel: "x/y"},
		{in: "@me/@odd", rel: "@odd"},
		{in: "@project:web/src/a.go", prefix: "project:web", rel: "src/a.go"},
		{in: "@org:acme", prefix: "org:acme", rel: "."},
		{in: "@project:mobile/a", kind: armory.KindPermission, msg: "your prefixes are: @me/, @org:acme/, @project:rel/, @project:web/"},
		{in: "@org:evil/a", kind: armory.KindPermission, msg: "no access to @org:evil/"},
		{in: "@team/a", kind: armory.KindInvalid, msg: "unknown prefix @team/"},
		{in: "@/a", kind: armory.KindInvalid, msg: "unknown prefix"},
		{in: "@project:rel/a", kind: armory.KindUnavailable, msg: "misconfigured"},
		{in: "/etc/passwd", kind: armory.KindInvalid, msg: "absolute"},
		{in: "@me//etc/passwd", kind: armory.KindInvalid, msg: "absolute"},
		{in: "/proc/self/root/etc/passwd", kind: armory.KindInvalid, msg: "absolute"},
		{in: "..", kind: armory.KindInvalid, msg: "climbs above"},
		{in: "../ws-evil/secret.txt", kind: armory.KindInvalid, msg: "climbs above"},
		{in: "a/../../x", kind: armory.KindInvalid, msg: "climbs above"},
		{in: "@project:web/../ws/x", kind: armory.KindInvalid, msg: "climbs above @project:web/"},
		{in: "a\x00b", kind: armory.KindInvalid, msg: "NUL"},
		{in: strings.Repeat("a/", MaxPath/2+1), kind: armory.KindInvalid, msg: "the limit is 4096"},
		{in: "...", rel: "..."},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%.40q", c.in), func(t *testing.T) {
			tg, err := parseTarget("test", env, c.in)
			if c.kind != 0 {
				if err == nil || armory.KindOf(err) != c.kind || !strings.Contains(err.Error(), c.msg) {
					t.Fatalf("want %v error containing %q, got %v", c.kind, c.msg, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tg.prefix != c.prefix || tg.rel != c.rel {
				t.Fatalf("got prefix %q rel %q, want %q %q", tg.prefix, tg.rel, c.prefix, c.rel)
			}
		})
	}
	if _, err := parseTarget("test", nil, "a"); armory.KindOf(err) != armory.KindUnavailable {
		t.Fatalf("nil env: %v", err)
	}
	if _, err := parseTarget("test", &armory.AgentEnv{}, "a"); armory.KindOf(err) != armory.KindUnavailable {
		t.Fatalf("no workspace: %v", err)
	}
}

func TestProtectedReason(t *testing.T) {
	yes := []string{
		".git", ".git/hooks", ".git/hooks/pre-commit", ".git/config", ".GIT/HOOKS/x", ".Git/Config",
		"repo/.git/hooks/post-checkout", "a/b/.git", ".git./hooks/x", ".git /config",
		".armory", ".armory/policy.yaml", "x/.ARMORY/y", ".ssh", ".ssh/authorized_keys", "home/.SSH/id_rsa",
		".\u017fsh/authorized_keys", // LATIN SMALL LETTER LONG S folds to s
		".bashrc", ".bash_profile", ".profile", ".zshrc", ".bash_login", ".zprofile", ".zshenv", "home/.BashRC",
	}
	no := []string{
		".", "a.txt", ".gitignore", ".github/workflows/x.yml", ".git/HEAD", ".git/objects/ab/cd", ".git/info/exclude",
		"git/hooks/x", "hooks/x", "config", ".bashrc.d/x", "notes/.profile.md", ".armoryx", ".sshx/y", "src/.git-keep",
	}
	for _, p := range yes {
		if protectedReason(p) == "" {
			t.Errorf("%q should be protected", p)
		}
	}
	for _, p := range no {
		if why := protectedReason(p); why != "" {
			t.Errorf("%q should not be protected (%s)", p, why)
		}
	}
}

func TestWorkspaceRead(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		rd := &Read{}
		mustWrite(t, filepath.Join(f.ws, "a.txt"), "hello\nworld\n")
		mustWrite(t, filepath.Join(f.ws, "empty.txt"), "")
		mustWrite(t, filepath.Join(f.ws, "bin.dat"), "ab\x00cd")
		mustWrite(t, filepath.Join(f.proj, "README.md"), "project readme")

		r := runOK(t, rd, f.env, M{"path": "a.txt"})
		if r.Text != "hello\nworld\n" {
			t.Fatalf("got %q", r.Text)
		}
		r = runOK(t, rd, f.env, M{"path": "@me/a.txt", "offset": 6})
		if r.Text != "world\n" {
			t.Fatalf("offset: got %q", r.Text)
		}
		wantOK(t, run(t, rd, f.env, M{"path": "a.txt", "offset": 12}))
		wantFail(t, run(t, rd, f.env, M{"path": "a.txt", "offset": 13}), armory.KindInvalid, "past the end")
		wantFail(t, run(t, rd, f.env, M{"path": "a.txt", "offset": -1}), armory.KindInvalid, "offset")
		r = runOK(t, rd, f.env, M{"path": "empty.txt"})
		if r.Text != "[empty file]" {
			t.Fatalf("empty: %q", r.Text)
		}
		wantFail(t, run(t, rd, f.env, M{"path": "bin.dat"}), armory.KindInvalid, "binary")
		wantFail(t, run(t, rd, f.env, M{"path": "nope.txt"}), armory.KindNotFound, "nope.txt does not exist")
		wantFail(t, run(t, rd, f.env, M{"path": "@me/"}), armory.KindInvalid, "root folder")
		wantFail(t, run(t, rd, f.env, M{"path": ""}), armory.KindInvalid, "path is empty")
		wantFail(t, run(t, rd, f.env, M{}), armory.KindInvalid, "path is empty")
		if err := os.Mkdir(filepath.Join(f.ws, "dir"), 0o755); err != nil {
			t.Fatal(err)
		}
		wantFail(t, run(t, rd, f.env, M{"path": "dir"}), armory.KindInvalid, "is a folder")
		r = runOK(t, rd, f.env, M{"path": "@project:web/README.md"})
		if r.Text != "project readme" {
			t.Fatalf("project: %q", r.Text)
		}
		wantFail(t, run(t, rd, f.env, M{"path": "@org:acme/x"}), armory.KindPermission, "@me/, @project:web/")
		wantFail(t, run(t, rd, nil, M{"path": "a.txt"}), armory.KindUnavailable, "no workspace")
	})
}

// TestWorkspaceReadLimit shows the 64 KB cap, the visible marker, reading
// on with offset, and that a UTF-8 character is never cut in two.
func TestWorkspaceReadLimit(t *testing.T) {
	f := newWS(t)
	rd := &Read{}
	// 'é' is two bytes; place one across the 64 KB boundary.
	content := strings.Repeat("a", ReadLimit-1) + "é" + strings.Repeat("b", 100)
	mustWrite(t, filepath.Join(f.ws, "big.txt"), content)
	r := runOK(t, rd, f.env, M{"path": "big.txt"})
	body, marker, ok := strings.Cut(r.Text, "\n[truncated: ")
	if !ok {
		t.Fatalf("no truncation marker in %d bytes", len(r.Text))
	}
	if len(body) != ReadLimit-1 || strings.ContainsRune(body, '\uFFFD') {
		t.Fatalf("body is %d bytes, want %d (whole characters only)", len(body), ReadLimit-1)
	}
	wantMarker := fmt.Sprintf("showed bytes 0-%d of %d; %d more bytes not shown; read on with offset %d]", ReadLimit-1, len(content), len(content)-ReadLimit+1, ReadLimit-1)
	if marker != wantMarker {
		t.Fatalf("marker %q, want %q", marker, wantMarker)
	}
	r = runOK(t, rd, f.env, M{"path": "big.txt", "offset": ReadLimit - 1})
	if r.Text != "é"+strings.Repeat("b", 100) {
		t.Fatalf("rest: %q", r.Text)
	}
	// A file of exactly ReadLimit bytes has no marker.
	mustWrite(t, filepath.Join(f.ws, "exact.txt"), strings.Repeat("x", ReadLimit))
	r = run(t, rd, f.env, M{"path": "exact.txt"})
	if !r.Success || len(r.Text) != ReadLimit {
		t.Fatalf("exact: %d bytes, success %v", len(r.Text), r.Success)
	}
}

func TestWorkspaceWrite(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		w := &Write{}
		r := runOK(t, w, f.env, M{"path": "deep/er/new.txt", "content": "one"})
		if !strings.HasPrefix(r.Text, "created deep/er/new.txt") || testenv.ReadFile(t, filepath.Join(f.ws, "deep/er/new.txt")) != "one" {
			t.Fatalf("create: %q", r.Text)
		}
		if err := os.Chmod(filepath.Join(f.ws, "deep/er/new.txt"), 0o700); err != nil {
			t.Fatal(err)
		}
		r = runOK(t, w, f.env, M{"path": "deep/er/new.txt", "content": "two"})
		if !strings.HasPrefix(r.Text, "replaced") || testenv.ReadFile(t, filepath.Join(f.ws, "deep/er/new.txt")) != "two" {
			t.Fatalf("replace: %q", r.Text)
		}
		if fi, _ := os.Stat(filepath.Join(f.ws, "deep/er/new.txt")); fi.Mode().Perm() != 0o700 {
			t.Fatalf("mode not kept: %v", fi.Mode())
		}
		wantOK(t, run(t, w, f.env, M{"path": "empty.txt", "content": ""}))
		// No temporary files are left behind.
		ents, _ := os.ReadDir(filepath.Join(f.ws, "deep/er"))
		if len(ents) != 1 {
			t.Fatalf("leftovers: %v", ents)
		}
		wantOK(t, run(t, w, f.env, M{"path": "@project:web/docs/x.md", "content": "p"}))
		if testenv.ReadFile(t, filepath.Join(f.proj, "docs/x.md")) != "p" {
			t.Fatal("project write went elsewhere")
		}
		wantFail(t, run(t, w, f.env, M{"path": "x.txt"}), armory.KindInvalid, "content is required")
		wantFail(t, run(t, w, f.env, M{"path": "", "content": "x"}), armory.KindInvalid, "path is empty")
		wantFail(t, run(t, w, f.env, M{"path": "@me", "content": "x"}), armory.KindInvalid, "root folder")
		wantFail(t, run(t, w, f.env, M{"path": "dir/", "content": "x"}), armory.KindInvalid, "ends with /")
		wantFail(t, run(t, w, f.env, M{"path": "deep", "content": "x"}), armory.KindInvalid, "is a folder")
		wantFail(t, run(t, w, f.env, M{"path": "deep/er/new.txt/x", "content": "x"}), armory.KindInvalid, "not a folder")
	})
}

func TestWorkspaceWriteLimit(t *testing.T) {
	f := newWS(t)
	w := &Write{}
	wantOK(t, run(t, w, f.env, M{"path": "max.txt", "content": strings.Repeat("x", WriteLimit)}))
	wantFail(t, run(t, w, f.env, M{"path": "over.txt", "content": strings.Repeat("x", WriteLimit+1)}), armory.KindInvalid, "the limit is 8388608")
	if _, err := os.Stat(filepath.Join(f.ws, "over.txt")); !os.IsNotExist(err) {
		t.Fatal("over-limit content was written")
	}
}

func TestWorkspaceMissingRoots(t *testing.T) {
	base := t.TempDir()
	env := &armory.AgentEnv{Workspace: filepath.Join(base, "fresh", "ws"), Roots: map[string]string{"project:gone": filepath.Join(base, "gone")}}
	// The agent's own workspace is created on first use.
	wantOK(t, run(t, &List{}, env, M{}))
	if fi, err := os.Stat(env.Workspace); err != nil || !fi.IsDir() {
		t.Fatal("workspace not created")
	}
	// A granted root is never created.
	wantFail(t, run(t, &Write{}, env, M{"path": "@project:gone/x", "content": "x"}), armory.KindUnavailable, "@project:gone/ is not available")
	if _, err := os.Stat(filepath.Join(base, "gone")); !os.IsNotExist(err) {
		t.Fatal("granted root was created")
	}
}

func TestWorkspaceEdit(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		e := &Edit{}
		p := filepath.Join(f.ws, "code.go")
		mustWrite(t, p, "a := 1\nb := 1\nc := 2\n")
		cases := []struct {
			args    M
			kind    armory.Kind
			msg     string
			content string
		}{
			{args: M{"old_string": "c := 2", "new_string": "c := 3"}, msg: "replaced 1 occurrence in code.go", content: "a := 1\nb := 1\nc := 3\n"},
			{args: M{"old_string": ":= 1", "new_string": ":= 9"}, kind: armory.KindInvalid, msg: "occurs 2 times in code.go; include more surrounding text to make it unique, or set replace_all"},
			{args: M{"old_string": ":= 1", "new_string": ":= 9", "replace_all": true}, msg: "replaced 2 occurrences", content: "a := 9\nb := 9\nc := 3\n"},
			{args: M{"old_string": "zzz", "new_string": "y"}, kind: armory.KindInvalid, msg: "old_string was not found in code.go"},
			{args: M{"old_string": "a := 9", "new_string": "a := 9"}, kind: armory.KindInvalid, msg: "the same"},
			{args: M{"old_string": "", "new_string": "x"}, kind: armory.KindInvalid, msg: "old_string is empty"},
			{args: M{"new_string": "x"}, kind: armory.KindInvalid, msg: "required"},
			{args: M{"old_string": "a := 9\n", "new_string": ""}, msg: "replaced 1 occurrence", content: "b := 9\nc := 3\n"},
		}
		for i, c := range cases {
			c.args["path"] = "code.go"
			r := run(t, e, f.env, c.args)
			if c.kind != 0 {
				wantFail(t, r, c.kind, c.msg)
				continue
			}
			wantOK(t, r)
			if !strings.Contains(r.Text, c.msg) {
				t.Fatalf("case %d: %q lacks %q", i, r.Text, c.msg)
			}
			if got := testenv.ReadFile(t, p); got != c.content {
				t.Fatalf("case %d: content %q, want %q", i, got, c.content)
			}
		}
		wantFail(t, run(t, e, f.env, M{"path": "none.go", "old_string": "a", "new_string": "b"}), armory.KindNotFound, "does not exist")
		mustWrite(t, filepath.Join(f.ws, "bin"), "a\x00b")
		wantFail(t, run(t, e, f.env, M{"path": "bin", "old_string": "a", "new_string": "b"}), armory.KindInvalid, "binary")
	})
}

func TestWorkspaceEditLimits(t *testing.T) {
	f := newWS(t)
	e := &Edit{}
	mustWrite(t, filepath.Join(f.ws, "big.txt"), strings.Repeat("x", EditLimit+1))
	wantFail(t, run(t, e, f.env, M{"path": "big.txt", "old_string": "x", "new_string": "y"}), armory.KindInvalid, "handles files up to 8388608 bytes")
	// The result of an edit may not exceed WriteLimit either.
	mustWrite(t, filepath.Join(f.ws, "grow.txt"), strings.Repeat("x", 1<<20))
	wantFail(t, run(t, e, f.env, M{"path": "grow.txt", "old_string": "x", "new_string": "0123456789", "replace_all": true}), armory.KindInvalid, "the limit is 8388608")
	if testenv.ReadFile(t, filepath.Join(f.ws, "grow.txt")) != strings.Repeat("x", 1<<20) {
		t.Fatal("file changed by a refused edit")
	}
}

func TestWorkspaceList(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		l := &List{}
		mustWrite(t, filepath.Join(f.ws, "b.txt"), "12345")
		mustWrite(t, filepath.Join(f.ws, "a/x.go"), "x")
		mustWrite(t, filepath.Join(f.ws, ".git/HEAD"), "ref")
		if err := os.Symlink("b.txt", filepath.Join(f.ws, "link")); err != nil {
			t.Fatal(err)
		}
		r := runOK(t, l, f.env, M{})
		if want := ".git/\na/\nb.txt (5 bytes)\nlink -> b.txt (symbolic link)"; r.Text != want {
			t.Fatalf("got\n%s\nwant\n%s", r.Text, want)
		}
		r = runOK(t, l, f.env, M{"recursive": true})
		if want := ".git/\na/\na/x.go (1 bytes)\nb.txt (5 bytes)\nlink -> b.txt (symbolic link)"; r.Text != want {
			t.Fatalf("recursive: got\n%s", r.Text)
		}
		r = runOK(t, l, f.env, M{"path": ".git"})
		if r.Text != "HEAD (3 bytes)" {
			t.Fatalf(".git: %q", r.Text)
		}
		wantFail(t, run(t, l, f.env, M{"path": "b.txt"}), armory.KindInvalid, "not a folder")
		wantFail(t, run(t, l, f.env, M{"path": "nope"}), armory.KindNotFound, "does not exist")
		r = runOK(t, l, f.env, M{"path": "@project:web"})
		if r.Text != "(empty)" {
			t.Fatalf("project: %q", r.Text)
		}
	})
}

func TestWorkspaceListLimit(t *testing.T) {
	f := newWS(t)
	for i := range ListLimit + 5 {
		mustWrite(t, filepath.Join(f.ws, "many", fmt.Sprintf("f%04d", i)), "")
	}
	r := runOK(t, &List{}, f.env, M{"path": "many"})
	lines := strings.Split(r.Text, "\n")
	if len(lines) != ListLimit+1 || !strings.HasPrefix(lines[ListLimit], "[truncated at 1000 entries") {
		t.Fatalf("%d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func TestWorkspaceDelete(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		d := &Delete{}
		mustWrite(t, filepath.Join(f.ws, "f.txt"), "x")
		mustWrite(t, filepath.Join(f.ws, "full/a/b.txt"), "x")
		mustWrite(t, filepath.Join(f.ws, "full/c.txt"), "x")
		mustWrite(t, filepath.Join(f.ws, "keep.txt"), "keep")
		if err := os.Mkdir(filepath.Join(f.ws, "empty"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("keep.txt", filepath.Join(f.ws, "ln")); err != nil {
			t.Fatal(err)
		}
		r := runOK(t, d, f.env, M{"path": "f.txt"})
		if r.Text != "deleted file f.txt" {
			t.Fatalf("%q", r.Text)
		}
		wantOK(t, run(t, d, f.env, M{"path": "ln"}))
		if testenv.ReadFile(t, filepath.Join(f.ws, "keep.txt")) != "keep" {
			t.Fatal("link target touched")
		}
		wantOK(t, run(t, d, f.env, M{"path": "empty"}))
		wantFail(t, run(t, d, f.env, M{"path": "full"}), armory.KindConflict, "set recursive to true")
		if _, err := os.Stat(filepath.Join(f.ws, "full/a/b.txt")); err != nil {
			t.Fatal("non-recursive delete removed content")
		}
		r = runOK(t, d, f.env, M{"path": "full", "recursive": true})
		if r.Text != "deleted folder full and the 3 entries inside it" {
			t.Fatalf("%q", r.Text)
		}
		if _, err := os.Stat(filepath.Join(f.ws, "full")); !os.IsNotExist(err) {
			t.Fatal("folder still there")
		}
		for _, p := range []string{"", "@me", "@me/", ".", "a/..", "@project:web", "@project:web/"} {
			r := run(t, d, f.env, M{"path": p, "recursive": true})
			if r.Success {
				t.Fatalf("deleted root via %q", p)
			}
		}
		wantFail(t, run(t, d, f.env, M{"path": "@me/", "recursive": true}), armory.KindInvalid, "refusing to delete @me/ itself")
		if _, err := os.Stat(filepath.Join(f.ws, "keep.txt")); err != nil {
			t.Fatal("root content gone")
		}
		wantFail(t, run(t, d, f.env, M{"path": "gone.txt"}), armory.KindNotFound, "does not exist")
	})
}

func TestWorkspaceDeleteLimits(t *testing.T) {
	f := newWS(t)
	d := &Delete{}
	mustWrite(t, filepath.Join(f.ws, "huge", "f00000"), "")
	for i := 1; i <= DeleteMaxEntries; i++ {
		if err := os.WriteFile(filepath.Join(f.ws, "huge", fmt.Sprintf("f%05d", i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wantFail(t, run(t, d, f.env, M{"path": "huge", "recursive": true}), armory.KindInvalid, "more than 10000 entries; nothing was deleted")
	if ents, _ := os.ReadDir(filepath.Join(f.ws, "huge")); len(ents) != DeleteMaxEntries+1 {
		t.Fatalf("%d entries left, want all", len(ents))
	}
	// Depth: a chain deeper than WalkMaxDepth is refused whole.
	deep := filepath.Join(f.ws, "deep")
	for range WalkMaxDepth + 1 {
		deep = filepath.Join(deep, "d")
	}
	mustWrite(t, filepath.Join(deep, "x"), "")
	wantFail(t, run(t, d, f.env, M{"path": "deep", "recursive": true}), armory.KindInvalid, "deeper than 64 levels")
	if _, err := os.Stat(filepath.Join(deep, "x")); err != nil {
		t.Fatal("part of a refused tree was deleted")
	}
}

func TestWorkspaceSearch(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		s := &Search{}
		mustWrite(t, filepath.Join(f.ws, "src/main.go"), "package main\n\nfunc main() {\n\tprintln(\"Hello\")\n}\n")
		mustWrite(t, filepath.Join(f.ws, "src/util/util.go"), "package util\n// hello helper\r\n")
		mustWrite(t, filepath.Join(f.ws, "README.md"), "say hello\n")
		mustWrite(t, filepath.Join(f.ws, "blob.bin"), "hello\x00world")
		mustWrite(t, filepath.Join(f.ws, ".git/COMMIT_EDITMSG"), "hello from git")
		if err := os.Symlink("README.md", filepath.Join(f.ws, "readme-link")); err != nil {
			t.Fatal(err)
		}
		mustWrite(t, filepath.Join(f.proj, "p.txt"), "hello project\n")

		r := runOK(t, s, f.env, M{"pattern": "hello"})
		want := "README.md:1: say hello\nsrc/util/util.go:2: // hello helper\n[2 matches in 2 files; 4 files read]\n[skipped 1 binary files]"
		if !strings.HasPrefix(r.Text, "README.md:1: say hello\nsrc/util/util.go:2: // hello helper") || !strings.Contains(r.Text, "[skipped 1 binary files]") {
			t.Fatalf("got\n%s\nwant like\n%s", r.Text, want)
		}
		if strings.Contains(r.Text, "git") || strings.Contains(r.Text, "readme-link") {
			t.Fatalf(".git or links searched:\n%s", r.Text)
		}
		r = runOK(t, s, f.env, M{"pattern": "hello", "case_insensitive": true, "glob": "*.go"})
		if !strings.HasPrefix(r.Text, "src/main.go:4: \tprintln(\"Hello\")\nsrc/util/util.go:2: // hello helper\n[2 matches in 2 files; 2 files read]") {
			t.Fatalf("glob+ci: %s", r.Text)
		}
		r = runOK(t, s, f.env, M{"glob": "src/**/*.go"})
		if !strings.HasPrefix(r.Text, "src/main.go\nsrc/util/util.go\n[2 files]") {
			t.Fatalf("glob only: %s", r.Text)
		}
		r = runOK(t, s, f.env, M{"glob": "*.go", "path": "src/util"})
		if !strings.HasPrefix(r.Text, "src/util/util.go\n") {
			t.Fatalf("path: %s", r.Text)
		}
		r = runOK(t, s, f.env, M{"pattern": "project", "path": "@project:web"})
		if !strings.HasPrefix(r.Text, "@project:web/p.txt:1: hello project") {
			t.Fatalf("prefix: %s", r.Text)
		}
		r = runOK(t, s, f.env, M{"pattern": "nothing-like-this"})
		if !strings.HasPrefix(r.Text, `no matches for "nothing-like-this"`) {
			t.Fatalf("none: %s", r.Text)
		}
		r = runOK(t, s, f.env, M{"glob": "nodir/**"})
		wantFail(t, run(t, s, f.env, M{}), armory.KindInvalid, "give a pattern")
		wantFail(t, run(t, s, f.env, M{"pattern": "(a"}), armory.KindInvalid, "not a valid regular expression")
		wantFail(t, run(t, s, f.env, M{"pattern": `(a)\1`}), armory.KindInvalid, "RE2")
		wantFail(t, run(t, s, f.env, M{"glob": "[a"}), armory.KindInvalid, "not a valid pattern")
		wantFail(t, run(t, s, f.env, M{"glob": "../ws-evil/*"}), armory.KindInvalid, ". or .. segments")
		wantFail(t, run(t, s, f.env, M{"glob": "/etc/*"}), armory.KindInvalid, "no leading /")
		wantFail(t, run(t, s, f.env, M{"pattern": "x", "max_results": 0}), armory.KindInvalid, "between 1 and 500")
		wantFail(t, run(t, s, f.env, M{"pattern": "x", "max_results": 501}), armory.KindInvalid, "between 1 and 500")
		wantFail(t, run(t, s, f.env, M{"pattern": strings.Repeat("a", SearchPatternLen+1)}), armory.KindInvalid, "at most 1024 bytes")
		wantFail(t, run(t, s, f.env, M{"pattern": "x", "path": "README.md"}), armory.KindInvalid, "not a folder")
	})
}

func TestWorkspaceSearchLimits(t *testing.T) {
	f := newWS(t)
	s := &Search{}
	t.Run("max_results", func(t *testing.T) {
		mustWrite(t, filepath.Join(f.ws, "r/many.txt"), strings.Repeat("match\n", SearchMaxResults+10))
		for _, max := range []int{0, 3, SearchMaxResults} {
			args := M{"pattern": "match", "path": "r"}
			want := SearchDefaultResults
			if max > 0 {
				args["max_results"] = max
				want = max
			}
			r := runOK(t, s, f.env, args)
			if got := strings.Count(r.Text, "r/many.txt:"); got != want {
				t.Fatalf("max %d: %d results", max, got)
			}
			if !strings.Contains(r.Text, "[stopped early: reached max_results") {
				t.Fatalf("no stop note: %s", r.Text[len(r.Text)-200:])
			}
		}
	})
	t.Run("file bytes", func(t *testing.T) {
		big := strings.Repeat("x\n", SearchFileBytes/2-4) + "EARLY\n" + strings.Repeat("y\n", 100) + "LATE\n"
		mustWrite(t, filepath.Join(f.ws, "b/big.txt"), big)
		r := runOK(t, s, f.env, M{"pattern": "EARLY|LATE", "path": "b"})
		if !strings.Contains(r.Text, "EARLY") || strings.Contains(r.Text, "LATE") || !strings.Contains(r.Text, "1 files are larger than 1048576 bytes") {
			t.Fatalf("file cap: %s", r.Text)
		}
	})
	t.Run("line bytes", func(t *testing.T) {
		mustWrite(t, filepath.Join(f.ws, "l/long.txt"), strings.Repeat("é", 2000)+"NEEDLE"+strings.Repeat("z", 2000))
		r := runOK(t, s, f.env, M{"pattern": "NEEDLE", "path": "l"})
		line, _, _ := strings.Cut(r.Text, "\n")
		text := strings.TrimPrefix(line, "l/long.txt:1: ")
		if !strings.Contains(text, "NEEDLE") || len(text) > SearchLineBytes+2*len("…") || strings.ContainsRune(text, '\uFFFD') {
			t.Fatalf("excerpt %d bytes: %q", len(text), text)
		}
	})
	t.Run("files read", func(t *testing.T) {
		mustWrite(t, filepath.Join(f.ws, "files", "f00000.txt"), "nothing here\n")
		for i := 1; i <= SearchMaxFiles; i++ {
			if err := os.WriteFile(filepath.Join(f.ws, "files", fmt.Sprintf("f%05d.txt", i)), []byte("nothing here\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := runOK(t, s, f.env, M{"pattern": "absent", "path": "files"})
		if !strings.Contains(r.Text, "5000 files read]") || !strings.Contains(r.Text, "[stopped early: read 5000 files (the limit)") {
			t.Fatalf("files cap: %s", r.Text)
		}
	})
	t.Run("entries visited", func(t *testing.T) {
		mustWrite(t, filepath.Join(f.ws, "entries", "e00000"), "")
		for i := 1; i <= SearchMaxEntries; i++ {
			if err := os.WriteFile(filepath.Join(f.ws, "entries", fmt.Sprintf("e%05d", i)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		r := runOK(t, s, f.env, M{"glob": "*.none", "path": "entries"})
		if !strings.Contains(r.Text, "[stopped early: visited 20000 files and folders (the limit)") {
			t.Fatalf("entries cap: %s", r.Text)
		}
	})
}

func TestWorkspaceContextCancelled(t *testing.T) {
	f := newWS(t)
	mustWrite(t, filepath.Join(f.ws, "a/b.txt"), "x")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tool := range []armory.Tool{&Search{}, &List{}, &Delete{}} {
		args := json.RawMessage(`{"path":"a","pattern":"x"}`)
		switch tool.(type) {
		case *List:
			args = json.RawMessage(`{"path":"a"}`)
		case *Delete:
			args = json.RawMessage(`{"path":"a","recursive":true}`)
		}
		r := tool.Execute(ctx, armory.Invocation{Args: args, Agent: f.env})
		wantFail(t, r, armory.KindTimeout, "cancelled")
	}
	if _, err := os.Stat(filepath.Join(f.ws, "a/b.txt")); err != nil {
		t.Fatal("cancelled delete removed files")
	}
}

func BenchmarkWorkspaceRead4K(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte(strings.Repeat("0123456789abcde\n", 256)), 0o644); err != nil {
		b.Fatal(err)
	}
	env := &armory.AgentEnv{ID: "bench", Workspace: dir}
	inv := armory.Invocation{Args: json.RawMessage(`{"path":"f.txt"}`), Agent: env}
	rd := &Read{}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := rd.Execute(ctx, inv); !r.Success || len(r.Text) != 4096 {
			b.Fatal(r.Text)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
}
