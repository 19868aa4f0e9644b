package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/store"
)

// The world services' roles (store.Agents, Inboxes, Chats, Tasks,
// Knowledge, Memory, State, Timers, Leases).

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wantErr fails t unless err matches target.
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: got %v, want %v", what, err, target)
	}
}

// allPages reads every page of a list with page size n.
func allPages[T any](t *testing.T, n int, read func(p store.Page) ([]T, string, error)) (all []T, pages int) {
	t.Helper()
	p := store.Page{Limit: n}
	for {
		items, next, err := read(p)
		must(t, err)
		if len(items) > n {
			t.Fatalf("page of %d items, limit %d", len(items), n)
		}
		all, pages = append(all, items...), pages+1
		if next == "" {
			return all, pages
		}
		if pages > 10000 {
			t.Fatal("pages never end")
		}
		p.Cursor = next
	}
}

func testAgents(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	for _, id := range []string{"c", "a", "e", "b", "d"} {
		must(t, s.PutAgent(ctx, &store.Agent{ID: id, Archetype: "worker", CreatedBy: "boss"}))
	}
	a := &store.Agent{ID: "a", Archetype: "other"}
	wantErr(t, "duplicate agent", s.PutAgent(ctx, a), store.ErrConflict)
	wantErr(t, "bad status", s.PutAgent(ctx, &store.Agent{ID: "x", Status: "zombie"}), store.ErrInvalid)
	wantErr(t, "long id", s.PutAgent(ctx, &store.Agent{ID: strings.Repeat("x", store.MaxName+1)}), store.ErrInvalid)
	got, err := s.GetAgent(ctx, "a")
	must(t, err)
	if got.Archetype != "worker" || got.Status != store.AgentRunning || got.CreatedBy != "boss" || got.CreatedAt.IsZero() || !got.StatusAt.Equal(got.CreatedAt) {
		t.Errorf("agent a: %+v", got)
	}
	_, err = s.GetAgent(ctx, "nope")
	wantErr(t, "unknown agent", err, store.ErrNotFound)
	all, pages := allPages(t, 2, func(p store.Page) ([]*store.Agent, string, error) { return s.ListAgents(ctx, p) })
	var ids []string
	for _, a := range all {
		ids = append(ids, a.ID)
	}
	if strings.Join(ids, "") != "abcde" || pages != 3 {
		t.Errorf("agents %v in %d pages", ids, pages)
	}
	time.Sleep(time.Millisecond)
	st, err := open(t).SetAgentStatus(ctx, "a", store.AgentStopped)
	must(t, err)
	if st.Status != store.AgentStopped || !st.StatusAt.After(st.CreatedAt) || st.Archetype != "worker" {
		t.Errorf("stopped: %+v", st)
	}
	_, err = s.SetAgentStatus(ctx, "nope", store.AgentStopped)
	wantErr(t, "status of unknown agent", err, store.ErrNotFound)
	_, err = s.SetAgentStatus(ctx, "a", "paused")
	wantErr(t, "bad status", err, store.ErrInvalid)
	_, _, err = s.ListAgents(ctx, store.Page{Cursor: "%%%"})
	wantErr(t, "bad cursor", err, store.ErrInvalid)
}

// testBroadcast sends 1,000 messages in one call, then reads each inbox.
func testBroadcast(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	const n = 1000
	msgs := make([]*store.Message, n)
	for i := range msgs {
		msgs[i] = &store.Message{To: fmt.Sprintf("agent-%04d", i), From: "boss", Kind: store.KindMessage, Subject: "all hands", Body: "meeting at noon"}
	}
	must(t, s.SendMessages(ctx, msgs))
	seen := map[string]bool{}
	for i, m := range msgs {
		if m.ID == "" || seen[m.ID] || m.CreatedAt.IsZero() || (i > 0 && m.Seq <= msgs[i-1].Seq) {
			t.Fatalf("message %d: %+v", i, m)
		}
		seen[m.ID] = true
	}
	other := open(t)
	for _, i := range []int{0, 500, n - 1} {
		got, next, err := other.ReadInbox(ctx, store.InboxQuery{Agent: msgs[i].To})
		must(t, err)
		if len(got) != 1 || next != "" || *got[0] != *msgs[i] {
			t.Errorf("inbox of %s: %+v (next %q), want %+v", msgs[i].To, got, next, msgs[i])
		}
	}
	// One bad message: nothing of the batch is stored.
	bad := []*store.Message{{To: "x", From: "y", Kind: "message"}, {To: "x", From: "y", Kind: "message", Body: strings.Repeat("b", store.MaxBody+1)}}
	wantErr(t, "oversized body", s.SendMessages(ctx, bad), store.ErrInvalid)
	bad[1].Body = "bad\x00"
	wantErr(t, "NUL in body", s.SendMessages(ctx, bad), store.ErrInvalid)
	got, _, err := s.ReadInbox(ctx, store.InboxQuery{Agent: "x"})
	must(t, err)
	if len(got) != 0 || bad[0].ID != "" {
		t.Errorf("a refused batch left %d messages (first ID %q)", len(got), bad[0].ID)
	}
	wantErr(t, "too many", s.SendMessages(ctx, make([]*store.Message, store.MaxBatch+1)), store.ErrInvalid)
}

