package services_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// communicatorWorld is the communicator group: alice and bob are
// in it, carol is not.
const communicatorWorld = `tool_privileges:
  communicator:
    - channel
    - syscall.ask
    - syscall.channel.send
    - syscall.channel.handoff
`

func channelWorld(t *testing.T, dsn string) *world {
	t.Helper()
	dir := writeWorld(t, map[string]string{
		"world-config.yaml": "name: chan\nagents:\n  - id: alice\n    archetype: talker\n  - id: bob\n    archetype: talker\n  - id: carol\n    archetype: quiet\n" +
			communicatorWorld,
		"archetype/talker/config.md": "# talker\n\n## Tool Access\nprivilege_groups: communicator\n",
		"archetype/quiet/config.md":  "# quiet\n\n## Tool Access\nprivilege_groups:\n",
	})
	return open(t, dir, dsn, services.Options{})
}

// in runs tool as agent in conversation channel.
func (w *world) in(channel, agent, tool string, args any) pipeline.Outcome {
	w.t.Helper()
	return w.run(pipeline.Call{Agent: agent, Tool: tool, Channel: channel}, args)
}

var channelTools = []string{"channel.file_attach", "channel.handoff", "channel.send", "syscall.channel.handoff", "syscall.channel.send"}

func names(specs []armory.Spec) []string {
	var out []string
	for _, s := range specs {
		out = append(out, s.Name)
	}
	return out
}

func TestChannelToolsListedOnlyWithContext(t *testing.T) {
	w := channelWorld(t, "")
	r := w.eng.Roster()
	for _, d := range r.Warnings {
		if strings.Contains(d.String(), "channel") {
			t.Errorf("world check warns about the channel tools: %v", d)
		}
	}
	alice, _ := r.Agent("alice")
	carol, _ := r.Agent("carol")
	without := names(alice.Registry.Specs())
	with := names(alice.Registry.SpecsFor(registry.Caller{Channel: true}))
	for _, n := range channelTools {
		if slices.Contains(without, n) {
			t.Errorf("%s listed without a channel context", n)
		}
		if !slices.Contains(with, n) {
			t.Errorf("%s not listed with a channel context", n)
		}
		if !alice.Registry.Has(n) {
			t.Errorf("%s not in alice's registry", n)
		}
		if carol.Registry.Has(n) || slices.Contains(names(carol.Registry.SpecsFor(registry.Caller{Channel: true})), n) {
			t.Errorf("%s granted to carol, outside the communicator group", n)
		}
	}
	if ex, err := r.Explain("alice", "channel.send"); err != nil || !ex.Visible || !strings.Contains(strings.Join(ex.Reasons, "\n"), "registered only for a call that names its conversation") {
		t.Errorf("explain %+v %v", ex, err)
	}
	if len(with) != len(without)+len(channelTools) {
		t.Errorf("with a context %d tools, without %d", len(with), len(without))
	}
}

func TestChannelCallWithoutContextRefused(t *testing.T) {
	w := channelWorld(t, "")
	for _, n := range channelTools {
		o := w.fails("alice", n, `{"message":"hi","agent":"bob","path":"x"}`, "registered only for a call that names its conversation")
		if o.Kind != armory.KindNotFound || o.Status != audit.StatusError {
			t.Errorf("%s: %v %v", n, o.Kind, o.Status)
		}
		if !strings.Contains(o.Result, pipeline.ChannelHeader) {
			t.Errorf("%s: the reason does not say how to name the conversation: %s", n, o.Result)
		}
	}
	// carol is not granted them: with a context they are unknown to her.
	w.t = t
	if o := w.in("c1", "carol", "channel.send", map[string]string{"message": "hi"}); o.Status == audit.StatusSuccess || !strings.Contains(o.Result, "Unknown tool") {
		t.Errorf("carol: %s %s", o.Status, o.Result)
	}
	// A bad conversation name is refused before anything is claimed.
	for _, bad := range []string{strings.Repeat("x", pipeline.MaxChannelBytes+1), "a\x1b[2Jb", "\xff"} {
		if o := w.in(bad, "alice", "channel.send", map[string]string{"message": "hi"}); o.Kind != armory.KindInvalid {
			t.Errorf("channel %q: %v %s", bad, o.Kind, o.Result)
		}
	}
}

