package services

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// Channels: the channel tools (channel.send, channel.file_attach,
// channel.handoff) and syscalls (syscall.channel.send,
// syscall.channel.handoff), "always registered when channel context
// exists". A REST or MCP caller that relays an external channel (a chat
// thread, a ticket) names the conversation in its calls (the call's
// channel context, pipeline.Call.Channel); the tools act on that
// conversation, never on one named in their arguments. Their manifests set
// NeedsChannel, so the pipeline refuses them at lookup for a call that
// names no conversation, and listings without one omit them.
//
// A conversation is a row of the store (store.Channels): the first agent
// to make a call in it holds it, until it hands it off. The module's gate
// (AdmitChannel, a pipeline.ChannelGate) claims the conversation on a
// call's first naming of it and refuses any call of an agent that does
// not hold it, saying who does. What the agents post is kept as the
// conversation's messages, which the caller reads back
// (GET /api/channels/{id}/messages); each write publishes a "channel"
// event (EventChannel) that names the conversation (Event.Ref).

// EventChannel is the kind of the event a conversation's new message
// publishes: Agent is the agent that wrote it, Ref the conversation,
// Status the message's kind (store.ChannelSend, ChannelHandoff,
// ChannelAttach) and Message a short summary.
const EventChannel = "channel"

// maxNote bounds a handoff's note: the inbox notice that carries it, with
// its own text around it, stays within the store's MaxBody.
const maxNote = MaxMessage - 1024

// MaxAttachBytes bounds a file channel.file_attach attaches.
const MaxAttachBytes = 10 << 20

// channelManifest is the manifest of the channel tools that post.
var channelManifest = armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatAgent,
	Capabilities: []armory.Capability{armory.CapWriteState, armory.CapUserInteraction}, NeedsChannel: true}

// AdmitChannel implements pipeline.ChannelGate: it claims conversation
// channel for agent when nobody holds it yet and refuses (KindConflict)
// the call of an agent that does not hold it, naming the one that does.
// A store failure refuses the call (KindUnavailable): the gate fails
// closed.
func (g *agentGate) AdmitChannel(ctx context.Context, agent, channel string) (string, error) {
	st, err := g.m.store(ctx)
	if err != nil {
		return "", err
	}
	ch, err := st.ClaimChannel(ctx, channel, agent)
	if err != nil {
		return "", armory.E("", armory.KindUnavailable, "the conversation "+quote(channel)+" could not be read: "+err.Error())
	}
	if ch.Holder != agent {
		return ch.Holder, armory.E("", armory.KindConflict, fmt.Sprintf(
			"conversation %s is held by agent %s (it was handed off): agent %s no longer acts in it. Stop here; the caller should send this conversation to %s",
			quote(channel), ch.Holder, agent, ch.Holder))
	}
	return ch.Holder, nil
}

var _ pipeline.ChannelGate = (*agentGate)(nil)

// channelOf returns the conversation of the call, or a failed result
// (never: the pipeline refuses a NeedsChannel tool without one; a library
// caller that runs the tool directly may not have set it).
func channelOf(c call) (string, armory.Result, bool) {
	if c.inv.Channel == "" {
		return "", armory.Failf(armory.KindInvalid, "%s acts on the conversation the call names, and this call names none", c.op), false
	}
	return c.inv.Channel, armory.Result{}, true
}

// channelSendTool is channel.send or syscall.channel.send (the same
// tool under its two names).
func (m *Module) channelSendTool(name, desc string) *tool {
	return &tool{
		spec: armory.Spec{Name: name, Description: desc,
			InputSchema: schema([]string{"message"}, prop("message", str("The text to post (at most 64 KiB).")))},
		man: channelManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Message string `json:"message"`
			}
			if r, ok := c.decodeMessage(&a, &a.Message); !ok {
				return r
			}
			ch, r, ok := channelOf(c)
			if !ok {
				return r
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			msg := &store.ChannelMessage{Channel: ch, From: c.agent, Kind: store.ChannelSend, Body: a.Message}
			if err := st.AppendChannelMessage(ctx, msg); err != nil {
				return channelFail(c, ch, err)
			}
			m.publishChannel(msg, "message from "+c.agent)
			res := jsonResult(map[string]any{"channel": ch, "message_id": msg.ID, "seq": msg.Seq})
			res.Text = fmt.Sprintf("Posted to conversation %s (message %s).", quote(ch), msg.ID)
			return res
		},
	}
}

