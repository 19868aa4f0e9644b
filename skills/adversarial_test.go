package skills

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// The hazards of tools that change while agents run: a skill's tool
// taking a world tool's name, two same-named tools in two registries,
// a permission floor no rule lowers, a drop made by another process, the
// bound on holds.

// packFilesOf returns the files of a skill pack called name under prefix
// ("skills" or "archetype/<arch>/skills") whose toolbox has one tool
// (wc) called tool, with extra toolbox args (YAML list items).
func packFilesOf(prefix, name, tool, args string) map[string]string {
	tb := fmt.Sprintf("name: %s\ntools:\n  - name: %s\n    description: counts\n    binary: wc\n    danger: safe\n    permission: auto\n", name, tool)
	if args != "" {
		tb += "    args:\n" + args
	}
	return map[string]string{
		prefix + "/" + name + "/SKILL.md":     fmt.Sprintf("---\nname: %s\ndescription: Skill %s.\n---\nUse it.\n", name, name),
		prefix + "/" + name + "/toolbox.yaml": tb,
	}
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// A skill's tool cannot take the name of a tool of the world — a
// built-in (tool.cli, workspace.write), a world toolbox's, a module's, a
// pipeline tool's — whether the skill is the world's or an archetype's:
// the world does not load, and the error is at the skill toolbox's line.
func TestSkillToolNamedLikeAWorldTool(t *testing.T) {
	base := map[string]string{
		"world-config.yaml":             "name: sk\nagents:\n  - {id: dev, archetype: dev}\n",
		"archetype/dev/config.md":       "# dev\n\n## Tool Access\n",
		"toolbox/devtools/toolbox.yaml": "name: devtools\ntools:\n  - name: wc\n    description: counts\n    binary: wc\n",
	}
	for _, tc := range []struct {
		name    string
		files   map[string]string
		modules []engine.Module
		want    string
	}{
		{"built-in tool.cli", packFilesOf("skills", "tool", "cli", ""), nil, `skills/tool/toolbox.yaml:3: skill tool: tool name "tool.cli" is taken (a built-in tool)`},
		{"built-in workspace.write", packFilesOf("skills", "workspace", "write", ""), nil, `skills/workspace/toolbox.yaml:3: skill workspace: tool name "workspace.write" is taken (a built-in tool)`},
		{"archetype's own skill", packFilesOf("archetype/dev/skills", "workspace", "read", ""), nil, `archetype/dev/skills/workspace/toolbox.yaml:3: skill workspace: tool name "workspace.read" is taken`},
		{"world toolbox tool", merge(packFilesOf("skills", "devtools", "wc", ""), map[string]string{"world-config.yaml": base["world-config.yaml"] + "toolboxes: [devtools]\n"}), nil,
			`skills/devtools/toolbox.yaml:3: skill devtools: tool name "devtools.wc" is taken (toolbox/devtools/toolbox.yaml:3)`},
		{"module tool", packFilesOf("skills", "channel", "send", ""), []engine.Module{services.New(services.Options{})}, `skills/channel/toolbox.yaml:3: skill channel: tool name "channel.send" is taken (a tool of module services)`},
		{"pipeline tool", merge(packFilesOf("skills", "approval", "list", ""), map[string]string{
			"world-config.yaml":          base["world-config.yaml"] + "  - {id: warden, archetype: warden}\n",
			"archetype/warden/config.md": "# warden\n\n## Tool Access\n\n## Capabilities\n- tool_approval: tool.cli\n",
		}), nil, `skills/approval/toolbox.yaml:3: skill approval: tool name "approval.list" is taken (a tool the pipeline adds)`},
		{"pipeline tool no agent gets yet", packFilesOf("skills", "approval", "decide", ""), nil, `skills/approval/toolbox.yaml:3: skill approval: tool name "approval.decide" is taken (a tool the pipeline adds)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeWorld(t, merge(base, tc.files))
			_, err := engine.Open(context.Background(), engine.Options{World: dir, Skip: engine.Trail, Modules: append(tc.modules, New(Options{}))})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("open: %v\nwant an error saying %q", err, tc.want)
			}
		})
	}
}

// An install of a pack whose tool has a world tool's name is refused
// (KindConflict) and leaves nothing behind.
func TestInstallRefusesAWorldToolsName(t *testing.T) {
	dir := writeWorld(t, packFiles())
	e := open(t, dir, "", Options{})
	for _, tc := range []struct{ skill, tool string }{{"tool", "cli"}, {"workspace", "write"}, {"approval", "decide"}, {"syscall", "list"}} {
		src := writeWorld(t, packFilesOf("skills", tc.skill, tc.tool, ""))
		_, err := e.mod.Install(context.Background(), e.eng.Pipeline(), InstallRequest{Source: SourceFolder, Path: filepath.Join(src, "skills", tc.skill)}, "test")
		if tc.skill == "syscall" { // syscall.list is no world tool: installed
			if err != nil {
				t.Fatalf("install syscall: %v", err)
			}
			continue
		}
		if armory.KindOf(err) != armory.KindConflict || !strings.Contains(err.Error(), fmt.Sprintf("the skill's tool %s.%s has the name of a tool of the world", tc.skill, tc.tool)) {
			t.Fatalf("install %s: %v", tc.skill, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "skills", tc.skill)); !os.IsNotExist(err) {
			t.Fatalf("the refused pack %s is in skills/: %v", tc.skill, err)
		}
	}
	if left := incoming(t, dir); len(left) != 0 {
		t.Fatalf("the refused installs left %v", left)
	}
	// The registry of an agent holding nothing of it is unchanged, and
	// the built-in is still the built-in.
	if src := e.source("dev", "tool.cli"); src != "built-in" {
		t.Fatalf("tool.cli's source is %q", src)
	}
}

// Two archetypes each have their own skill "calc" with a tool calc.run of
// different arguments. Each agent's calls validate against its own tool's
// schema, in either order: the pipeline's compiled schemas are the
// tools', not the name's.
func TestSameNamedSkillToolsKeepTheirSchemas(t *testing.T) {
	files := merge(
		map[string]string{
			"world-config.yaml":         "name: sk\nagents:\n  - {id: a, archetype: alpha}\n  - {id: b, archetype: beta}\n",
			"archetype/alpha/config.md": "# alpha\n\n## Tool Access\n",
			"archetype/beta/config.md":  "# beta\n\n## Tool Access\n",
		},
		packFilesOf("archetype/alpha/skills", "calc", "run", "      - {name: file, type: positional, required: true}\n"),
		packFilesOf("archetype/beta/skills", "calc", "run", "      - {name: lines, type: flag_bool, flag: -l}\n"),
	)
	e := open(t, writeWorld(t, files), "", Options{})
	e.ok("a", "syscall.skill.acquire", `{"name":"calc"}`, nil)
	e.ok("b", "syscall.skill.acquire", `{"name":"calc"}`, nil)
	ta, _ := e.agent("a").Registry.Lookup("calc.run")
	tb, _ := e.agent("b").Registry.Lookup("calc.run")
	if ta == nil || tb == nil || string(ta.Spec().InputSchema) == string(tb.Spec().InputSchema) {
		t.Fatalf("the two tools: %v %v", ta, tb)
	}
	validated := func(agent, args string) bool {
		t.Helper()
		o := e.run(agent, "calc.run", args)
		switch stage(o, "validate") {
		case "ok":
			return true
		case "error":
			if !strings.HasPrefix(o.Result, "Invalid arguments for calc.run") {
				t.Fatalf("%s %s: %s", agent, args, o.Result)
			}
			return false
		}
		t.Fatalf("%s %s: no validate stage: %+v", agent, args, o)
		return false
	}
	// Each order: the first call compiles its tool's schema; the other
	// agent's call must not be checked against it.
	for _, order := range [][2]string{{"a", "b"}, {"b", "a"}, {"a", "b"}} {
		for _, agent := range order {
			if agent == "a" {
				if !validated("a", `{"file":"x"}`) || validated("a", `{"lines":true}`) || validated("a", `{}`) {
					t.Fatalf("agent a's calc.run validates against another schema")
				}
			} else {
				if !validated("b", `{"lines":true}`) || !validated("b", `{}`) || validated("b", `{"file":"x"}`) {
					t.Fatalf("agent b's calc.run validates against another schema")
				}
			}
		}
	}
	// A pack replaced under the same name brings a new schema at once.
	src := writeWorld(t, packFilesOf("skills", "calc", "run", "      - {name: words, type: flag_bool, flag: -w}\n"))
	if _, err := e.mod.Install(context.Background(), e.eng.Pipeline(), InstallRequest{Source: SourceFolder, Path: filepath.Join(src, "skills", "calc")}, "test"); err != nil {
		t.Fatal(err)
	}
	// (a world skill calc: the archetypes' own still take its place.)
	if !validated("a", `{"file":"x"}`) || validated("a", `{"words":true}`) {
		t.Fatal("the world's new calc replaced an archetype's own")
	}
}

// syscall.skill.install always waits for an approval: a world rule, an
// agent's rule or its trusted profile that would make it auto is raised to
// confirm by the manifest's floor, and explain says so; deny stays deny.
func TestInstallAlwaysNeedsApproval(t *testing.T) {
	base := packFiles()
	for _, tc := range []struct {
		name   string
		world  string // appended to world-config.yaml
		config string // dev's config.md
		level  string
		want   []string
	}{
		{"default", "", "## Tool Access\n", "confirm", []string{"confirm by the tool's manifest default"}},
		{"world rule auto", "permissions:\n  syscall.skill.install: auto\n", "## Tool Access\n", "confirm",
			[]string{`auto by the world's permission rule "syscall.skill.install"`, "raised to confirm: the tool's manifest allows no lower level"}},
		{"world family rule auto", "permissions:\n  syscall.skill: auto\n", "## Tool Access\n", "confirm", []string{"raised to confirm"}},
		{"agent rule auto", "", "## Tool Access\n\n## Permissions\nsyscall.skill.install: auto\n", "confirm",
			[]string{`auto by the agent's permission rule "syscall.skill.install"`, "raised to confirm: the tool's manifest allows no lower level"}},
		{"trusted profile, world rule auto", "permissions:\n  syscall.skill.install: auto\n", "## Tool Access\n\n## Permissions\nprofile: trusted\n", "confirm", []string{"auto by the world's permission rule", "raised to confirm"}},
		{"always_confirm stays", "", "## Tool Access\n\n## Permissions\nsyscall.skill.install: always_confirm\n", "always_confirm", nil},
		{"deny stays deny", "", "## Tool Access\n\n## Permissions\nsyscall.skill.install: deny\n", "deny", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := withFiles(base, map[string]string{
				"world-config.yaml":       base["world-config.yaml"] + tc.world,
				"archetype/dev/config.md": tc.config,
			})
			e := open(t, writeWorld(t, files), "", Options{})
			vis, why := e.explain("dev", "syscall.skill.install")
			if !vis || !strings.Contains(why, "permission: ") {
				t.Fatalf("explain (visible %v):\n%s", vis, why)
			}
			for _, w := range tc.want {
				if !strings.Contains(why, w) {
					t.Errorf("explain lacks %q:\n%s", w, why)
				}
			}
			o := e.run("dev", "syscall.skill.install", `{"source":"builtin","name":"python"}`)
			if o.Permission != tc.level {
				t.Fatalf("level %q, want %q: %+v", o.Permission, tc.level, o.Reasons)
			}
			switch tc.level {
			case "deny":
				if o.Status != audit.StatusDenied {
					t.Fatalf("denied install: %+v", o)
				}
			default:
				if o.Status != audit.StatusPending || o.ApprovalID == "" {
					t.Fatalf("install did not wait for an approval: %s %s", o.Status, o.Result)
				}
			}
			if _, err := os.Stat(filepath.Join(e.dir, "skills", "python")); !os.IsNotExist(err) {
				t.Fatalf("the skill was installed before any approval: %v", err)
			}
		})
	}
}

// A drop made by another process on the same database: this process's
// agent calling the skill's tool is refused before the tool runs, with no
// event delivered (the view is re-read once older than StateTTL), and
// the registry no longer holds it; with a view still fresh, the tool
// runs. A later acquire there is seen here the same way.
func TestDropByAnotherProcess(t *testing.T) {
	needSandbox(t)
	dir := e2eWorkspace(t)
	db := filepath.Join(t.TempDir(), "armory.db")
	// StateTTL of a nanosecond: every call of a skill's tool reads the
	// store (the first engine is never started, so no event reaches it).
	here := open(t, dir, db, Options{StateTTL: time.Nanosecond})
	stale := open(t, dir, db, Options{StateTTL: 24 * time.Hour})
	there := open(t, dir, db, Options{})
	here.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, nil)
	stale.ok("dev", "syscall.skill.list", `{}`, nil) // reads the store: dev holds text
	if o := here.ok("dev", "text.count", `{"file":"notes.txt"}`, nil); !strings.Contains(o.Result, "notes.txt") {
		t.Fatalf("text.count: %s", o.Result)
	}
	if err := there.mod.Drop(context.Background(), there.eng.Pipeline(), "dev", "text", "test"); err != nil {
		t.Fatal(err)
	}
	if !here.agent("dev").Registry.Has("text.count") {
		t.Fatal("the drop reached this process's registry without a read")
	}
	o := here.refused("dev", "text.count", `{"file":"notes.txt"}`, armory.KindPermission, "skill text was dropped", `syscall.skill.acquire {"name": "text"}`)
	if strings.Contains(o.Result, "notes.txt") {
		t.Fatalf("the tool ran: %s", o.Result)
	}
	if here.agent("dev").Registry.Has("text.count") || here.agent("dev").Registry.Has("text.search") {
		t.Fatal("after the refused call the registry still holds the dropped skill's tools")
	}
	here.refused("dev", "text.count", `{"file":"notes.txt"}`, armory.KindNotFound, "Unknown tool: text.count")
	// A process whose view is fresh runs it until the view expires or the
	// event arrives (documented: the TTL bounds the lag).
	if o := stale.run("dev", "text.count", `{"file":"notes.txt"}`); o.Status != audit.StatusSuccess {
		t.Fatalf("a fresh view refused the call: %+v", o)
	}
	// Acquired again over there: here, the next listing reads it.
	there.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, nil)
	here.ok("dev", "syscall.skill.list", `{}`, nil)
	if !here.agent("dev").Registry.Has("text.count") {
		t.Fatal("an acquire by another process is not registered after a read")
	}
}

