package services

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
	"github.com/fsnotify/fsnotify"
)

// The scheduler fires the timers. It runs in a started engine only
// (`armory serve`: engine.Starter), so `armory call` can set a timer but
// never fires one.
//
// Exactly once, in two layers (docs/design.md, "Timers"):
//   - One replica schedules at a time: it holds the lease TimerLease
//     (store.Leases) and renews it; a replica that dies loses it when it
//     expires and another takes over; a replica that stops releases it.
//   - Every occurrence is claimed by store.Timers.FireTimer, whose
//     occurrence record is unique and durable: even two replicas that both
//     believe they hold the lease (a lease that expired during a long
//     pause) fire an occurrence once, and a restart never fires it again.
//
// The occurrence is claimed first, then delivered (a message, a task, an
// event), with the delivery not cut short by shutdown. A task's ID is
// derived from the occurrence, so a second delivery of it is refused by
// the store. A process killed between the claim and the delivery loses
// that one delivery: at most once, never twice.
//
// Missed occurrences (the server was down): a one-shot timer fires once,
// late; a cron fires once for all it missed (the occurrence is its first
// missed time) and moves on to its next time after now.
//
// A one-shot timer is deleted once delivered (its message or task is the
// record); one left behind spent (a crash between firing and deleting) is
// swept when the watches are synced, and does not count toward the
// owner's bound.
//
// Watches live in the process holding the lease: it arms them (fsnotify)
// when it takes the lease and on every sync, and disarms them when it
// loses it. A change made while no replica held the lease is not
// reported.

// TimerLease is the name of the lease of the replica that fires timers.
const TimerLease = "services.timers"

// Scheduler defaults (Options).
const (
	DefaultTimerPoll = time.Second
	DefaultLeaseTTL  = 15 * time.Second
	DefaultDueBatch  = 100
	// watchSyncRounds is how many polls pass between two re-reads of the
	// watches (a watch set by another process is armed by then); a watch
	// set in this process is armed at once.
	watchSyncRounds = 5
	// maxChanged bounds the names a watch's message lists.
	maxChanged = 20
	// deliveryTries bounds the attempts to deliver a claimed occurrence.
	deliveryTries = 3
)

// Start starts the scheduler in the background (engine.Starter): it runs
// until ctx ends. Errors: the store's, when it cannot be opened.
func (m *Module) Start(ctx context.Context, rt engine.Runtime) error {
	st, err := rt.Env.Store(ctx)
	if err != nil {
		return err
	}
	s := &scheduler{m: m, rt: rt, st: st, holder: m.opts.Replica, armed: map[string]*armed{}, dirs: map[string]int{},
		pending: map[string]*pendingFire{}, failed: map[string]int64{}}
	if !rt.Go(func() { s.run(ctx) }) {
		return errors.New("the engine is closing")
	}
	return nil
}

// replicaID names this process as a lease holder.
func replicaID() string {
	h, _ := os.Hostname()
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", h, os.Getpid(), hex.EncodeToString(b[:]))
}

// poke wakes the scheduler (a timer was set or deleted here).
func (m *Module) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

type scheduler struct {
	m      *Module
	rt     engine.Runtime
	st     timerStore
	holder string

	held     bool
	renewed  time.Time // when the lease was last acquired or renewed (wall clock)
	rounds   int
	watcher  *fsnotify.Watcher
	armed    map[string]*armed // timer ID → armed watch
	dirs     map[string]int    // watched folder → armed watches in it
	pending  map[string]*pendingFire
	failed   map[string]int64 // timer ID → version that could not be armed (logged once)
	lastSync int
}

// armed is a watch armed in this process.
type armed struct {
	t        *store.Timer
	real     string // the watched path, resolved
	dir      string // the folder given to fsnotify
	isDir    bool
	debounce time.Duration
}

// pendingFire is a watch that saw changes and waits for quiet.
type pendingFire struct {
	due     time.Time // wall clock
	changed []string
}

