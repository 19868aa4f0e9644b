package store

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The world's services (package services: agents, messages, chats, tasks,
// knowledge, memory, state, timers) keep their rows through the roles of
// this file and of messages.go, timers.go and leases.go. The roles live
// here, not in package services, because a backend may not import a room
// (internal/archtest); package services declares the small interfaces it
// uses, composed of these roles. The store keeps rows and makes each call
// atomic; every decision about who may do what (creators, ACLs, members,
// gated chats) is the service's.
//
// Common rules of the service roles:
//   - Every list is bounded and paginated: Page.Limit ≤ 0 means
//     DefaultPage, more than MaxPage means MaxPage; a call returns the
//     cursor of the next page, "" when there is none. A cursor is opaque:
//     pass it back unchanged (a malformed one is ErrInvalid).
//   - Every input is bounded (MaxName, MaxKey, MaxBody, …) and text must be
//     valid UTF-8 without NUL bytes; a violation is ErrInvalid with the
//     reason, and nothing is written.
//   - Every call is one transaction: nothing is half-written on error.
//   - Times are the Store's clock (Options.Now) in UTC microseconds, except
//     lease times (Leases: the backend's lease clock) and the times a
//     caller passes in (timers' fire times).

// Bounds of the service roles.
const (
	// DefaultPage and MaxPage bound a page of a service list.
	DefaultPage = 50
	MaxPage     = 1000
	// MaxName bounds an ID or a name (agent, chat, task, timer, holder,
	// lease, message kind…), in bytes.
	MaxName = 256
	// MaxKey bounds a key (knowledge, memory, state), in bytes.
	MaxKey = 256
	// MaxBody bounds a message body, a chat message, a task description, a
	// knowledge entry, a memory value (also after an append), a state value
	// and a timer's action, in bytes.
	MaxBody = 64 << 10
	// MaxSubject bounds a message subject and a task title or reason.
	MaxSubject = 1 << 10
	// MaxBatch bounds the messages of one SendMessages, the IDs of one
	// AckMessages, the members of a chat and the entries of an ACL.
	MaxBatch = 10000
	// MaxMemoryKeys bounds the memory keys of one agent.
	MaxMemoryKeys = 1000
)

// AnyVersion, as an expected version, makes a versioned write
// unconditional; expected version 0 means "must not exist yet".
const AnyVersion int64 = -1

// Page asks for one page of a list.
type Page struct {
	// Limit is the most items returned (≤ 0: DefaultPage; at most MaxPage).
	Limit int
	// Cursor is "" for the first page, else the next cursor a previous
	// call returned.
	Cursor string
}

// PageLimit returns the limit a backend applies for a requested one.
func PageLimit(n int) int {
	if n <= 0 {
		return DefaultPage
	}
	return min(n, MaxPage)
}

// CheckText returns an ErrInvalid error unless s, named what, is valid
// UTF-8 without NUL bytes and at most max bytes long (and not empty when
// required).
func CheckText(what, s string, max int, required bool) error {
	switch {
	case required && s == "":
		return fmt.Errorf("%w: %s is empty", ErrInvalid, what)
	case len(s) > max:
		return fmt.Errorf("%w: %s is %d bytes; the limit is %d", ErrInvalid, what, len(s), max)
	case !utf8.ValidString(s):
		return fmt.Errorf("%w: %s is not valid UTF-8", ErrInvalid, what)
	case strings.IndexByte(s, 0) >= 0:
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalid, what)
	}
	return nil
}