func testInbox(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	var mine, theirs []*store.Message
	for i := range 7 {
		mine = append(mine, &store.Message{To: "alice", From: "bob", Kind: store.KindAsk, Body: "q" + strconv.Itoa(i)})
		theirs = append(theirs, &store.Message{To: "carol", From: "bob", Kind: store.KindMessage, Body: "c" + strconv.Itoa(i)})
	}
	must(t, s1.SendMessages(ctx, mine[:4]))
	must(t, s2.SendMessages(ctx, append(slices.Clone(theirs), mine[4:]...)))

	// Paginated, oldest first.
	all, pages := allPages(t, 3, func(p store.Page) ([]*store.Message, string, error) {
		return s1.ReadInbox(ctx, store.InboxQuery{Agent: "alice", Page: p})
	})
	if len(all) != 7 || pages != 3 {
		t.Fatalf("alice has %d messages in %d pages", len(all), pages)
	}
	for i, m := range all {
		if m.Body != "q"+strconv.Itoa(i) || m.To != "alice" {
			t.Errorf("message %d: %+v", i, m)
		}
	}
	// Acking carol's messages as alice changes nothing; alice's own are acked.
	ids := []string{theirs[0].ID, theirs[1].ID, mine[0].ID, mine[1].ID, "unknown"}
	n, err := s2.AckMessages(ctx, "alice", ids)
	must(t, err)
	if n != 2 {
		t.Errorf("acked %d, want 2", n)
	}
	if n, err = s1.AckMessages(ctx, "alice", ids); err != nil || n != 0 {
		t.Errorf("second ack: %d, %v", n, err)
	}
	c0, err := s1.GetMessage(ctx, theirs[0].ID)
	must(t, err)
	if !c0.AckedAt.IsZero() {
		t.Errorf("carol's message acked by alice: %+v", c0)
	}
	carol, _, err := s1.ReadInbox(ctx, store.InboxQuery{Agent: "carol", Unacked: true})
	must(t, err)
	if len(carol) != 7 {
		t.Errorf("carol has %d unacked, want 7", len(carol))
	}
	unacked, _, err := s1.ReadInbox(ctx, store.InboxQuery{Agent: "alice", Unacked: true})
	must(t, err)
	if len(unacked) != 5 || unacked[0].ID != mine[2].ID {
		t.Errorf("alice unacked: %d, first %+v", len(unacked), unacked[0])
	}
	a0, err := s2.GetMessage(ctx, mine[0].ID)
	must(t, err)
	if a0.AckedAt.IsZero() {
		t.Errorf("alice's message not acked: %+v", a0)
	}
	future, _, err := s1.ReadInbox(ctx, store.InboxQuery{Agent: "alice", Since: time.Now().Add(time.Hour)})
	must(t, err)
	if len(future) != 0 {
		t.Errorf("since the future: %d", len(future))
	}
	_, err = s1.GetMessage(ctx, "nope")
	wantErr(t, "unknown message", err, store.ErrNotFound)

	// Ask and reply.
	_, err = s1.FindReply(ctx, mine[3].ID)
	wantErr(t, "no reply yet", err, store.ErrNotFound)
	must(t, s2.SendMessages(ctx, []*store.Message{{To: "bob", From: "alice", Kind: store.KindMessage, Body: "not a reply", ReplyTo: mine[3].ID}}))
	reply := &store.Message{To: "bob", From: "alice", Kind: store.KindReply, Body: "a3", ReplyTo: mine[3].ID}
	must(t, s2.SendMessages(ctx, []*store.Message{reply}))
	got, err := s1.FindReply(ctx, mine[3].ID)
	must(t, err)
	if *got != *reply {
		t.Errorf("reply %+v, want %+v", got, reply)
	}
	_, err = s1.FindReply(ctx, "")
	wantErr(t, "reply to nothing", err, store.ErrNotFound)

	// TakeReply: the reply in the asker's inbox, acknowledged in the same
	// statement; none for another agent, nor before there is a reply.
	_, err = s1.TakeReply(ctx, "alice", mine[3].ID)
	wantErr(t, "a reply in another agent's inbox", err, store.ErrNotFound)
	_, err = s1.TakeReply(ctx, "bob", mine[4].ID)
	wantErr(t, "no reply yet to take", err, store.ErrNotFound)
	took, err := s2.TakeReply(ctx, "bob", mine[3].ID)
	must(t, err)
	if took.ID != reply.ID || took.Body != "a3" || took.AckedAt.IsZero() {
		t.Errorf("took %+v, want %s acknowledged", took, reply.ID)
	}
	again, err := s1.TakeReply(ctx, "bob", mine[3].ID)
	must(t, err)
	if !again.AckedAt.Equal(took.AckedAt) {
		t.Errorf("taken twice: acked %v then %v", took.AckedAt, again.AckedAt)
	}
	if unread, _, err := s1.ReadInbox(ctx, store.InboxQuery{Agent: "bob", Unacked: true}); err != nil || slices.ContainsFunc(unread, func(m *store.Message) bool { return m.ID == reply.ID }) {
		t.Errorf("the reply taken is still unread (%v)", err)
	}

	// SendReply: the reply stored and the message answered acknowledged
	// (only in the replier's inbox), in one call.
	ask := &store.Message{To: "carol", From: "bob", Kind: store.KindAsk, Body: "q?"}
	must(t, s1.SendMessages(ctx, []*store.Message{ask}))
	r2 := &store.Message{To: "bob", From: "carol", Kind: store.KindReply, Body: "a!", ReplyTo: ask.ID}
	must(t, s2.SendReply(ctx, r2))
	if r2.ID == "" || r2.Seq <= ask.Seq || r2.CreatedAt.IsZero() {
		t.Errorf("sent reply %+v", r2)
	}
	if a, err := s1.GetMessage(ctx, ask.ID); err != nil || a.AckedAt.IsZero() {
		t.Errorf("the ask answered is not acknowledged: %+v, %v", a, err)
	}
	if got, err := s1.FindReply(ctx, ask.ID); err != nil || got.ID != r2.ID {
		t.Errorf("find the reply sent: %+v, %v", got, err)
	}
	other := &store.Message{To: "carol", From: "bob", Kind: store.KindAsk, Body: "q2"}
	must(t, s1.SendMessages(ctx, []*store.Message{other}))
	must(t, s2.SendReply(ctx, &store.Message{To: "bob", From: "dave", Kind: store.KindReply, Body: "not mine", ReplyTo: other.ID}))
	if a, err := s1.GetMessage(ctx, other.ID); err != nil || !a.AckedAt.IsZero() {
		t.Errorf("dave's reply acknowledged carol's message: %+v, %v", a, err)
	}
	wantErr(t, "a reply of another kind", s1.SendReply(ctx, &store.Message{To: "bob", From: "carol", Kind: store.KindMessage, Body: "x", ReplyTo: ask.ID}), store.ErrInvalid)
	wantErr(t, "a reply to nothing", s1.SendReply(ctx, &store.Message{To: "bob", From: "carol", Kind: store.KindReply, Body: "x"}), store.ErrInvalid)
}

