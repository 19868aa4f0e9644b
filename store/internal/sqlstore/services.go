package sqlstore

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// The world services' rows (store.Agents, Tasks, Knowledge, Memory, State;
// messages.go, timers.go and leases.go hold the others).

// cursor makes an opaque cursor of a position (a key or a decimal seq).
func cursor(pos string) string { return base64.RawURLEncoding.EncodeToString([]byte(pos)) }

// keyAfter decodes a key cursor ("" for the first page).
func keyAfter(c string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", fmt.Errorf("%w: malformed cursor", store.ErrInvalid)
	}
	return string(b), nil
}

// seqAfter decodes a seq cursor (0 for the first page).
func seqAfter(c string) (int64, error) {
	if c == "" {
		return 0, nil
	}
	k, err := keyAfter(c)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(k, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w: malformed cursor", store.ErrInvalid)
	}
	return n, nil
}

func seqCursor(seq int64) string { return cursor(strconv.FormatInt(seq, 10)) }

// pageOf reads one page: q (without LIMIT) is run with LIMIT limit+1, and
// the next cursor is pos of the page's last item when there is more.
func pageOf[T any](ctx context.Context, c *Core, op string, scan func(Row) (T, error), p store.Page, pos func(T) string, q string, args ...any) ([]T, string, error) {
	limit := store.PageLimit(p.Limit)
	items, err := list(ctx, c, op, scan, q+" LIMIT ?", append(args, limit+1)...)
	if err != nil || len(items) <= limit {
		return items, "", err
	}
	items = items[:limit]
	return items, pos(items[limit-1]), nil
}

// one runs q on db (Read for a SELECT, Write for an UPDATE … RETURNING)
// under the gate and scans its one row; no row is ErrNotFound naming what.
func one[T any](ctx context.Context, c *Core, db Querier, what string, scan func(Row) (T, error), q string, args ...any) (T, error) {
	var zero T
	release, err := c.c.Gate.Use()
	if err != nil {
		return zero, err
	}
	defer release()
	v, err := scan(db.QueryRow(ctx, q, args...))
	if noRows(err) {
		return zero, c.errf(what, store.ErrNotFound)
	}
	if err != nil {
		return zero, c.errf(what, err)
	}
	return v, nil
}

// nowUS is the Store's clock in µs (at least 1: 0 means "no time").
func (c *Core) nowUS() int64 { return max(c.c.Now().UnixMicro(), 1) }

// byPrefix reads a page of the rows of sel (a SELECT of a table keyed by
// key) whose key starts with prefix, ordered by key, after the page's
// cursor. The keys are those ≥ prefix and < prefix followed by the
// greatest code point (a key continuing with that code point itself is
// not matched), which an index on key serves.
func byPrefix[T any](ctx context.Context, c *Core, op string, scan func(Row) (T, error), key func(T) string, sel, prefix string, p store.Page) ([]T, string, error) {
	after, err := keyAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf(op, err)
	}
	return pageOf(ctx, c, op, scan, p, func(v T) string { return cursor(key(v)) },
		sel+` WHERE key >= ? AND key < ? AND key <> ? ORDER BY key`, max(prefix, after), prefix+"\U0010FFFF", after)
}

// --- Agents

const selectAgent = `SELECT id, archetype, status, created_by, created_us, status_us FROM agents`

func scanAgent(row Row) (*store.Agent, error) {
	var (
		a                   store.Agent
		status              string
		createdUS, statusUS int64
	)
	if err := row.Scan(&a.ID, &a.Archetype, &status, &a.CreatedBy, &createdUS, &statusUS); err != nil {
		return nil, err
	}
	a.Status, a.CreatedAt, a.StatusAt = store.AgentStatus(status), TimeOrZero(createdUS), TimeOrZero(statusUS)
	return &a, nil
}

// PutAgent implements store.Agents.
func (c *Core) PutAgent(ctx context.Context, a *store.Agent) error {
	if a == nil {
		return c.errf("put agent", store.CheckAgent(a))
	}
	ag := *a
	if ag.Status == "" {
		ag.Status = store.AgentRunning
	}
	if err := store.CheckAgent(&ag); err != nil {
		return c.errf("put agent", err)
	}
	now := c.nowUS()
	ag.CreatedAt, ag.StatusAt = TimeOrZero(now), TimeOrZero(now)
	if err := c.insert(ctx, "put agent "+ag.ID, "agent exists", `INSERT INTO agents (id, archetype, status, created_by, created_us, status_us)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`, ag.ID, ag.Archetype, string(ag.Status), ag.CreatedBy, now, now); err != nil {
		return err
	}
	*a = ag
	return nil
}

