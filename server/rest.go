package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/guard"
	"github.com/armory-dev/armory/store"
)

// routes is the server's route table.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.Handle("GET /metrics", s.admin(s.metrics.handler.ServeHTTP))
	mux.Handle("/agents/{id}/mcp", long(s.agentScoped(s.mcpHTTP)))

	mux.Handle("GET /api/agents", s.admin(s.handleAgents))
	mux.Handle("GET /api/agents/{id}/tools", s.agentScoped(http.HandlerFunc(s.handleTools)))
	mux.Handle("GET /api/agents/{id}/tools/brief", s.agentScoped(http.HandlerFunc(s.handleBrief)))
	mux.Handle("POST /api/agents/{id}/calls", long(s.agentScoped(http.HandlerFunc(s.handleCall))))
	mux.Handle("GET /api/approvals", s.admin(s.handleApprovals))
	mux.Handle("POST /api/approvals/{id}/approve", s.admin(s.decide(store.StatusApproved)))
	mux.Handle("POST /api/approvals/{id}/deny", s.admin(s.decide(store.StatusDenied)))
	mux.Handle("GET /api/audit", s.admin(s.handleAudit))
	mux.Handle("GET /api/audit/verify", s.admin(s.handleVerify))
	mux.Handle("GET /api/events", long(s.admin(s.handleEvents)))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, armory.E("", armory.KindNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path))
	})
	return s.guardHTTP(mux)
}

// AgentSummary is one entry of GET /api/agents.
type AgentSummary struct {
	ID        string `json:"id"`
	Archetype string `json:"archetype"`
	Tools     int    `json:"tools"`
}

func (s *Server) handleAgents(w http.ResponseWriter, r *http.Request) {
	out := []AgentSummary{}
	for _, ag := range s.h.Agents() {
		out = append(out, AgentSummary{ID: ag.ID, Archetype: ag.Def.Archetype, Tools: ag.Registry.Len()})
	}
	writeJSON(w, http.StatusOK, out)
}

// ToolEntry is one entry of GET /api/agents/{id}/tools (seed 000).
type ToolEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	ag, _ := s.h.Agent(r.PathValue("id")) // agentScoped checked it
	out := []ToolEntry{}
	for _, sp := range ag.Registry.Specs() {
		out = append(out, ToolEntry{sp.Name, sp.Description})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleBrief(w http.ResponseWriter, r *http.Request) {
	ag, _ := s.h.Agent(r.PathValue("id"))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprint(w, s.h.Briefing(ag))
}

// CallRequest is the body of POST /api/agents/{id}/calls.
type CallRequest struct {
	Tool          string          `json:"tool"`
	Args          json.RawMessage `json:"args,omitempty"`
	Session       string          `json:"session,omitempty"`
	Task          string          `json:"task,omitempty"`
	Justification string          `json:"justification,omitempty"`
	Resume        string          `json:"resume,omitempty"`
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
	c := guard.Call{
		Agent: agent, Tool: req.Tool, Args: req.Args, Session: ScopeSession(agent, req.Session),
		Task: req.Task, Justification: req.Justification, Resume: req.Resume, Wait: wait,
	}
	if c.Session == guard.DefaultSession(agent) && req.Session == "" {
		if h := r.Header.Get(SessionHeader); h != "" {
			c.Session = ScopeSession(agent, h)
		}
	}
	o := s.execute(r.Context(), c)
	writeJSON(w, http.StatusOK, o)
}

func (s *Server) handleApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	statuses := []store.ApprovalStatus{store.StatusPending, store.StatusEscalated}
	if v := q.Get("status"); v != "" {
		st := store.ApprovalStatus(v)
		if !st.Valid() {
			s.writeError(w, r, armory.E("", armory.KindInvalid, "status must be pending, escalated, approved, denied or expired"))
			return
		}
		statuses = []store.ApprovalStatus{st}
	}
	out := []*store.Approval{}
	for _, st := range statuses {
		as, err := s.st.ListApprovals(r.Context(), store.ApprovalFilter{Status: st, Agent: q.Get("agent"), Limit: store.MaxLimit})
		if err != nil {
			s.writeError(w, r, storeErr("approvals", err))
			return
		}
		out = append(out, as...)
	}
	writeJSON(w, http.StatusOK, out)
}

// decide records a human decision (decided_by "human") and publishes it.
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
		id := r.PathValue("id")
		if err := s.st.DecideApproval(r.Context(), id, status, "human", body.Reason); err != nil {
			s.writeError(w, r, storeErr("approvals", err))
			return
		}
		a, err := s.st.GetApproval(r.Context(), id)
		if err != nil {
			s.writeError(w, r, storeErr("approvals", err))
			return
		}
		s.publish(guard.Event{Kind: guard.EventApprovalDecided, Time: time.Now(), Agent: a.Agent, Session: a.Session, Tool: a.Tool,
			ApprovalID: id, Status: string(status), Message: "by human"})
		writeJSON(w, http.StatusOK, a)
	}
}

func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.AuditFilter{Agent: q.Get("agent"), Tool: q.Get("tool"), Session: q.Get("session"), Status: audit.Status(q.Get("status"))}
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v)
		if err != nil {
			s.writeError(w, r, armory.E("", armory.KindInvalid, "since: "+err.Error()))
			return
		}
		f.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxLimit {
			s.writeError(w, r, armory.E("", armory.KindInvalid, fmt.Sprintf("limit must be 1..%d", store.MaxLimit)))
			return
		}
		f.Limit = n
	}
	recs, err := s.st.ListAudit(r.Context(), f)
	if err != nil {
		s.writeError(w, r, storeErr("audit", err))
		return
	}
	if recs == nil {
		recs = []*audit.Record{}
	}
	writeJSON(w, http.StatusOK, recs)
}

// parseSince accepts RFC 3339 or a duration ago ("1h"), as the CLI does.
func parseSince(v string) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d), nil
	}
	return time.Parse(time.RFC3339, v)
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

// handleVerify verifies the store's chain and the JSONL trail. A broken
// chain is a finding (200, ok false), not a request error.
func (s *Server) handleVerify(w http.ResponseWriter, r *http.Request) {
	rep := VerifyReport{OK: true, Store: "chain verified"}
	if err := s.st.VerifyAudit(r.Context()); err != nil {
		var ce *audit.ChainError
		if !errors.As(err, &ce) {
			s.writeError(w, r, storeErr("audit verify", err))
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
			rep.JSONL, rep.JSONLBehind = "chain verified, a copy of the store's", tr.Behind
		}
	}
	writeJSON(w, http.StatusOK, rep)
}
