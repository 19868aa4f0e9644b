package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/roster"
)

// SessionHeader names the session of a call when the MCP transport has no
// session id (stdio, or the sessionless protocol revisions).
const SessionHeader = "X-Armory-Session"

// Meta keys a tools/call request may carry in params._meta.
const (
	MetaResume        = "armory.dev/resume"        // resume the call approval <id> was created for
	MetaTask          = "armory.dev/task"          // task id, recorded in the audit trail
	MetaJustification = "armory.dev/justification" // lets a call past loop detection
	MetaSession       = "armory.dev/session"       // the caps session of a sessionless call (as X-Armory-Session)
	MetaOutcome       = "armory.dev/outcome"       // in results: call id, status, approval id
)

// buildMCP builds one MCP server per agent, listing exactly the tools of
// the agent's registry (sorted by name by the SDK), with their manifests'
// annotations.
func (s *Server) buildMCP() error {
	s.mcpServers = map[string]*mcp.Server{}
	for _, ag := range s.h.Agents() {
		srv, err := s.newMCPServer(ag)
		if err != nil {
			return err
		}
		s.mcpServers[ag.ID] = srv
	}
	agentServer := func(r *http.Request) *mcp.Server { return s.agentMCP(r.PathValue("id")) }
	s.sessions = newSessionTable(s.opts.MCPSessionsPerToken, s.opts.MCPSessions, s.opts.MCPSessionTimeout)
	s.sessions.register(s.metrics.reg)
	opts := func(stateless bool) *mcp.StreamableHTTPOptions {
		return &mcp.StreamableHTTPOptions{
			Logger:              s.sdkLogger(),
			MaxRequestBodyBytes: s.opts.MaxBodyBytes,
			SessionTimeout:      s.opts.MCPSessionTimeout,
			Stateless:           stateless,
			// The server checks Host and Origin on every route (guardHTTP),
			// including the names --allow-host adds, which the SDK's own
			// loopback check would refuse.
			DisableLocalhostProtection:   true,
			PropagateRequestCancellation: true,
		}
	}
	stateful := mcp.NewStreamableHTTPHandler(agentServer, opts(false))
	sessionless := mcp.NewStreamableHTTPHandler(agentServer, opts(true))
	// One handler serves every agent's sessions; sessionGuard binds each
	// session to the agent and token that opened it and bounds how many
	// are open, and the SDK checks the same owner again (sdkUser).
	s.mcpHTTP = s.sessionGuard(sdkUser(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sessionlessRequest(r) {
			sessionless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})))
	return nil
}

// agentMCP returns the MCP server of agent id, or nil for an agent the
// roster does not host. An agent created at run time (syscall.agent.create,
// roster.Add) gets its server on its first request, built as the world
// agents' were by New.
func (s *Server) agentMCP(id string) *mcp.Server {
	s.mcpMu.RLock()
	srv := s.mcpServers[id]
	s.mcpMu.RUnlock()
	if srv != nil {
		return srv
	}
	ag, err := s.h.Agent(id)
	if err != nil {
		return nil
	}
	s.mcpMu.Lock()
	defer s.mcpMu.Unlock()
	if srv := s.mcpServers[id]; srv != nil {
		return srv
	}
	srv, err = s.newMCPServer(ag)
	if err != nil {
		s.opts.Logger.Warn("no MCP server for an agent created at run time", "agent", id, "err", err)
		return nil
	}
	srv.AddReceivingMiddleware(checkLogLevel)
	s.mcpServers[id] = srv
	return srv
}

// sdkLogger is the server's logger for the go-sdk, which logs session ids:
// they are replaced by their SessionRef.
func (s *Server) sdkLogger() *slog.Logger {
	return slog.New(redactSessions{s.opts.Logger.Handler()})
}

// sessionlessProtocol is the first MCP revision without sessions
// (initialize): its requests carry their version in every request.
const sessionlessProtocol = "2026-07-28"

