package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// Humans is what the routes of the world's services need of the services
// module (services.Module): its human API. Every change is audited through
// the pipeline given (pipeline.AuditHuman: decided_by human, via rest).
type Humans interface {
	PostMessage(ctx context.Context, p *pipeline.Pipeline, agent, body, via string) (*store.Message, error)
	ReadInbox(ctx context.Context, q services.InboxQuery) ([]*store.Message, string, error)
	ListChats(ctx context.Context, member string, p store.Page) ([]*store.Chat, string, error)
	GetChat(ctx context.Context, id string) (*store.Chat, error)
	ChatHistory(ctx context.Context, id string, p store.Page) ([]*store.ChatMessage, string, error)
	PostChat(ctx context.Context, p *pipeline.Pipeline, id, body, via string) (*store.ChatMessage, error)

	ListTasks(ctx context.Context, f store.TaskFilter) ([]*store.Task, string, error)
	GetTask(ctx context.Context, id string) (*store.Task, error)
	CreateTask(ctx context.Context, p *pipeline.Pipeline, via string, in services.TaskInput) (services.TaskChange, error)
	UpdateTask(ctx context.Context, p *pipeline.Pipeline, via string, u services.TaskUpdate) (services.TaskChange, error)

	ListKnowledge(ctx context.Context, prefix string, p store.Page) ([]services.KnowledgeSummary, string, error)
	GetKnowledge(ctx context.Context, key string) (*store.KnowledgeEntry, error)
	PutKnowledge(ctx context.Context, p *pipeline.Pipeline, via string, w services.KnowledgeWrite) (*store.KnowledgeEntry, error)
	DeleteKnowledge(ctx context.Context, p *pipeline.Pipeline, via, key string, expectVersion *int64) error

	ReadState(ctx context.Context, key string) (*store.StateEntry, error)
	ListState(ctx context.Context, prefix string, p store.Page) ([]*store.StateEntry, string, error)
	WriteState(ctx context.Context, p *pipeline.Pipeline, via string, w services.StateWrite) (services.StateWritten, error)

	ListTimers(ctx context.Context, owner string, p store.Page) ([]services.TimerView, string, error)
	DeleteTimer(ctx context.Context, by services.HumanAuditor, id string) (services.TimerView, error)
}

var _ Humans = (*services.Module)(nil)

// ListPage is the body of every paginated list of the services routes:
// a page of items and the cursor of the next page (absent on the last),
// which ?cursor= takes back.
type ListPage[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

func page[T any](items []T, next string) ListPage[T] {
	if items == nil {
		items = []T{}
	}
	return ListPage[T]{Items: items, NextCursor: next}
}

// The services routes (inboxes, chats, tasks, knowledge, state, timers).
// They follow the agent routes (agents.go):
//
//   - An admin token acts as the human, through the services module's
//     human API; every change is audited as the human's (via rest).
//   - An agent token acts as its agent: the route runs the matching
//     syscall tool through the pipeline as that agent's call (the world's
//     access policy decides: a tool it does not have is an unknown tool,
//     404; the call, refused or not, is audited as the agent's; a stopped
//     agent is refused, 403), and the body is the tool's value. A route without a matching tool (posting
//     to an inbox as a person, a chat's members, deleting a timer by ID) is
//     403 for an agent token.
//
// agentForm maps a request of an agent token to its tool and arguments;
// nil means the route is the human's only.
type agentForm func(r *http.Request, agent string) (tool string, args map[string]any, err error)

// humanRoute serves a services route: human for an admin token, agent for
// an agent token (see above).
func (s *Server) humanRoute(human func(w http.ResponseWriter, r *http.Request, h Humans), agent agentForm) http.HandlerFunc {
	return s.tokenRoute(func(w http.ResponseWriter, r *http.Request) {
		if s.humans == nil {
			s.writeError(w, r, armory.E("", armory.KindUnavailable, "this server has no world services (the services module)"))
			return
		}
		human(w, r, s.humans)
	}, agent)
}

// tokenRoute serves a route that a person (admin token) and an agent
// (agent token) both use: human serves the admin token; an agent token's
// request becomes its agent's call of the tool agent names, through the
// pipeline (nil agent: 403).
func (s *Server) tokenRoute(human http.HandlerFunc, agent agentForm) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t := requestToken(r.Context())
		if !t.Admin {
			if agent == nil {
				s.writeError(w, r, armory.E("", armory.KindPermission, "this needs an admin token (it acts as the human; no agent tool does it)"))
				return
			}
			tool, args, err := agent(r, t.Agent)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			if args == nil {
				args = map[string]any{}
			}
			raw, err := json.Marshal(args)
			if err != nil {
				s.writeError(w, r, armory.E("", armory.KindInternal, "encoding the arguments", err))
				return
			}
			s.agentToolCall(w, r, t.Agent, tool, raw)
			return
		}
		human(w, r)
	}
}

