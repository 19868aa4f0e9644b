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
)

// Chats: the world's shared channels. A chat has a creator, who alone
// invites and removes members, and members; skip_creator leaves the
// creator out of the members (a moderator). A message sent to a chat goes
// to its history and, unless the chat is gated, to every other member's
// inbox (kind "chat"); a gated chat delivers to no inbox (no fan-out
// storm): members read its history, and a moderator grants turns with
// syscall.ask. The members and the creator may send to a chat and read
// its history; nobody else learns more than that it does not exist for
// them.

// Bounds of the chats.
const (
	// MaxChatMembers bounds a chat's members (the store's bound).
	MaxChatMembers = store.MaxBatch
	// DefaultHistory and MaxHistory bound a page of syscall.chat.history.
	DefaultHistory = 50
	MaxHistory     = 200
	// MaxChatList bounds a page of syscall.chat.list.
	MaxChatList = 200
)

var (
	chatWriteManifest = armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatAgent,
		Capabilities: []armory.Capability{armory.CapReadState, armory.CapWriteState}}
	chatReadManifest = armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatAgent,
		Capabilities: []armory.Capability{armory.CapReadState}}
)

// ChatView is a chat as the tools show it.
type ChatView struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Creator   string    `json:"creator"`
	Gated     bool      `json:"gated"`
	Members   []string  `json:"members,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

func viewChat(c *store.Chat) ChatView {
	return ChatView{ID: c.ID, Name: c.Name, Creator: c.Creator, Gated: c.Gated, Members: c.Members, CreatedAt: c.CreatedAt}
}

// chatFor returns chat id if agent may use it (a member or its creator).
// An unknown chat and one agent may not see fail alike, with KindNotFound.
func (m *Module) chatFor(ctx context.Context, st store.Store, agent, id string) (*store.Chat, armory.Result, bool) {
	c, err := st.GetChat(ctx, id)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) || err == nil && c.Creator != agent && !slices.Contains(c.Members, agent) {
		return nil, armory.Failf(armory.KindNotFound, "there is no chat %q that you belong to (syscall.chat.list lists yours)", id), false
	}
	if err != nil {
		return nil, storeFail("chat", err), false
	}
	return c, armory.Result{}, true
}

// chatCreateTool is syscall.chat.create.
func (m *Module) chatCreateTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.chat.create",
			Description: "Create a named shared chat with members (you are added unless skip_creator: a moderator). Only you, its creator, may invite or remove members. A gated chat keeps messages in its history only and delivers none to inboxes (use it for 3+ members with a moderator who gives turns with syscall.ask).",
			InputSchema: schema([]string{"name", "members"},
				prop("name", str("The chat's name.")),
				prop("members", stringList("The agents to add (ids).")),
				prop("skip_creator", boolean("Do not add yourself as a member (a moderator).")),
				prop("gated", boolean("Deliver no message to members' inboxes; they read syscall.chat.history."))),
		},
		man: chatWriteManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Name        string   `json:"name"`
				Members     []string `json:"members"`
				SkipCreator bool     `json:"skip_creator"`
				Gated       bool     `json:"gated"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			switch {
			case strings.TrimSpace(a.Name) == "":
				return c.fail(armory.KindInvalid, "name is empty; name the chat")
			case len(a.Name) > store.MaxName:
				return c.fail(armory.KindTooLarge, "name is %d bytes; at most %d", len(a.Name), store.MaxName)
			case len(a.Members) > MaxChatMembers:
				return c.fail(armory.KindTooLarge, "%d members; a chat has at most %d", len(a.Members), MaxChatMembers)
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			members := slices.Clone(a.Members)
			if !a.SkipCreator {
				members = append(members, c.agent)
			}
			slices.Sort(members)
			members = slices.Compact(members)
			if a.SkipCreator {
				members = slices.DeleteFunc(members, func(s string) bool { return s == c.agent })
			}
			for _, id := range members {
				if r, ok := m.checkAgent(ctx, st, "members", id); !ok {
					return r
				}
			}
			ch := &store.Chat{Name: a.Name, Creator: c.agent, Gated: a.Gated, Members: members}
			if err := st.CreateChat(ctx, ch); err != nil {
				return storeFail(c.op, err)
			}
			r := jsonResult(viewChat(ch))
			r.Text = fmt.Sprintf("Created chat %q (id %s, %d members%s).", ch.Name, ch.ID, len(ch.Members), map[bool]string{true: ", gated"}[ch.Gated])
			return r
		},
	}
}