// sessionlessRequest reports whether r speaks a sessionless revision (the
// Mcp-Protocol-Version header, required with it, names 2026-07-28 or
// later). The go-sdk serves those revisions only from a stateless handler
// and the older ones (initialize, Mcp-Session-Id, the standalone GET
// stream) only from a stateful one, so each agent's endpoint has both and
// routes by version; both serve the same per-agent server and run every
// call through the same pipeline. A request with a malformed or missing
// header goes to the stateful handler, which answers older clients and
// rejects a newer request that lacks the header, as the spec asks.
func sessionlessRequest(r *http.Request) bool {
	v := r.Header.Get("Mcp-Protocol-Version")
	return r.Method == http.MethodPost && len(v) == len(sessionlessProtocol) && v >= sessionlessProtocol
}

func (s *Server) newMCPServer(ag *roster.Agent) (*mcp.Server, error) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "armory", Title: "Armory tools of agent " + ag.ID, Version: Version},
		&mcp.ServerOptions{
			Instructions: s.instructions(ag),
			Logger:       s.sdkLogger(),
			// Prompts and resources are declared because the SDK answers
			// their list methods (with empty lists): a server must declare
			// what it handles (SEP-2575 checks it in server/discover).
			Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true},
				Prompts: &mcp.PromptCapabilities{}, Resources: &mcp.ResourceCapabilities{}},
		})
	srv.AddReceivingMiddleware(s.unlistedToolCalls(ag), s.channelListing(ag), s.liveInstructions(ag))
	// Every tool of the registry, those that need a channel context too:
	// channelListing leaves them out of the lists of a caller without one.
	for _, t := range registry.MCPTools(ag.Registry.ToolsFor(registry.Caller{Channel: true})) {
		if err := s.addMCPTool(srv, ag.ID, t); err != nil {
			return nil, err
		}
	}
	// Tools registered or removed at run time (skills, library users) change
	// the list; the SDK tells the agent's clients (notifications/tools/list_changed).
	s.unwatch = append(s.unwatch, ag.Registry.OnChange(func(name string, added bool) {
		if !added {
			srv.RemoveTools(name)
			return
		}
		t, err := ag.Registry.Lookup(name)
		if err != nil {
			return // removed again meanwhile
		}
		if err := s.addMCPTool(srv, ag.ID, registry.MCPTools([]armory.Tool{t})[0]); err != nil {
			s.opts.Logger.Warn("tool registered at run time is not served over MCP", "agent", ag.ID, "tool", name, "error", err)
		}
	}))
	return srv, nil
}

// liveInstructions gives each initialize (and the sessionless revision's
// server/discover) the instructions of the agent's registry as it is now:
// the server's own were computed when it was built, and tools registered
// at run time (an acquired skill) may bring a toolkit's policy text in or
// take it out.
func (s *Server) liveInstructions(ag *roster.Agent) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if err != nil {
				return res, err
			}
			switch r := res.(type) {
			case *mcp.InitializeResult:
				r.Instructions = s.instructions(ag)
			case *mcp.DiscoverResult:
				r.Instructions = s.instructions(ag)
			}
			return res, nil
		}
	}
}

// addMCPTool adds one tool of agent to its MCP server.
func (s *Server) addMCPTool(srv *mcp.Server, agent string, t registry.MCPTool) error {
	var probe struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(t.InputSchema, &probe); err != nil || probe.Type != "object" {
		return armory.E("server", armory.KindInvalid, fmt.Sprintf("tool %s: MCP needs an input schema of type \"object\"", t.Name))
	}
	tool := &mcp.Tool{
		Name:        t.Name,
		Description: t.Description,
		InputSchema: t.InputSchema,
		Annotations: &mcp.ToolAnnotations{
			ReadOnlyHint:    t.Annotations.ReadOnly,
			DestructiveHint: &t.Annotations.Destructive,
			IdempotentHint:  t.Annotations.Idempotent,
			OpenWorldHint:   &t.Annotations.OpenWorld,
		},
	}
	if len(t.OutputSchema) > 0 {
		tool.OutputSchema = t.OutputSchema
	}
	srv.AddTool(tool, s.toolHandler(agent, len(t.OutputSchema) > 0))
	return nil
}

