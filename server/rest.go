package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/store"
)

// routes is the server's route table.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// Every route names the query parameters it takes (s.params); any
	// other, a repeated or a malformed one is a 400.
	mux.Handle("GET /healthz", s.params(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	mux.Handle("GET /metrics", s.admin(s.params(s.metrics.handler.ServeHTTP)))
	mux.Handle("/agents/{id}/mcp", s.long(s.agentScoped(s.strictJSONRPC(s.mcpHTTP))))

	mux.Handle("GET /api/agents", s.anyToken(s.params(s.handleAgents)))
	mux.Handle("POST /api/agents/{id}/stop", s.anyToken(s.params(s.handleAgentStatus(true))))
	mux.Handle("POST /api/agents/{id}/start", s.anyToken(s.params(s.handleAgentStatus(false))))
	mux.Handle("GET /api/agents/{id}/tools", s.agentScoped(s.params(s.handleTools, "long")))
	mux.Handle("GET /api/agents/{id}/tools/brief", s.agentScoped(s.params(s.handleBrief)))
	mux.Handle("POST /api/agents/{id}/calls", s.long(s.agentScoped(s.params(s.handleCall))))
	mux.Handle("GET /api/approvals", s.admin(s.params(s.handleApprovals, "status", "agent")))
	mux.Handle("POST /api/approvals/{id}/approve", s.admin(s.params(s.decide(store.StatusApproved))))
	mux.Handle("POST /api/approvals/{id}/deny", s.admin(s.params(s.decide(store.StatusDenied))))
	mux.Handle("GET /api/audit", s.admin(s.params(s.handleAudit, auditParams...)))
	mux.Handle("GET /api/audit/verify", s.admin(s.params(s.handleVerify)))
	s.humanRoutes(mux)
	s.skillRoutes(mux)
	mux.Handle("GET /api/channels/{id}/messages", s.anyToken(s.params(s.handleChannelMessages, "cursor", "limit")))
	mux.Handle("GET /api/channels/messages", s.anyToken(s.params(s.handleChannelMessages, "cursor", "limit")))
	mux.Handle("GET /api/events", s.long(s.anyToken(s.params(s.handleEvents, "kind", "agent"))))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		msg := "no such endpoint: " + r.Method + " " + r.URL.Path
		if ms := methodsOf(mux, r); len(ms) > 0 {
			msg += " (this path takes " + strings.Join(ms, ", ") + ")"
		}
		s.writeError(w, r, armory.E("", armory.KindNotFound, msg))
	})
	return s.guardHTTP(mux)
}

// methodsOf lists the methods that mux routes r's path for, other than
// the catch-all (for the message of a request with the wrong method).
func methodsOf(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		r2 := *r
		r2.Method = m
		if _, pat := mux.Handler(&r2); pat != "/" {
			out = append(out, m)
		}
	}
	return out
}

// AgentSummary is one entry of GET /api/agents (admin token). The status
// fields come from the services module (services.AgentInfo); a server
// without it leaves them empty.
type AgentSummary struct {
	ID            string    `json:"id"`
	Archetype     string    `json:"archetype"`
	Tools         int       `json:"tools"`
	Status        string    `json:"status,omitempty"`
	Origin        string    `json:"origin,omitempty"`
	CreatedBy     string    `json:"created_by,omitempty"`
	Since         time.Time `json:"since,omitzero"`
	UptimeSeconds int64     `json:"uptime_seconds"`
}

