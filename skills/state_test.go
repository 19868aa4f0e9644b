package skills

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

// Skill state is durable: an engine opened later on the same store
// registers the acquired skills' tools as it opens (before any call),
// keeps the activations, and forgets a hold on a pack gone from disk
// without failing.
func TestStateSurvivesARestart(t *testing.T) {
	dir := writeWorld(t, packFiles())
	db := filepath.Join(t.TempDir(), "armory.db")
	first := open(t, dir, db, Options{})
	first.ok("dev", "syscall.skill.acquire", `{"name":"text"}`, nil)
	first.ok("dev", "syscall.skill.acquire", `{"name":"notes"}`, nil)
	first.ok("guest", "syscall.skill.activate", `{"name":"plain"}`, nil)
	first.ok("guest", "syscall.skill.acquire", `{"name":"text"}`, nil)
	if err := first.eng.Close(); err != nil {
		t.Fatal(err)
	}

	second := open(t, dir, db, Options{})
	dev, guest := second.agent("dev"), second.agent("guest")
	if !dev.Registry.Has("text.count") || !dev.Registry.Has("text.search") {
		t.Fatalf("dev's tools after the restart: %v", dev.Registry.Specs())
	}
	if !guest.Registry.Has("text.count") || guest.Registry.Has("text.search") {
		t.Fatalf("guest's tools after the restart (text.search is withheld): %v", guest.Registry.Specs())
	}
	if src := second.source("dev", "text.count"); src != "skill text" {
		t.Fatalf("source after the restart: %q", src)
	}
	var list struct{ Skills []SkillInfo }
	second.ok("guest", "syscall.skill.list", `{}`, &list)
	if len(list.Skills) != 2 || !list.Skills[0].Active || list.Skills[0].Acquired || !list.Skills[1].Acquired {
		t.Fatalf("guest's state after the restart: %+v", list.Skills)
	}
	if w := list.Skills[1].Withheld["text.search"]; w == "" {
		t.Fatalf("the withheld tool's reason after the restart: %+v", list.Skills[1])
	}
	if err := second.eng.Close(); err != nil {
		t.Fatal(err)
	}

	// The pack is gone while nothing runs: the next engine opens, and
	// nobody holds its tools.
	if err := os.RemoveAll(filepath.Join(dir, "skills", "text")); err != nil {
		t.Fatal(err)
	}
	third := open(t, dir, db, Options{})
	if third.agent("dev").Registry.Has("text.count") {
		t.Fatal("a removed pack's tool is registered")
	}
	third.ok("dev", "syscall.skill.list", `{}`, &list)
	for _, s := range list.Skills {
		if s.Name == "text" {
			t.Fatalf("the removed pack is listed: %+v", s)
		}
	}
}

// config.md "## Skills" lists skills an agent holds from its start:
// engine.Start (armory serve) acquires them; a drop lasts until the next
// start; an engine that is not started (a short command) acquires none.
func TestConfigSkillsAcquiredAtStart(t *testing.T) {
	files := withFiles(packFiles(), map[string]string{
		"archetype/dev/config.md": "# dev\n\n## Tool Access\nprivilege_groups: devops\n\n## Skills\n- text\n- notes\n",
	})
	dir := writeWorld(t, files)
	db := filepath.Join(t.TempDir(), "armory.db")
	short := open(t, dir, db, Options{})
	if short.agent("dev").Registry.Has("text.count") || len(short.holds("dev")) != 0 {
		t.Fatal("an engine that was not started acquired config.md's skills")
	}
	if err := short.eng.Close(); err != nil {
		t.Fatal(err)
	}

	start := func() *env {
		t.Helper()
		e := open(t, dir, db, Options{})
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		if err := e.eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		return e
	}
	serve := start()
	if got := serve.holds("dev"); !slices.Equal(got, []string{"notes", "text"}) {
		t.Fatalf("after start dev holds %v", got)
	}
	if !serve.agent("dev").Registry.Has("text.search") {
		t.Fatal("config.md's skill's tools are not registered at start")
	}
	if got := serve.holds("guest"); len(got) != 0 {
		t.Fatalf("guest holds %v", got)
	}
	serve.ok("dev", "syscall.skill.drop", `{"name":"text"}`, nil)
	if err := serve.eng.Close(); err != nil {
		t.Fatal(err)
	}
	// Until the next start, the drop stands.
	between := open(t, dir, db, Options{})
	if between.agent("dev").Registry.Has("text.count") || !slices.Equal(between.holds("dev"), []string{"notes"}) {
		t.Fatalf("between starts dev holds %v", between.holds("dev"))
	}
	if err := between.eng.Close(); err != nil {
		t.Fatal(err)
	}
	again := start()
	if !again.agent("dev").Registry.Has("text.count") || !slices.Equal(again.holds("dev"), []string{"notes", "text"}) {
		t.Fatalf("after the next start dev holds %v", again.holds("dev"))
	}
}