func testChats(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	c := &store.Chat{ID: "ops", Name: "Ops", Creator: "boss", Members: []string{"carol", "alice", "alice"}, Gated: true}
	must(t, s1.CreateChat(ctx, c))
	if !slices.Equal(c.Members, []string{"alice", "carol"}) || c.CreatedAt.IsZero() {
		t.Errorf("created %+v", c)
	}
	wantErr(t, "duplicate chat", s2.CreateChat(ctx, &store.Chat{ID: "ops", Creator: "x"}), store.ErrConflict)
	other := &store.Chat{Creator: "alice", Members: []string{"alice"}}
	must(t, s2.CreateChat(ctx, other))
	if other.ID == "" {
		t.Error("no chat id")
	}
	got, err := s2.GetChat(ctx, "ops")
	must(t, err)
	if got.Name != "Ops" || !got.Gated || got.Creator != "boss" || !slices.Equal(got.Members, c.Members) {
		t.Errorf("got %+v", got)
	}
	added, err := s2.AddChatMember(ctx, "ops", "bob")
	must(t, err)
	again, err := s1.AddChatMember(ctx, "ops", "bob")
	must(t, err)
	removed, err := s1.RemoveChatMember(ctx, "ops", "carol")
	must(t, err)
	gone, err := s1.RemoveChatMember(ctx, "ops", "carol")
	must(t, err)
	if !added || again || !removed || gone {
		t.Errorf("add %v, again %v, remove %v, again %v", added, again, removed, gone)
	}
	_, err = s1.AddChatMember(ctx, "nope", "bob")
	wantErr(t, "add to unknown chat", err, store.ErrNotFound)
	got, err = s1.GetChat(ctx, "ops")
	must(t, err)
	if !slices.Equal(got.Members, []string{"alice", "bob"}) {
		t.Errorf("members %v", got.Members)
	}
	list, _, err := s1.ListChats(ctx, "alice", store.Page{})
	must(t, err)
	if len(list) != 2 || list[0].ID != "ops" || list[1].ID != other.ID {
		t.Errorf("alice's chats %+v", list)
	}
	list, _, err = s1.ListChats(ctx, "bob", store.Page{})
	must(t, err)
	if len(list) != 1 || list[0].ID != "ops" {
		t.Errorf("bob's chats %+v", list)
	}
	everyone, pages := allPages(t, 1, func(p store.Page) ([]*store.Chat, string, error) { return s2.ListChats(ctx, "", p) })
	if len(everyone) != 2 || pages != 2 {
		t.Errorf("%d chats in %d pages", len(everyone), pages)
	}

	// History: pages go back in time, each oldest first.
	for i := range 7 {
		m := &store.ChatMessage{Chat: "ops", From: "alice", Body: "m" + strconv.Itoa(i)}
		must(t, []store.Store{s1, s2}[i%2].AppendChatMessage(ctx, m))
		if m.ID == "" || m.Seq == 0 {
			t.Fatalf("appended %+v", m)
		}
	}
	wantErr(t, "append to unknown chat", s1.AppendChatMessage(ctx, &store.ChatMessage{Chat: "nope", From: "a", Body: "x"}), store.ErrNotFound)
	var bodies []string
	p := store.Page{Limit: 3}
	for {
		h, next, err := s1.ChatHistory(ctx, "ops", p)
		must(t, err)
		var page []string
		for _, m := range h {
			page = append(page, m.Body)
		}
		bodies = append(bodies, strings.Join(page, ","))
		if next == "" {
			break
		}
		p.Cursor = next
	}
	if strings.Join(bodies, " ") != "m4,m5,m6 m1,m2,m3 m0" {
		t.Errorf("history pages %q", bodies)
	}
	h, _, err := s1.ChatHistory(ctx, "ops", store.Page{})
	must(t, err)
	if len(h) != 7 {
		t.Errorf("default page: %d messages", len(h))
	}
	_, _, err = s1.ChatHistory(ctx, "nope", store.Page{})
	wantErr(t, "history of unknown chat", err, store.ErrNotFound)
}

