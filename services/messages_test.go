package services_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

type askResult struct {
	Status    string `json:"status"`
	MessageID string `json:"message_id"`
	Reply     *struct {
		ID, From, Body, ReplyTo string
	} `json:"reply"`
}

type inboxPage struct {
	Messages []struct {
		ID      string `json:"id"`
		From    string `json:"from"`
		Kind    string `json:"kind"`
		Body    string `json:"body"`
		ReplyTo string `json:"reply_to"`
		Chat    string `json:"chat"`
		Acked   bool   `json:"acked"`
	} `json:"messages"`
	Acked      int    `json:"acked"`
	NextCursor string `json:"next_cursor"`
}

// waitInbox polls agent's unacked inbox in st (not through the tool: it
// acknowledges nothing) until it has n messages, and returns them.
func waitInbox(t testing.TB, st store.Store, agent string, n int) []*store.Message {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound, not a timing check
	for {
		msgs, _, err := st.ReadInbox(context.Background(), store.InboxQuery{Agent: agent, Unacked: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) >= n {
			return msgs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s's inbox has %d unacked messages, want %d", agent, len(msgs), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An ask is answered by a reply through the pipeline; the reply is
// returned to the asker and acknowledged, and the answered message too.
func TestAskReply(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		w := open(t, msgWorld(t, "alice", "bob"), dsn, services.Options{})
		done := make(chan pipeline.Outcome, 1)
		go func() {
			done <- w.call("alice", "syscall.ask", map[string]any{"to": "bob", "message": "what is 6×7?", "timeout_secs": 60})
		}()

		var in inboxPage
		waitInbox(t, w.eng.Store(), "bob", 1)
		w.ok("bob", "syscall.inbox", `{}`, &in)
		if len(in.Messages) != 1 || in.Messages[0].From != "alice" || in.Messages[0].Kind != store.KindAsk || in.Acked != 1 {
			t.Fatalf("bob's inbox: %+v", in)
		}
		w.ok("bob", "syscall.reply", map[string]any{"message_id": in.Messages[0].ID, "message": "42"}, nil)
		o := <-done
		if o.Status != audit.StatusSuccess {
			t.Fatalf("ask: %s", o.Result)
		}
		var a askResult
		decode(t, o, &a)
		if a.Status != "answered" || a.MessageID != in.Messages[0].ID || a.Reply == nil || a.Reply.Body != "42" || a.Reply.From != "bob" {
			t.Fatalf("ask result %+v", a)
		}
		if !strings.Contains(o.Result, "42") {
			t.Fatalf("ask text %q", o.Result)
		}
		// The reply was handed over: nothing unread is left for alice.
		w.ok("alice", "syscall.inbox", `{"unacked_only":true}`, &in)
		if len(in.Messages) != 0 {
			t.Fatalf("alice's unread after the answered ask: %+v", in)
		}
	})
}

// An ask made in one process is answered from another on the same
// database: the asker's wait is woken by the other process's event (its
// poll is an hour), on SQLite and on Postgres.
func TestAskAcrossEngines(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		dir := msgWorld(t, "alice", "bob")
		asker := open(t, dir, dsn, services.Options{AskPoll: time.Hour})
		replier := open(t, dir, dsn, services.Options{})
		done := make(chan pipeline.Outcome, 1)
		go func() {
			done <- asker.call("alice", "syscall.ask", map[string]any{"to": "bob", "message": "ping", "timeout_secs": 60})
		}()
		msgs := waitInbox(t, replier.eng.Store(), "bob", 1)
		replier.ok("bob", "syscall.reply", map[string]any{"message_id": msgs[0].ID, "message": "pong"}, nil)
		select {
		case o := <-done:
			var a askResult
			decode(t, o, &a)
			if a.Status != "answered" || a.Reply == nil || a.Reply.Body != "pong" {
				t.Fatalf("ask: %s", o.Result)
			}
		case <-time.After(time.Minute): // a bound, not a timing check
			t.Fatal("the ask was not woken by the other process's reply")
		}
	})
}

