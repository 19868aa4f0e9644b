package services

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
)

// Tasks: a unit of work an agent (or a person) gives another agent or
// itself (syscall.task.*; delegating and rejecting map
// onto syscall.task.update).
//
// Who may change a task: its creator and its current assignee, nobody
// else (a person through REST or the CLI may change any task). Within
// that:
//   - reassigning (delegating) is allowed to both; the task reopens for
//     its new assignee unless the update sets a status;
//   - rejecting is the assignee's: it needs a reason and hands the task
//     back to its creator (assignee = creator, status rejected);
//   - cancelling and reopening a finished task (done, rejected,
//     cancelled → open) are the creator's;
//   - open, in_progress and done are set by either.
//
// Every change sends a notice (kind "task") to the inboxes of the
// parties other than the one who made it — the assignee, the creator, and
// an assignee the task was taken from — and raises a "task" event whose
// Ref is the task's ID.

// TaskEventKind is the kind of the event raised for every created or
// changed task (Event.Ref is its ID).
const TaskEventKind = "task"

// TaskUpdate is a change to a task (syscall.task.update's arguments).
// Empty fields change nothing.
type TaskUpdate struct {
	ID     string           `json:"id"`
	Status store.TaskStatus `json:"status,omitempty"`
	// Assignee reassigns (delegates) the task.
	Assignee string `json:"assignee,omitempty"`
	// Note is sent with the notice (and kept in the audit trail).
	Note string `json:"note,omitempty"`
	// Reason is why: required to reject, stored with the task.
	Reason string `json:"reason,omitempty"`
}

// applyTaskUpdate is the decision on an update: whether actor (human: a
// person, who may change any task) may make u to t, and t as changed. It
// changes t only when it returns nil. Errors: KindPermission (who may, in
// the message), KindInvalid.
func applyTaskUpdate(t *store.Task, actor string, human bool, u TaskUpdate) error {
	const op = "syscall.task.update"
	creator, assignee := actor == t.Creator, actor == t.Assignee
	if !human && !creator && !assignee {
		return armory.E(op, armory.KindPermission, fmt.Sprintf("task %s is %s's (created by %s, assigned to %s): only its creator or its assignee may change it", t.ID, t.Assignee, t.Creator, t.Assignee))
	}
	if u.Status == "" && u.Assignee == "" && u.Reason == "" && u.Note == "" {
		return armory.E(op, armory.KindInvalid, "nothing to change: give status, assignee, reason or note")
	}
	if u.Status != "" && !u.Status.Valid() {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("unknown status %q (open, in_progress, done, rejected, cancelled)", u.Status))
	}
	if err := checkAllText(
		store.CheckText("assignee", u.Assignee, store.MaxName, false),
		store.CheckText("note", u.Note, store.MaxBody, false),
		store.CheckText("reason", u.Reason, store.MaxSubject, false)); err != nil {
		return store.Err(op, err)
	}
	finished := func(s store.TaskStatus) bool {
		return s == store.TaskDone || s == store.TaskRejected || s == store.TaskCancelled
	}
	next := *t
	switch u.Status {
	case store.TaskRejected:
		switch {
		case !human && !assignee:
			return armory.E(op, armory.KindPermission, fmt.Sprintf("only task %s's assignee (%s) may reject it; as its creator, cancel it or reassign it", t.ID, t.Assignee))
		case strings.TrimSpace(u.Reason) == "":
			return armory.E(op, armory.KindInvalid, "rejecting a task needs a reason: say why, so that its creator can reassign or change it")
		case u.Assignee != "" && u.Assignee != t.Creator:
			return armory.E(op, armory.KindInvalid, fmt.Sprintf("a rejected task goes back to its creator (%s); to hand it to %s instead, reassign it without rejecting", t.Creator, u.Assignee))
		case t.Status == store.TaskRejected || t.Status == store.TaskCancelled || t.Status == store.TaskDone:
			return armory.E(op, armory.KindInvalid, fmt.Sprintf("task %s is %s already", t.ID, t.Status))
		}
		next.Status, next.Assignee = store.TaskRejected, t.Creator
	case store.TaskCancelled:
		if !human && !creator {
			return armory.E(op, armory.KindPermission, fmt.Sprintf("only task %s's creator (%s) may cancel it; as its assignee, reject it with a reason", t.ID, t.Creator))
		}
		next.Status = store.TaskCancelled
	case store.TaskOpen:
		if finished(t.Status) && !human && !creator {
			return armory.E(op, armory.KindPermission, fmt.Sprintf("task %s is %s: only its creator (%s) may reopen it", t.ID, t.Status, t.Creator))
		}
		next.Status = store.TaskOpen
	case store.TaskInProgress, store.TaskDone:
		if finished(t.Status) && t.Status != u.Status {
			return armory.E(op, armory.KindInvalid, fmt.Sprintf("task %s is %s; its creator (%s) may reopen it (status open) first", t.ID, t.Status, t.Creator))
		}
		next.Status = u.Status
	}
	if u.Assignee != "" && u.Status != store.TaskRejected && u.Assignee != t.Assignee {
		if t.Status == store.TaskCancelled || t.Status == store.TaskDone {
			if u.Status != store.TaskOpen {
				return armory.E(op, armory.KindInvalid, fmt.Sprintf("task %s is %s; reopen it (status open) to reassign it", t.ID, t.Status))
			}
		}
		next.Assignee = u.Assignee
		if u.Status == "" {
			next.Status = store.TaskOpen
		}
	}
	if u.Reason != "" {
		next.Reason = u.Reason
	}
	*t = next
	return nil
}