func TestChannelSendAndHandoff(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		w := channelWorld(t, dsn)
		ctx := context.Background()
		o := w.in("slack:C1/42", "alice", "channel.send", map[string]string{"message": "hello from alice"})
		if o.Status != audit.StatusSuccess {
			t.Fatalf("send: %s %s", o.Status, o.Result)
		}
		i := slices.IndexFunc(o.Stages, func(s audit.Stage) bool { return s.Name == "channel" })
		if i < 0 || !strings.Contains(strings.Join(o.Stages[i].Reasons, ";"), `conversation "slack:C1/42", held by alice`) {
			t.Errorf("stages %+v", o.Stages)
		}
		// The audit record keeps the conversation (stage "channel").
		recs, err := w.eng.Store().ListAudit(ctx, store.AuditFilter{Agent: "alice", Tool: "channel.send"})
		if err != nil || len(recs) == 0 || !slices.ContainsFunc(recs[len(recs)-1].Stages, func(s audit.Stage) bool { return s.Name == "channel" }) {
			t.Errorf("audit %v %+v", err, recs)
		}
		if o := w.in("slack:C1/42", "alice", "syscall.channel.send", map[string]string{"message": "second"}); o.Status != audit.StatusSuccess {
			t.Fatalf("syscall send: %s %s", o.Status, o.Result)
		}
		// bob has no business in alice's conversation.
		if o := w.in("slack:C1/42", "bob", "channel.send", map[string]string{"message": "hijack"}); o.Kind != armory.KindConflict || !strings.Contains(o.Result, "held by agent alice") {
			t.Errorf("bob in alice's conversation: %v %s", o.Kind, o.Result)
		}

		o = w.in("slack:C1/42", "alice", "channel.handoff", map[string]string{"agent": "bob", "note": "billing question"})
		if o.Status != audit.StatusSuccess {
			t.Fatalf("handoff: %s %s", o.Status, o.Result)
		}
		// The old holder is refused, on any tool, with who holds it now.
		for _, tool := range []string{"channel.send", "think", "syscall.channel.handoff"} {
			o := w.in("slack:C1/42", "alice", tool, map[string]string{"message": "still me?", "thought": "x", "agent": "carol"})
			if o.Status != audit.StatusBlocked || o.Kind != armory.KindConflict || !strings.Contains(o.Result, "held by agent bob") {
				t.Errorf("alice after the handoff, %s: %s %v %s", tool, o.Status, o.Kind, o.Result)
			}
		}
		// The new holder got a notice and acts.
		var inbox services.InboxPage
		w.ok("bob", "syscall.inbox", map[string]any{}, &inbox)
		if len(inbox.Messages) != 1 || !strings.Contains(inbox.Messages[0].Body, "billing question") || inbox.Messages[0].From != "alice" {
			t.Errorf("bob's inbox %+v", inbox)
		}
		if o := w.in("slack:C1/42", "bob", "syscall.channel.send", map[string]string{"message": "bob here"}); o.Status != audit.StatusSuccess {
			t.Fatalf("bob send: %s %s", o.Status, o.Result)
		}
		if o := w.in("slack:C1/42", "bob", "channel.handoff", map[string]string{"agent": "nobody"}); o.Kind != armory.KindNotFound {
			t.Errorf("handoff to an unknown agent: %v %s", o.Kind, o.Result)
		}
		if o := w.in("slack:C1/42", "bob", "channel.handoff", map[string]string{"agent": "bob"}); o.Kind != armory.KindInvalid {
			t.Errorf("handoff to oneself: %v %s", o.Kind, o.Result)
		}

		ch, err := w.mod.Channel(ctx, "slack:C1/42")
		if err != nil || ch.Holder != "bob" || ch.Creator != "alice" {
			t.Fatalf("channel %+v %v", ch, err)
		}
		msgs, next, err := w.mod.ChannelMessages(ctx, "slack:C1/42", store.Page{})
		if err != nil || next != "" {
			t.Fatal(err, next)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.From+"/"+m.Kind+"/"+m.Body+"/"+m.To)
		}
		want := []string{"alice/message/hello from alice/", "alice/message/second/", "alice/handoff/billing question/bob", "bob/message/bob here/"}
		if !slices.Equal(got, want) {
			t.Errorf("messages\n%q\nwant\n%q", got, want)
		}
		if _, _, err := w.mod.ChannelMessages(ctx, "nope", store.Page{}); armory.KindOf(err) != armory.KindNotFound {
			t.Errorf("unknown conversation: %v", err)
		}
	})
}