// checkAll returns the first error of errs.
func checkAll(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// AgentStatus is whether a world agent runs.
type AgentStatus string

// Agent states.
const (
	AgentRunning AgentStatus = "running"
	AgentStopped AgentStatus = "stopped"
)

// Agent is a world agent created at run time (from an archetype), with its
// persisted run status.
type Agent struct {
	ID        string      `json:"id"`
	Archetype string      `json:"archetype"`
	Status    AgentStatus `json:"status"`
	CreatedBy string      `json:"created_by,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	// StatusAt is when Status was last set.
	StatusAt time.Time `json:"status_at"`
}

// CheckAgent validates an agent about to be stored; backends call it.
func CheckAgent(a *Agent) error {
	if a == nil {
		return fmt.Errorf("%w: nil agent", ErrInvalid)
	}
	if a.Status != AgentRunning && a.Status != AgentStopped {
		return fmt.Errorf("%w: agent status %q (running or stopped)", ErrInvalid, a.Status)
	}
	return checkAll(CheckText("agent id", a.ID, MaxName, true), CheckText("archetype", a.Archetype, MaxName, false),
		CheckText("created_by", a.CreatedBy, MaxName, false))
}

// Agents are the agents created at run time. Safe for concurrent use;
// every call is atomic across the Stores sharing the database.
type Agents interface {
	// PutAgent creates a. An empty Status is AgentRunning; CreatedAt and
	// StatusAt are set to now; a is updated accordingly. Errors:
	// ErrConflict (the ID exists), ErrInvalid.
	PutAgent(ctx context.Context, a *Agent) error
	// GetAgent returns agent id, or ErrNotFound.
	GetAgent(ctx context.Context, id string) (*Agent, error)
	// ListAgents returns a page of agents ordered by ID.
	ListAgents(ctx context.Context, p Page) (agents []*Agent, next string, err error)
	// SetAgentStatus sets agent id's status, and StatusAt to now, even when
	// the status does not change, and returns the agent as stored.
	// Errors: ErrNotFound, ErrInvalid.
	SetAgentStatus(ctx context.Context, id string, status AgentStatus) (*Agent, error)
}

// TaskStatus is the state of a task. The store keeps any of these; which
// transitions are allowed is the service's decision.
type TaskStatus string

// Task states.
const (
	TaskOpen       TaskStatus = "open"
	TaskInProgress TaskStatus = "in_progress"
	TaskDone       TaskStatus = "done"
	TaskRejected   TaskStatus = "rejected"
	TaskCancelled  TaskStatus = "cancelled"
)

// Valid reports whether s is a known task status.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskOpen, TaskInProgress, TaskDone, TaskRejected, TaskCancelled:
		return true
	}
	return false
}

// Task is a unit of work an agent gives another (or itself).
type Task struct {
	ID          string     `json:"id"`
	Title       string     `json:"title"`
	Description string     `json:"description,omitempty"`
	Creator     string     `json:"creator"`
	Assignee    string     `json:"assignee,omitempty"`
	Status      TaskStatus `json:"status"`
	// Reason is why the task was last rejected, cancelled or reassigned.
	Reason string `json:"reason,omitempty"`
	// Version is 1 at creation and grows by one with every update.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CheckTask validates a task about to be stored; backends call it.
func CheckTask(t *Task) error {
	if t == nil {
		return fmt.Errorf("%w: nil task", ErrInvalid)
	}
	if !t.Status.Valid() {
		return fmt.Errorf("%w: task status %q", ErrInvalid, t.Status)
	}
	return checkAll(CheckText("task id", t.ID, MaxName, true), CheckText("title", t.Title, MaxSubject, true),
		CheckText("description", t.Description, MaxBody, false), CheckText("creator", t.Creator, MaxName, true),
		CheckText("assignee", t.Assignee, MaxName, false), CheckText("reason", t.Reason, MaxSubject, false))
}

// TaskFilter selects tasks; zero fields do not filter.
type TaskFilter struct {
	Creator  string
	Assignee string
	Status   TaskStatus
	Page
}

// Tasks are the world's tasks. Safe for concurrent use.
type Tasks interface {
	// CreateTask stores a new task. An empty ID gets a fresh one, an empty
	// Status TaskOpen; Version is set to 1 and CreatedAt and UpdatedAt to
	// now; t is updated accordingly. Errors: ErrConflict (the ID exists),
	// ErrInvalid.
	CreateTask(ctx context.Context, t *Task) error
	// GetTask returns task id, or ErrNotFound.
	GetTask(ctx context.Context, id string) (*Task, error)
	// ListTasks returns a page of the tasks that match f, oldest first.
	ListTasks(ctx context.Context, f TaskFilter) (tasks []*Task, next string, err error)
	// UpdateTask stores t's Title, Description, Assignee, Status and
	// Reason iff the stored task's version is t.Version (optimistic
	// concurrency: read, change, update, retry on conflict), then sets
	// t.Version to the new version and t.UpdatedAt to now (Creator and
	// CreatedAt are never changed: t receives the stored ones). Errors:
	// ErrNotFound, ErrConflict (a stale version: someone updated it
	// since), ErrInvalid.
	UpdateTask(ctx context.Context, t *Task) error
}

// KnowledgeEntry is one entry of the world's shared knowledge. Read and
// Write are access lists ("agent:<id>", "group:<name>", "*" for everyone)
// that the service enforces; the store keeps them.
type KnowledgeEntry struct {
	Key    string   `json:"key"`
	Title  string   `json:"title,omitempty"`
	Body   string   `json:"body"`
	Author string   `json:"author,omitempty"`
	Read   []string `json:"read"`
	Write  []string `json:"write"`
	// Version is 1 at creation and grows by one with every write.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// CheckKnowledge validates an entry about to be stored; backends call it.
func CheckKnowledge(e *KnowledgeEntry) error {
	if e == nil {
		return fmt.Errorf("%w: nil knowledge entry", ErrInvalid)
	}
	if err := checkAll(CheckText("knowledge key", e.Key, MaxKey, true), CheckText("title", e.Title, MaxSubject, false),
		CheckText("body", e.Body, MaxBody, false), CheckText("author", e.Author, MaxName, false)); err != nil {
		return err
	}
	for _, acl := range [][]string{e.Read, e.Write} {
		if len(acl) > MaxBatch {
			return fmt.Errorf("%w: an access list has %d entries; the limit is %d", ErrInvalid, len(acl), MaxBatch)
		}
		for _, p := range acl {
			if err := CheckText("access list entry", p, MaxName, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// Knowledge is the world's shared knowledge. Safe for concurrent use.
type Knowledge interface {
	// PutKnowledge writes e iff the stored entry's version is expect
	// (AnyVersion: unconditionally; 0: only if the key does not exist),
	// sets e.Version, e.CreatedAt (kept from the first write) and
	// e.UpdatedAt, and returns nil. Errors: ErrConflict (another version),
	// ErrInvalid.
	PutKnowledge(ctx context.Context, e *KnowledgeEntry, expect int64) error
	// GetKnowledge returns the entry of key, or ErrNotFound.
	GetKnowledge(ctx context.Context, key string) (*KnowledgeEntry, error)
	// ListKnowledge returns a page of the entries whose key starts with
	// prefix, ordered by key.
	ListKnowledge(ctx context.Context, prefix string, p Page) (entries []*KnowledgeEntry, next string, err error)
	// DeleteKnowledge deletes key's entry iff its version is expect (or
	// expect is AnyVersion). Errors: ErrNotFound, ErrConflict.
	DeleteKnowledge(ctx context.Context, key string, expect int64) error
}

// MemoryEntry is one key of an agent's persistent memory.
type MemoryEntry struct {
	Agent     string    `json:"agent"`
	Key       string    `json:"key"`
	Value     string    `json:"value"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Memory is every agent's persistent memory: at most MaxMemoryKeys keys
// per agent, each value at most MaxBody bytes, so an agent's whole memory
// (what recall ranks, in the service) is bounded. Safe for concurrent use;
// writes of one agent's memory are serialized across Stores.
type Memory interface {
	// WriteMemory sets agent's key to value. Errors: ErrInvalid (bounds,
	// or a new key beyond MaxMemoryKeys).
	WriteMemory(ctx context.Context, agent, key, value string) (*MemoryEntry, error)
	// AppendMemory appends text to agent's key (creating it), atomically:
	// concurrent appends all land, in some order. Errors: ErrInvalid (the
	// value would exceed MaxBody, or a new key beyond MaxMemoryKeys).
	AppendMemory(ctx context.Context, agent, key, text string) (*MemoryEntry, error)
	// ReadMemory returns agent's key, or ErrNotFound.
	ReadMemory(ctx context.Context, agent, key string) (*MemoryEntry, error)
	// ListMemory returns a page of agent's entries ordered by key (recall
	// reads every page: at most MaxMemoryKeys entries).
	ListMemory(ctx context.Context, agent string, p Page) (entries []*MemoryEntry, next string, err error)
	// DeleteMemory deletes agent's key. Errors: ErrNotFound.
	DeleteMemory(ctx context.Context, agent, key string) error
}

// StateEntry is one key of the world's shared state.
type StateEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
	// Version is 1 at the first write and grows by one with every write.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// State is the world's key/value state with compare-and-set. Safe for
// concurrent use: every write is one atomic statement, so concurrent
// compare-and-set writers, in any process, never lose an update (each
// stale one gets ErrConflict and retries).
type State interface {
	// ReadState returns key's entry, or ErrNotFound.
	ReadState(ctx context.Context, key string) (*StateEntry, error)
	// ReadAllState returns a page of the entries whose key starts with
	// prefix, ordered by key.
	ReadAllState(ctx context.Context, prefix string, p Page) (entries []*StateEntry, next string, err error)
	// WriteState sets key to value iff its version is expect (AnyVersion:
	// unconditionally; 0: only if the key does not exist) and returns the
	// new version. Errors: ErrConflict (another version, including a key
	// that does not exist for expect > 0), ErrInvalid.
	WriteState(ctx context.Context, key, value string, expect int64) (version int64, err error)
	// DeleteState deletes key iff its version is expect (or AnyVersion).
	// Errors: ErrNotFound, ErrConflict.
	DeleteState(ctx context.Context, key string, expect int64) error
}

// CheckMemory validates a memory write (or append, value being the text
// appended); backends call it.
func CheckMemory(agent, key, value string) error {
	return checkAll(CheckText("agent", agent, MaxName, true), CheckText("memory key", key, MaxKey, true),
		CheckText("memory value", value, MaxBody, false))
}

// CheckState validates a state write; backends call it.
func CheckState(key, value string) error {
	return checkAll(CheckText("state key", key, MaxKey, true), CheckText("state value", value, MaxBody, false))
}