func checkAllText(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// TaskInput creates a task (syscall.task.create's arguments).
type TaskInput struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// Assignee defaults to the creator.
	Assignee string `json:"assignee,omitempty"`
}

// TaskChange is the result of a task's creation or change: the task as
// stored, and who was notified.
type TaskChange struct {
	Task     *store.Task `json:"task"`
	Notified []string    `json:"notified"`
	// NoticeError says why the notices could not be sent (the change
	// stands: the task is stored).
	NoticeError string `json:"notice_error,omitempty"`
}

// createTask creates in as creator's task. Errors: KindInvalid, KindNotFound
// (an unknown assignee), KindUnavailable.
func (m *Module) createTask(ctx context.Context, creator string, in TaskInput) (TaskChange, error) {
	const op = "syscall.task.create"
	st, err := m.store(ctx)
	if err != nil {
		return TaskChange{}, err
	}
	if in.Assignee == "" {
		in.Assignee = creator
	}
	t := &store.Task{Title: in.Title, Description: in.Description, Creator: creator, Assignee: in.Assignee, Status: store.TaskOpen}
	if err := store.CheckTask(&store.Task{ID: "-", Title: t.Title, Description: t.Description, Creator: creator, Assignee: t.Assignee, Status: t.Status}); err != nil {
		return TaskChange{}, store.Err(op, err)
	}
	if in.Assignee != creator {
		if err := m.requireAgent(ctx, st, op, in.Assignee); err != nil {
			return TaskChange{}, err
		}
	}
	if err := st.CreateTask(ctx, t); err != nil {
		return TaskChange{}, store.Err(op, err)
	}
	body := fmt.Sprintf("%s assigned you task %s: %s", creator, t.ID, t.Title)
	if t.Description != "" {
		body += "\n\n" + t.Description
	}
	return m.notifyTask(ctx, st, t, creator, nil, "New task: "+t.Title, body), nil
}

// updateTask applies u for actor, re-reading and re-deciding when another
// change lands in between (optimistic concurrency). Errors: KindNotFound,
// KindPermission, KindInvalid, KindConflict (still changing after several
// tries), KindUnavailable.
func (m *Module) updateTask(ctx context.Context, actor string, human bool, u TaskUpdate) (TaskChange, error) {
	const op = "syscall.task.update"
	st, err := m.store(ctx)
	if err != nil {
		return TaskChange{}, err
	}
	for range 5 {
		t, err := st.GetTask(ctx, u.ID)
		if err != nil {
			return TaskChange{}, taskErr(op, u.ID, err)
		}
		before := *t
		if err := applyTaskUpdate(t, actor, human, u); err != nil {
			return TaskChange{}, err
		}
		if t.Assignee != before.Assignee && t.Assignee != t.Creator {
			if err := m.requireAgent(ctx, st, op, t.Assignee); err != nil {
				return TaskChange{}, err
			}
		}
		err = st.UpdateTask(ctx, t)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return TaskChange{}, taskErr(op, u.ID, err)
		}
		subject, body := taskNotice(&before, t, actor, u)
		extra := []string(nil)
		if before.Assignee != t.Assignee {
			extra = []string{before.Assignee}
		}
		return m.notifyTask(ctx, st, t, actor, extra, subject, body), nil
	}
	return TaskChange{}, armory.E(op, armory.KindConflict, fmt.Sprintf("task %s kept changing while this update was applied; get it again and retry", u.ID))
}