// ToolEntry is one entry of GET /api/agents/{id}/tools (the ghost world).
type ToolEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// handleTools answers the agent's tools as [{name, description}], or with
// ?long=1 (or true) each tool's danger, capabilities, permission level for
// the agent and source (roster.ToolInfo).
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	ag, _ := s.h.Agent(r.PathValue("id")) // agentScoped checked it
	switch v := r.URL.Query().Get("long"); v {
	case "", "0", "false":
	case "1", "true":
		writeJSON(w, http.StatusOK, s.h.ToolsFor(ag, caller(r.Header.Get(ChannelHeader))))
		return
	default:
		s.writeError(w, r, armory.E("", armory.KindInvalid, fmt.Sprintf(`"long" must be 1, true, 0 or false, got %q`, v)))
		return
	}
	out := []ToolEntry{}
	for _, sp := range ag.Registry.SpecsFor(caller(r.Header.Get(ChannelHeader))) {
		out = append(out, ToolEntry{sp.Name, sp.Description})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleBrief(w http.ResponseWriter, r *http.Request) {
	ag, _ := s.h.Agent(r.PathValue("id"))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, registry.Brief(ag.Registry.SpecsFor(caller(r.Header.Get(ChannelHeader)))))
}

// CallRequest is the body of POST /api/agents/{id}/calls.
type CallRequest struct {
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args,omitempty"`
	Session       string          `json:"session,omitempty"`
	Task          string          `json:"task,omitempty"`
	Justification string          `json:"justification,omitempty"`
	Resume        string          `json:"resume,omitempty"`
	// Channel names the conversation of the call (its channel context;
	// else the X-Armory-Channel header).
	Channel string `json:"channel,omitempty"`
	// Wait is how long to wait for an approval, as a Go duration ("30s");
	// default 0 (return pending at once), at most Options.MaxCallWait.
	Wait string `json:"wait,omitempty"`
}

// handleCall runs one call and answers 200 with the outcome (the JSON of
// `armory call`) whatever the outcome; errors are about the request.
func (s *Server) handleCall(w http.ResponseWriter, r *http.Request) {
	var req CallRequest
	if err := decodeJSON(r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.Tool == "" && req.Resume == "" {
		s.writeError(w, r, armory.E("", armory.KindInvalid, `"tool" is required (or "resume" with an approval id)`))
		return
	}
	var wait time.Duration
	if req.Wait != "" {
		d, err := time.ParseDuration(req.Wait)
		if err != nil || d < 0 {
			s.writeError(w, r, armory.E("", armory.KindInvalid, fmt.Sprintf(`"wait" must be a duration such as "30s", got %q`, req.Wait)))
			return
		}
		if d > s.opts.MaxCallWait {
			s.writeError(w, r, armory.E("", armory.KindInvalid, fmt.Sprintf(`"wait" may be at most %s`, s.opts.MaxCallWait)))
			return
		}
		wait = d
	}
	agent := r.PathValue("id")
	c := pipeline.Call{
		Agent: agent, Tool: req.Tool, Args: req.Args, Session: ScopeSession(agent, req.Session),
		Task: req.Task, Justification: req.Justification, Resume: req.Resume, Wait: wait, Channel: req.Channel,
	}
	if c.Channel == "" {
		c.Channel = r.Header.Get(ChannelHeader)
	}
	if c.Session == pipeline.DefaultSession(agent) && req.Session == "" {
		if h := r.Header.Get(SessionHeader); h != "" {
			c.Session = ScopeSession(agent, h)
		}
	}
	o := s.execute(r.Context(), c)
	writeJSON(w, callStatus(o), o)
}

func (s *Server) handleApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query() // checked by s.params
	statuses := []store.ApprovalStatus{store.StatusPending, store.StatusEscalated}
	if v := q.Get("status"); v != "" {
		st := store.ApprovalStatus(v)
		if !st.Valid() {
			s.writeError(w, r, badParam("status", "must be pending, escalated, approved, denied or expired, got %s", quote(v)))
			return
		}
		statuses = []store.ApprovalStatus{st}
	}
	out := []*store.Approval{}
	for _, st := range statuses {
		as, err := s.st.ListApprovals(r.Context(), store.ApprovalFilter{Status: st, Agent: q.Get("agent"), Limit: store.MaxLimit})
		if err != nil {
			s.writeError(w, r, store.Err("approvals", err))
			return
		}
		out = append(out, as...)
	}
	writeJSON(w, http.StatusOK, s.p.ApprovalViews(r.Context(), out)) // with the diff of file changes
}