// Concurrent acquires and drops of one agent's skill, with resyncs among
// them: once they are done, the registry holds the skill's tools exactly
// when the store says the agent holds the skill (a reconcile that read
// the store earlier never applies its older view over a newer one).
func TestConcurrentChangesEndInStep(t *testing.T) {
	e := open(t, writeWorld(t, packFiles()), "", Options{})
	ctx := context.Background()
	dev := e.agent("dev")
	for round := range 20 {
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ag := e.agent("dev")
				switch i % 3 {
				case 0:
					e.mod.acquire(ctx, ag, "text")
				case 1:
					e.mod.drop(ctx, ag, "text")
				default:
					e.mod.reconcileAll(ctx)
				}
			}()
		}
		wg.Wait()
		held := slices.Contains(e.holds("dev"), "text")
		if has := dev.Registry.Has("text.count"); has != held {
			t.Fatalf("round %d: the store says dev holds text: %v; the registry holds text.count: %v", round, held, has)
		}
	}
}

// eventually waits until cond holds, failing t if it does not before a
// bound far beyond any delivery (a hang guard, not a speed check).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: never happened", what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// A started engine follows the other processes' changes through their
// skill events: an acquire and a drop of one of its agents, an install
// and a removal of a pack (with StateTTL and Resync long enough that only
// the events can explain it).
func TestPeersEventsReconcile(t *testing.T) {
	dir := writeWorld(t, packFiles())
	db := filepath.Join(t.TempDir(), "armory.db")
	slow := Options{StateTTL: time.Hour, Resync: time.Hour}
	serve := open(t, dir, db, slow)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := serve.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cli := open(t, dir, db, slow)
	p := cli.eng.Pipeline()
	dev := serve.agent("dev")

	if _, err := cli.mod.Acquire(ctx, p, "dev", "text", "cli"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the peer's acquire registered", func() bool { return dev.Registry.Has("text.count") })
	if err := cli.mod.Drop(ctx, p, "dev", "text", "cli"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the peer's drop unregistered", func() bool { return !dev.Registry.Has("text.count") })

	src := testenv.WriteTree(t, filepath.Join(t.TempDir(), "memo"), memoFiles)
	if _, err := cli.mod.Install(ctx, p, InstallRequest{Source: SourceFolder, Path: src}, "cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.mod.Acquire(ctx, p, "guest", "memo", "cli"); err != nil {
		t.Fatal(err)
	}
	guest := serve.agent("guest")
	eventually(t, "the peer's install and acquire registered", func() bool { return guest.Registry.Has("memo.count") })
	if _, err := cli.mod.Remove(ctx, p, "memo", "cli"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the peer's removal unregistered", func() bool { return !guest.Registry.Has("memo.count") })
	serve.refused("guest", "syscall.skill.acquire", `{"name":"memo"}`, armory.KindNotFound, `no skill "memo"`)
}