// GetAgent implements store.Agents.
func (c *Core) GetAgent(ctx context.Context, id string) (*store.Agent, error) {
	return one(ctx, c, c.c.Read, "agent "+id, scanAgent, selectAgent+` WHERE id = ?`, id)
}

// ListAgents implements store.Agents.
func (c *Core) ListAgents(ctx context.Context, p store.Page) ([]*store.Agent, string, error) {
	after, err := keyAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf("list agents", err)
	}
	return pageOf(ctx, c, "list agents", scanAgent, p, func(a *store.Agent) string { return cursor(a.ID) },
		selectAgent+` WHERE id > ? ORDER BY id`, after)
}

// SetAgentStatus implements store.Agents.
func (c *Core) SetAgentStatus(ctx context.Context, id string, status store.AgentStatus) (*store.Agent, error) {
	if status != store.AgentRunning && status != store.AgentStopped {
		return nil, c.errf("set agent status", fmt.Errorf("%w: agent status %q (running or stopped)", store.ErrInvalid, status))
	}
	return one(ctx, c, c.c.Write, "agent "+id, scanAgent, `UPDATE agents SET status = ?, status_us = ? WHERE id = ?
		RETURNING id, archetype, status, created_by, created_us, status_us`, string(status), c.nowUS(), id)
}

// --- Tasks

const taskColumns = `seq, id, title, description, creator, assignee, status, reason, version, created_us, updated_us`

type taskRow struct {
	seq int64
	*store.Task
}

func scanTask(row Row) (taskRow, error) {
	var (
		t                    store.Task
		seq, createdUS, upUS int64
		status               string
	)
	if err := row.Scan(&seq, &t.ID, &t.Title, &t.Description, &t.Creator, &t.Assignee, &status, &t.Reason, &t.Version, &createdUS, &upUS); err != nil {
		return taskRow{}, err
	}
	t.Status, t.CreatedAt, t.UpdatedAt = store.TaskStatus(status), TimeOrZero(createdUS), TimeOrZero(upUS)
	return taskRow{seq, &t}, nil
}

// CreateTask implements store.Tasks.
func (c *Core) CreateTask(ctx context.Context, t *store.Task) error {
	if t == nil {
		return c.errf("create task", store.CheckTask(t))
	}
	tk := *t
	if tk.ID == "" {
		tk.ID = audit.NewID()
	}
	if tk.Status == "" {
		tk.Status = store.TaskOpen
	}
	if err := store.CheckTask(&tk); err != nil {
		return c.errf("create task", err)
	}
	now := c.nowUS()
	tk.Version, tk.CreatedAt, tk.UpdatedAt = 1, TimeOrZero(now), TimeOrZero(now)
	if err := c.insert(ctx, "create task "+tk.ID, "task exists", `INSERT INTO tasks (id, title, description, creator, assignee, status, reason, version, created_us, updated_us)
		VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT (id) DO NOTHING`,
		tk.ID, tk.Title, tk.Description, tk.Creator, tk.Assignee, string(tk.Status), tk.Reason, now, now); err != nil {
		return err
	}
	*t = tk
	return nil
}

// GetTask implements store.Tasks.
func (c *Core) GetTask(ctx context.Context, id string) (*store.Task, error) {
	r, err := one(ctx, c, c.c.Read, "task "+id, scanTask, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id)
	return r.Task, err
}

// ListTasks implements store.Tasks.
func (c *Core) ListTasks(ctx context.Context, f store.TaskFilter) ([]*store.Task, string, error) {
	after, err := seqAfter(f.Cursor)
	if err != nil {
		return nil, "", c.errf("list tasks", err)
	}
	var w filter
	w.add("seq > ?", after)
	w.eq("creator", f.Creator)
	w.eq("assignee", f.Assignee)
	w.eq("status", string(f.Status))
	rows, next, err := pageOf(ctx, c, "list tasks", scanTask, f.Page, func(r taskRow) string { return seqCursor(r.seq) },
		`SELECT `+taskColumns+` FROM tasks`+w.where()+` ORDER BY seq`, w.args...)
	out := make([]*store.Task, len(rows))
	for i, r := range rows {
		out[i] = r.Task
	}
	return out, next, err
}