func testTasks(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	var ids []string
	for i := range 5 {
		tk := &store.Task{Title: "task " + strconv.Itoa(i), Creator: "boss", Assignee: []string{"alice", "bob"}[i%2]}
		must(t, s1.CreateTask(ctx, tk))
		if tk.ID == "" || tk.Version != 1 || tk.Status != store.TaskOpen {
			t.Fatalf("created %+v", tk)
		}
		ids = append(ids, tk.ID)
	}
	wantErr(t, "duplicate", s1.CreateTask(ctx, &store.Task{ID: ids[0], Title: "x", Creator: "y"}), store.ErrConflict)
	wantErr(t, "no title", s1.CreateTask(ctx, &store.Task{Creator: "y"}), store.ErrInvalid)
	wantErr(t, "bad status", s1.CreateTask(ctx, &store.Task{Title: "x", Creator: "y", Status: "later"}), store.ErrInvalid)

	alice, pages := allPages(t, 2, func(p store.Page) ([]*store.Task, string, error) {
		return s2.ListTasks(ctx, store.TaskFilter{Assignee: "alice", Page: p})
	})
	if len(alice) != 3 || pages != 2 || alice[0].ID != ids[0] || alice[2].ID != ids[4] {
		t.Errorf("alice's tasks: %d in %d pages", len(alice), pages)
	}

	// Reject with a reason, then a stale writer loses.
	a, err := s1.GetTask(ctx, ids[1])
	must(t, err)
	b := *a
	a.Status, a.Reason = store.TaskRejected, "not mine"
	must(t, s1.UpdateTask(ctx, a))
	if a.Version != 2 || a.Creator != "boss" {
		t.Errorf("updated %+v", a)
	}
	b.Assignee = "carol"
	wantErr(t, "stale update", s2.UpdateTask(ctx, &b), store.ErrConflict)
	got, err := s2.GetTask(ctx, ids[1])
	must(t, err)
	if got.Status != store.TaskRejected || got.Reason != "not mine" || got.Assignee != "bob" || got.Version != 2 {
		t.Errorf("after the stale update: %+v", got)
	}
	rejected, _, err := s2.ListTasks(ctx, store.TaskFilter{Status: store.TaskRejected, Creator: "boss"})
	must(t, err)
	if len(rejected) != 1 || rejected[0].ID != ids[1] {
		t.Errorf("rejected: %+v", rejected)
	}
	wantErr(t, "update unknown", s1.UpdateTask(ctx, &store.Task{ID: "nope", Title: "x", Status: store.TaskDone, Version: 1}), store.ErrNotFound)
	_, err = s1.GetTask(ctx, "nope")
	wantErr(t, "get unknown", err, store.ErrNotFound)
}