// An ask that times out says so with its message id; the late reply then
// waits in the asker's inbox.
func TestAskTimeoutLeavesTheLateReply(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		w := open(t, msgWorld(t, "alice", "bob"), dsn, services.Options{})
		o := w.ok("alice", "syscall.ask", map[string]any{"to": "bob", "message": "are you there?", "timeout_secs": 0.2}, nil)
		var a askResult
		decode(t, o, &a)
		if a.Status != "timeout" || a.MessageID == "" || !strings.Contains(o.Result, "timeout") || !strings.Contains(o.Result, a.MessageID) {
			t.Fatalf("timed out ask: %+v %q", a, o.Result)
		}
		w.ok("bob", "syscall.reply", map[string]any{"message_id": a.MessageID, "message": "late, sorry"}, nil)
		var in inboxPage
		w.ok("alice", "syscall.inbox", `{"unacked_only":true}`, &in)
		if len(in.Messages) != 1 || in.Messages[0].ReplyTo != a.MessageID || in.Messages[0].Body != "late, sorry" || in.Messages[0].Kind != store.KindReply {
			t.Fatalf("alice's inbox after the timeout: %+v", in)
		}
	})
}

// At most MaxWaiters asks wait at once; one more is refused with a clear
// error and sends nothing.
func TestAskWaiterLimit(t *testing.T) {
	w := open(t, msgWorld(t, "alice", "bob", "carol"), "", services.Options{MaxWaiters: 1})
	done := make(chan pipeline.Outcome, 1)
	go func() {
		done <- w.call("alice", "syscall.ask", map[string]any{"to": "bob", "message": "first", "timeout_secs": 60})
	}()
	msgs := waitInbox(t, w.eng.Store(), "bob", 1)
	w.fails("carol", "syscall.ask", map[string]any{"to": "bob", "message": "second"}, "already waiting")
	if got := waitInbox(t, w.eng.Store(), "bob", 1); len(got) != 1 {
		t.Fatalf("the refused ask was sent: %d messages", len(got))
	}
	w.ok("bob", "syscall.reply", map[string]any{"message_id": msgs[0].ID, "message": "ok"}, nil)
	if o := <-done; o.Status != audit.StatusSuccess {
		t.Fatal(o.Result)
	}
	// The slot is free again.
	w.ok("carol", "syscall.ask", map[string]any{"to": "bob", "message": "third", "timeout_secs": 0.05}, nil)
}

func TestAskRefusals(t *testing.T) {
	w := open(t, msgWorld(t, "alice", "bob"), "", services.Options{})
	w.fails("alice", "syscall.ask", map[string]any{"to": "nobody", "message": "hi"}, `no agent "nobody"`)
	w.fails("alice", "syscall.ask", map[string]any{"to": "alice", "message": "hi"}, "yourself")
	w.fails("alice", "syscall.ask", map[string]any{"to": "bob", "message": "  "}, "empty")
	big := strings.Repeat("x", services.MaxMessage+1)
	o := w.fails("alice", "syscall.ask", map[string]any{"to": "bob", "message": big}, "")
	if o.Kind.String() != "too_large" {
		t.Fatalf("oversized ask: kind %s, %s", o.Kind, o.Result)
	}
	for _, tool := range []string{"syscall.reply", "syscall.broadcast"} {
		args := map[string]any{"message": big, "message_id": "x"}
		if tool == "syscall.broadcast" {
			delete(args, "message_id")
		}
		if o := w.call("alice", tool, args); o.Kind.String() != "too_large" {
			t.Fatalf("oversized %s: kind %s, %s", tool, o.Kind, o.Result)
		}
	}
	if msgs, _, _ := w.eng.Store().ReadInbox(context.Background(), store.InboxQuery{Agent: "bob"}); len(msgs) != 0 {
		t.Fatalf("refused asks wrote %d messages", len(msgs))
	}
}

