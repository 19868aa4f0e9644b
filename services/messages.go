package services

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
	args "github.com/armory-dev/armory/toolargs"
)

// Messages: syscall.ask and syscall.broadcast, with the reply
// and inbox tools an agent needs to take part (Thinkroid's check_messages:
// a lookback window of 10 minutes by default, at most 60). Every message
// is a row of the store's inboxes (store.Inboxes), the truth; after a
// write the module publishes a "message" event (EventMessage), which only
// says that an inbox changed. A waiting ask listens to this process's
// events and to the other processes' (the engine relays them through the
// store), and re-reads the store when woken, with a bounded poll as the
// fallback for an event lost on the way.

// Event kinds the messages and chats publish (Contribution.EventKinds).
// A "message" event names the recipient (Event.Agent; "" for a broadcast,
// which publishes one event for all its recipients) and the message
// (Event.Ref); a "chat" event names the chat (Event.Ref) and the sender
// (Event.Agent), for gated chats too.
const (
	EventMessage = "message"
	EventChat    = "chat"
)

// Bounds of the messages.
const (
	// MaxMessage bounds a message's text (ask, reply, broadcast, chat), in
	// bytes: the store's bound.
	MaxMessage = store.MaxBody
	// DefaultAskTimeout and MaxAskTimeout bound how long syscall.ask waits
	// for its reply (timeout_secs).
	DefaultAskTimeout = 60 * time.Second
	MaxAskTimeout     = 10 * time.Minute
	// DefaultMaxWaiters bounds the asks waiting at once in one process
	// (Options.MaxWaiters).
	DefaultMaxWaiters = 256
	// DefaultAskPoll is how often a waiting ask re-reads the store when no
	// event woke it (Options.AskPoll).
	DefaultAskPoll = 500 * time.Millisecond
	// DefaultLookback and MaxLookback bound syscall.inbox's window, in
	// minutes.
	DefaultLookback = 10
	MaxLookback     = 60
	// DefaultInboxPage and MaxInboxPage bound a page of syscall.inbox.
	DefaultInboxPage = 20
	MaxInboxPage     = 100
	// subscriptionLinger is how long the module keeps listening to events
	// after its last waiter left (so that a run of asks does not subscribe
	// anew for each; on SQLite a listener makes the other processes write
	// their events, so the module does not listen for ever).
	subscriptionLinger = time.Minute
)

var msgManifest = armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatAgent,
	Capabilities: []armory.Capability{armory.CapReadState, armory.CapWriteState}}

var askTimeouts = args.Timeouts{}.WithDefaults(DefaultAskTimeout, MaxAskTimeout)