func testKnowledge(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	e := &store.KnowledgeEntry{Key: "deploy/howto", Title: "Deploy", Body: "run make", Author: "alice",
		Read: []string{"*"}, Write: []string{"agent:alice", "group:ops"}}
	must(t, s1.PutKnowledge(ctx, e, 0))
	if e.Version != 1 || e.CreatedAt.IsZero() {
		t.Errorf("put %+v", e)
	}
	wantErr(t, "create existing", s2.PutKnowledge(ctx, &store.KnowledgeEntry{Key: "deploy/howto"}, 0), store.ErrConflict)
	stale := *e
	e.Body = "run make deploy"
	must(t, s2.PutKnowledge(ctx, e, 1))
	wantErr(t, "stale put", s1.PutKnowledge(ctx, &stale, 1), store.ErrConflict)
	got, err := s1.GetKnowledge(ctx, "deploy/howto")
	must(t, err)
	if got.Body != "run make deploy" || got.Version != 2 || !slices.Equal(got.Write, e.Write) || !slices.Equal(got.Read, []string{"*"}) ||
		!got.CreatedAt.Equal(e.CreatedAt) {
		t.Errorf("got %+v", got)
	}
	must(t, s1.PutKnowledge(ctx, &store.KnowledgeEntry{Key: "deploy/howto", Body: "overwritten"}, store.AnyVersion))
	got, err = s2.GetKnowledge(ctx, "deploy/howto")
	must(t, err)
	if got.Version != 3 || got.Read == nil || len(got.Read) != 0 {
		t.Errorf("unconditional put: %+v", got)
	}
	for _, k := range []string{"deploy/b", "deploy/a", "deployx", "other", "deploy/c"} {
		must(t, s1.PutKnowledge(ctx, &store.KnowledgeEntry{Key: k}, store.AnyVersion))
	}
	entries, pages := allPages(t, 2, func(p store.Page) ([]*store.KnowledgeEntry, string, error) {
		return s2.ListKnowledge(ctx, "deploy/", p)
	})
	var keys []string
	for _, e := range entries {
		keys = append(keys, e.Key)
	}
	if strings.Join(keys, " ") != "deploy/a deploy/b deploy/c deploy/howto" || pages != 2 {
		t.Errorf("keys %v in %d pages", keys, pages)
	}
	everything, _ := allPages(t, 4, func(p store.Page) ([]*store.KnowledgeEntry, string, error) { return s2.ListKnowledge(ctx, "", p) })
	if len(everything) != 6 {
		t.Errorf("%d entries", len(everything))
	}
	wantErr(t, "stale delete", s1.DeleteKnowledge(ctx, "deploy/howto", 1), store.ErrConflict)
	must(t, s1.DeleteKnowledge(ctx, "deploy/howto", 3))
	wantErr(t, "delete again", s1.DeleteKnowledge(ctx, "deploy/howto", store.AnyVersion), store.ErrNotFound)
	_, err = s1.GetKnowledge(ctx, "deploy/howto")
	wantErr(t, "get deleted", err, store.ErrNotFound)
	wantErr(t, "long key", s1.PutKnowledge(ctx, &store.KnowledgeEntry{Key: strings.Repeat("k", store.MaxKey+1)}, store.AnyVersion), store.ErrInvalid)
	wantErr(t, "empty ACL entry", s1.PutKnowledge(ctx, &store.KnowledgeEntry{Key: "k", Read: []string{""}}, store.AnyVersion), store.ErrInvalid)
}

func testMemory(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	e, err := s1.WriteMemory(ctx, "alice", "todo", "a")
	must(t, err)
	if e.Value != "a" || e.UpdatedAt.IsZero() {
		t.Errorf("wrote %+v", e)
	}
	// Concurrent appends from two Stores all land.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := []store.Store{s1, s2}[i%2].AppendMemory(ctx, "alice", "todo", "+"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := s2.ReadMemory(ctx, "alice", "todo")
	must(t, err)
	if got.Value != "a"+strings.Repeat("+", 20) {
		t.Errorf("after appends: %q", got.Value)
	}
	_, err = s1.AppendMemory(ctx, "alice", "todo", strings.Repeat("x", store.MaxBody))
	wantErr(t, "append past the bound", err, store.ErrInvalid)
	if got, _ := s1.ReadMemory(ctx, "alice", "todo"); got.Value != "a"+strings.Repeat("+", 20) {
		t.Errorf("a refused append changed the value: %d bytes", len(got.Value))
	}
	_, err = s1.AppendMemory(ctx, "alice", "new", "first")
	must(t, err)
	_, err = s1.WriteMemory(ctx, "bob", "todo", "bob's")
	must(t, err)
	entries, pages := allPages(t, 1, func(p store.Page) ([]*store.MemoryEntry, string, error) { return s2.ListMemory(ctx, "alice", p) })
	if len(entries) != 2 || pages != 2 || entries[0].Key != "new" || entries[1].Key != "todo" {
		t.Errorf("alice's memory: %+v", entries)
	}
	must(t, s1.DeleteMemory(ctx, "alice", "new"))
	wantErr(t, "delete again", s1.DeleteMemory(ctx, "alice", "new"), store.ErrNotFound)
	_, err = s1.ReadMemory(ctx, "alice", "new")
	wantErr(t, "read deleted", err, store.ErrNotFound)
	_, err = s1.WriteMemory(ctx, "alice", "", "x")
	wantErr(t, "empty key", err, store.ErrInvalid)
}

// testMemoryKeyBound fills an agent's memory to MaxMemoryKeys keys.
func testMemoryKeyBound(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	for i := range store.MaxMemoryKeys {
		_, err := s.WriteMemory(ctx, "alice", fmt.Sprintf("k%04d", i), "v")
		must(t, err)
	}
	_, err := s.WriteMemory(ctx, "alice", "one-more", "v")
	wantErr(t, "key past the bound", err, store.ErrInvalid)
	_, err = s.AppendMemory(ctx, "alice", "k0000", "w")
	must(t, err)
	_, err = s.WriteMemory(ctx, "bob", "k", "v")
	must(t, err)
}