// decide records a human decision (decided_by "human") through the
// pipeline's one decision path (pipeline.Pipeline.Decide), which audits and
// publishes it.
func (s *Server) decide(status store.ApprovalStatus) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Reason string `json:"reason"`
		}
		if r.ContentLength != 0 {
			if err := decodeJSON(r, &body); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		a, err := s.p.Decide(r.Context(), pipeline.ApprovalDecision{ID: r.PathValue("id"), Status: status, Reason: body.Reason, Via: pipeline.ViaREST})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, a)
	}
}

// auditParams are the query parameters of GET /api/audit.
var auditParams = []string{"agent", "tool", "session", "status", "since", "limit"}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query() // checked by s.params
	f := store.AuditFilter{Agent: q.Get("agent"), Tool: q.Get("tool"), Session: q.Get("session"), Status: audit.Status(q.Get("status"))}
	if f.Status != "" && !f.Status.Valid() {
		s.writeError(w, r, badParam("status", "must be running, pending, success, error, blocked, denied, timeout or interrupted, got %s", quote(q.Get("status"))))
		return
	}
	if v := q.Get("since"); v != "" {
		t, err := ParseSince(v)
		if err != nil {
			s.writeError(w, r, badParam("since", "%v", err))
			return
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxLimit || strconv.Itoa(n) != v {
			s.writeError(w, r, badParam("limit", "must be a whole number 1..%d, got %s", store.MaxLimit, quote(v)))
			return
		}
		f.Limit = n
	}
	recs, err := s.st.ListAudit(r.Context(), f)
	if err != nil {
		s.writeError(w, r, store.Err("audit", err))
		return
	}
	if recs == nil {
		recs = []*audit.Record{}
	}
	writeJSON(w, http.StatusOK, recs)
}

// ParseSince reads the since filter of GET /api/audit and armory audit
// --since: a time in RFC 3339 or a duration ago ("1h"). A negative duration
// is an error.
func ParseSince(v string) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("the duration %s is negative (it means that long ago)", quote(v))
		}
		return time.Now().Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("must be RFC 3339 (2006-01-02T15:04:05Z) or a duration ago such as 1h, got %s", quote(v))
	}
	return t, nil
}

// VerifyReport is the body of GET /api/audit/verify.
type VerifyReport struct {
	OK      bool   `json:"ok"`
	Records int64  `json:"records"`
	Store   string `json:"store"`
	JSONL   string `json:"jsonl"`
	// JSONLBehind is how many of the store's records the JSONL trail (a
	// copy of the store's, written after commit) does not hold yet.
	JSONLBehind int64 `json:"jsonl_behind"`
}

// trailVerified says what a verified JSONL trail holding the store's
// records 1..files is.
func trailVerified(files int64) string {
	if files == 0 {
		return "chain verified, no records yet"
	}
	return fmt.Sprintf("chain verified, a copy of the store's records 1..%d", files)
}

// handleVerify verifies the store's chain and the JSONL trail. A broken
// chain is a finding (200, ok false), not a request error.
func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request) {
	rep := VerifyReport{OK: true, Store: "chain verified"}
	if err := s.st.VerifyAudit(r.Context()); err != nil {
		var ce *audit.ChainError
		if !errors.As(err, &ce) {
			s.writeError(w, r, store.Err("audit verify", err))
			return
		}
		rep.OK, rep.Store = false, err.Error()
	}
	head, err := s.st.AuditHead(r.Context())
	if err == nil {
		rep.Records = head.Seq
	}
	dir := filepath.Join(s.h.World.Dir, ".armory", "audit")
	switch _, err := os.Stat(dir); {
	case err != nil:
		rep.JSONL = "no trail"
	default:
		tr, err := trail.Check(r.Context(), s.st, dir)
		if err != nil {
			rep.OK, rep.JSONL = false, err.Error()
		} else {
			rep.JSONL, rep.JSONLBehind = trailVerified(tr.Files), tr.Behind
		}
	}
	writeJSON(w, http.StatusOK, rep)
}