// channelFail is the result of a store error on conversation ch.
func channelFail(c call, ch string, err error) armory.Result {
	if errors.Is(err, store.ErrConflict) {
		return c.fail(armory.KindConflict, "conversation %s is no longer yours (%v); stop acting in it", quote(ch), err)
	}
	return storeFail(c.op, err)
}

// channelHandoffTool is channel.handoff or syscall.channel.handoff.
func (m *Module) channelHandoffTool(name, desc string) *tool {
	return &tool{
		spec: armory.Spec{Name: name, Description: desc,
			InputSchema: schema([]string{"agent"},
				prop("agent", str("The id of the agent that takes the conversation over.")),
				prop("note", str("What the new agent should know (kept with the handoff and sent to its inbox)."))),
		},
		man: channelManifest,
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Agent string `json:"agent"`
				Note  string `json:"note"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			if len(a.Note) > maxNote {
				return c.fail(armory.KindTooLarge, "note is %d bytes, more than the %d allowed", len(a.Note), maxNote)
			}
			ch, r, ok := channelOf(c)
			if !ok {
				return r
			}
			if a.Agent == c.agent {
				return c.fail(armory.KindInvalid, "you hold conversation %s already; name another agent", quote(ch))
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			if r, ok := m.checkAgent(ctx, st, "agent", a.Agent); !ok {
				return r
			}
			msg := &store.ChannelMessage{Channel: ch, From: c.agent, Kind: store.ChannelHandoff, Body: a.Note}
			if _, err := st.HandoffChannel(ctx, msg, a.Agent); err != nil {
				return channelFail(c, ch, err)
			}
			m.publishChannel(msg, fmt.Sprintf("handed off by %s to %s", c.agent, a.Agent))
			body := fmt.Sprintf("Agent %s handed you conversation %s: its caller's next calls naming it are yours.", c.agent, quote(ch))
			if strings.TrimSpace(a.Note) != "" {
				body += "\nNote: " + a.Note
			}
			notice := &store.Message{To: a.Agent, From: c.agent, Kind: store.KindMessage, Subject: "channel handoff: " + ch, Body: body}
			if err := m.deliver(context.WithoutCancel(ctx), st, []*store.Message{notice}, "handoff notice"); err != nil {
				// The handoff stands (the store has it); the notice is best effort.
				m.log.Warn("channel handoff: the inbox notice was not sent", "channel", ch, "to", a.Agent, "err", err)
			}
			res := jsonResult(map[string]any{"channel": ch, "holder": a.Agent, "message_id": msg.ID})
			res.Text = fmt.Sprintf("Handed conversation %s to %s; you no longer act in it.", quote(ch), a.Agent)
			return res
		},
	}
}

// fileAttachTool is channel.file_attach: a workspace file attached to the
// current response (an armory.Artifact of the call's result) and recorded
// in the conversation.
func (m *Module) fileAttachTool() *tool {
	return &tool{
		spec: armory.Spec{Name: "channel.file_attach",
			Description: fmt.Sprintf("Attach a workspace file to the current response in the conversation (a path relative to your workspace; at most %d MiB).", MaxAttachBytes>>20),
			InputSchema: schema([]string{"path"}, prop("path", str("The file, relative to your workspace (for example reports/summary.pdf).")))},
		man: armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatAgent, NeedsChannel: true,
			Capabilities: []armory.Capability{armory.CapReadFS, armory.CapWriteState, armory.CapUserInteraction}},
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Path string `json:"path"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			ch, r, ok := channelOf(c)
			if !ok {
				return r
			}
			art, err := attachable(c.inv.Agent, a.Path)
			if err != nil {
				return armory.FailErr(err)
			}
			st, err := m.store(ctx)
			if err != nil {
				return armory.FailErr(err)
			}
			msg := &store.ChannelMessage{Channel: ch, From: c.agent, Kind: store.ChannelAttach, Body: art.Path}
			if err := st.AppendChannelMessage(ctx, msg); err != nil {
				return channelFail(c, ch, err)
			}
			m.publishChannel(msg, "attachment from "+c.agent)
			res := jsonResult(map[string]any{"channel": ch, "message_id": msg.ID, "path": art.Path, "mime_type": art.MIMEType, "size": art.Size})
			res.Text = fmt.Sprintf("Attached %s (%d bytes, %s) to the response in conversation %s.", art.Path, art.Size, art.MIMEType, quote(ch))
			res.Artifacts = []armory.Artifact{art}
			return res
		},
	}
}