func testState(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	v, err := s.WriteState(ctx, "k", "1", 0)
	must(t, err)
	if v != 1 {
		t.Errorf("first version %d", v)
	}
	_, err = s.WriteState(ctx, "k", "x", 0)
	wantErr(t, "create existing", err, store.ErrConflict)
	_, err = s.WriteState(ctx, "k", "x", 5)
	wantErr(t, "stale", err, store.ErrConflict)
	_, err = s.WriteState(ctx, "missing", "x", 1)
	wantErr(t, "missing key with a version", err, store.ErrConflict)
	if v, err = s.WriteState(ctx, "k", "2", 1); err != nil || v != 2 {
		t.Errorf("CAS: %d, %v", v, err)
	}
	if v, err = s.WriteState(ctx, "k", "3", store.AnyVersion); err != nil || v != 3 {
		t.Errorf("unconditional: %d, %v", v, err)
	}
	if v, err = s.WriteState(ctx, "new", "n", store.AnyVersion); err != nil || v != 1 {
		t.Errorf("unconditional new: %d, %v", v, err)
	}
	e, err := s.ReadState(ctx, "k")
	must(t, err)
	if e.Value != "3" || e.Version != 3 || e.UpdatedAt.IsZero() {
		t.Errorf("read %+v", e)
	}
	_, err = s.WriteState(ctx, "k", "x", -2)
	wantErr(t, "bad version", err, store.ErrInvalid)
	_, err = s.WriteState(ctx, "k", strings.Repeat("v", store.MaxBody+1), store.AnyVersion)
	wantErr(t, "oversized", err, store.ErrInvalid)
	all, _, err := s.ReadAllState(ctx, "", store.Page{})
	must(t, err)
	if len(all) != 2 || all[0].Key != "k" || all[1].Key != "new" {
		t.Errorf("all state %+v", all)
	}
	wantErr(t, "stale delete", s.DeleteState(ctx, "k", 1), store.ErrConflict)
	must(t, s.DeleteState(ctx, "k", 3))
	_, err = s.ReadState(ctx, "k")
	wantErr(t, "read deleted", err, store.ErrNotFound)
}

// testStateCASTwoStores: 100 writers on two Stores increment one counter
// with read / compare-and-set / retry; no update is lost.
func testStateCASTwoStores(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	const writers = 100
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		conflicts int
	)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[i%2]
			for {
				var cur, version int64
				e, err := s.ReadState(ctx, "counter")
				if err == nil {
					cur, _ = strconv.ParseInt(e.Value, 10, 64)
					version = e.Version
				} else if !errors.Is(err, store.ErrNotFound) {
					t.Error(err)
					return
				}
				_, err = s.WriteState(ctx, "counter", strconv.FormatInt(cur+1, 10), version)
				if err == nil {
					return
				}
				if !errors.Is(err, store.ErrConflict) {
					t.Error(err)
					return
				}
				mu.Lock()
				conflicts++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	e, err := stores[0].ReadState(ctx, "counter")
	must(t, err)
	if e.Value != strconv.Itoa(writers) || e.Version != writers {
		t.Errorf("counter %s at version %d after %d writers (%d conflicts)", e.Value, e.Version, writers, conflicts)
	}
	t.Logf("%d conflicts retried", conflicts)
}

