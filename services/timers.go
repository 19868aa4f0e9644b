package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
	"github.com/robfig/cron/v3"
)

// Timers (util.timer, util.cron, util.watch) are durable store.Timer rows
// owned by the agent that set them; the scheduler (scheduler.go) fires
// them in `armory serve` only. See docs/services.md, "Timers".

// Bounds of the timers; Options may lower or raise the per-agent ones.
const (
	// DefaultMaxTimers bounds an agent's one-shot timers and crons
	// together.
	DefaultMaxTimers = 50
	// DefaultMaxWatches bounds an agent's watches.
	DefaultMaxWatches = 10
	// DefaultMaxWatchesTotal bounds the watches the scheduler arms (inotify
	// watches are a per-user kernel resource).
	DefaultMaxWatchesTotal = 1000
	// MinCronInterval is the shortest gap between two occurrences of a
	// cron schedule (5-field cron cannot go below a minute; this also
	// bounds "@every").
	MinCronInterval = time.Minute
	// MinTimerDelay and MaxTimerDelay bound when a one-shot timer fires,
	// from now.
	MinTimerDelay = time.Second
	MaxTimerDelay = 366 * 24 * time.Hour
	// DefaultDebounce, MinDebounce and MaxDebounce bound a watch's quiet
	// time before it fires.
	DefaultDebounce = 2 * time.Second
	MinDebounce     = 100 * time.Millisecond
	MaxDebounce     = time.Hour
	// MaxTimerMessage bounds a timer's message, in bytes.
	MaxTimerMessage = 8 << 10
)

// EventTimer is the kind of event a firing publishes (Ref: the timer ID).
const EventTimer = "timer"

// timerStore is what the scheduler needs of the store.
type timerStore interface {
	store.Timers
	store.Leases
	store.Inboxes
	store.Tasks
}

// timerAction is a timer's store.Timer.Action: what a firing does.
type timerAction struct {
	// Message is put in the owner's inbox (kind "timer"); a default one
	// when neither Message nor Task is set.
	Message string `json:"message,omitempty"`
	// Task, when set, is created for the owner (creator and assignee).
	Task *taskAction `json:"task,omitempty"`
	// Debounce is a watch's quiet time (a Go duration).
	Debounce string `json:"debounce,omitempty"`
}

