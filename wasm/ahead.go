package wasm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/armory-dev/armory"
	"github.com/tetratelabs/wazero/sys"
)

// Instances made ahead of calls.
//
// Once a tool has been called it keeps up to Options.Warm instances made
// ahead of its next calls, and starts them: an instance's _start runs in
// a goroutine of its own until the module first reads stdin. That read
// blocks until a call hands the instance its arguments; the call then only
// feeds stdin and waits for the module to end. What runs before the
// module reads its input is what any call of it runs first — a language's
// runtime starting (Go's: ≈2 ms), package initialisation — with nothing of
// any call yet. An instance started ahead is still for one call only, and
// closed after it.
//
// Having run code, such an instance belongs to the agent it was started
// for: its granted folders were mounted from that agent's workspace, and
// it serves that agent's calls only (agentRef). The call opens the grants
// again, with the usual checks, and the module's read mounts those (on the
// module's goroutine, as nothing else of it runs there) before it returns
// the arguments; the instance's earlier ones are closed.
//
// A call that finds no instance kept for its agent, while one is being
// started for it, claims that one (it has a head start on a new one, and
// a new one would compete with it for the same cores): the call's
// arguments wait for the module's read.
//
// A module that does not read stdin within the start bound
// (startBound), or exits, or fails first (a trap, more than max_output on
// stdout) is stopped, and the tool stops starting its instances (noStart,
// logged once): they are made ahead without being started, and the module
// runs no code before its call. A module spinning before it reads stdin
// thus runs for one start bound with no call waiting, once per tool.
//
// Kept instances are bounded in number (Options.Warm in all, across
// agents: the agent of the latest call gets one in place of the one that
// waited longest) and in time: one that waits Options.WarmIdle for its
// call is closed (idle started instances are goroutines blocked in a read,
// holding their memory).

// Bounds of instances made ahead.
const (
	// MaxStartBound bounds how long a module started ahead may run before
	// it reads stdin (the tool's timeout, when shorter, is the bound).
	MaxStartBound = 5 * time.Second
	// DefaultWarmIdle is how long an instance made ahead waits for its
	// call before it is closed, unless Options say otherwise.
	DefaultWarmIdle = time.Minute
)

// errDropped is the cause of an instance made ahead stopped with no call:
// idle, evicted, or its tool closing.
var errDropped = errors.New("the instance made ahead was dropped")

// agentRef is whom a call is for. An instance started ahead serves calls
// for the same agent and workspace only.
type agentRef struct{ key, ws string }

func agentOf(a *armory.AgentEnv) agentRef {
	if a == nil {
		return agentRef{}
	}
	return agentRef{key: a.ID + "\x00" + a.Workspace, ws: a.Workspace}
}

// serves reports whether a call for a may take in: an instance started
// for a, or one not started (those are anyone's).
func (in *instance) serves(a agentRef) bool { return !in.started || in.key == a.key }

// startBound is how long a module started ahead may take to read stdin.
func (t *Tool) startBound() time.Duration {
	if b := t.r.opts.startBound; b > 0 {
		return b
	}
	return min(t.def.Timeout, MaxStartBound)
}

// starting is the start under way of an instance ahead, for the agent of
// key; a call for that agent that finds none kept claims it. made is
// closed once the instance runs (in), or could not be made (in nil).
type starting struct {
	key     string
	made    chan struct{}
	in      *instance
	claimed bool
}

// take returns an instance for a call for a: one started ahead for a;
// else the one being started for a; else one made ahead without starting;
// else a new one.
func (t *Tool) take(ctx context.Context, a agentRef) (*instance, error) {
	t.mu.Lock()
	i := slices.IndexFunc(t.pool, func(in *instance) bool { return in.started && in.key == a.key })
	if i < 0 {
		if s := t.starting; s != nil && s.key == a.key && !s.claimed {
			s.claimed = true
			t.mu.Unlock()
			<-s.made
			if s.in != nil {
				s.in.claimed = true
				return s.in, nil
			}
			return t.newInstance(ctx)
		}
		i = slices.IndexFunc(t.pool, func(in *instance) bool { return !in.started })
	}
	if i < 0 {
		t.mu.Unlock()
		return t.newInstance(ctx)
	}
	in := t.pool[i]
	t.pool = slices.Delete(t.pool, i, i+1)
	t.mu.Unlock()
	return in, nil
}

