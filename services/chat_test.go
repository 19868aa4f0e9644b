package services_test

import (
	"context"
	"strings"
	"testing"

	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

type chatView struct {
	ID      string   `json:"id"`
	Name    string   `json:"name"`
	Creator string   `json:"creator"`
	Gated   bool     `json:"gated"`
	Members []string `json:"members"`
}

type historyPage struct {
	Messages []struct {
		ID   string `json:"id"`
		From string `json:"from"`
		Body string `json:"body"`
	} `json:"messages"`
	NextCursor string `json:"next_cursor"`
}

func unacked(t testing.TB, st store.Store, agent string) []*store.Message {
	t.Helper()
	msgs, _, err := st.ReadInbox(context.Background(), store.InboxQuery{Agent: agent, Unacked: true})
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// An ungated chat delivers to every other member's inbox; a gated one to
// none, and keeps the history either way.
func TestChatDelivery(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		w := open(t, msgWorld(t, "alice", "bob", "carol", "dave"), dsn, services.Options{})
		st := w.eng.Store()
		var open_, gated chatView
		w.ok("alice", "syscall.chat.create", map[string]any{"name": "team", "members": []string{"bob", "carol", "bob"}}, &open_)
		if open_.Creator != "alice" || len(open_.Members) != 3 || open_.Gated {
			t.Fatalf("chat %+v", open_)
		}
		w.ok("alice", "syscall.chat.create", map[string]any{"name": "panel", "members": []string{"bob", "carol"}, "gated": true, "skip_creator": true}, &gated)
		if len(gated.Members) != 2 || !gated.Gated {
			t.Fatalf("gated chat %+v", gated)
		}
		w.ok("bob", "syscall.chat.send", map[string]any{"chat_id": open_.ID, "message": "hello team"}, nil)
		for _, ag := range []string{"alice", "carol"} {
			if got := unacked(t, st, ag); len(got) != 1 || got[0].Kind != store.KindChat || got[0].Chat != open_.ID || got[0].From != "bob" {
				t.Fatalf("%s's inbox: %+v", ag, got)
			}
		}
		if got := unacked(t, st, "bob"); len(got) != 0 {
			t.Fatalf("the sender got its own message: %+v", got)
		}
		w.ok("bob", "syscall.chat.send", map[string]any{"chat_id": gated.ID, "message": "my turn?"}, nil)
		w.ok("alice", "syscall.chat.send", map[string]any{"chat_id": gated.ID, "message": "carol first"}, nil) // the moderator
		if got := unacked(t, st, "carol"); len(got) != 1 {
			t.Fatalf("the gated chat delivered to carol's inbox: %+v", got)
		}
		if got := unacked(t, st, "alice"); len(got) != 1 {
			t.Fatalf("the gated chat delivered to alice's inbox: %+v", got)
		}
		var h historyPage
		w.ok("carol", "syscall.chat.history", map[string]any{"chat_id": gated.ID}, &h)
		if len(h.Messages) != 2 || h.Messages[0].Body != "my turn?" || h.Messages[1].From != "alice" {
			t.Fatalf("gated history %+v", h)
		}
		// Reply to a chat message goes to its sender.
		msgs := unacked(t, st, "carol")
		w.ok("carol", "syscall.reply", map[string]any{"message_id": msgs[0].ID, "message": "hi bob"}, nil)
		if got := unacked(t, st, "bob"); len(got) != 1 || got[0].ReplyTo != msgs[0].ID {
			t.Fatalf("bob's inbox after carol's reply: %+v", got)
		}
		var list struct {
			Chats []chatView `json:"chats"`
		}
		w.ok("carol", "syscall.chat.list", `{}`, &list)
		if len(list.Chats) != 2 {
			t.Fatalf("carol's chats %+v", list)
		}
		w.ok("dave", "syscall.chat.list", `{}`, &list)
		if len(list.Chats) != 0 {
			t.Fatalf("dave's chats %+v", list)
		}
	})
}