// An agent holds at most store.MaxSkillHolds skills: the next acquire
// (or activate) is a clear error, and nothing changes.
func TestHoldsBound(t *testing.T) {
	files := withFiles(packFiles(), nil)
	n := store.MaxSkillHolds + 1
	for i := range n {
		name := fmt.Sprintf("s%03d", i)
		files["skills/"+name+"/SKILL.md"] = fmt.Sprintf("---\nname: %s\ndescription: skill %d\n---\nx\n", name, i)
	}
	e := open(t, writeWorld(t, files), "", Options{})
	ctx := context.Background()
	for i := range store.MaxSkillHolds {
		if _, _, err := e.eng.Store().SetSkillAcquired(ctx, "dev", fmt.Sprintf("s%03d", i), true); err != nil {
			t.Fatal(err)
		}
	}
	last := fmt.Sprintf("s%03d", n-1)
	for _, tool := range []string{"syscall.skill.acquire", "syscall.skill.activate"} {
		o := e.refused("dev", tool, map[string]string{"name": last}, armory.KindConflict,
			fmt.Sprintf("agent dev holds %d skills (acquired or activated), the most an agent may hold; drop one first", store.MaxSkillHolds))
		if strings.Contains(o.Result, "store:") || strings.Contains(o.Result, "sqlite") {
			t.Errorf("the error shows the store's internals: %s", o.Result)
		}
	}
	if got := e.holds("dev"); len(got) != store.MaxSkillHolds || slices.Contains(got, last) {
		t.Fatalf("holds after the refusal: %d (has %s: %v)", len(got), last, slices.Contains(got, last))
	}
	// Dropping one makes room.
	e.ok("dev", "syscall.skill.drop", `{"name":"s000"}`, nil)
	e.ok("dev", "syscall.skill.acquire", map[string]string{"name": last}, nil)
}