type taskAction struct {
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

var timerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$`)

// cronParser reads standard 5-field cron (minute hour day month weekday)
// and the descriptors (@hourly, @daily, @every 1h, …), in UTC unless the
// spec starts with CRON_TZ=Zone.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron parses spec and checks that its occurrences are at least
// MinCronInterval apart. The error names the problem for the model.
func parseCron(spec string) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, errors.New(`schedule is empty; give 5 fields "minute hour day-of-month month day-of-week", e.g. "0 9 * * 1-5"`)
	}
	s, err := cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q is not valid cron: %v; give 5 fields \"minute hour day-of-month month day-of-week\", e.g. \"*/15 * * * *\"", spec, err)
	}
	t := s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	if t.IsZero() {
		return nil, fmt.Errorf("schedule %q never fires", spec)
	}
	for range 8 {
		n := s.Next(t)
		if n.IsZero() {
			break
		}
		if n.Sub(t) < MinCronInterval {
			return nil, fmt.Errorf("schedule %q fires every %s; the shortest interval allowed is %s", spec, n.Sub(t), MinCronInterval)
		}
		t = n
	}
	return s, nil
}

// nextCron is the first occurrence of spec after now, or zero.
func nextCron(spec string, now time.Time) time.Time {
	s, err := parseCron(spec)
	if err != nil {
		return time.Time{}
	}
	return s.Next(now).UTC().Truncate(time.Microsecond)
}

// actionArgs are the what-to-do arguments shared by the timer tools.
type actionArgs struct {
	Message string      `json:"message"`
	Task    *taskAction `json:"task"`
}

// action validates a and returns the action to store. Errors: KindTooLarge
// (a text past its bound), KindInvalid.
func (a actionArgs) action() (timerAction, error) {
	const op = "timers"
	if len(a.Message) > MaxTimerMessage {
		return timerAction{}, armory.E(op, armory.KindTooLarge, fmt.Sprintf("message is %d bytes; the limit is %d", len(a.Message), MaxTimerMessage))
	}
	if a.Task != nil {
		a.Task.Title = strings.TrimSpace(a.Task.Title)
		if a.Task.Title == "" {
			return timerAction{}, armory.E(op, armory.KindInvalid, "task.title is empty; a task needs a title")
		}
		if len(a.Task.Title) > store.MaxSubject {
			return timerAction{}, armory.E(op, armory.KindTooLarge, fmt.Sprintf("task.title is %d bytes; the limit is %d", len(a.Task.Title), store.MaxSubject))
		}
		if err := store.CheckText("task.title", a.Task.Title, store.MaxSubject, true); err != nil {
			return timerAction{}, armory.E(op, armory.KindInvalid, strings.TrimPrefix(err.Error(), "store: invalid argument: "))
		}
		if len(a.Task.Description) > MaxTimerMessage {
			return timerAction{}, armory.E(op, armory.KindTooLarge, fmt.Sprintf("task.description is %d bytes; the limit is %d", len(a.Task.Description), MaxTimerMessage))
		}
	}
	return timerAction{Message: a.Message, Task: a.Task}, nil
}

func checkName(name string) error {
	if !timerName.MatchString(name) {
		return fmt.Errorf("name %q must be 1 to 128 letters, digits and _ . : / - (starting with a letter or digit)", name)
	}
	return nil
}

const actionProps = `"message":{"type":"string","description":"Text put in your inbox (kind timer) when it fires (at most 8 KiB)."},` +
	`"task":{"type":"object","description":"A task to create for yourself when it fires, instead of or besides the message.","properties":{"title":{"type":"string"},"description":{"type":"string"}},"required":["title"],"additionalProperties":false}`

// timerTool is util.timer: a named one-shot timer.
func (m *Module) timerTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name: "util.timer",
			Description: "Set a named timer that fires once, after a duration (\"90s\", \"10m\", \"2h\") or at a time (RFC 3339). " +
				"When it fires, a message lands in your inbox (or a task is created for you). Timers survive restarts and fire exactly once. " +
				"util.cron list shows your timers; util.cron delete cancels one.",
			InputSchema: schema([]string{"name"},
				prop("name", str("Your name for the timer (unique among your timers).")),
				prop("after", str("Fire after this long, e.g. \"90s\", \"10m\", \"1h30m\" (at least 1s, at most a year).")),
				prop("at", str("Fire at this time, RFC 3339 (e.g. \"2030-01-02T15:04:05Z\"); instead of after.")),
				actionProps),
		},
		man: armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapWriteState}},
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Name  string `json:"name"`
				After string `json:"after"`
				At    string `json:"at"`
				actionArgs
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			if err := checkName(a.Name); err != nil {
				return c.fail(armory.KindInvalid, "%v", err)
			}
			now := m.now().UTC()
			var when time.Time
			switch {
			case (a.After == "") == (a.At == ""):
				return c.fail(armory.KindInvalid, "give either after (a duration like \"10m\") or at (an RFC 3339 time), not both and not neither")
			case a.After != "":
				d, err := time.ParseDuration(a.After)
				if err != nil {
					return c.fail(armory.KindInvalid, "after %q is not a duration; write it like \"90s\", \"10m\" or \"1h30m\"", a.After)
				}
				when = now.Add(d)
			default:
				t, err := time.Parse(time.RFC3339, a.At)
				if err != nil {
					return c.fail(armory.KindInvalid, "at %q is not an RFC 3339 time; write it like \"2030-01-02T15:04:05Z\"", a.At)
				}
				when = t.UTC()
			}
			if d := when.Sub(now); d < MinTimerDelay || d > MaxTimerDelay {
				return c.fail(armory.KindInvalid, "the timer would fire in %s (at %s); it must be between %s and %s from now", d.Round(time.Second), when.Format(time.RFC3339), MinTimerDelay, "366 days")
			}
			act, err := a.action()
			if err != nil {
				return armory.FailErr(err)
			}
			return timerResult(m.createTimer(ctx, c.agent, a.Name, store.TimerOnce, when.Format(time.RFC3339Nano), when, act))
		},
	}
}

// cronTool is util.cron: recurring schedules, and the list and delete of
// every timer of the caller.
func (m *Module) cronTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name: "util.cron",
			Description: "Create, update, delete or list your recurring cron schedules. schedule is standard 5-field cron " +
				"\"minute hour day-of-month month day-of-week\" in UTC (e.g. \"0 9 * * 1-5\"; CRON_TZ=Europe/Paris prefix for a zone), at most once a minute. " +
				"Each occurrence puts a message in your inbox (or creates a task); missed occurrences while the server was down fire once, not once each. " +
				"list shows all your timers, crons and watches; delete removes any of them by name.",
			InputSchema: schema([]string{"action"},
				prop("action", `{"type":"string","enum":["create","update","delete","list"],"description":"What to do."}`),
				prop("name", str("The schedule's name (create, update, delete).")),
				prop("schedule", str("5-field cron expression (create; update to change it).")),
				actionProps),
		},
		man: armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapWriteState, armory.CapReadState}},
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Action   string `json:"action"`
				Name     string `json:"name"`
				Schedule string `json:"schedule"`
				actionArgs
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			switch a.Action {
			case "list":
				ts, err := m.ownTimers(ctx, c.agent)
				if err != nil {
					return armory.FailErr(err)
				}
				return jsonResult(timerViews(ts))
			case "create", "update", "delete":
			default:
				return c.fail(armory.KindInvalid, "action %q is not one of create, update, delete, list", a.Action)
			}
			if err := checkName(a.Name); err != nil {
				return c.fail(armory.KindInvalid, "%v", err)
			}
			if a.Action == "delete" {
				t, err := m.deleteOwn(ctx, c.agent, a.Name)
				if err != nil {
					return armory.FailErr(err)
				}
				return armory.Result{Success: true, Text: fmt.Sprintf("Deleted %s %q.", t.Kind, t.Name), Value: timerView(t)}
			}
			if a.Action == "update" && strings.TrimSpace(a.Schedule) == "" {
				return m.updateCron(ctx, c, a.Name, "", a.actionArgs)
			}
			if _, err := parseCron(a.Schedule); err != nil {
				return c.fail(armory.KindInvalid, "%v", err)
			}
			if a.Action == "update" {
				return m.updateCron(ctx, c, a.Name, strings.TrimSpace(a.Schedule), a.actionArgs)
			}
			act, err := a.action()
			if err != nil {
				return armory.FailErr(err)
			}
			spec := strings.TrimSpace(a.Schedule)
			return timerResult(m.createTimer(ctx, c.agent, a.Name, store.TimerCron, spec, nextCron(spec, m.now()), act))
		},
	}
}

// updateCron changes the schedule (when spec is set) and the action (when
// a message or task is given) of the caller's cron name.
func (m *Module) updateCron(ctx context.Context, c call, name, spec string, a actionArgs) armory.Result {
	st, err := m.store(ctx)
	if err != nil {
		return armory.FailErr(err)
	}
	t, err := m.findOwn(ctx, c.agent, name)
	if err != nil {
		return armory.FailErr(err)
	}
	if t.Kind != store.TimerCron {
		return c.fail(armory.KindConflict, "%q is a %s, not a cron; delete it and create a cron instead", name, t.Kind)
	}
	if spec != "" {
		t.Spec = spec
		t.NextFire = nextCron(spec, m.now())
		t.Enabled = true
	}
	if a.Message != "" || a.Task != nil {
		act, err := a.action()
		if err != nil {
			return armory.FailErr(err)
		}
		if t.Action, err = json.Marshal(act); err != nil {
			return armory.FailErr(err)
		}
	}
	if err := st.UpdateTimer(ctx, t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return c.fail(armory.KindConflict, "cron %q changed meanwhile (it fired or was updated); try again", name)
		}
		return armory.FailErr(store.Err(c.op, err))
	}
	return jsonResult(timerView(t))
}

// watchTool is util.watch: a debounced watch of a workspace file or
// folder.
func (m *Module) watchTool() *tool {
	return &tool{
		spec: armory.Spec{
			Name: "util.watch",
			Description: "Watch a file or folder of your workspace: when it changes (a folder: its direct entries), and then stays quiet for debounce, " +
				"a message lands in your inbox naming what changed. Watches survive restarts. util.cron list shows them; util.cron delete removes one.",
			InputSchema: schema([]string{"path"},
				prop("path", str("A file or folder in your workspace, relative to it (e.g. \"notes/todo.md\", \"inbox/\").")),
				prop("name", str("Your name for the watch (default: \"watch:\" and the path).")),
				prop("debounce", str("Quiet time before it fires, e.g. \"2s\" (default 2s, 100ms to 1h).")),
				prop("message", str("Text put in your inbox with the changed names (at most 8 KiB)."))),
		},
		man: armory.Manifest{Danger: armory.DangerCautious, Permission: armory.PermAuto, Category: armory.CatSystem, Capabilities: []armory.Capability{armory.CapReadFS, armory.CapWriteState}},
		run: func(ctx context.Context, c call) armory.Result {
			var a struct {
				Path     string `json:"path"`
				Name     string `json:"name"`
				Debounce string `json:"debounce"`
				Message  string `json:"message"`
			}
			if err := c.decode(&a); err != nil {
				return armory.FailErr(err)
			}
			rel, err := confine(c.inv.Agent.Workspace, a.Path)
			if err != nil {
				return c.fail(armory.KindPermission, "%v", err)
			}
			if a.Name == "" {
				a.Name = "watch:" + rel
				if len(a.Name) > 128 {
					a.Name = a.Name[:128]
				}
			}
			if err := checkName(a.Name); err != nil {
				return c.fail(armory.KindInvalid, "%v", err)
			}
			deb := DefaultDebounce
			if a.Debounce != "" {
				if deb, err = time.ParseDuration(a.Debounce); err != nil {
					return c.fail(armory.KindInvalid, "debounce %q is not a duration; write it like \"2s\" or \"500ms\"", a.Debounce)
				}
				if deb < MinDebounce || deb > MaxDebounce {
					return c.fail(armory.KindInvalid, "debounce %s is out of bounds: %s to %s", deb, MinDebounce, MaxDebounce)
				}
			}
			act, err := actionArgs{Message: a.Message}.action()
			if err != nil {
				return armory.FailErr(err)
			}
			act.Debounce = deb.String()
			return timerResult(m.createTimer(ctx, c.agent, a.Name, store.TimerWatch, rel, time.Time{}, act)) // createTimer pokes the scheduler: it arms the watch
		},
	}
}

// TimerView is a timer as the tools and the human API show it.
type TimerView struct {
	ID       string          `json:"id"`
	Owner    string          `json:"owner"`
	Name     string          `json:"name"`
	Kind     store.TimerKind `json:"kind"`
	Spec     string          `json:"spec"`
	NextFire time.Time       `json:"next_fire,omitzero"`
	Enabled  bool            `json:"enabled"`
	Fires    int64           `json:"fires"`
	// LastFired is the last occurrence fired.
	LastFired time.Time       `json:"last_fired,omitzero"`
	Action    json.RawMessage `json:"action,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
}