// Non-members neither read nor post; only the creator invites and
// removes; unknown agents and chats are refused.
func TestChatMembership(t *testing.T) {
	w := open(t, msgWorld(t, "alice", "bob", "carol", "mallory"), "", services.Options{})
	st := w.eng.Store()
	var c chatView
	w.ok("alice", "syscall.chat.create", map[string]any{"name": "private", "members": []string{"bob"}}, &c)
	w.ok("bob", "syscall.chat.send", map[string]any{"chat_id": c.ID, "message": "secret plan"}, nil)

	w.fails("mallory", "syscall.chat.history", map[string]any{"chat_id": c.ID}, "no chat")
	w.fails("mallory", "syscall.chat.send", map[string]any{"chat_id": c.ID, "message": "let me in"}, "no chat")
	w.fails("mallory", "syscall.chat.invite", map[string]any{"chat_id": c.ID, "agent": "mallory"}, "no chat")
	w.fails("bob", "syscall.chat.invite", map[string]any{"chat_id": c.ID, "agent": "mallory"}, "only the chat's creator")
	w.fails("bob", "syscall.chat.remove", map[string]any{"chat_id": c.ID, "agent": "alice"}, "only the chat's creator")
	w.fails("alice", "syscall.chat.invite", map[string]any{"chat_id": c.ID, "agent": "nobody"}, `no agent "nobody"`)
	w.fails("alice", "syscall.chat.create", map[string]any{"name": "x", "members": []string{"ghost"}}, `no agent "ghost"`)
	w.fails("alice", "syscall.chat.send", map[string]any{"chat_id": "no-such-chat", "message": "x"}, "no chat")
	w.fails("mallory", "syscall.chat.send", map[string]any{"chat_id": c.ID, "from": "bob", "message": "x"}, "from")
	if got, _ := st.GetChat(context.Background(), c.ID); len(got.Members) != 2 {
		t.Fatalf("members after refusals: %v", got.Members)
	}
	if h, _, _ := st.ChatHistory(context.Background(), c.ID, store.Page{}); len(h) != 1 {
		t.Fatalf("history after refusals: %d messages", len(h))
	}

	w.ok("alice", "syscall.chat.invite", map[string]any{"chat_id": c.ID, "agent": "carol"}, nil)
	var h historyPage
	w.ok("carol", "syscall.chat.history", map[string]any{"chat_id": c.ID}, &h)
	if len(h.Messages) != 1 {
		t.Fatalf("carol's history %+v", h)
	}
	w.ok("alice", "syscall.chat.remove", map[string]any{"chat_id": c.ID, "agent": "carol"}, nil)
	w.fails("carol", "syscall.chat.history", map[string]any{"chat_id": c.ID, "limit": 10}, "no chat")
}

// The history pages back in time, each page oldest first.
func TestChatHistoryPages(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		w := open(t, msgWorld(t, "alice", "bob"), dsn, services.Options{})
		var c chatView
		w.ok("alice", "syscall.chat.create", map[string]any{"name": "log", "members": []string{"bob"}, "gated": true}, &c)
		for i := range 7 {
			w.ok("alice", "syscall.chat.send", map[string]any{"chat_id": c.ID, "message": string(rune('a' + i))}, nil)
		}
		var got []string
		cursor := ""
		for range 10 {
			var h historyPage
			w.ok("bob", "syscall.chat.history", map[string]any{"chat_id": c.ID, "limit": 3, "cursor": cursor}, &h)
			var page []string
			for _, m := range h.Messages {
				page = append(page, m.Body)
			}
			got = append(page, got...)
			if cursor = h.NextCursor; cursor == "" {
				break
			}
		}
		if s := strings.Join(got, ""); s != "abcdefg" {
			t.Fatalf("history read back in pages: %s", s)
		}
		w.fails("bob", "syscall.chat.history", map[string]any{"chat_id": c.ID, "limit": services.MaxHistory + 1}, "")
	})
}

// A person posts to an agent's inbox and to a chat through the human
// API; each post is audited (decided_by human), reads acknowledge
// nothing, and an agent's reply reaches the "human" inbox.
func TestHumanAPI(t *testing.T) {
	w := open(t, msgWorld(t, "alice", "bob"), "", services.Options{})
	ctx := context.Background()
	p := w.eng.Pipeline()
	msg, err := w.mod.PostMessage(ctx, p, "alice", "please summarize", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.mod.PostMessage(ctx, p, "nobody", "x", "test"); err == nil {
		t.Fatal("posted to an unknown agent")
	}
	msgs, _, err := w.mod.ReadInbox(ctx, services.InboxQuery{Agent: "alice"})
	if err != nil || len(msgs) != 1 || msgs[0].From != pipeline.Human || !msgs[0].AckedAt.IsZero() {
		t.Fatalf("alice's inbox as the human reads it: %v %v", msgs, err)
	}
	w.ok("alice", "syscall.reply", map[string]any{"message_id": msg.ID, "message": "done"}, nil)
	replies, _, err := w.mod.ReadInbox(ctx, services.InboxQuery{Agent: pipeline.Human})
	if err != nil || len(replies) != 1 || replies[0].ReplyTo != msg.ID {
		t.Fatalf("the human's inbox: %v %v", replies, err)
	}
	var c chatView
	w.ok("alice", "syscall.chat.create", map[string]any{"name": "room", "members": []string{"bob"}}, &c)
	if _, err := w.mod.PostChat(ctx, p, c.ID, "hello from the operator", "test"); err != nil {
		t.Fatal(err)
	}
	h, _, err := w.mod.ChatHistory(ctx, c.ID, store.Page{})
	if err != nil || len(h) != 1 || h[0].From != pipeline.Human {
		t.Fatalf("history %v %v", h, err)
	}
	if got := unacked(t, w.eng.Store(), "bob"); len(got) != 1 {
		t.Fatalf("bob's inbox after the human's chat post: %v", got)
	}
	chats, _, err := w.mod.ListChats(ctx, "bob", store.Page{})
	if err != nil || len(chats) != 1 {
		t.Fatalf("bob's chats %v %v", chats, err)
	}
	recs, err := w.eng.Store().ListAudit(ctx, store.AuditFilter{Agent: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	var posted bool
	for _, r := range recs {
		if r.Tool == "inbox.post" && r.DecidedBy == pipeline.Human {
			posted = true
		}
	}
	if !posted {
		t.Fatal("no audit entry of the human's post")
	}
}