// MessageView is a message as the tools show it to its recipient.
type MessageView struct {
	ID        string    `json:"id"`
	From      string    `json:"from"`
	Kind      string    `json:"kind"`
	Subject   string    `json:"subject,omitempty"`
	Body      string    `json:"body"`
	ReplyTo   string    `json:"reply_to,omitempty"`
	Chat      string    `json:"chat,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Acked     bool      `json:"acked,omitempty"`
}

func viewMessage(m *store.Message) MessageView {
	return MessageView{ID: m.ID, From: m.From, Kind: m.Kind, Subject: m.Subject, Body: m.Body, ReplyTo: m.ReplyTo,
		Chat: m.Chat, CreatedAt: m.CreatedAt, Acked: !m.AckedAt.IsZero()}
}

// checkBody returns a failed result unless body is a message's text: not
// blank, at most MaxMessage bytes.
func checkBody(what, body string) (armory.Result, bool) {
	switch {
	case strings.TrimSpace(body) == "":
		return armory.Failf(armory.KindInvalid, "%s is empty; write the text to send", what), false
	case len(body) > MaxMessage:
		return armory.Failf(armory.KindTooLarge, "%s is %d bytes, more than the %d allowed; send a shorter one (or put the text in a file and send its path)", what, len(body), MaxMessage), false
	}
	return armory.Result{}, true
}

// decodeMessage decodes the call's arguments into v (as decode) and then
// checks *text, the message text v holds, with checkBody. On failure it
// returns the failed result and false.
func (c call) decodeMessage(v any, text *string) (armory.Result, bool) {
	if err := c.decode(v); err != nil {
		return armory.FailErr(err), false
	}
	return checkBody("message", *text)
}

// boundedInt returns v, the argument name, or def when v is 0; a failed
// result when v is outside 1..max.
func boundedInt(name string, v, max, def int) (int, armory.Result, bool) {
	switch {
	case v < 0 || v > max:
		return 0, armory.Failf(armory.KindInvalid, "%s must be between 1 and %d", name, max), false
	case v == 0:
		return def, armory.Result{}, true
	}
	return v, armory.Result{}, true
}

// storeFail turns a store error into a failed result of its kind.
func storeFail(op string, err error) armory.Result { return armory.FailErr(store.Err(op, err)) }

// askTool is syscall.ask: send to another agent and wait for the reply.
func (m *Module) askTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name: "syscall.ask",
			Description: "Send a message to another agent and wait for its reply (the agent answers with syscall.reply). " +
				"If no reply comes in time the result says timeout with the message id; a late reply arrives in your inbox (syscall.inbox).",
			InputSchema: schema([]string{"to", "message"},
				prop("to", str("The id of the agent to ask.")),
				prop("message", str("The question or request (at most 64 KiB).")),
				askTimeouts.Prop("How long to wait for the reply, in seconds")),
		},
		man: msgManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				To      string  `json:"to"`
				Message string  `json:"message"`
				Timeout float64 `json:"timeout_secs"`
			}
			if r, ok := c.decodeMessage(&a, &a.Message); !ok {
				return r
			}
			wait, err := askTimeouts.Call(c.op, a.Timeout)
			if err != nil {
				return armory.FailErr(err)
			}
			if a.To == c.agent {
				return c.fail(armory.KindInvalid, "you cannot ask yourself; name another agent in to")
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			if r, ok := m.checkAgent(ctx, st, "to", a.To); !ok {
				return r
			}
			return m.ask(ctx, st, c.agent, a.To, a.Message, wait)
		},
	}
}

// AskResult is syscall.ask's result.
type AskResult struct {
	// Status is "answered" or "timeout".
	Status    string       `json:"status"`
	MessageID string       `json:"message_id"`
	Reply     *MessageView `json:"reply,omitempty"`
	WaitedMS  int64        `json:"waited_ms"`
}

// ask sends from's question to to and waits for the reply, at most wait.
func (m *Module) ask(ctx context.Context, st store.Store, from, to, body string, wait time.Duration) armory.Result {
	w, err := m.waiters.add(m, from)
	if err != nil {
		return armory.FailErr(err)
	}
	defer m.waiters.remove(w)
	msg := &store.Message{To: to, From: from, Kind: store.KindAsk, Body: body}
	if err := m.deliver(ctx, st, []*store.Message{msg}, "ask from "+from); err != nil {
		return storeFail("syscall.ask", err)
	}
	start := time.Now()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	poll := time.NewTicker(m.opts.AskPoll)
	defer poll.Stop()
	// The waiter was added before the ask was sent, so the reply's event
	// wakes it: the store is read on a wake-up (or on the poll, the bound
	// when an event is lost), not before — there can be no reply yet. The
	// read and the acknowledgement of the reply (so that it does not show
	// again among the unread messages of the inbox) are one statement.
	for {
		select {
		case <-w.wake:
		case <-poll.C:
		case <-timer.C:
			res := AskResult{Status: "timeout", MessageID: msg.ID, WaitedMS: time.Since(start).Milliseconds()}
			r := jsonResult(res)
			r.Text = fmt.Sprintf("timeout: %s did not reply within %s to message %s. The message stays in its inbox; a later reply will arrive in your inbox (read it with syscall.inbox).", to, wait, msg.ID)
			return r
		case <-ctx.Done():
			return armory.Failf(armory.KindTimeout, "the call ended before %s replied to message %s (%v); a later reply will arrive in your inbox", to, msg.ID, ctx.Err())
		}
		rep, err := st.TakeReply(ctx, from, msg.ID)
		switch {
		case err == nil:
			v := viewMessage(rep)
			res := AskResult{Status: "answered", MessageID: msg.ID, Reply: &v, WaitedMS: time.Since(start).Milliseconds()}
			r := jsonResult(res)
			r.Text = fmt.Sprintf("%s replied (message %s):\n%s", rep.From, rep.ID, rep.Body)
			return r
		case !errors.Is(err, store.ErrNotFound):
			return storeFail("syscall.ask", err)
		}
	}
}

// replyTool is syscall.reply: answer a message of one's own inbox.
func (m *Module) replyTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.reply",
			Description: "Reply to a message in your inbox (an ask, a direct message or a chat message): the reply goes to its sender, and wakes it if it is waiting in syscall.ask. The message is marked read.",
			InputSchema: schema([]string{"message_id", "message"},
				prop("message_id", str("The id of the message you answer (from syscall.inbox).")),
				prop("message", str("Your reply (at most 64 KiB)."))),
		},
		man: msgManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				MessageID string `json:"message_id"`
				Message   string `json:"message"`
			}
			if r, ok := c.decodeMessage(&a, &a.Message); !ok {
				return r
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			orig, err := st.GetMessage(ctx, a.MessageID)
			if errors.Is(err, store.ErrNotFound) || err == nil && orig.To != c.agent {
				// Another agent's message is as unknown as a missing one: an
				// agent learns nothing of the others' inboxes.
				return c.fail(armory.KindNotFound, "there is no message %q in your inbox; syscall.inbox lists the messages you can reply to", a.MessageID)
			}
			if err != nil {
				return storeFail(c.op, err)
			}
			rep := &store.Message{To: orig.From, From: c.agent, Kind: store.KindReply, ReplyTo: orig.ID, Body: a.Message}
			// The reply and the acknowledgement of the message answered
			// commit together.
			if err := st.SendReply(ctx, rep); err != nil {
				return storeFail(c.op, err)
			}
			m.publishMessage(rep)
			r := jsonResult(map[string]string{"message_id": rep.ID, "to": rep.To, "reply_to": orig.ID})
			r.Text = fmt.Sprintf("Replied to %s (message %s answers %s).", rep.To, rep.ID, orig.ID)
			return r
		},
	}
}

// InboxPage is syscall.inbox's result.
type InboxPage struct {
	Messages []MessageView `json:"messages"`
	// Acked is how many of them this call acknowledged.
	Acked int `json:"acked"`
	// NextCursor continues the listing ("" at the end).
	NextCursor string `json:"next_cursor,omitempty"`
}

// inboxTool is syscall.inbox (Thinkroid's check_messages): read and
// acknowledge one's own inbox.
func (m *Module) inboxTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.inbox",
			Description: "Read your inbox: messages, asks, replies, broadcasts and chat messages of the last lookback_minutes (default 10, at most 60), oldest first; the messages listed are marked read. Reply with syscall.reply.",
			InputSchema: schema(nil,
				prop("lookback_minutes", fmt.Sprintf(`{"type":"integer","minimum":1,"maximum":%d,"description":"How far back to read, in minutes (default %d, at most %d)."}`, MaxLookback, DefaultLookback, MaxLookback)),
				prop("limit", fmt.Sprintf(`{"type":"integer","minimum":1,"maximum":%d,"description":"The most messages to return (default %d, at most %d)."}`, MaxInboxPage, DefaultInboxPage, MaxInboxPage)),
				prop("unacked_only", boolean("Only messages not read yet.")),
				prop("cursor", str("next_cursor of the previous page, to read on."))),
		},
		man: msgManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Lookback int    `json:"lookback_minutes"`
				Limit    int    `json:"limit"`
				Unacked  bool   `json:"unacked_only"`
				Cursor   string `json:"cursor"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			lookback, r, ok := boundedInt("lookback_minutes", a.Lookback, MaxLookback, DefaultLookback)
			if !ok {
				return r
			}
			limit, r, ok := boundedInt("limit", a.Limit, MaxInboxPage, DefaultInboxPage)
			if !ok {
				return r
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			msgs, next, err := st.ReadInbox(ctx, store.InboxQuery{Agent: c.agent, Unacked: a.Unacked,
				Since: m.now().Add(-minutes(lookback)), Page: store.Page{Limit: limit, Cursor: a.Cursor}})
			if err != nil {
				return storeFail(c.op, err)
			}
			out := InboxPage{Messages: make([]MessageView, 0, len(msgs)), NextCursor: next}
			var ids []string
			for _, msg := range msgs {
				out.Messages = append(out.Messages, viewMessage(msg))
				if msg.AckedAt.IsZero() {
					ids = append(ids, msg.ID)
				}
			}
			if len(ids) > 0 {
				if out.Acked, err = st.AckMessages(ctx, c.agent, ids); err != nil {
					return storeFail(c.op, err)
				}
			}
			return jsonResult(out)
		},
	}
}