// written answers a change: 200 with v, or the error. A KindUnavailable
// error with done true means the change was made but its audit entry (or,
// for a chat message, its delivery) is missing: 200 with a warning.
func (s *Server) written(w http.ResponseWriter, r *http.Request, done bool, v any, err error) {
	if err != nil && (!done || armory.KindOf(err) != armory.KindUnavailable) {
		s.writeError(w, r, err)
		return
	}
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]any{"result": v, "warning": armory.Message(err)})
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// pageParams reads ?limit= (1..store.MaxPage) and ?cursor=.
func pageParams(r *http.Request) (store.Page, error) {
	q := r.URL.Query()
	p := store.Page{Cursor: q.Get("cursor")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > store.MaxPage || strconv.Itoa(n) != v {
			return p, badParam("limit", "must be a whole number 1..%d, got %s", store.MaxPage, quote(v))
		}
		p.Limit = n
	}
	return p, nil
}

// intParam reads an optional whole number parameter (nil when absent).
func intParam(r *http.Request, name string, lo, hi int64) (*int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return nil, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < lo || n > hi || strconv.FormatInt(n, 10) != v {
		return nil, badParam(name, "must be a whole number %d..%d, got %s", lo, hi, quote(v))
	}
	return &n, nil
}

// pageArgs adds a request's limit and cursor to a tool's arguments.
func pageArgs(r *http.Request, args map[string]any) (map[string]any, error) {
	p, err := pageParams(r)
	if err != nil {
		return nil, err
	}
	if p.Limit > 0 {
		args["limit"] = p.Limit
	}
	if p.Cursor != "" {
		args["cursor"] = p.Cursor
	}
	return args, nil
}

// queryArgs copies the named query parameters that are given into args.
func queryArgs(r *http.Request, args map[string]any, names ...string) map[string]any {
	for _, n := range names {
		if v := r.URL.Query().Get(n); v != "" {
			args[n] = v
		}
	}
	return args
}

// ---- inboxes ----

// MessageRequest is the body of POST /api/agents/{id}/inbox and
// POST /api/chats/{id}/messages.
type MessageRequest struct {
	Message string `json:"message"`
}

func decodeMessage(r *http.Request) (string, error) {
	var req MessageRequest
	if err := decodeJSON(r, &req); err != nil {
		return "", err
	}
	if req.Message == "" {
		return "", armory.E("", armory.KindInvalid, `"message" is required: the text to send`)
	}
	return req.Message, nil
}