// UpdateTask implements store.Tasks: one UPDATE that compares the version,
// so a stale writer, in any process, changes nothing.
func (c *Core) UpdateTask(ctx context.Context, t *store.Task) error {
	if t == nil {
		return c.errf("update task", store.CheckTask(t))
	}
	check := *t
	check.Creator = "-" // not written
	if err := store.CheckTask(&check); err != nil {
		return c.errf("update task", err)
	}
	release, err := c.c.Gate.Use()
	if err != nil {
		return err
	}
	defer release()
	r, err := scanTask(c.c.Write.QueryRow(ctx, `UPDATE tasks SET title = ?, description = ?, assignee = ?, status = ?, reason = ?,
		version = version + 1, updated_us = ? WHERE id = ? AND version = ? RETURNING `+taskColumns,
		t.Title, t.Description, t.Assignee, string(t.Status), t.Reason, c.nowUS(), t.ID, t.Version))
	if noRows(err) {
		return c.stale(ctx, "task "+t.ID, `SELECT version FROM tasks WHERE id = ?`, t.ID, t.Version)
	}
	if err != nil {
		return c.errf("update task", err)
	}
	*t = *r.Task
	return nil
}

// stale explains a versioned write that changed nothing: ErrNotFound when
// q (the row's version by key) finds no row, else ErrConflict.
func (c *Core) stale(ctx context.Context, what, q string, key any, expect int64) error {
	var have int64
	err := c.c.Read.QueryRow(ctx, q, key).Scan(&have)
	if noRows(err) {
		return c.errf(what, store.ErrNotFound)
	}
	if err != nil {
		return c.errf(what, err)
	}
	return c.errf(what, fmt.Errorf("%w: version %d, not %d", store.ErrConflict, have, expect))
}

// --- Versioned rows (knowledge, state)

// versioned is a table of rows with a key and a version, written by
// putVersioned.
type versioned struct {
	table string
	// cols are the written columns after the key; updated_us is last.
	cols []string
	// created: the table has created_us, set by the first write.
	created bool
}

// put writes key's row with vals (one per col; the last is updated_us,
// also the created_us of a new row when the table has one) iff its version
// is expect (store.AnyVersion: unconditionally; 0: only as a new row), in
// one statement, and returns the new version and the row's created_us (0
// when the table has none).
func (v versioned) put(ctx context.Context, c *Core, op string, expect int64, key string, vals []any) (version, createdUS int64, err error) {
	release, err := c.c.Gate.Use()
	if err != nil {
		return 0, 0, err
	}
	defer release()
	cols, ret := strings.Join(v.cols, ", "), " RETURNING version, 0"
	ins := `INSERT INTO ` + v.table + ` (key, ` + cols + `, version`
	values := `VALUES (?` + strings.Repeat(", ?", len(v.cols)) + `, 1`
	args := append([]any{key}, vals...)
	if v.created {
		ins, values, ret = ins+`, created_us`, values+`, ?`, " RETURNING version, created_us"
		args = append(args, vals[len(vals)-1])
	}
	insert := ins + `) ` + values + `)`
	var q string
	switch {
	case expect == store.AnyVersion:
		set := make([]string, len(v.cols))
		for i, col := range v.cols {
			set[i] = col + " = excluded." + col
		}
		q = insert + ` ON CONFLICT (key) DO UPDATE SET ` + strings.Join(set, ", ") + `, version = ` + v.table + `.version + 1` + ret
	case expect == 0:
		q = insert + ` ON CONFLICT (key) DO NOTHING` + ret
	case expect > 0:
		q = `UPDATE ` + v.table + ` SET ` + strings.Join(v.cols, " = ?, ") + ` = ?, version = version + 1 WHERE key = ? AND version = ?` + ret
		args = append(append(vals[:len(vals):len(vals)], key), expect)
	default:
		return 0, 0, c.errf(op, fmt.Errorf("%w: expected version %d", store.ErrInvalid, expect))
	}
	err = c.c.Write.QueryRow(ctx, q, args...).Scan(&version, &createdUS)
	if noRows(err) {
		if expect == 0 {
			return 0, 0, c.errf(op, fmt.Errorf("%w: %q exists", store.ErrConflict, key))
		}
		return 0, 0, c.errf(op, fmt.Errorf("%w: %q is not at version %d", store.ErrConflict, key, expect))
	}
	if err != nil {
		return 0, 0, c.errf(op, err)
	}
	return version, createdUS, nil
}

// delete deletes key's row iff its version is expect (or AnyVersion).
func (v versioned) delete(ctx context.Context, c *Core, op, key string, expect int64) error {
	release, err := c.c.Gate.Use()
	if err != nil {
		return err
	}
	defer release()
	n, err := c.c.Write.Exec(ctx, `DELETE FROM `+v.table+` WHERE key = ? AND (CAST(? AS BIGINT) = -1 OR version = ?)`, key, expect, expect)
	if err != nil {
		return c.errf(op, err)
	}
	if n == 1 {
		return nil
	}
	return c.stale(ctx, op, `SELECT version FROM `+v.table+` WHERE key = ?`, key, expect)
}