func testTimers(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	at := time.Now().Add(-time.Second).UTC().Truncate(time.Microsecond)
	once := &store.Timer{Owner: "alice", Name: "remind", Kind: store.TimerOnce, Spec: at.Format(time.RFC3339), NextFire: at,
		Action: []byte(`{"message":"stand up"}`), Enabled: true}
	must(t, s.CreateTimer(ctx, once))
	if once.ID == "" || once.Version != 1 {
		t.Fatalf("created %+v", once)
	}
	wantErr(t, "same name", s.CreateTimer(ctx, &store.Timer{Owner: "alice", Name: "remind", Kind: store.TimerOnce}), store.ErrConflict)
	wantErr(t, "bad kind", s.CreateTimer(ctx, &store.Timer{Owner: "alice", Name: "x", Kind: "sometimes"}), store.ErrInvalid)
	wantErr(t, "bad action", s.CreateTimer(ctx, &store.Timer{Owner: "alice", Name: "x", Kind: store.TimerOnce, Action: []byte("{")}), store.ErrInvalid)
	cron := &store.Timer{Owner: "bob", Name: "hourly", Kind: store.TimerCron, Spec: "0 * * * *", NextFire: at.Add(-time.Minute), Enabled: true}
	must(t, s.CreateTimer(ctx, cron))
	watch := &store.Timer{Owner: "bob", Name: "readme", Kind: store.TimerWatch, Spec: "README.md", Enabled: true}
	must(t, s.CreateTimer(ctx, watch))
	later := &store.Timer{Owner: "bob", Name: "later", Kind: store.TimerOnce, NextFire: at.Add(time.Hour), Enabled: true}
	must(t, s.CreateTimer(ctx, later))

	due, err := s.DueTimers(ctx, time.Now(), 0)
	must(t, err)
	if len(due) != 2 || due[0].ID != cron.ID || due[1].ID != once.ID || string(due[1].Action) != `{"message":"stand up"}` {
		t.Fatalf("due: %+v", due)
	}
	// The cron timer fires and moves on; a stale occurrence does not fire.
	next := at.Add(time.Hour)
	fired, got, err := s.FireTimer(ctx, cron.ID, cron.NextFire, next, "replica-1")
	must(t, err)
	if !fired || !got.NextFire.Equal(next) || !got.Enabled || got.Fires != 1 || !got.LastFired.Equal(cron.NextFire) || got.Version != 2 {
		t.Errorf("cron fired %v: %+v", fired, got)
	}
	if fired, _, _ := s.FireTimer(ctx, cron.ID, cron.NextFire, next, "replica-2"); fired {
		t.Error("a fired occurrence fired again")
	}
	// The one-shot fires once and is disabled.
	fired, got, err = s.FireTimer(ctx, once.ID, at, time.Time{}, "replica-1")
	must(t, err)
	if !fired || got.Enabled || !got.NextFire.IsZero() {
		t.Errorf("one-shot fired %v: %+v", fired, got)
	}
	// A watch fires on any occurrence and stays enabled.
	for i := range 2 {
		fired, got, err = s.FireTimer(ctx, watch.ID, at.Add(time.Duration(i)*time.Second), time.Time{}, "replica-1")
		must(t, err)
		if !fired || !got.Enabled || got.Fires != int64(i+1) {
			t.Errorf("watch fired %v: %+v", fired, got)
		}
	}
	if due, _ := s.DueTimers(ctx, time.Now(), 0); len(due) != 0 {
		t.Errorf("still due: %+v", due)
	}
	// Update with a version; a stale one loses.
	stale := *later
	later.Name, later.Enabled = "later-renamed", false
	must(t, s.UpdateTimer(ctx, later))
	if later.Version != 2 || later.Owner != "bob" {
		t.Errorf("updated %+v", later)
	}
	wantErr(t, "stale update", s.UpdateTimer(ctx, &stale), store.ErrConflict)
	clash := *later
	clash.Name = "hourly"
	wantErr(t, "rename onto another", s.UpdateTimer(ctx, &clash), store.ErrConflict)
	mine, _, err := s.ListTimers(ctx, "bob", store.Page{})
	must(t, err)
	if len(mine) != 3 || mine[2].Name != "later-renamed" {
		t.Errorf("bob's timers %+v", mine)
	}
	everyone, pages := allPages(t, 3, func(p store.Page) ([]*store.Timer, string, error) { return s.ListTimers(ctx, "", p) })
	if len(everyone) != 4 || pages != 2 {
		t.Errorf("%d timers in %d pages", len(everyone), pages)
	}
	must(t, s.DeleteTimer(ctx, later.ID))
	wantErr(t, "delete again", s.DeleteTimer(ctx, later.ID), store.ErrNotFound)
	_, _, err = s.FireTimer(ctx, later.ID, at, time.Time{}, "r")
	wantErr(t, "fire deleted", err, store.ErrNotFound)
	_, _, err = s.FireTimer(ctx, cron.ID, at, time.Time{}, "")
	wantErr(t, "no holder", err, store.ErrInvalid)
}

// testTimerFireRace: Stores on one database race to fire each occurrence
// of a timer; exactly one wins each, and after a restart the recorded
// occurrence does not fire again, even when the schedule is set back to it.
func testTimerFireRace(t *testing.T, open Opener) {
	ctx := ctxT(t)
	stores := []store.Store{open(t), open(t)}
	start := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	tm := &store.Timer{Owner: "alice", Name: "tick", Kind: store.TimerCron, Spec: "* * * * *", NextFire: start, Enabled: true}
	must(t, stores[0].CreateTimer(ctx, tm))
	const occurrences, racers = 10, 8
	for k := range occurrences {
		at := start.Add(time.Duration(k) * time.Minute)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		for r := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				holder := "replica-" + strconv.Itoa(r)
				fired, _, err := stores[r%2].FireTimer(ctx, tm.ID, at, at.Add(time.Minute), holder)
				if err != nil {
					t.Error(err)
				}
				if fired {
					mu.Lock()
					wins = append(wins, holder)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("occurrence %d fired by %v", k, wins)
		}
	}
	// Restart: close both, open a new Store, set the schedule back.
	for _, s := range stores {
		must(t, s.Close())
	}
	s := open(t)
	got, err := s.GetTimer(ctx, tm.ID)
	must(t, err)
	if got.Fires != occurrences || !got.NextFire.Equal(start.Add(occurrences*time.Minute)) {
		t.Errorf("after %d occurrences: %+v", occurrences, got)
	}
	got.NextFire = start
	must(t, s.UpdateTimer(ctx, got))
	fired, _, err := s.FireTimer(ctx, tm.ID, start, start.Add(time.Minute), "after-restart")
	must(t, err)
	if fired {
		t.Error("an occurrence fired before the restart fired again")
	}
}