// unlistedToolCalls sends a tools/call naming a tool the agent's MCP server
// does not list (unknown, not granted, or a model's provider-style name)
// through the pipeline like any call, after resolving a provider-style
// name to the tool it names. The SDK would answer such a call with
// a protocol error (-32602) before any Armory code runs, so nothing would be
// audited; a probe for tools an agent cannot see is exactly what an operator
// looks for in the trail. A call the pipeline resolves and runs is an
// ordinary result; a refusal stays the protocol error the MCP spec asks for,
// carrying the pipeline's reason (what the model can do) and the call id.
func (s *Server) unlistedToolCalls(ag *roster.Agent) mcp.Middleware {
	handle := s.toolHandler(ag.ID, false)
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				cr, ok := req.(*mcp.CallToolRequest)
				if ok && cr.Params != nil {
					// A provider-style name ("devtools__word-count") is
					// resolved by the agent's registry, the one place that
					// maps those names, so the SDK finds the tool.
					if real, found := ag.Registry.Resolve(cr.Params.Name); found {
						cr.Params.Name = real
					}
				}
				if ok && cr.Params != nil && !ag.Registry.Has(cr.Params.Name) {
					res, err := handle(ctx, cr)
					if err != nil || !res.IsError {
						return completeResult(cr.Session, res)
					}
					// The MCP spec makes an unknown tool a protocol error
					// (invalid params), and the official conformance suite
					// checks it: the refusal keeps that form, with the
					// pipeline's reason as its message and the outcome
					// (call id, reasons) as its data.
					data, _ := json.Marshal(res.StructuredContent)
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: callResultText(res), Data: data}
				}
			}
			return next(ctx, method, req)
		}
	}
}

// completeResult marks res as complete ("resultType") for a client of a
// revision with multi-round-trip results (2026-07-28 and later), as the SDK
// does for the results of the handlers it dispatches itself. The SDK keeps
// that field unexported, so it is set the one public way: through the
// result's own JSON decoding.
func completeResult(ss *mcp.ServerSession, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	if res == nil {
		return nil, nil
	}
	if ss != nil {
		if ip := ss.InitializeParams(); ip != nil && ip.ProtocolVersion < sessionlessProtocol {
			return res, nil
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	if len(b) < 3 || b[0] != '{' {
		return res, nil // never: a result always has content
	}
	b = append([]byte(`{"resultType":"complete",`), b[1:]...)
	var out mcp.CallToolResult
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// callResultText is the text content of a result.
func callResultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// instructions are the toolkit policy texts that apply to the agent's
// tools (seajelly toolkits: policy text only when its tools are available).
func (s *Server) instructions(ag *roster.Agent) string {
	var b strings.Builder
	for _, p := range s.h.ToolkitPrompts() {
		if strings.TrimSpace(p.Text) == "" {
			continue
		}
		for _, t := range p.Tools {
			if ag.Registry.Has(t) {
				fmt.Fprintf(&b, "Toolkit %s: %s\n", p.Toolkit, strings.TrimSpace(p.Text))
				break
			}
		}
	}
	return b.String()
}

// MCPServer returns the MCP server of agent id (for stdio), or an error of
// kind KindNotFound.
func (s *Server) MCPServer(id string) (*mcp.Server, error) {
	srv := s.agentMCP(id)
	if srv == nil {
		return nil, armory.E("server", armory.KindNotFound, "unknown agent "+quote(id))
	}
	return srv, nil
}

// ScopeSession returns the session a client-named session maps to: sessions
// belong to an agent, so a name not already "<agent>:…" gets that prefix
// (a client of one agent cannot spend another agent's session caps). An
// empty name is the agent's default session.
func ScopeSession(agent, name string) string {
	if name == "" {
		return pipeline.DefaultSession(agent)
	}
	if strings.HasPrefix(name, agent+":") {
		return name
	}
	return agent + ":" + name
}

// toolHandler runs an MCP tools/call through the pipeline. Refusals and
// failures are results with isError set, never protocol errors.
func (s *Server) toolHandler(agent string, hasOutputSchema bool) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		name := ""
		if req.Session != nil && req.Session.ID() != "" {
			// A stateful session's caps session was fixed when it opened
			// (sessionGuard): X-Armory-Session at initialize, else its ref.
			name = ScopeSession(agent, SessionRef(req.Session.ID()))
			if ms, ok := s.sessions.lookup(req.Session.ID()); ok {
				name = ms.caps
			}
		}
		if name == "" && req.Extra != nil && req.Extra.Header != nil {
			name = req.Extra.Header.Get(SessionHeader)
		}
		if m := req.Params.Meta; name == "" && m != nil {
			name, _ = m[MetaSession].(string)
		}
		c := pipeline.Call{
			Agent:   agent,
			Tool:    req.Params.Name,
			Args:    req.Params.Arguments,
			Session: ScopeSession(agent, name),
			Wait:    s.opts.ApprovalWait,
			Channel: s.mcpChannel(req.Session, req.Extra, req.Params.Meta),
		}
		if m := req.Params.Meta; m != nil {
			c.Resume, _ = m[MetaResume].(string)
			c.Task, _ = m[MetaTask].(string)
			c.Justification, _ = m[MetaJustification].(string)
		}
		if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
			var mu sync.Mutex
			n := 0.0
			c.Progress = func(msg string) {
				mu.Lock()
				n++
				p := n
				mu.Unlock()
				req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Message: msg, Progress: p})
			}
		}
		o := s.execute(ctx, c)
		return outcomeResult(o, hasOutputSchema), nil
	}
}