// refill asks the refiller (started at the tool's first call) to make
// instances ahead for a's next calls.
func (t *Tool) refill(a agentRef) {
	if t.r.opts.Warm == 0 {
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	if !t.refilling {
		t.refilling = true
		go t.refiller()
	}
	if !slices.Contains(t.wants, a) {
		t.wants = append(t.wants, a)
	}
	t.mu.Unlock()
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// refiller makes the instances asked for, one at a time, and closes those
// that waited WarmIdle, until the tool closes.
func (t *Tool) refiller() {
	defer close(t.stopped)
	idle := time.NewTimer(time.Hour)
	defer idle.Stop()
	for {
		if d, ok := t.expire(); ok {
			idle.Reset(d)
		} else {
			idle.Stop()
		}
		select {
		case <-t.stop:
			return
		case <-idle.C:
			continue
		case <-t.kick:
		}
		for {
			t.mu.Lock()
			if len(t.wants) == 0 {
				t.mu.Unlock()
				break
			}
			a := t.wants[0]
			t.wants = slices.Delete(t.wants, 0, 1)
			t.mu.Unlock()
			if !t.fill(a) {
				return
			}
		}
	}
}

// expire closes the instances that waited WarmIdle for a call and returns
// how long until the next one has (false: none is kept).
func (t *Tool) expire() (time.Duration, bool) {
	now := time.Now()
	var old []*instance
	next := time.Duration(-1)
	t.mu.Lock()
	keep := t.pool[:0]
	for _, in := range t.pool {
		left := in.made.Add(t.r.opts.WarmIdle).Sub(now)
		if left <= 0 {
			old = append(old, in)
			continue
		}
		keep = append(keep, in)
		if next < 0 || left < next {
			next = left
		}
	}
	clear(t.pool[len(keep):])
	t.pool = keep
	t.mu.Unlock()
	for _, in := range old {
		in.drop()
	}
	return next, next >= 0
}

// fill makes instances ahead for a's calls: while there is room among the
// Warm kept, and, when there is none and none is a's, one in place of the
// one that waited longest. It returns false once the tool is closed.
func (t *Tool) fill(a agentRef) bool {
	evicted := false
	for {
		start := !t.noStart.Load()
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return false
		}
		mine := 0
		other := -1 // the pool is in the order instances were made: the first is the oldest
		for i, in := range t.pool {
			if in.started == start && in.serves(a) {
				mine++
			} else if other < 0 {
				other = i
			}
		}
		var out *instance
		if len(t.pool) >= t.r.opts.Warm {
			if mine > 0 || evicted || other < 0 {
				t.mu.Unlock()
				return true
			}
			out = t.pool[other]
			t.pool = slices.Delete(t.pool, other, other+1)
			evicted = true
		}
		t.mu.Unlock()
		if out != nil {
			out.drop()
		}
		if start {
			pooled, fault, err := t.startAhead(a)
			switch {
			case fault != nil:
				t.stopStarting(fault)
				continue // made ahead without starting, from now on
			case errors.Is(err, errClosed):
				return false
			case err != nil:
				// The agent's workspace or grants are not usable now: its
				// next call says why.
				t.r.opts.Logger.Debug("wasm: cannot start an instance ahead", "tool", t.spec.Name, "err", err)
				return true
			case !pooled:
				// A call took it while it started: that call's end asks
				// for the next one, not to compete with it now.
				return true
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.def.Timeout)
		in, err := t.newInstance(ctx)
		cancel()
		if err != nil {
			t.r.opts.Logger.Warn("wasm: cannot make a warm instance", "tool", t.spec.Name, "err", err)
			return true
		}
		t.mu.Lock()
		if t.closed || len(t.pool) >= t.r.opts.Warm {
			closed := t.closed
			t.mu.Unlock()
			in.drop()
			return !closed
		}
		in.made = time.Now()
		t.pool = append(t.pool, in)
		t.mu.Unlock()
	}
}

// stopStarting makes the tool's instances ahead without starting them from
// now on, and says why once.
func (t *Tool) stopStarting(why error) {
	if t.noStart.CompareAndSwap(false, true) {
		t.r.opts.Logger.Warn("wasm: the module does not wait for its input when it starts; its instances are made ahead without starting them",
			"tool", t.spec.Name, "why", why.Error())
	}
}

// startAhead makes an instance for a's next call (its grants mounted from
// a's workspace), runs its _start until the module reads stdin, at most
// startBound, and keeps it (pooled) — unless a call claimed it meanwhile
// (then it is the call's). fault says how a module did not get to its
// read; err why no instance could be made (the agent's workspace; the
// tool closing: errClosed).
func (t *Tool) startAhead(a agentRef) (pooled bool, fault, err error) {
	t.startsTried.Add(1)
	s := &starting{key: a.key, made: make(chan struct{})}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false, nil, errClosed
	}
	t.starting = s
	t.mu.Unlock()
	in, err := t.startInstance(a)
	if err != nil {
		t.mu.Lock()
		t.starting = nil
		t.mu.Unlock()
		close(s.made) // a claiming call makes its own
		return false, nil, err
	}
	s.in = in
	close(s.made)

	bound := time.NewTimer(t.startBound())
	defer bound.Stop()
	stopping := false
	select {
	case <-in.stdin.ready:
	case <-in.exited:
	case <-bound.C:
	case <-t.stop:
		stopping = true
	}
	read, ended := fired(in.stdin.ready), fired(in.exited)
	t.mu.Lock()
	t.starting = nil
	claimed := s.claimed
	if !claimed && read && in.ctx.Err() == nil && !t.closed && len(t.pool) < t.r.opts.Warm {
		in.made = time.Now()
		t.pool = append(t.pool, in)
		t.mu.Unlock()
		return true, nil, nil
	}
	closing := t.closed
	t.mu.Unlock()
	switch {
	case claimed && read:
	case claimed && ended && in.ctx.Err() != nil && context.Cause(in.ctx) != errOutput:
		// Stopped by its call's end before reading: nothing is known.
	case claimed && ended:
		fault = in.endedEarly() // its call gets what it wrote, as from any instance
	case claimed && !stopping:
		fault = fmt.Errorf("it did not read its input within %s of its start", t.startBound())
	case claimed:
	case read && in.ctx.Err() != nil: // stopped for its output, then read
		fault = fmt.Errorf("it wrote more than max_output (%d bytes) to stdout before reading its input", t.def.MaxOutput)
	case read:
	case ended:
		fault = in.endedEarly()
	case !stopping:
		fault = fmt.Errorf("it did not read its input within %s of its start", t.startBound())
	}
	if !claimed {
		in.drop()
	}
	if fault == nil && (stopping || closing) {
		return false, nil, errClosed
	}
	return false, fault, nil
}

// startInstance makes an instance for a's call and starts its _start in a
// goroutine of its own.
func (t *Tool) startInstance(a agentRef) (*instance, error) {
	var roots []*os.Root
	if len(t.def.Wasm.Files) > 0 {
		if a.ws == "" {
			return nil, errors.New("no workspace")
		}
		var err error
		if roots, err = openGrants(t.spec.Name, a.ws, t.def.Wasm.Files); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.def.Timeout)
	in, err := t.newInstance(ctx)
	cancel()
	if err != nil {
		closeRoots(roots)
		return nil, err
	}
	in.started, in.key, in.roots = true, a.key, roots
	for i, g := range in.grants {
		g.bind(roots[i])
	}
	in.ctx, in.cancel = context.WithCancelCause(context.Background())
	in.stdin.waitFor(in.ctx.Done())
	in.stdout.over = func() { in.cancel(errOutput) }
	in.exited = make(chan struct{})
	go in.run()
	return in, nil
}

// fired reports whether c is closed.
func fired(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// endedEarly says how a module started ahead ended before reading stdin.
func (in *instance) endedEarly() error {
	var ee *sys.ExitError
	switch {
	case in.stdout.total > int64(in.stdout.max):
		return fmt.Errorf("it wrote more than max_output (%d bytes) to stdout before reading its input", in.stdout.max)
	case in.err == nil:
		return errors.New("it returned before reading its input")
	case errors.As(in.err, &ee):
		return fmt.Errorf("it exited (code %d) before reading its input", ee.ExitCode())
	}
	msg := in.err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return fmt.Errorf("it failed before reading its input: %s", msg)
}

// run runs _start; the module is closed when it returns. It is the one
// goroutine that runs the module's code and closes it.
func (in *instance) run() {
	defer close(in.exited)
	_, in.err = in.start.Call(in.ctx)
	in.close()
}

// serve runs a call on an instance started ahead: the arguments handed
// to the module's read of stdin, which first mounts the call's grants in
// place of those the instance was started with; the call's end (its
// timeout, the caller, Close) stopping the module. It returns how _start
// ended.
func (in *instance) serve(runCtx context.Context, args []byte, roots []*os.Root) error {
	// The arguments first: a call ended already still hands them over,
	// and the module is stopped as any call's.
	in.stdin.feed <- fed{args: args, bind: func() {
		for i, g := range in.grants {
			g.bind(roots[i])
		}
		closeRoots(in.roots)
		in.roots = nil
	}}
	stop := context.AfterFunc(runCtx, func() { in.cancel(context.Cause(runCtx)) })
	defer stop()
	<-in.exited
	closeRoots(in.roots) // it ended before reading its input
	in.roots = nil
	return in.err
}

// drop closes an instance no call took (a started one is stopped in its
// read, and waited for).
func (in *instance) drop() {
	if in.exited == nil {
		in.close()
		return
	}
	in.cancel(errDropped)
	<-in.exited
	closeRoots(in.roots)
	in.roots = nil
}

func closeRoots(roots []*os.Root) {
	for _, r := range roots {
		r.Close()
	}
}