// broadcastTool is syscall.broadcast: one message to every other agent.
func (m *Module) broadcastTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.broadcast",
			Description: "Send a message to every other agent of the world (it arrives in their inboxes).",
			InputSchema: schema([]string{"message"}, prop("message", str("The text to send (at most 64 KiB)."))),
		},
		man: msgManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Message string `json:"message"`
			}
			if r, ok := c.decodeMessage(&a, &a.Message); !ok {
				return r
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			msgs := fanOut(store.Message{From: c.agent, Kind: store.KindMessage, Subject: "broadcast", Body: a.Message}, m.agentIDs())
			if len(msgs) == 0 {
				return c.fail(armory.KindInvalid, "there is no other agent in this world to broadcast to")
			}
			if err := m.deliver(ctx, st, msgs, "broadcast from "+c.agent); err != nil {
				return storeFail(c.op, err)
			}
			r := jsonResult(map[string]any{"delivered": len(msgs)})
			r.Text = fmt.Sprintf("Broadcast to %d agents.", len(msgs))
			return r
		},
	}
}

// agentIDs returns the world's agents, sorted.
func (m *Module) agentIDs() []string {
	m.mu.Lock()
	r := m.roster
	m.mu.Unlock()
	if r == nil {
		return nil
	}
	var out []string
	for _, ag := range r.Agents() {
		out = append(out, ag.ID)
	}
	slices.Sort(out)
	return out
}