// --- Knowledge

var knowledgeTable = versioned{"knowledge", []string{"title", "body", "author", "read_acl", "write_acl", "updated_us"}, true}

const selectKnowledge = `SELECT key, title, body, author, read_acl, write_acl, version, created_us, updated_us FROM knowledge`

func scanKnowledge(row Row) (*store.KnowledgeEntry, error) {
	var (
		e               store.KnowledgeEntry
		read, write     string
		createdUS, upUS int64
	)
	if err := row.Scan(&e.Key, &e.Title, &e.Body, &e.Author, &read, &write, &e.Version, &createdUS, &upUS); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(read), &e.Read); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(write), &e.Write); err != nil {
		return nil, err
	}
	e.CreatedAt, e.UpdatedAt = TimeOrZero(createdUS), TimeOrZero(upUS)
	return &e, nil
}

// acl is an access list as stored (a JSON array, never null).
func acl(l []string) string {
	if l == nil {
		l = []string{}
	}
	b, _ := json.Marshal(l) // strings always marshal
	return string(b)
}

// PutKnowledge implements store.Knowledge.
func (c *Core) PutKnowledge(ctx context.Context, e *store.KnowledgeEntry, expect int64) error {
	if err := store.CheckKnowledge(e); err != nil {
		return c.errf("put knowledge", err)
	}
	now := c.nowUS()
	v, created, err := knowledgeTable.put(ctx, c, "put knowledge "+e.Key, expect, e.Key,
		[]any{e.Title, e.Body, e.Author, acl(e.Read), acl(e.Write), now})
	if err != nil {
		return err
	}
	e.Version, e.CreatedAt, e.UpdatedAt = v, TimeOrZero(created), TimeOrZero(now)
	return nil
}

// GetKnowledge implements store.Knowledge.
func (c *Core) GetKnowledge(ctx context.Context, key string) (*store.KnowledgeEntry, error) {
	return one(ctx, c, c.c.Read, "knowledge "+key, scanKnowledge, selectKnowledge+` WHERE key = ?`, key)
}

// ListKnowledge implements store.Knowledge.
func (c *Core) ListKnowledge(ctx context.Context, prefix string, p store.Page) ([]*store.KnowledgeEntry, string, error) {
	return byPrefix(ctx, c, "list knowledge", scanKnowledge, func(e *store.KnowledgeEntry) string { return e.Key }, selectKnowledge, prefix, p)
}

// DeleteKnowledge implements store.Knowledge.
func (c *Core) DeleteKnowledge(ctx context.Context, key string, expect int64) error {
	return knowledgeTable.delete(ctx, c, "delete knowledge "+key, key, expect)
}

// --- State

var stateTable = versioned{"world_state", []string{"value", "updated_us"}, false}

const selectState = `SELECT key, value, version, updated_us FROM world_state`

func scanState(row Row) (*store.StateEntry, error) {
	var (
		e    store.StateEntry
		upUS int64
	)
	if err := row.Scan(&e.Key, &e.Value, &e.Version, &upUS); err != nil {
		return nil, err
	}
	e.UpdatedAt = TimeOrZero(upUS)
	return &e, nil
}

// ReadState implements store.State.
func (c *Core) ReadState(ctx context.Context, key string) (*store.StateEntry, error) {
	return one(ctx, c, c.c.Read, "state "+key, scanState, selectState+` WHERE key = ?`, key)
}

// ReadAllState implements store.State.
func (c *Core) ReadAllState(ctx context.Context, prefix string, p store.Page) ([]*store.StateEntry, string, error) {
	return byPrefix(ctx, c, "read all state", scanState, func(e *store.StateEntry) string { return e.Key }, selectState, prefix, p)
}

// WriteState implements store.State: one statement, so a compare-and-set
// is atomic across processes.
func (c *Core) WriteState(ctx context.Context, key, value string, expect int64) (int64, error) {
	if err := store.CheckState(key, value); err != nil {
		return 0, c.errf("write state", err)
	}
	v, _, err := stateTable.put(ctx, c, "write state "+key, expect, key, []any{value, c.nowUS()})
	return v, err
}

// DeleteState implements store.State.
func (c *Core) DeleteState(ctx context.Context, key string, expect int64) error {
	return stateTable.delete(ctx, c, "delete state "+key, key, expect)
}

// --- Memory

const selectMemory = `SELECT agent, key, value, updated_us FROM memory`