func timerView(t *store.Timer) TimerView {
	return TimerView{ID: t.ID, Owner: t.Owner, Name: t.Name, Kind: t.Kind, Spec: t.Spec, NextFire: t.NextFire, Enabled: t.Enabled,
		Fires: t.Fires, LastFired: t.LastFired, Action: t.Action, CreatedAt: t.CreatedAt}
}

// timerViews is timerView of each of ts (an empty list, not nil, for none).
func timerViews(ts []*store.Timer) []TimerView {
	out := make([]TimerView, 0, len(ts))
	for _, t := range ts {
		out = append(out, timerView(t))
	}
	return out
}

// timerResult is a timer tool's result for the timer it created or
// changed: t's view, or the failure err.
func timerResult(t *store.Timer, err error) armory.Result {
	if err != nil {
		return armory.FailErr(err)
	}
	return jsonResult(timerView(t))
}

// ownTimers returns every timer of owner (at most the per-agent bounds,
// so one page).
func (m *Module) ownTimers(ctx context.Context, owner string) ([]*store.Timer, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	var out []*store.Timer
	cur := ""
	for {
		ts, next, err := st.ListTimers(ctx, owner, store.Page{Limit: store.MaxPage, Cursor: cur})
		if err != nil {
			return nil, store.Err("timers", err)
		}
		out = append(out, ts...)
		if next == "" {
			return out, nil
		}
		cur = next
	}
}