func (s *scheduler) run(ctx context.Context) {
	defer s.stop()
	for {
		s.round(ctx)
		wait := s.m.opts.TimerPoll
		if d, ok := s.nextDebounce(); ok && d < wait {
			wait = max(d, 0)
		}
		t := time.NewTimer(wait)
		var events chan fsnotify.Event
		var errs chan error
		if s.watcher != nil {
			events, errs = s.watcher.Events, s.watcher.Errors
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.m.wake:
			s.lastSync = -watchSyncRounds // re-read the watches now
		case <-t.C:
		case ev, ok := <-events:
			if ok {
				s.noteEvent(ev)
			}
		case err, ok := <-errs:
			if ok {
				s.m.log.Warn("timers: watch error", "err", err)
			}
		}
		t.Stop()
	}
}

// round keeps or takes the lease and, holding it, fires what is due.
func (s *scheduler) round(ctx context.Context) {
	s.rounds++
	if !s.lease(ctx) {
		return
	}
	if s.rounds-s.lastSync >= watchSyncRounds {
		s.syncWatches(ctx)
		s.lastSync = s.rounds
	}
	s.fireWatches(ctx)
	s.fireDue(ctx)
	s.m.rounds.Add(1)
}

// lease reports whether this replica holds the lease, acquiring or
// renewing it as needed; losing it disarms the watches.
func (s *scheduler) lease(ctx context.Context) bool {
	ttl := s.m.opts.LeaseTTL
	if s.held && time.Since(s.renewed) < ttl/3 {
		return true
	}
	_, won, err := s.st.AcquireLease(ctx, TimerLease, s.holder, ttl)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			s.m.log.Warn("timers: lease", "err", err)
		}
		// Keep firing only while the lease surely lasts.
		won = s.held && time.Since(s.renewed) < ttl/2
	case won:
		s.renewed = time.Now()
	}
	if s.held && !won {
		s.m.log.Info("timers: lease lost", "holder", s.holder)
		s.disarmAll()
	}
	if !s.held && won {
		s.lastSync = -watchSyncRounds
	}
	s.held = won
	return won
}

// fireDue fires the timers due now, a bounded batch per round.
func (s *scheduler) fireDue(ctx context.Context) {
	now := s.m.now().UTC()
	due, err := s.st.DueTimers(ctx, now, s.m.opts.DueBatch)
	if err != nil {
		if ctx.Err() == nil {
			s.m.log.Warn("timers: due timers", "err", err)
		}
		return
	}
	for _, t := range due {
		if ctx.Err() != nil {
			return
		}
		var next time.Time
		if t.Kind == store.TimerCron {
			// One firing for every occurrence missed: the next one is after now.
			next = nextCron(t.Spec, now)
			if next.IsZero() {
				s.m.log.Warn("timers: cron no longer parses; disabling it", "timer", t.ID, "spec", t.Spec)
			}
		}
		s.fire(ctx, t, t.NextFire, next, nil)
	}
}

// fire claims the occurrence at of t and, when this replica got it,
// delivers it. changed are a watch's changed names.
func (s *scheduler) fire(ctx context.Context, t *store.Timer, at, next time.Time, changed []string) *store.Timer {
	fired, cur, err := s.st.FireTimer(ctx, t.ID, at, next, s.holder)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
			s.m.log.Warn("timers: fire", "timer", t.ID, "err", err)
		}
		return nil
	}
	if !fired {
		return cur
	}
	// Claimed: deliver even if shutdown begins now.
	dctx := context.WithoutCancel(ctx)
	var derr error
	for range deliveryTries {
		if derr = s.deliver(dctx, cur, at, changed); derr == nil {
			break
		}
	}
	if derr != nil {
		s.m.log.Error("timers: occurrence fired but not delivered", "timer", t.ID, "at", at, "err", derr)
	}
	if spent(cur) {
		s.sweep(dctx, cur)
	}
	return cur
}