// attachable checks that p names a regular file of env's workspace of at
// most MaxAttachBytes, and returns it as an artifact (its path relative to
// the workspace). It refuses a path with a ".." element, an absolute path
// outside the workspace, and a path through a symbolic link that leads
// out of it (os.Root resolves every element inside the workspace).
func attachable(env *armory.AgentEnv, p string) (armory.Artifact, error) {
	const op = "channel.file_attach"
	fail := func(k armory.Kind, format string, a ...any) (armory.Artifact, error) {
		return armory.Artifact{}, armory.E(op, k, fmt.Sprintf(format, a...))
	}
	if env == nil || env.Workspace == "" {
		return fail(armory.KindUnavailable, "this agent has no workspace")
	}
	if strings.TrimSpace(p) == "" || strings.IndexByte(p, 0) >= 0 {
		return fail(armory.KindInvalid, "path is empty; name a file of your workspace")
	}
	rel := filepath.ToSlash(p)
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(filepath.Clean(env.Workspace), filepath.Clean(p))
		if err != nil || r == ".." || strings.HasPrefix(r, "../") {
			return fail(armory.KindPermission, "%s is outside your workspace; attach a file of your workspace (a relative path)", quote(p))
		}
		rel = filepath.ToSlash(r)
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." {
			return fail(armory.KindPermission, "%s has a \"..\" element; name the file by its path inside your workspace", quote(p))
		}
	}
	rel = path.Clean(rel)
	root, err := os.OpenRoot(env.Workspace)
	if err != nil {
		return fail(armory.KindUnavailable, "your workspace cannot be opened: %v", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fail(armory.KindNotFound, "there is no file %s in your workspace", quote(rel))
		case strings.Contains(err.Error(), "escapes from parent"):
			return fail(armory.KindPermission, "%s leads out of your workspace (a symbolic link); attach a file inside it", quote(rel))
		}
		return fail(armory.KindPermission, "%s cannot be opened: %v", quote(rel), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fail(armory.KindInternal, "%s: %v", quote(rel), err)
	}
	switch {
	case fi.IsDir():
		return fail(armory.KindInvalid, "%s is a folder; attach a file", quote(rel))
	case !fi.Mode().IsRegular():
		return fail(armory.KindInvalid, "%s is not a regular file", quote(rel))
	case fi.Size() > MaxAttachBytes:
		return fail(armory.KindTooLarge, "%s is %d bytes; an attachment is at most %d bytes", quote(rel), fi.Size(), MaxAttachBytes)
	}
	typ := mime.TypeByExtension(path.Ext(rel))
	if typ == "" {
		head := make([]byte, 512)
		n, _ := io.ReadFull(f, head)
		typ = http.DetectContentType(head[:n])
	}
	return armory.Artifact{Path: rel, MIMEType: typ, Size: fi.Size()}, nil
}

// publishChannel publishes the "channel" event of msg.
func (m *Module) publishChannel(msg *store.ChannelMessage, what string) {
	m.publish(pipeline.Event{Kind: EventChannel, Agent: msg.From, Ref: msg.Channel, Status: msg.Kind,
		Message: what + " in conversation " + quote(msg.Channel)})
}

// channelTools are the channel tools, under both families' names.
func (m *Module) channelTools() []*tool {
	return []*tool{
		m.channelSendTool("channel.send", "Post a standalone message to the originating channel thread (the conversation your caller named)."),
		m.channelSendTool("syscall.channel.send", "Send a message to the originating external channel (the conversation your caller named). Registered only when the call names its conversation."),
		m.channelHandoffTool("channel.handoff", "Transfer the conversation to another agent: from then on it holds the conversation and gets a notice in its inbox; you no longer act in it."),
		m.channelHandoffTool("syscall.channel.handoff", "Hand the conversation to another agent (it gets a notice in its inbox). Registered only when the call names its conversation."),
		m.fileAttachTool(),
	}
}

// Channel returns conversation id (for the REST API: who holds it).
// Errors: KindNotFound, KindUnavailable.
func (m *Module) Channel(ctx context.Context, id string) (*store.Channel, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	ch, err := st.GetChannel(ctx, id)
	if err != nil {
		return nil, store.Err("channel", err)
	}
	return ch, nil
}

// ChannelMessages returns a page of conversation id's messages, oldest
// first (for the REST API). Errors: KindNotFound, KindInvalid (a bad
// cursor), KindUnavailable.
func (m *Module) ChannelMessages(ctx context.Context, id string, p store.Page) ([]*store.ChannelMessage, string, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	msgs, next, err := st.ChannelMessages(ctx, id, p)
	if err != nil {
		return nil, "", store.Err("channel messages", err)
	}
	if msgs == nil {
		msgs = []*store.ChannelMessage{}
	}
	return msgs, next, nil
}