func testLeases(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	l, won, err := s1.AcquireLease(ctx, "timers", "A", time.Hour)
	must(t, err)
	if !won || l.Holder != "A" || l.Fence != 1 || l.Expired || !l.Expires.After(l.AcquiredAt) {
		t.Fatalf("A acquired %v: %+v", won, l)
	}
	l, won, err = s2.AcquireLease(ctx, "timers", "B", time.Hour)
	must(t, err)
	if won || l.Holder != "A" {
		t.Errorf("B acquired a live lease %v: %+v", won, l)
	}
	again, won, err := s2.AcquireLease(ctx, "timers", "A", time.Hour)
	must(t, err)
	if !won || again.Fence != 1 || !again.AcquiredAt.Equal(l.AcquiredAt) {
		t.Errorf("A re-acquired %v: %+v", won, again)
	}
	_, err = s2.RenewLease(ctx, "timers", "B", time.Hour)
	wantErr(t, "B renews A's", err, store.ErrConflict)
	wantErr(t, "B releases A's", s2.ReleaseLease(ctx, "timers", "B"), store.ErrConflict)
	_, err = s1.RenewLease(ctx, "nope", "A", time.Hour)
	wantErr(t, "renew unknown", err, store.ErrNotFound)
	_, err = s1.InspectLease(ctx, "nope")
	wantErr(t, "inspect unknown", err, store.ErrNotFound)
	_, _, err = s1.AcquireLease(ctx, "timers", "A", 0)
	wantErr(t, "zero ttl", err, store.ErrInvalid)
	_, _, err = s1.AcquireLease(ctx, "", "A", time.Second)
	wantErr(t, "no name", err, store.ErrInvalid)

	// Release: anyone takes it, in a new term.
	must(t, s1.ReleaseLease(ctx, "timers", "A"))
	l, err = s2.InspectLease(ctx, "timers")
	must(t, err)
	if l.Holder != "" || !l.Expired {
		t.Errorf("released: %+v", l)
	}
	l, won, err = s2.AcquireLease(ctx, "timers", "B", 30*time.Millisecond)
	must(t, err)
	if !won || l.Holder != "B" || l.Fence != 2 {
		t.Errorf("B after the release %v: %+v", won, l)
	}
}

// testLeaseTakeover: a holder that stops renewing loses its lease once it
// expires, to a holder on another Store; the old holder's renewal then
// fails.
func testLeaseTakeover(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	_, won, err := s1.AcquireLease(ctx, "timers", "A", 50*time.Millisecond)
	must(t, err)
	if !won {
		t.Fatal("A did not get a free lease")
	}
	// A holder may renew past expiry while no one took the lease.
	for {
		l, err := s2.InspectLease(ctx, "timers")
		must(t, err)
		if l.Expired {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease never expired: %+v", l)
		case <-time.After(5 * time.Millisecond):
		}
	}
	l, err := s1.RenewLease(ctx, "timers", "A", 50*time.Millisecond)
	must(t, err)
	if l.Expired || l.Fence != 1 {
		t.Errorf("renewed past expiry: %+v", l)
	}
	var taken *store.Lease
	for taken == nil {
		l, won, err := s2.AcquireLease(ctx, "timers", "B", time.Hour)
		must(t, err)
		if won {
			taken = l
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("B never took the lease: %+v", l)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if taken.Holder != "B" || taken.Fence != 2 {
		t.Errorf("taken over: %+v", taken)
	}
	_, err = s1.RenewLease(ctx, "timers", "A", time.Hour)
	wantErr(t, "old holder renews", err, store.ErrConflict)
	_, won, err = s1.AcquireLease(ctx, "timers", "A", time.Hour)
	must(t, err)
	if won {
		t.Error("A took B's live lease")
	}
}

// BenchmarkBroadcast measures SendMessages of 1,000 messages (one
// broadcast) against bare, the same 1,000 rows inserted by a bare
// transaction on the same database (see each backend's benchmark).
func BenchmarkBroadcast(b *testing.B, s store.Store, bare func(ctx context.Context, msgs []*store.Message) error) {
	ctx := context.Background()
	msgs := make([]*store.Message, 1000)
	fresh := func() {
		for i := range msgs {
			msgs[i] = &store.Message{To: fmt.Sprintf("agent-%04d", i), From: "boss", Kind: store.KindMessage, Subject: "all hands", Body: "meeting at noon in the big room"}
		}
	}
	// Warm up both sides first, so that neither pays alone for growing
	// the database's files (SQLite's WAL grows until its first checkpoint).
	for range 5 {
		fresh()
		if err := s.SendMessages(ctx, msgs); err != nil {
			b.Fatal(err)
		}
		fresh()
		if err := bare(ctx, msgs); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("store", func(b *testing.B) {
		for b.Loop() {
			fresh()
			if err := s.SendMessages(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "µs/msg")
	})
	b.Run("bare", func(b *testing.B) {
		for b.Loop() {
			fresh()
			if err := bare(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "µs/msg")
	})
}

// BenchmarkStateCAS measures one compare-and-set WriteState (expecting the
// version its previous write returned) against bare, a bare transaction that updates the same row
// (see each backend's benchmark).
func BenchmarkStateCAS(b *testing.B, s store.Store, bare func(ctx context.Context, key, value string) error) {
	ctx := context.Background()
	v, err := s.WriteState(ctx, "bench", "0", store.AnyVersion)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 { // warm up, as BenchmarkBroadcast does
		if v, err = s.WriteState(ctx, "bench", strconv.Itoa(i), v); err != nil {
			b.Fatal(err)
		}
		if err := bare(ctx, "bench", strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
		v++ // bare moved the version on
	}
	b.Run("store", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if v, err = s.WriteState(ctx, "bench", strconv.Itoa(i), v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("bare", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := bare(ctx, "bench", strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