// taskNotice is the subject and body of the notice of a change.
func taskNotice(before, after *store.Task, actor string, u TaskUpdate) (subject, body string) {
	var what []string
	if before.Status != after.Status {
		what = append(what, fmt.Sprintf("status %s → %s", before.Status, after.Status))
	}
	if before.Assignee != after.Assignee {
		what = append(what, fmt.Sprintf("assignee %s → %s", before.Assignee, after.Assignee))
	}
	if len(what) == 0 {
		what = append(what, "a note")
	}
	subject = fmt.Sprintf("Task %s: %s", after.Title, strings.Join(what, ", "))
	if after.Status == store.TaskRejected && before.Status != store.TaskRejected {
		subject = fmt.Sprintf("Task %s rejected by %s", after.Title, actor)
	}
	body = fmt.Sprintf("%s changed task %s (%s): %s.", actor, after.ID, after.Title, strings.Join(what, ", "))
	if u.Reason != "" {
		body += "\nReason: " + u.Reason
	}
	if u.Note != "" {
		body += "\nNote: " + u.Note
	}
	return subject, body
}

// notifyTask sends the notice of a change of t made by actor to the
// task's assignee, its creator and extra, except actor (and a person), in
// one SendMessages, and raises the task event. The change stands either
// way; a failed send is reported in the TaskChange.
func (m *Module) notifyTask(ctx context.Context, st store.Inboxes, t *store.Task, actor string, extra []string, subject, body string) TaskChange {
	out := TaskChange{Task: t, Notified: []string{}}
	var msgs []*store.Message
	for _, to := range append([]string{t.Assignee, t.Creator}, extra...) {
		if to == "" || to == actor || to == pipeline.Human || slices.Contains(out.Notified, to) {
			continue
		}
		out.Notified = append(out.Notified, to)
		msgs = append(msgs, &store.Message{To: to, From: actor, Kind: store.KindTask, Subject: truncate(subject, store.MaxSubject), Body: truncate(body, store.MaxBody)})
	}
	if len(msgs) > 0 {
		if err := st.SendMessages(context.WithoutCancel(ctx), msgs); err != nil {
			out.NoticeError = "the task is saved, but its notice could not be sent: " + store.Err("notice", err).Error()
			out.Notified = []string{}
		}
	}
	m.publish(pipeline.Event{Kind: TaskEventKind, Agent: t.Assignee, Tool: "task", Status: string(t.Status), Ref: t.ID,
		Message: fmt.Sprintf("task %s %s, assigned to %s", t.ID, t.Status, t.Assignee)})
	return out
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut]
}

// taskErr maps a store error about task id.
func taskErr(op, id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return armory.E(op, armory.KindNotFound, fmt.Sprintf("no task %q; syscall.task.list shows the tasks", id))
	}
	return store.Err(op, err)
}

// --- The tools

var taskStatusEnum = `{"type":"string","enum":["open","in_progress","done","rejected","cancelled"],"description":` +
	quote("open, in_progress, done; rejected (assignee only, with a reason: back to the creator); cancelled (creator only).") + `}`

var (
	taskRead  = armory.Manifest{Danger: armory.DangerSafe, Permission: armory.PermAuto, Category: armory.CatAgent, Capabilities: []armory.Capability{armory.CapReadState}}
	taskWrite = armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatAgent, Capabilities: []armory.Capability{armory.CapReadState, armory.CapWriteState}}
)