// findOwn returns owner's timer name, or KindNotFound.
func (m *Module) findOwn(ctx context.Context, owner, name string) (*store.Timer, error) {
	ts, err := m.ownTimers(ctx, owner)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		if t.Name == name {
			return t, nil
		}
	}
	return nil, armory.E("timers", armory.KindNotFound, fmt.Sprintf("you have no timer, cron or watch named %q; util.cron with action list shows yours", name))
}

// createTimer checks owner's bounds and stores a new timer; nothing is
// written on error.
func (m *Module) createTimer(ctx context.Context, owner, name string, kind store.TimerKind, spec string, next time.Time, act timerAction) (*store.Timer, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	own, err := m.ownTimers(ctx, owner)
	if err != nil {
		return nil, err
	}
	var timers, watches int
	for _, t := range own {
		if spent(t) { // fired, not swept yet: its name is free again
			if err := st.DeleteTimer(ctx, t.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return nil, store.Err("timers", err)
			}
			continue
		}
		if t.Name == name {
			return nil, armory.E("timers", armory.KindConflict, fmt.Sprintf("you already have a %s named %q; pick another name, or delete it first (util.cron action delete)", t.Kind, name))
		}
		if t.Kind == store.TimerWatch {
			watches++
		} else {
			timers++
		}
	}
	if kind == store.TimerWatch && watches >= m.opts.MaxWatches {
		return nil, armory.E("timers", armory.KindBlocked, fmt.Sprintf("you have %d watches, the most allowed; delete one first (util.cron action delete)", watches))
	}
	if kind != store.TimerWatch && timers >= m.opts.MaxTimers {
		return nil, armory.E("timers", armory.KindBlocked, fmt.Sprintf("you have %d timers and crons, the most allowed (%d); delete one first (util.cron action delete)", timers, m.opts.MaxTimers))
	}
	b, err := json.Marshal(act)
	if err != nil {
		return nil, armory.E("timers", armory.KindInternal, "encoding the action", err)
	}
	t := &store.Timer{Owner: owner, Name: name, Kind: kind, Spec: spec, NextFire: next, Action: b, Enabled: true}
	if err := st.CreateTimer(ctx, t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, armory.E("timers", armory.KindConflict, fmt.Sprintf("you already have a timer named %q; pick another name", name))
		}
		return nil, store.Err("timers", err)
	}
	m.poke()
	return t, nil
}