// No agent reads, acknowledges or answers another's messages, nor posts
// as another: the caller is the pipeline's agent, and an argument naming
// another sender or inbox is an unknown argument.
func TestMessagesAdversarial(t *testing.T) {
	w := open(t, msgWorld(t, "alice", "bob", "mallory"), "", services.Options{})
	ctx := context.Background()
	st := w.eng.Store()
	w.ok("alice", "syscall.ask", map[string]any{"to": "bob", "message": "secret", "timeout_secs": 0.01}, nil)
	toBob := waitInbox(t, st, "bob", 1)[0]

	for _, args := range []string{`{"agent":"bob"}`, `{"inbox":"bob"}`, `{"to":"bob"}`} {
		w.fails("mallory", "syscall.inbox", args, "")
	}
	var in inboxPage
	w.ok("mallory", "syscall.inbox", `{}`, &in)
	if len(in.Messages) != 0 {
		t.Fatalf("mallory read %+v", in)
	}
	if got, _ := st.GetMessage(ctx, toBob.ID); !got.AckedAt.IsZero() {
		t.Fatal("mallory's inbox call acknowledged bob's message")
	}
	w.fails("mallory", "syscall.reply", map[string]any{"message_id": toBob.ID, "message": "I am bob"}, "no message")
	if _, err := st.FindReply(ctx, toBob.ID); err == nil {
		t.Fatal("mallory's reply to bob's message was stored")
	}
	w.fails("mallory", "syscall.ask", map[string]any{"to": "bob", "from": "alice", "message": "x"}, "from")
	w.fails("mallory", "syscall.broadcast", map[string]any{"from": "alice", "message": "x"}, "from")
	w.fails("mallory", "syscall.reply", map[string]any{"message_id": toBob.ID, "from": "bob", "message": "x"}, "from")
	// A call that names no agent acts as nobody.
	o := w.eng.Pipeline().Execute(ctx, pipeline.Call{Tool: "syscall.inbox"})
	if o.Status == audit.StatusSuccess {
		t.Fatal("an inbox call with no agent succeeded")
	}
	msgs, _, _ := st.ReadInbox(ctx, store.InboxQuery{Agent: "bob"})
	if len(msgs) != 1 || msgs[0].From != "alice" {
		t.Fatalf("bob's inbox after mallory's attempts: %v", msgs)
	}
}

// The inbox pages, keeps to its lookback window and refuses bounds.
func TestInboxPagesAndBounds(t *testing.T) {
	backends(t, func(t *testing.T, dsn string) {
		dir := msgWorld(t, "alice", "bob")
		w := open(t, dir, dsn, services.Options{})
		for i := range 5 {
			w.ok("alice", "syscall.broadcast", map[string]any{"message": fmt.Sprintf("news %d", i)}, nil)
		}
		// Half an hour later, the default window (10 minutes) is empty and
		// a 60-minute one has them all.
		later := open(t, dir, dsn, services.Options{Clock: func() time.Time { return time.Now().Add(30 * time.Minute) }})
		var in inboxPage
		later.ok("bob", "syscall.inbox", `{}`, &in)
		if len(in.Messages) != 0 {
			t.Fatalf("the 10-minute window has %d messages from 30 minutes ago", len(in.Messages))
		}
		var bodies []string
		cursor := ""
		for range 10 {
			in = inboxPage{}
			later.ok("bob", "syscall.inbox", map[string]any{"lookback_minutes": 60, "limit": 2, "cursor": cursor}, &in)
			for _, m := range in.Messages {
				bodies = append(bodies, m.Body)
			}
			if len(in.Messages) > 2 {
				t.Fatalf("a page of %d messages, limit 2", len(in.Messages))
			}
			if cursor = in.NextCursor; cursor == "" {
				break
			}
		}
		if want := []string{"news 0", "news 1", "news 2", "news 3", "news 4"}; !slices.Equal(bodies, want) {
			t.Fatalf("paged inbox %v, want %v", bodies, want)
		}
		// Everything read was acknowledged.
		in = inboxPage{}
		w.ok("bob", "syscall.inbox", `{"unacked_only":true}`, &in)
		if len(in.Messages) != 0 {
			t.Fatalf("unread after reading every page: %+v", in)
		}
		w.fails("bob", "syscall.inbox", `{"lookback_minutes":61}`, "")
		w.fails("bob", "syscall.inbox", `{"limit":1000}`, "")
		w.fails("bob", "syscall.inbox", `{"cursor":"garbage"}`, "")
	})
}

func decode(t testing.TB, o pipeline.Outcome, v any) {
	t.Helper()
	b, err := json.Marshal(o.Value)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("value %s: %v", b, err)
	}
}