// taskTools are syscall.task.create, list, get and update.
func (m *Module) taskTools() []*tool {
	return []*tool{
		{
			spec: armory.Spec{
				Name:        "syscall.task.create",
				Description: "Create a task and assign it to yourself or another agent (who gets a notice in their inbox).",
				InputSchema: schema([]string{"title"},
					prop("title", str("What to do, in one line (at most 1 KiB).")),
					prop("description", str("Details, acceptance criteria (at most 64 KiB).")),
					prop("assignee", str("The agent to do it (default: you)."))),
			},
			man: taskWrite,
			run: func(ctx context.Context, c call) armory.Result {
				var a TaskInput
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				ch, err := m.createTask(ctx, c.agent, a)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(ch)
			},
		},
		{
			spec: armory.Spec{
				Name:        "syscall.task.list",
				Description: "List the world's tasks, oldest first, optionally by creator, assignee (owner) and status.",
				InputSchema: schema(nil,
					prop("creator", str("Only tasks this agent created.")),
					prop("assignee", str("Only tasks assigned to this agent (\"me\": you).")),
					prop("status", taskStatusEnum),
					propLimit, propCursor),
			},
			man: taskRead,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					Creator  string           `json:"creator"`
					Assignee string           `json:"assignee"`
					Status   store.TaskStatus `json:"status"`
					Limit    int              `json:"limit"`
					Cursor   string           `json:"cursor"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				for _, p := range []*string{&a.Creator, &a.Assignee} {
					if *p == "me" {
						*p = c.agent
					}
				}
				tasks, next, err := m.ListTasks(ctx, store.TaskFilter{Creator: a.Creator, Assignee: a.Assignee, Status: a.Status, Page: store.Page{Limit: a.Limit, Cursor: a.Cursor}})
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(listPage[*store.Task]{Items: nonNilSlice(tasks), NextCursor: next})
			},
		},
		{
			spec: armory.Spec{
				Name:        "syscall.task.get",
				Description: "Return a task's full details by ID.",
				InputSchema: schema([]string{"id"}, prop("id", str("The task's ID."))),
			},
			man: taskRead,
			run: func(ctx context.Context, c call) armory.Result {
				var a struct {
					ID string `json:"id"`
				}
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				t, err := m.GetTask(ctx, a.ID)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(t)
			},
		},
		{
			spec: armory.Spec{
				Name: "syscall.task.update",
				Description: "Change a task you created or are assigned: set its status, reassign (delegate) it, or reject it back to its creator " +
					"(status rejected, with a reason). The other parties get a notice.",
				InputSchema: schema([]string{"id"},
					prop("id", str("The task's ID.")),
					prop("status", taskStatusEnum),
					prop("assignee", str("Reassign the task to this agent.")),
					prop("reason", str("Why (required to reject; at most 1 KiB).")),
					prop("note", str("A note for the other parties' notice."))),
			},
			man: taskWrite,
			run: func(ctx context.Context, c call) armory.Result {
				var a TaskUpdate
				if err := c.decode(&a); err != nil {
					return armory.FailErr(err)
				}
				ch, err := m.updateTask(ctx, c.agent, false, a)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(ch)
			},
		},
	}
}

// --- The human API (REST, CLI)

// ListTasks returns a page of the tasks that match f, oldest first, and
// the next page's cursor. Errors: KindInvalid, KindUnavailable.
func (m *Module) ListTasks(ctx context.Context, f store.TaskFilter) ([]*store.Task, string, error) {
	const op = "syscall.task.list"
	if f.Status != "" && !f.Status.Valid() {
		return nil, "", armory.E(op, armory.KindInvalid, fmt.Sprintf("unknown status %q (open, in_progress, done, rejected, cancelled)", f.Status))
	}
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	f.Page = pageArgs(f.Limit, f.Cursor)
	tasks, next, err := st.ListTasks(ctx, f)
	return tasks, next, store.Err(op, err)
}

// GetTask returns task id. Errors: KindNotFound, KindUnavailable.
func (m *Module) GetTask(ctx context.Context, id string) (*store.Task, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	t, err := st.GetTask(ctx, id)
	if err != nil {
		return nil, taskErr("syscall.task.get", id, err)
	}
	return t, nil
}

// CreateTask creates a task on a person's behalf (creator "human"),
// audited through p as tool "task.create" with via (the surface). Errors:
// as syscall.task.create's; a KindUnavailable after the task was created
// means only its audit entry is missing.
func (m *Module) CreateTask(ctx context.Context, p *pipeline.Pipeline, via string, in TaskInput) (TaskChange, error) {
	if in.Assignee == "" {
		return TaskChange{}, armory.E("task.create", armory.KindInvalid, "a person's task needs an assignee agent")
	}
	ch, err := m.createTask(ctx, pipeline.Human, in)
	if err != nil {
		return ch, err
	}
	return ch, audited(ctx, p, pipeline.HumanAction{Tool: "task.create", Agent: in.Assignee,
		Args:   map[string]any{"title": in.Title, "description": in.Description, "assignee": in.Assignee, "via": via},
		Result: fmt.Sprintf("task %s created for %s by %s via %s", ch.Task.ID, in.Assignee, pipeline.Human, via)})
}

// UpdateTask changes a task on a person's behalf (any task, under the
// rules for reject and reassign), audited through p as tool "task.update".
// Errors: as syscall.task.update's.
func (m *Module) UpdateTask(ctx context.Context, p *pipeline.Pipeline, via string, u TaskUpdate) (TaskChange, error) {
	ch, err := m.updateTask(ctx, pipeline.Human, true, u)
	if err != nil {
		return ch, err
	}
	return ch, audited(ctx, p, pipeline.HumanAction{Tool: "task.update", Agent: ch.Task.Assignee,
		Args:   map[string]any{"id": u.ID, "status": u.Status, "assignee": u.Assignee, "reason": u.Reason, "note": u.Note, "via": via},
		Result: fmt.Sprintf("task %s now %s, assigned to %s, by %s via %s", ch.Task.ID, ch.Task.Status, ch.Task.Assignee, pipeline.Human, via)})
}