// deleteOwn deletes owner's timer name.
func (m *Module) deleteOwn(ctx context.Context, owner, name string) (*store.Timer, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, err
	}
	t, err := m.findOwn(ctx, owner, name)
	if err != nil {
		return nil, err
	}
	if err := st.DeleteTimer(ctx, t.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, store.Err("timers", err)
	}
	m.poke()
	return t, nil
}

// HumanAuditor records a person's action; *pipeline.Pipeline is one.
type HumanAuditor interface {
	AuditHuman(ctx context.Context, a pipeline.HumanAction) error
}

// ListTimers returns a page of owner's timers (every agent's when owner
// is ""), oldest first, for the REST API and the CLI. Reading is not
// audited. Errors: KindUnavailable (the store), KindInvalid (a bad
// cursor). Safe for concurrent use.
func (m *Module) ListTimers(ctx context.Context, owner string, p store.Page) ([]TimerView, string, error) {
	st, err := m.store(ctx)
	if err != nil {
		return nil, "", err
	}
	ts, next, err := st.ListTimers(ctx, owner, p)
	if err != nil {
		return nil, "", store.Err("timers.list", err)
	}
	return timerViews(ts), next, nil
}

// DeleteTimer deletes timer id on a person's behalf (REST, CLI) and
// records it in the audit trail through by (the engine's pipeline):
// decided_by human, tool "timers.delete", the timer's owner as agent. It
// returns the deleted timer. Errors: KindNotFound (no such timer),
// KindUnavailable (the store; or the timer was deleted but its audit entry
// could not be written). Safe for concurrent use.
func (m *Module) DeleteTimer(ctx context.Context, by HumanAuditor, id string) (TimerView, error) {
	st, err := m.store(ctx)
	if err != nil {
		return TimerView{}, err
	}
	t, err := st.GetTimer(ctx, id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return TimerView{}, armory.E("timers.delete", armory.KindNotFound, fmt.Sprintf("no timer %q; `armory timers list` shows them", id))
		}
		return TimerView{}, store.Err("timers.delete", err)
	}
	if err := st.DeleteTimer(ctx, id); err != nil {
		return TimerView{}, store.Err("timers.delete", err)
	}
	m.poke()
	v := timerView(t)
	if by != nil {
		err = by.AuditHuman(ctx, pipeline.HumanAction{Tool: "timers.delete", Agent: t.Owner,
			Args: map[string]any{"id": id}, Result: fmt.Sprintf("deleted %s %q of %s", t.Kind, t.Name, t.Owner)})
	}
	return v, err
}