func scanMemory(row Row) (*store.MemoryEntry, error) {
	var (
		e    store.MemoryEntry
		upUS int64
	)
	if err := row.Scan(&e.Agent, &e.Key, &e.Value, &upUS); err != nil {
		return nil, err
	}
	e.UpdatedAt = TimeOrZero(upUS)
	return &e, nil
}

// WriteMemory implements store.Memory.
func (c *Core) WriteMemory(ctx context.Context, agent, key, value string) (*store.MemoryEntry, error) {
	return c.writeMemory(ctx, "write memory", agent, key, value, false)
}

// AppendMemory implements store.Memory.
func (c *Core) AppendMemory(ctx context.Context, agent, key, text string) (*store.MemoryEntry, error) {
	return c.writeMemory(ctx, "append memory", agent, key, text, true)
}

// writeMemory sets (or appends to) agent's key in one transaction that
// first serializes the agent's memory writes (Config.Serialize), then
// checks the bounds against what is stored.
func (c *Core) writeMemory(ctx context.Context, op, agent, key, value string, appending bool) (*store.MemoryEntry, error) {
	if err := store.CheckMemory(agent, key, value); err != nil {
		return nil, c.errf(op, err)
	}
	var e *store.MemoryEntry
	err := c.tx(ctx, op, func(q Querier) (err error) {
		if err := c.serialize(ctx, q, "memory:"+agent); err != nil {
			return err
		}
		var old string
		err = q.QueryRow(ctx, `SELECT value FROM memory WHERE agent = ? AND key = ?`, agent, key).Scan(&old)
		switch {
		case noRows(err):
			var n int
			if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM memory WHERE agent = ?`, agent).Scan(&n); err != nil {
				return err
			}
			if n >= store.MaxMemoryKeys {
				return final(c.errf(op, fmt.Errorf("%w: agent %s has %d memory keys; the limit is %d", store.ErrInvalid, agent, n, store.MaxMemoryKeys)))
			}
		case err != nil:
			return err
		}
		if appending {
			if len(old)+len(value) > store.MaxBody {
				return final(c.errf(op, fmt.Errorf("%w: memory value would be %d bytes; the limit is %d", store.ErrInvalid, len(old)+len(value), store.MaxBody)))
			}
			value = old + value
		}
		e, err = scanMemory(q.QueryRow(ctx, `INSERT INTO memory (agent, key, value, updated_us) VALUES (?, ?, ?, ?)
			ON CONFLICT (agent, key) DO UPDATE SET value = excluded.value, updated_us = excluded.updated_us
			RETURNING agent, key, value, updated_us`, agent, key, value, c.nowUS()))
		return err
	})
	return e, err
}

// serialize runs Config.Serialize for key in q's transaction (nothing
// where a write transaction locks the whole database).
func (c *Core) serialize(ctx context.Context, q Querier, key string) error {
	if c.c.Serialize == "" {
		return nil
	}
	_, err := q.Exec(ctx, c.c.Serialize, key)
	return err
}

// ReadMemory implements store.Memory.
func (c *Core) ReadMemory(ctx context.Context, agent, key string) (*store.MemoryEntry, error) {
	return one(ctx, c, c.c.Read, "memory "+agent+"/"+key, scanMemory, selectMemory+` WHERE agent = ? AND key = ?`, agent, key)
}

// ListMemory implements store.Memory.
func (c *Core) ListMemory(ctx context.Context, agent string, p store.Page) ([]*store.MemoryEntry, string, error) {
	after, err := keyAfter(p.Cursor)
	if err != nil {
		return nil, "", c.errf("list memory", err)
	}
	return pageOf(ctx, c, "list memory", scanMemory, p, func(e *store.MemoryEntry) string { return cursor(e.Key) },
		selectMemory+` WHERE agent = ? AND key > ? ORDER BY key`, agent, after)
}

// DeleteMemory implements store.Memory.
func (c *Core) DeleteMemory(ctx context.Context, agent, key string) error {
	release, err := c.c.Gate.Use()
	if err != nil {
		return err
	}
	defer release()
	n, err := c.c.Write.Exec(ctx, `DELETE FROM memory WHERE agent = ? AND key = ?`, agent, key)
	if err != nil {
		return c.errf("delete memory", err)
	}
	if n == 0 {
		return c.errf("memory "+agent+"/"+key, store.ErrNotFound)
	}
	return nil
}

// usTime is the UTC time of a µs value, for callers' times (zero stays
// zero).
func usTime(t time.Time) int64 { return MicrosOrZero(t.UTC()) }