// chatSendTool is syscall.chat.send.
func (m *Module) chatSendTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.chat.send",
			Description: "Post a message to a chat you belong to (or created). It is kept in the chat's history and delivered to every other member's inbox, unless the chat is gated.",
			InputSchema: schema([]string{"chat_id", "message"},
				prop("chat_id", str("The chat's id.")),
				prop("message", str("The text to post (at most 64 KiB)."))),
		},
		man: chatWriteManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Chat    string `json:"chat_id"`
				Message string `json:"message"`
			}
			if r, ok := c.decodeMessage(&a, &a.Message); !ok {
				return r
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			ch, r, ok := m.chatFor(ctx, st, c.agent, a.Chat)
			if !ok {
				return r
			}
			cm, delivered, err := m.sendChat(ctx, st, ch, c.agent, a.Message)
			if err != nil {
				return armory.FailErr(err)
			}
			r = jsonResult(map[string]any{"id": cm.ID, "chat_id": ch.ID, "delivered": delivered, "gated": ch.Gated})
			if ch.Gated {
				r.Text = fmt.Sprintf("Posted to gated chat %q (message %s): kept in its history, delivered to no inbox.", ch.Name, cm.ID)
			} else {
				r.Text = fmt.Sprintf("Posted to chat %q (message %s), delivered to %d members.", ch.Name, cm.ID, delivered)
			}
			return r
		},
	}
}

// sendChat appends from's body to ch's history and, unless ch is gated,
// delivers it to every other member's inbox in one SendMessages call. The
// history is written first: when the delivery fails the error says that
// the message is in the history only. It publishes a "chat" event, and a
// "message" event per delivery (one for all, past maxDeliveryEvents).
func (m *Module) sendChat(ctx context.Context, st store.Store, ch *store.Chat, from, body string) (*store.ChatMessage, int, error) {
	const op = "syscall.chat.send"
	cm := &store.ChatMessage{Chat: ch.ID, From: from, Body: body}
	if err := st.AppendChatMessage(ctx, cm); err != nil {
		return nil, 0, store.Err(op, err)
	}
	m.publish(pipeline.Event{Kind: EventChat, Agent: from, Ref: ch.ID, Message: "chat message " + cm.ID})
	if ch.Gated {
		return cm, 0, nil
	}
	msgs := fanOut(store.Message{From: from, Kind: store.KindChat, Chat: ch.ID, Subject: ch.Name, Body: body}, ch.Members)
	if len(msgs) == 0 {
		return cm, 0, nil
	}
	if err := m.deliver(ctx, st, msgs, "chat "+ch.ID+" from "+from); err != nil {
		return cm, 0, armory.E(op, store.Kind(err), "the message "+cm.ID+" is in the chat's history but could not be delivered to the members' inboxes", err)
	}
	return cm, len(msgs), nil
}