// deliver puts occurrence at of t in its owner's inbox or creates its
// task, then publishes a "timer" event.
func (s *scheduler) deliver(ctx context.Context, t *store.Timer, at time.Time, changed []string) error {
	var act timerAction
	if len(t.Action) > 0 {
		if err := json.Unmarshal(t.Action, &act); err != nil {
			return fmt.Errorf("timer action: %w", err)
		}
	}
	subject := fmt.Sprintf("%s %s", t.Kind, t.Name)
	body := act.Message
	if t.Kind == store.TimerWatch {
		list := strings.Join(changed, ", ")
		if body == "" {
			body = fmt.Sprintf("%s changed: %s", t.Spec, list)
		} else {
			body += "\n\nChanged: " + list
		}
	} else if body == "" && act.Task == nil {
		body = fmt.Sprintf("Your %s %q fired (scheduled for %s).", t.Kind, t.Name, at.Format(time.RFC3339))
	}
	ref := t.ID
	if act.Task != nil {
		task := &store.Task{ID: fmt.Sprintf("timer-%s-%d", t.ID, at.UnixMicro()), Title: act.Task.Title, Description: act.Task.Description,
			Creator: t.Owner, Assignee: t.Owner}
		if err := s.st.CreateTask(ctx, task); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	if body != "" {
		msg := &store.Message{To: t.Owner, From: t.Owner, Kind: store.KindTimer, Subject: subject, Body: body}
		if err := s.st.SendMessages(ctx, []*store.Message{msg}); err != nil {
			return err
		}
	}
	if err := s.rt.Publish(pipeline.Event{Kind: EventTimer, Agent: t.Owner, Message: subject + " fired", Ref: ref}); err != nil {
		s.m.log.Debug("timers: event", "err", err)
	}
	return nil
}

// spent reports whether t is a one-shot timer that fired.
func spent(t *store.Timer) bool {
	return t != nil && t.Kind == store.TimerOnce && !t.Enabled && t.Fires > 0
}

// sweep deletes spent timer t.
func (s *scheduler) sweep(ctx context.Context, t *store.Timer) {
	if err := s.st.DeleteTimer(ctx, t.ID); err != nil && !errors.Is(err, store.ErrNotFound) && ctx.Err() == nil {
		s.m.log.Warn("timers: deleting a spent timer", "timer", t.ID, "err", err)
	}
}

// syncWatches arms the enabled watches in the store not armed yet and
// disarms those gone.
func (s *scheduler) syncWatches(ctx context.Context) {
	var want []*store.Timer
	cur := ""
	for {
		ts, next, err := s.st.ListTimers(ctx, "", store.Page{Limit: store.MaxPage, Cursor: cur})
		if err != nil {
			if ctx.Err() == nil {
				s.m.log.Warn("timers: listing watches", "err", err)
			}
			return
		}
		for _, t := range ts {
			switch {
			case t.Kind == store.TimerWatch && t.Enabled:
				want = append(want, t)
			case spent(t):
				s.sweep(ctx, t)
			}
		}
		if next == "" {
			break
		}
		cur = next
	}
	if len(want) > s.m.opts.MaxWatchesTotal {
		s.m.log.Warn("timers: too many watches; arming the oldest", "watches", len(want), "max", s.m.opts.MaxWatchesTotal)
		want = want[:s.m.opts.MaxWatchesTotal]
	}
	keep := map[string]bool{}
	for _, t := range want {
		keep[t.ID] = true
		if a, ok := s.armed[t.ID]; ok {
			if a.t.Version < t.Version {
				a.t = t
			}
			continue
		}
		s.arm(t)
	}
	for id := range s.armed {
		if !keep[id] {
			s.disarm(id)
		}
	}
}

// arm starts watching t's path, resolved again inside its owner's
// workspace.
func (s *scheduler) arm(t *store.Timer) {
	if s.rt.World == nil {
		return
	}
	real, isDir, err := resolveWatch(s.rt.World.Workspace(t.Owner), t.Spec)
	if err != nil {
		if s.failed[t.ID] != t.Version {
			s.failed[t.ID] = t.Version
			s.m.log.Warn("timers: watch not armed (retried on every sync)", "timer", t.ID, "owner", t.Owner, "path", t.Spec, "err", err)
		}
		return
	}
	delete(s.failed, t.ID)
	var act timerAction
	_ = json.Unmarshal(t.Action, &act)
	deb, err := time.ParseDuration(act.Debounce)
	if err != nil || deb < MinDebounce {
		deb = DefaultDebounce
	}
	if s.watcher == nil {
		if s.watcher, err = fsnotify.NewWatcher(); err != nil {
			s.m.log.Warn("timers: watcher", "err", err)
			s.watcher = nil
			return
		}
	}
	dir := real
	if !isDir {
		dir = filepath.Dir(real)
	}
	if s.dirs[dir] == 0 {
		if err := s.watcher.Add(dir); err != nil {
			s.m.log.Warn("timers: watch not armed", "timer", t.ID, "path", t.Spec, "err", err)
			return
		}
	}
	s.dirs[dir]++
	s.armed[t.ID] = &armed{t: t, real: real, dir: dir, isDir: isDir, debounce: deb}
}

func (s *scheduler) disarm(id string) {
	a, ok := s.armed[id]
	if !ok {
		return
	}
	delete(s.armed, id)
	delete(s.pending, id)
	if s.dirs[a.dir]--; s.dirs[a.dir] <= 0 {
		delete(s.dirs, a.dir)
		if s.watcher != nil {
			_ = s.watcher.Remove(a.dir)
		}
	}
}

func (s *scheduler) disarmAll() {
	for id := range s.armed {
		s.disarm(id)
	}
}

// noteEvent records a change for the watches it concerns and (re)starts
// their debounce.
func (s *scheduler) noteEvent(ev fsnotify.Event) {
	if ev.Op == fsnotify.Chmod {
		return
	}
	for id, a := range s.armed {
		var name string
		switch {
		case ev.Name == a.real:
			name = filepath.Base(ev.Name)
		case a.isDir && filepath.Dir(ev.Name) == a.real:
			name = filepath.Base(ev.Name)
		default:
			continue
		}
		p := s.pending[id]
		if p == nil {
			p = &pendingFire{}
			s.pending[id] = p
		}
		p.due = time.Now().Add(a.debounce)
		if !slices.Contains(p.changed, name) && len(p.changed) < maxChanged {
			p.changed = append(p.changed, name)
		}
	}
}

// nextDebounce is the time until the first pending watch is quiet.
func (s *scheduler) nextDebounce() (time.Duration, bool) {
	var first time.Time
	for _, p := range s.pending {
		if first.IsZero() || p.due.Before(first) {
			first = p.due
		}
	}
	if first.IsZero() {
		return 0, false
	}
	return time.Until(first), true
}

// fireWatches fires the watches whose changes are quiet now, one
// occurrence each (its time after the last one's, so a fixed clock in
// tests still makes new occurrences).
func (s *scheduler) fireWatches(ctx context.Context) {
	for id, p := range s.pending {
		if time.Now().Before(p.due) {
			continue
		}
		delete(s.pending, id)
		a := s.armed[id]
		if a == nil {
			continue
		}
		at := s.m.now().UTC().Truncate(time.Microsecond)
		if !at.After(a.t.LastFired) {
			at = a.t.LastFired.Add(time.Microsecond)
		}
		if cur := s.fire(ctx, a.t, at, time.Time{}, p.changed); cur != nil {
			a.t = cur
		}
	}
}

// stop ends the scheduler: the watches close and the lease is released,
// so another replica takes over at once.
func (s *scheduler) stop() {
	s.disarmAll()
	if s.watcher != nil {
		_ = s.watcher.Close()
	}
	if s.held {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.st.ReleaseLease(ctx, TimerLease, s.holder); err != nil {
			s.m.log.Debug("timers: release lease", "err", err)
		}
	}
}
