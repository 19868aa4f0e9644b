package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// channelsWorld is the communicator group (the channel family and
// syscalls) for alice and bob.
var channelsWorld = map[string]string{
	"world-config.yaml": `name: channels
tool_privileges:
  communicator:
    - channel
    - syscall.ask
    - syscall.channel.send
    - syscall.channel.handoff
agents:
  - id: alice
    archetype: talker
  - id: bob
    archetype: talker
`,
	"archetype/talker/config.md": "## Tool Access\nprivilege_groups: communicator\n",
}

// mcpWith connects an MCP client to agent's endpoint sending hdr on every
// request (initialize included).
func (e *env) mcpWith(agent, token string, hdr http.Header) *mcp.ClientSession {
	e.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "armory-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   e.url + "/agents/" + agent + "/mcp",
		HTTPClient: &http.Client{Transport: bearer{token: token, header: hdr}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

func mcpToolNames(t *testing.T, s *mcp.ClientSession, meta mcp.Meta) []string {
	t.Helper()
	res, err := s.ListTools(ctx30(t), &mcp.ListToolsParams{Meta: meta})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, x := range res.Tools {
		out = append(out, x.Name)
	}
	return out
}

var channelToolNames = []string{"channel.file_attach", "channel.handoff", "channel.send", "syscall.channel.handoff", "syscall.channel.send"}

func hasAll(names, want []string) bool {
	for _, w := range want {
		if !slices.Contains(names, w) {
			return false
		}
	}
	return true
}

func hasNone(names, want []string) bool {
	for _, w := range want {
		if slices.Contains(names, w) {
			return false
		}
	}
	return true
}

// The channel tools are listed only to a caller that names its
// conversation, on REST and MCP alike, and the world check knows them.
func TestChannelToolsListedOnlyWithAChannel(t *testing.T) {
	e := startServices(t, channelsWorld)
	for _, d := range e.h.Warnings {
		if strings.Contains(d.String(), "channel") {
			t.Errorf("world check: %v", d)
		}
	}
	tok := e.token("alice")
	if names := e.restTools("alice", tok); !hasNone(names, channelToolNames) || !slices.Contains(names, "syscall.ask") {
		t.Errorf("REST without a channel lists %v", names)
	}
	for _, path := range []string{"/api/agents/alice/tools", "/api/agents/alice/tools?long=1", "/api/agents/alice/tools/brief"} {
		_, body, _ := e.do("GET", path, tok, "", server.ChannelHeader, "slack:C1/42")
		for _, n := range channelToolNames {
			if !strings.Contains(body, `"`+n+`"`) && !strings.Contains(body, "- "+n+":") {
				t.Errorf("%s with a channel does not list %s: %s", path, n, body)
			}
		}
		_, body, _ = e.do("GET", path, tok, "")
		if strings.Contains(body, "channel.send") {
			t.Errorf("%s without a channel lists channel.send", path)
		}
	}

	plain := e.mcpWith("alice", tok, nil)
	if names := mcpToolNames(t, plain, nil); !hasNone(names, channelToolNames) || !slices.Contains(names, "syscall.ask") {
		t.Errorf("MCP without a channel lists %v", names)
	}
	if names := mcpToolNames(t, plain, mcp.Meta{server.MetaChannel: "t-9"}); !hasAll(names, channelToolNames) {
		t.Errorf("MCP tools/list with _meta channel lists %v", names)
	}
	in := e.mcpWith("alice", tok, http.Header{server.ChannelHeader: {"slack:C1/42"}})
	if names := mcpToolNames(t, in, nil); !hasAll(names, channelToolNames) {
		t.Errorf("MCP session with a channel lists %v", names)
	}
	// A conversation name over the bound is refused at initialize.
	status, _, _ := e.do("POST", "/agents/alice/mcp", tok,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`,
		"Content-Type", "application/json", "Accept", "application/json, text/event-stream", server.ChannelHeader, strings.Repeat("x", pipeline.MaxChannelBytes+1))
	if status != http.StatusBadRequest {
		t.Errorf("initialize with an oversized channel: %d", status)
	}
}

// Calls without a conversation are refused with the reason; sends reach
// the REST caller and the event stream; a handoff moves the conversation
// and refuses the old holder.
func TestChannelCallsOverMCPAndREST(t *testing.T) {
	e := startServices(t, channelsWorld)
	aliceTok, bobTok := e.token("alice"), e.token("bob")
	events := e.events(e.admin)

	plain := e.mcpWith("alice", aliceTok, nil)
	if text, isErr := mcpCall(t, plain, "channel.send", map[string]any{"message": "hi"}); !isErr || !strings.Contains(text, "registered only for a call that names its conversation") {
		t.Errorf("MCP call without a channel: %v %s", isErr, text)
	}
	status, body, _ := e.do("POST", "/api/agents/alice/calls", aliceTok, `{"tool":"syscall.channel.send","args":{"message":"hi"}}`)
	if status == http.StatusOK || !strings.Contains(body, "registered only for a call that names its conversation") {
		t.Errorf("REST call without a channel: %d %s", status, body)
	}

	const conv = "slack:C1/42"
	in := e.mcpWith("alice", aliceTok, http.Header{server.ChannelHeader: {conv}})
	if text, isErr := mcpCall(t, in, "channel.send", map[string]any{"message": "hello from alice"}); isErr {
		t.Fatalf("MCP send: %s", text)
	}
	ev := events.waitFor(t, kind(services.EventChannel))
	if ev.Ref != conv || ev.Agent != "alice" || ev.Status != "message" {
		t.Errorf("event %+v", ev)
	}
	// _meta names the conversation of one call of a session without one.
	r, err := plain.CallTool(ctx30(t), &mcp.CallToolParams{Name: "syscall.channel.send", Arguments: map[string]any{"message": "via meta"},
		Meta: mcp.Meta{server.MetaChannel: conv}})
	if err != nil || r.IsError {
		t.Fatalf("send with _meta: %v %s", err, callText(r))
	}

	// A name with a "/" is read with the header; one without also by path.
	path := "/api/channels/messages"
	if status, body, _ := e.do("GET", "/api/channels/"+url.PathEscape(conv)+"/messages", aliceTok, ""); status != http.StatusBadRequest {
		t.Errorf("escaped slash in the path: %d %s", status, body)
	}
	read := func(tok string) (int, server.ChannelPage) {
		status, body, _ := e.do("GET", path, tok, "", server.ChannelHeader, conv)
		var p server.ChannelPage
		if status == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &p); err != nil {
				t.Fatal(err)
			}
		}
		return status, p
	}
	status, page := read(aliceTok)
	if status != http.StatusOK || len(page.Messages) != 2 || page.Messages[0].Body != "hello from alice" || page.Channel.Holder != "alice" {
		t.Fatalf("alice reads %d %+v", status, page)
	}
	if status, _ := read(bobTok); status != http.StatusNotFound {
		t.Errorf("bob reads alice's conversation: %d", status)
	}
	if status, _, _ := e.do("GET", path+"?limit=1", e.admin, "", server.ChannelHeader, conv); status != http.StatusOK {
		t.Errorf("admin reads: %d", status)
	}
	maxPage := strconv.Itoa(store.MaxPage)
	for _, bad := range []string{"0", strconv.Itoa(store.MaxPage + 1), "x", "01"} {
		if status, body, _ := e.do("GET", path+"?limit="+bad, e.admin, "", server.ChannelHeader, conv); status != http.StatusBadRequest || !strings.Contains(body, "1.."+maxPage) {
			t.Errorf("limit=%s: %d %s", bad, status, body)
		}
	}
	if status, body, _ := e.do("GET", path+"?limit="+maxPage, e.admin, "", server.ChannelHeader, conv); status != http.StatusOK {
		t.Errorf("limit=1000 (store.MaxPage): %d %s", status, body)
	}
	status, body, _ = e.do("GET", path+"?limit=1", aliceTok, "", server.ChannelHeader, conv)
	var first server.ChannelPage
	json.Unmarshal([]byte(body), &first)
	if status != 200 || len(first.Messages) != 1 || first.NextCursor == "" {
		t.Fatalf("page of one: %d %s", status, body)
	}
	status, body, _ = e.do("GET", path+"?cursor="+url.QueryEscape(first.NextCursor), aliceTok, "", server.ChannelHeader, conv)
	if status != 200 || !strings.Contains(body, "via meta") || strings.Contains(body, "hello from alice") {
		t.Errorf("next page: %d %s", status, body)
	}

	// The handoff, over REST with the "channel" field.
	status, body, _ = e.do("POST", "/api/agents/alice/calls", aliceTok, `{"tool":"channel.handoff","channel":"`+conv+`","args":{"agent":"bob","note":"refund"}}`)
	if status != http.StatusOK {
		t.Fatalf("handoff: %d %s", status, body)
	}
	events.waitFor(t, func(ev pipeline.Event) bool { return ev.Kind == services.EventChannel && ev.Status == "handoff" })
	if text, isErr := mcpCall(t, in, "channel.send", map[string]any{"message": "still me"}); !isErr || !strings.Contains(text, "held by agent bob") {
		t.Errorf("alice after the handoff: %v %s", isErr, text)
	}
	status, body, _ = e.do("POST", "/api/agents/bob/calls", bobTok, `{"tool":"channel.send","args":{"message":"bob here"}}`, server.ChannelHeader, conv)
	if status != http.StatusOK {
		t.Fatalf("bob sends: %d %s", status, body)
	}
	status, page = read(bobTok)
	if status != http.StatusOK || page.Channel.Holder != "bob" || len(page.Messages) != 4 || page.Messages[3].Body != "bob here" {
		t.Errorf("bob reads %d %+v", status, page)
	}
	if status, _ := read(aliceTok); status != http.StatusOK {
		t.Errorf("alice, who began it, reads: %d", status)
	}
	if status, body, _ := e.do("GET", "/api/channels/nope/messages", e.admin, ""); status != http.StatusNotFound {
		t.Errorf("unknown conversation: %d %s", status, body)
	}
	if status, body, _ := e.do("GET", "/api/channels/messages", e.admin, ""); status != http.StatusBadRequest {
		t.Errorf("no conversation named: %d %s", status, body)
	}
	// A conversation whose name the path carries.
	if status, body, _ := e.do("POST", "/api/agents/bob/calls", bobTok, `{"tool":"channel.send","channel":"ticket-7","args":{"message":"hi"}}`); status != http.StatusOK {
		t.Fatalf("send: %d %s", status, body)
	}
	if status, body, _ := e.do("GET", "/api/channels/ticket-7/messages", bobTok, ""); status != http.StatusOK || !strings.Contains(body, `"holder":"bob"`) {
		t.Errorf("by path: %d %s", status, body)
	}
}