// chatMemberTool is syscall.chat.invite (add) or syscall.chat.remove.
func (m *Module) chatMemberTool(add bool) *tool {
	name, desc := "syscall.chat.remove", "Remove an agent from a chat you created (only the creator may)."
	if add {
		name, desc = "syscall.chat.invite", "Add an agent to a chat you created (only the creator may)."
	}
	return &tool{
		spec: armory.Spec{
			Name:        name,
			Description: desc,
			InputSchema: schema([]string{"chat_id", "agent"},
				prop("chat_id", str("The chat's id.")),
				prop("agent", str("The agent's id."))),
		},
		man: chatWriteManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Chat  string `json:"chat_id"`
				Agent string `json:"agent"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			ch, r, ok := m.chatFor(ctx, st, c.agent, a.Chat)
			if !ok {
				return r
			}
			if ch.Creator != c.agent {
				return c.fail(armory.KindPermission, "only the chat's creator (%s) may invite or remove members", ch.Creator)
			}
			var changed bool
			if add {
				if r, ok := m.checkAgent(ctx, st, "agent", a.Agent); !ok {
					return r
				}
				changed, err = st.AddChatMember(ctx, ch.ID, a.Agent)
			} else {
				changed, err = st.RemoveChatMember(ctx, ch.ID, a.Agent)
			}
			if err != nil {
				return storeFail(c.op, err)
			}
			verb := map[bool]string{true: "added to", false: "removed from"}[add]
			r = jsonResult(map[string]any{"chat_id": ch.ID, "agent": a.Agent, "changed": changed})
			if changed {
				r.Text = fmt.Sprintf("%s %s chat %q.", a.Agent, verb, ch.Name)
			} else {
				r.Text = fmt.Sprintf("Nothing to do: %s was %s a member of chat %q.", a.Agent, map[bool]string{true: "already", false: "not"}[add], ch.Name)
			}
			return r
		},
	}
}

func (m *Module) chatInviteTool() *tool { return m.chatMemberTool(true) }
func (m *Module) chatRemoveTool() *tool { return m.chatMemberTool(false) }

// chatListTool is syscall.chat.list.
func (m *Module) chatListTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.chat.list",
			Description: "List the chats you are a member of, oldest first.",
			InputSchema: schema(nil,
				prop("limit", fmt.Sprintf(`{"type":"integer","minimum":1,"maximum":%d,"description":"The most chats to return (default %d)."}`, MaxChatList, store.DefaultPage)),
				prop("cursor", str("next_cursor of the previous page, to read on."))),
		},
		man: chatReadManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Limit  int    `json:"limit"`
				Cursor string `json:"cursor"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			limit, r, ok := boundedInt("limit", a.Limit, MaxChatList, 0) // 0: the store's default page
			if !ok {
				return r
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			chats, next, err := st.ListChats(ctx, c.agent, store.Page{Limit: limit, Cursor: a.Cursor})
			if err != nil {
				return storeFail(c.op, err)
			}
			out := struct {
				Chats      []ChatView `json:"chats"`
				NextCursor string     `json:"next_cursor,omitempty"`
			}{Chats: make([]ChatView, 0, len(chats)), NextCursor: next}
			for _, ch := range chats {
				out.Chats = append(out.Chats, viewChat(ch))
			}
			return jsonResult(out)
		},
	}
}

// HistoryPage is a page of a chat's history, oldest first.
type HistoryPage struct {
	Messages []*store.ChatMessage `json:"messages"`
	// NextCursor continues with older messages ("" at the start).
	NextCursor string `json:"next_cursor,omitempty"`
}

// chatHistoryTool is syscall.chat.history.
func (m *Module) chatHistoryTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name:        "syscall.chat.history",
			Description: "Read a chat's recent messages (members and its creator only), oldest first; next_cursor continues with older ones.",
			InputSchema: schema([]string{"chat_id"},
				prop("chat_id", str("The chat's id.")),
				prop("limit", fmt.Sprintf(`{"type":"integer","minimum":1,"maximum":%d,"description":"The most messages to return (default %d)."}`, MaxHistory, DefaultHistory)),
				prop("cursor", str("next_cursor of the previous page, to read older messages."))),
		},
		man: chatReadManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Chat   string `json:"chat_id"`
				Limit  int    `json:"limit"`
				Cursor string `json:"cursor"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			limit, r, ok := boundedInt("limit", a.Limit, MaxHistory, DefaultHistory)
			if !ok {
				return r
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			ch, r, ok := m.chatFor(ctx, st, c.agent, a.Chat)
			if !ok {
				return r
			}
			msgs, next, err := st.ChatHistory(ctx, ch.ID, store.Page{Limit: limit, Cursor: a.Cursor})
			if err != nil {
				return storeFail(c.op, err)
			}
			if msgs == nil {
				msgs = []*store.ChatMessage{}
			}
			return jsonResult(HistoryPage{Messages: msgs, NextCursor: next})
		},
	}
}