// knownAgent reports whether id is an agent of the world: one of the
// roster's, or one created at run time (store.Agents).
func (m *Module) knownAgent(ctx context.Context, st agentGetter, id string) (bool, error) {
	m.mu.Lock()
	r := m.roster
	m.mu.Unlock()
	if r != nil {
		if _, err := r.Agent(id); err == nil {
			return true, nil
		}
	}
	if id == "" || len(id) > store.MaxName {
		return false, nil
	}
	switch _, err := st.GetAgent(ctx, id); {
	case err == nil:
		return true, nil
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrInvalid):
		return false, nil
	default:
		return false, err
	}
}

// agentGetter reads the agents created at run time.
type agentGetter interface {
	GetAgent(ctx context.Context, id string) (*store.Agent, error)
}

// checkAgent returns a failed result unless id, the argument what, names
// an agent of the world.
func (m *Module) checkAgent(ctx context.Context, st store.Store, what, id string) (armory.Result, bool) {
	ok, err := m.knownAgent(ctx, st, id)
	switch {
	case err != nil:
		return storeFail("services", err), false
	case !ok:
		return armory.Failf(armory.KindNotFound, "%s: there is no agent %q in this world (syscall.agent.list lists them)", what, id), false
	}
	return armory.Result{}, true
}

// fanOut returns a copy of msg addressed to each of to but msg.From (the
// sender), in to's order.
func fanOut(msg store.Message, to []string) []*store.Message {
	out := make([]*store.Message, 0, len(to))
	for _, id := range to {
		if id != msg.From {
			cp := msg
			cp.To = id
			out = append(out, &cp)
		}
	}
	return out
}

// deliver puts msgs in their recipients' inboxes (one SendMessages: all or
// none) and publishes their "message" events (publishDeliveries; what
// names the fan-out in the one event past maxDeliveryEvents). The store's
// error is returned as it is.
func (m *Module) deliver(ctx context.Context, st store.Inboxes, msgs []*store.Message, what string) error {
	if err := st.SendMessages(ctx, msgs); err != nil {
		return err
	}
	m.publishDeliveries(msgs, what)
	return nil
}

// publishMessage publishes the "message" event of msg, delivered to
// msg.To.
func (m *Module) publishMessage(msg *store.Message) {
	m.publish(pipeline.Event{Kind: EventMessage, Agent: msg.To, Ref: msg.ID, Message: msg.Kind + " from " + msg.From})
}

// maxDeliveryEvents bounds the "message" events of one fan-out (a
// broadcast, a chat message): past it one event with no agent stands for
// all the deliveries.
const maxDeliveryEvents = 32

// publishDeliveries publishes the "message" events of msgs, one per
// message up to maxDeliveryEvents, else one for all (Agent "", Ref the
// first message).
func (m *Module) publishDeliveries(msgs []*store.Message, what string) {
	if len(msgs) <= maxDeliveryEvents {
		for _, msg := range msgs {
			m.publishMessage(msg)
		}
		return
	}
	m.publish(pipeline.Event{Kind: EventMessage, Ref: msgs[0].ID, Message: fmt.Sprintf("%s to %d agents", what, len(msgs))})
}

// publish publishes ev (best effort: the store has the record).
func (m *Module) publish(ev pipeline.Event) {
	m.mu.Lock()
	env := m.env
	m.mu.Unlock()
	if err := env.Publish(ev); err != nil {
		m.logger().Warn("services: event not published", "kind", ev.Kind, "ref", ev.Ref, "err", err)
	}
}