func TestChannelFileAttach(t *testing.T) {
	w := channelWorld(t, "")
	alice, _ := w.eng.Roster().Agent("alice")
	ws := alice.Env.Workspace
	outside := t.TempDir()
	testenv.WriteTree(t, ws, map[string]string{"reports/summary.md": "# done\n", "notes.txt": "plain"})
	testenv.WriteTree(t, outside, map[string]string{"secret.txt": "s3cret"})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(ws, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("notes.txt", filepath.Join(ws, "inside-link.txt")); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create(filepath.Join(ws, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(services.MaxAttachBytes + 1)
	big.Close()

	attach := func(p string) pipeline.Outcome {
		return w.in("t1", "alice", "channel.file_attach", map[string]string{"path": p})
	}
	o := attach("reports/summary.md")
	if o.Status != audit.StatusSuccess || len(o.Artifacts) != 1 {
		t.Fatalf("attach: %s %s", o.Status, o.Result)
	}
	if a := o.Artifacts[0]; a.Path != "reports/summary.md" || a.Size != 7 || !strings.HasPrefix(a.MIMEType, "text/") {
		t.Errorf("artifact %+v", a)
	}
	if o := attach(filepath.Join(ws, "notes.txt")); o.Status != audit.StatusSuccess || o.Artifacts[0].Path != "notes.txt" {
		t.Errorf("absolute path inside the workspace: %s %s %+v", o.Status, o.Result, o.Artifacts)
	}
	if o := attach("inside-link.txt"); o.Status != audit.StatusSuccess {
		t.Errorf("a link inside the workspace: %s %s", o.Status, o.Result)
	}
	for p, want := range map[string]string{
		"../secret.txt":                      `".." element`,
		"reports/../../secret.txt":           `".." element`,
		filepath.Join(outside, "secret.txt"): "outside your workspace",
		"/etc/passwd":                        "outside your workspace",
		"link.txt":                           "leads out of your workspace",
		"out/secret.txt":                     "leads out of your workspace",
		"missing.txt":                        "no file",
		"reports":                            "a folder",
		"big.bin":                            "an attachment is at most",
		"":                                   "path is empty",
		filepath.Join(ws, "..", "w2", "secret.txt"): "outside your workspace",
	} {
		o := attach(p)
		if o.Status == audit.StatusSuccess || !strings.Contains(o.Result, want) || len(o.Artifacts) > 0 {
			t.Errorf("attach %q: %s %q, want %q", p, o.Status, o.Result, want)
		}
	}
	msgs, _, err := w.mod.ChannelMessages(context.Background(), "t1", store.Page{})
	if err != nil || len(msgs) != 3 || msgs[0].Kind != store.ChannelAttach || msgs[0].Body != "reports/summary.md" {
		t.Errorf("recorded %v %+v", err, msgs)
	}
}