func (s *Server) postInbox(w http.ResponseWriter, r *http.Request, h Humans) {
	body, err := decodeMessage(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	msg, err := h.PostMessage(r.Context(), s.p, r.PathValue("id"), body, pipeline.ViaREST)
	s.written(w, r, msg != nil, msg, err)
}

// readInbox serves GET /api/agents/{id}/inbox: any agent's inbox, or
// "human" (the agents' replies to people), for an admin token, read
// without acknowledging anything.
func (s *Server) readInbox(w http.ResponseWriter, r *http.Request, h Humans) {
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := services.InboxQuery{Agent: r.PathValue("id"), Page: p}
	lb, err := intParam(r, "lookback_minutes", 1, 366*24*60)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if lb != nil {
		q.LookbackMinutes = int(*lb)
	}
	switch v := r.URL.Query().Get("unacked"); v {
	case "", "0", "false":
	case "1", "true":
		q.Unacked = true
	default:
		s.writeError(w, r, badParam("unacked", "must be 1, true, 0 or false, got %s", quote(v)))
		return
	}
	msgs, next, err := h.ReadInbox(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(msgs, next))
}

// inboxAsAgent: an agent token reads its own inbox with syscall.inbox
// (which acknowledges what it returns, as the agent's own read does).
func inboxAsAgent(r *http.Request, agent string) (string, map[string]any, error) {
	if r.PathValue("id") != agent {
		return "", nil, errWrongAgent
	}
	args, err := pageArgs(r, map[string]any{})
	if err != nil {
		return "", nil, err
	}
	lb, err := intParam(r, "lookback_minutes", 1, 366*24*60)
	if err != nil {
		return "", nil, err
	}
	if lb != nil {
		args["lookback_minutes"] = *lb
	}
	switch v := r.URL.Query().Get("unacked"); v {
	case "", "0", "false":
	case "1", "true":
		args["unacked_only"] = true
	default:
		return "", nil, badParam("unacked", "must be 1, true, 0 or false, got %s", quote(v))
	}
	return "syscall.inbox", args, nil
}

// ---- chats ----

func (s *Server) listChats(w http.ResponseWriter, r *http.Request, h Humans) {
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	chats, next, err := h.ListChats(r.Context(), r.URL.Query().Get("member"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(chats, next))
}

func chatsAsAgent(r *http.Request, agent string) (string, map[string]any, error) {
	if m := r.URL.Query().Get("member"); m != "" && m != agent {
		return "", nil, armory.E("", armory.KindPermission, "an agent token lists only its own agent's chats (member "+quote(m)+")")
	}
	args, err := pageArgs(r, map[string]any{})
	return "syscall.chat.list", args, err
}

func (s *Server) getChat(w http.ResponseWriter, r *http.Request, h Humans) {
	c, err := h.GetChat(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) chatHistory(w http.ResponseWriter, r *http.Request, h Humans) {
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	msgs, next, err := h.ChatHistory(r.Context(), r.PathValue("id"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(msgs, next))
}

func historyAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	args, err := pageArgs(r, map[string]any{"chat_id": r.PathValue("id")})
	return "syscall.chat.history", args, err
}

func (s *Server) postChat(w http.ResponseWriter, r *http.Request, h Humans) {
	body, err := decodeMessage(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cm, err := h.PostChat(r.Context(), s.p, r.PathValue("id"), body, pipeline.ViaREST)
	s.written(w, r, cm != nil, cm, err)
}

func postChatAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	body, err := decodeMessage(r)
	return "syscall.chat.send", map[string]any{"chat_id": r.PathValue("id"), "message": body}, err
}

// ---- tasks ----

func (s *Server) listTasks(w http.ResponseWriter, r *http.Request, h Humans) {
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	f := store.TaskFilter{Creator: q.Get("creator"), Assignee: q.Get("assignee"), Status: store.TaskStatus(q.Get("status")), Page: p}
	tasks, next, err := h.ListTasks(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(tasks, next))
}

func tasksAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	args, err := pageArgs(r, queryArgs(r, map[string]any{}, "creator", "assignee", "status"))
	return "syscall.task.list", args, err
}

func (s *Server) getTask(w http.ResponseWriter, r *http.Request, h Humans) {
	t, err := h.GetTask(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}

func taskAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	return "syscall.task.get", map[string]any{"id": r.PathValue("id")}, nil
}

// TaskRequest is the body of POST /api/tasks.
type TaskRequest struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Assignee is required of a person (an admin token); an agent's task
	// defaults to the agent itself.
	Assignee string `json:"assignee,omitempty"`
}

func decodeTask(r *http.Request) (TaskRequest, error) {
	var req TaskRequest
	if err := decodeJSON(r, &req); err != nil {
		return req, err
	}
	if req.Title == "" {
		return req, armory.E("", armory.KindInvalid, `"title" is required`)
	}
	return req, nil
}

func (s *Server) createTask(w http.ResponseWriter, r *http.Request, h Humans) {
	req, err := decodeTask(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ch, err := h.CreateTask(r.Context(), s.p, pipeline.ViaREST, services.TaskInput(req))
	s.written(w, r, ch.Task != nil, ch, err)
}

func createTaskAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	req, err := decodeTask(r)
	if err != nil {
		return "", nil, err
	}
	args := map[string]any{"title": req.Title}
	if req.Description != "" {
		args["description"] = req.Description
	}
	if req.Assignee != "" {
		args["assignee"] = req.Assignee
	}
	return "syscall.task.create", args, nil
}

// TaskUpdateRequest is the body of PATCH /api/tasks/{id}.
type TaskUpdateRequest struct {
	Status   store.TaskStatus `json:"status,omitempty"`
	Assignee string           `json:"assignee,omitempty"`
	Reason   string           `json:"reason,omitempty"`
	Note     string           `json:"note,omitempty"`
}

func decodeTaskUpdate(r *http.Request) (TaskUpdateRequest, error) {
	var req TaskUpdateRequest
	if err := decodeJSON(r, &req); err != nil {
		return req, err
	}
	if req.Status == "" && req.Assignee == "" {
		return req, armory.E("", armory.KindInvalid, `give "status", "assignee" or both: nothing to change`)
	}
	return req, nil
}

func (s *Server) updateTask(w http.ResponseWriter, r *http.Request, h Humans) {
	req, err := decodeTaskUpdate(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ch, err := h.UpdateTask(r.Context(), s.p, pipeline.ViaREST, services.TaskUpdate{ID: r.PathValue("id"),
		Status: req.Status, Assignee: req.Assignee, Reason: req.Reason, Note: req.Note})
	s.written(w, r, ch.Task != nil, ch, err)
}

func updateTaskAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	req, err := decodeTaskUpdate(r)
	if err != nil {
		return "", nil, err
	}
	args := map[string]any{"id": r.PathValue("id")}
	for k, v := range map[string]string{"status": string(req.Status), "assignee": req.Assignee, "reason": req.Reason, "note": req.Note} {
		if v != "" {
			args[k] = v
		}
	}
	return "syscall.task.update", args, nil
}

// ---- knowledge ----

func (s *Server) listKnowledge(w http.ResponseWriter, r *http.Request, h Humans) {
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, next, err := h.ListKnowledge(r.Context(), r.URL.Query().Get("prefix"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(items, next))
}

func knowledgeListAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	args, err := pageArgs(r, queryArgs(r, map[string]any{}, "prefix"))
	return "syscall.knowledge.list", args, err
}

func (s *Server) getKnowledge(w http.ResponseWriter, r *http.Request, h Humans) {
	e, err := h.GetKnowledge(r.Context(), r.PathValue("key"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func knowledgeAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	return "syscall.knowledge.read", map[string]any{"key": r.PathValue("key")}, nil
}

// KnowledgeRequest is the body of PUT /api/knowledge/{key}.
type KnowledgeRequest struct {
	Body  string `json:"body"`
	Title string `json:"title,omitempty"`
	// Read and Write replace the entry's lists when given (principals
	// agent:ID, group:NAME, *).
	Read  []string `json:"read,omitempty"`
	Write []string `json:"write,omitempty"`
	// ExpectVersion makes the write a compare-and-set (0: a new entry
	// only); a stale one is 409.
	ExpectVersion *int64 `json:"expect_version,omitempty"`
}

func decodeKnowledge(r *http.Request) (KnowledgeRequest, error) {
	var req KnowledgeRequest
	if err := decodeJSON(r, &req); err != nil {
		return req, err
	}
	if req.Body == "" {
		return req, armory.E("", armory.KindInvalid, `"body" is required: the entry's text`)
	}
	return req, nil
}

func (s *Server) putKnowledge(w http.ResponseWriter, r *http.Request, h Humans) {
	req, err := decodeKnowledge(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	e, err := h.PutKnowledge(r.Context(), s.p, pipeline.ViaREST, services.KnowledgeWrite{Key: r.PathValue("key"),
		Title: req.Title, Body: req.Body, Read: req.Read, Write: req.Write, ExpectVersion: req.ExpectVersion})
	s.written(w, r, e != nil, e, err)
}

func putKnowledgeAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	req, err := decodeKnowledge(r)
	if err != nil {
		return "", nil, err
	}
	args := map[string]any{"key": r.PathValue("key"), "body": req.Body}
	if req.Title != "" {
		args["title"] = req.Title
	}
	if req.Read != nil {
		args["read"] = req.Read
	}
	if req.Write != nil {
		args["write"] = req.Write
	}
	if req.ExpectVersion != nil {
		args["expect_version"] = *req.ExpectVersion
	}
	return "syscall.knowledge.write", args, nil
}

// deleteKnowledge serves DELETE /api/knowledge/{key}[?expect_version=N].
func (s *Server) deleteKnowledge(w http.ResponseWriter, r *http.Request, h Humans) {
	ev, err := intParam(r, "expect_version", 1, 1<<62)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	key := r.PathValue("key")
	if err := h.DeleteKnowledge(r.Context(), s.p, pipeline.ViaREST, key, ev); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": key})
}

func deleteKnowledgeAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	ev, err := intParam(r, "expect_version", 1, 1<<62)
	if err != nil {
		return "", nil, err
	}
	args := map[string]any{"key": r.PathValue("key")}
	if ev != nil {
		args["expect_version"] = *ev
	}
	return "syscall.knowledge.delete", args, nil
}

// ---- state ----

func (s *Server) listState(w http.ResponseWriter, r *http.Request, h Humans) {
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, next, err := h.ListState(r.Context(), r.URL.Query().Get("prefix"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(items, next))
}

func stateListAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	args, err := pageArgs(r, queryArgs(r, map[string]any{}, "prefix"))
	return "syscall.state.read", args, err
}

func (s *Server) getState(w http.ResponseWriter, r *http.Request, h Humans) {
	e, err := h.ReadState(r.Context(), r.PathValue("key"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

func stateAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	return "syscall.state.read", map[string]any{"key": r.PathValue("key")}, nil
}

// StateRequest is the body of PUT /api/state/{key}.
type StateRequest struct {
	Value string `json:"value"`
	// ExpectVersion makes the write a compare-and-set (0: a new key
	// only); a stale one is 409 with the current version.
	ExpectVersion *int64 `json:"expect_version,omitempty"`
}

func decodeState(r *http.Request) (StateRequest, error) {
	var req struct {
		Value         *string `json:"value"`
		ExpectVersion *int64  `json:"expect_version,omitempty"`
	}
	if err := decodeJSON(r, &req); err != nil {
		return StateRequest{}, err
	}
	if req.Value == nil {
		return StateRequest{}, armory.E("", armory.KindInvalid, `"value" is required (a string; "" is a value)`)
	}
	return StateRequest{Value: *req.Value, ExpectVersion: req.ExpectVersion}, nil
}

func (s *Server) putState(w http.ResponseWriter, r *http.Request, h Humans) {
	req, err := decodeState(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out, err := h.WriteState(r.Context(), s.p, pipeline.ViaREST, services.StateWrite{Key: r.PathValue("key"), Value: req.Value, ExpectVersion: req.ExpectVersion})
	s.written(w, r, out.Version > 0, out, err)
}

func putStateAsAgent(r *http.Request, _ string) (string, map[string]any, error) {
	req, err := decodeState(r)
	if err != nil {
		return "", nil, err
	}
	args := map[string]any{"key": r.PathValue("key"), "value": req.Value}
	if req.ExpectVersion != nil {
		args["expect_version"] = *req.ExpectVersion
	}
	return "syscall.state.write", args, nil
}

// ---- timers ----

func (s *Server) listTimers(w http.ResponseWriter, r *http.Request, h Humans) {
	p, err := pageParams(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ts, next, err := h.ListTimers(r.Context(), r.URL.Query().Get("agent"), p)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, page(ts, next))
}

// timersAsAgent: an agent lists its own timers with util.cron list (every
// one of them: the tool has no pages).
func timersAsAgent(r *http.Request, agent string) (string, map[string]any, error) {
	q := r.URL.Query()
	if a := q.Get("agent"); a != "" && a != agent {
		return "", nil, armory.E("", armory.KindPermission, "an agent token lists only its own agent's timers (agent "+quote(a)+")")
	}
	if q.Get("limit") != "" || q.Get("cursor") != "" {
		return "", nil, armory.E("", armory.KindInvalid, "an agent token lists all its timers at once (util.cron list): leave out limit and cursor")
	}
	return "util.cron", map[string]any{"action": "list"}, nil
}

func (s *Server) deleteTimer(w http.ResponseWriter, r *http.Request, h Humans) {
	v, err := h.DeleteTimer(r.Context(), s.p, r.PathValue("id"))
	s.written(w, r, v.ID != "", v, err)
}

// humanRoutes adds the services routes to mux.
func (s *Server) humanRoutes(mux *http.ServeMux) {
	route := func(pattern string, human func(http.ResponseWriter, *http.Request, Humans), agent agentForm, params ...string) {
		mux.Handle(pattern, s.anyToken(s.params(s.humanRoute(human, agent), params...)))
	}
	paged := []string{"limit", "cursor"}
	route("POST /api/agents/{id}/inbox", s.postInbox, nil)
	route("GET /api/agents/{id}/inbox", s.readInbox, inboxAsAgent, append(paged, "lookback_minutes", "unacked")...)
	route("GET /api/chats", s.listChats, chatsAsAgent, append(paged, "member")...)
	route("GET /api/chats/{id}", s.getChat, nil)
	route("GET /api/chats/{id}/history", s.chatHistory, historyAsAgent, paged...)
	route("POST /api/chats/{id}/messages", s.postChat, postChatAsAgent)
	route("GET /api/tasks", s.listTasks, tasksAsAgent, append(paged, "creator", "assignee", "status")...)
	route("POST /api/tasks", s.createTask, createTaskAsAgent)
	route("GET /api/tasks/{id}", s.getTask, taskAsAgent)
	route("PATCH /api/tasks/{id}", s.updateTask, updateTaskAsAgent)
	route("GET /api/knowledge", s.listKnowledge, knowledgeListAsAgent, append(paged, "prefix")...)
	route("GET /api/knowledge/{key...}", s.getKnowledge, knowledgeAsAgent)
	route("PUT /api/knowledge/{key...}", s.putKnowledge, putKnowledgeAsAgent)
	route("DELETE /api/knowledge/{key...}", s.deleteKnowledge, deleteKnowledgeAsAgent, "expect_version")
	route("GET /api/state", s.listState, stateListAsAgent, append(paged, "prefix")...)
	route("GET /api/state/{key...}", s.getState, stateAsAgent)
	route("PUT /api/state/{key...}", s.putState, putStateAsAgent)
	route("GET /api/timers", s.listTimers, timersAsAgent, append(paged, "agent")...)
	route("DELETE /api/timers/{id}", s.deleteTimer, nil)
}