// mcpChannel is the conversation an MCP request names: its session's
// (X-Armory-Channel at initialize), else the request's X-Armory-Channel
// header (a sessionless client), else its _meta "armory.dev/channel".
func (s *Server) mcpChannel(ss *mcp.ServerSession, extra *mcp.RequestExtra, meta mcp.Meta) string {
	if ss != nil && ss.ID() != "" {
		if ms, ok := s.sessions.lookup(ss.ID()); ok && ms.channel != "" {
			return ms.channel
		}
	}
	if extra != nil && extra.Header != nil {
		if ch := extra.Header.Get(ChannelHeader); ch != "" {
			return ch
		}
	}
	ch, _ := meta[MetaChannel].(string)
	return ch
}

// channelListing leaves the tools that need a channel context
// (armory.Manifest.NeedsChannel) out of the tools/list answers of a
// request that names no conversation (mcpChannel), as every surface's
// listing does (registry.Caller). A call of one of them still reaches the
// pipeline, which refuses it with the reason.
func (s *Server) channelListing(ag *roster.Agent) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			lr, ok := req.(*mcp.ListToolsRequest)
			out, isList := res.(*mcp.ListToolsResult)
			if method != "tools/list" || err != nil || !ok || !isList || out == nil {
				return res, err
			}
			var meta mcp.Meta
			if lr.Params != nil {
				meta = lr.Params.Meta
			}
			c := caller(s.mcpChannel(lr.Session, lr.Extra, meta))
			if c.Channel {
				return res, err
			}
			kept := out.Tools[:0:0]
			for _, t := range out.Tools {
				if tt, err := ag.Registry.Lookup(t.Name); err != nil || c.Listed(tt.Manifest()) {
					kept = append(kept, t)
				}
			}
			out.Tools = kept
			return out, nil
		}
	}
}

// outcomeResult turns an outcome into an MCP result: the result text as
// content; for a success, the tool's value as structured content when the
// tool declares an output schema; for anything else isError, with the whole
// outcome as structured content.
func outcomeResult(o pipeline.Outcome, hasOutputSchema bool) *mcp.CallToolResult {
	res := &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: o.Result}},
		Meta: mcp.Meta{MetaOutcome: map[string]any{
			"call_id": o.CallID, "status": o.Status, "approval_id": o.ApprovalID, "decided_by": o.DecidedBy, "permission": o.Permission,
		}},
	}
	if o.Status == audit.StatusSuccess {
		if hasOutputSchema && o.Value != nil {
			res.StructuredContent = o.Value
		}
		return res
	}
	res.IsError = true
	o.Human = "" // for people at the CLI or REST API, not for the model
	res.StructuredContent = o
	return res
}

// execute runs c through the pipeline, the only way the server runs a
// tool (MCP toolHandler above, REST handleCall), and records metrics (the
// pipeline publishes call_finished, whichever surface called it). It is here, next to toolHandler, so that an MCP
// call reads in one file of the server down to pipeline.Pipeline.Execute.
func (s *Server) execute(ctx context.Context, c pipeline.Call) pipeline.Outcome {
	s.calls.begin()
	defer s.calls.end()
	start := time.Now()
	o := s.p.Execute(ctx, c)
	tool := c.Tool
	known := false
	if ag, err := s.h.Agent(c.Agent); err == nil {
		known = ag.Registry.Has(tool)
	}
	s.metrics.observe(known, tool, string(o.Status), time.Since(start))
	return o
}
