package sandbox

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The warm pool (bwrap only) starts sandboxes before they are needed, so
// that a call pays only for its own command: bwrap's namespaces and
// mounts, the rlimits and the pids cgroup are set up in the background.
//
// A warm sandbox is exactly the sandbox a cold run would build for the same
// policy, except that its command is a trampoline: `/bin/sh -c '. /dev/fd/5'`,
// which blocks reading its script from a pipe. A call writes
// `exec 5<&-; exec 'argv0' 'argv1' …` (every word single-quoted) into the
// pipe and closes it; the shell closes the pipe and execs the command in
// place, which then runs as the sandbox's pid 2 exactly as in a cold run.
// Each warm sandbox serves one call and is torn down with it: nothing
// (processes, /tmp, cgroup) carries over from one call to the next.
//
// Sandboxes are keyed by everything that shapes them (bwrap's flags, the
// environment, the limits); a call whose policy has no warm sandbox runs
// cold and asks for one to be warmed for the next call with that policy.

// PoolOptions configures the warm pool.
type PoolOptions struct {
	// PerPolicy is how many warm sandboxes are kept ready for each distinct
	// policy (default 2).
	PerPolicy int
	// Max bounds the warm sandboxes in all, ready or being warmed (default 16:
	// eight agents with a sandbox policy each, two each).
	Max int
	// Idle is how long a ready sandbox waits for a call before it is torn
	// down (default 60 s).
	Idle time.Duration
}

// warmupBound bounds the start of one warm sandbox.
const warmupBound = 10 * time.Second

// trampoline is the command of a warm sandbox.
var trampoline = []string{"/bin/sh", "-c", ". /dev/fd/5"}

// warmRuns and coldRuns count the runs of every pool since the process
// started (PoolStats; counters for metrics never go back).
var warmRuns, coldRuns atomic.Int64

type pool struct {
	opts    PoolOptions
	mu      sync.Mutex
	closed  bool
	ready   map[string][]*warm
	warming map[string]int
	count   int // ready + warming
	wg      sync.WaitGroup
}

// warm is one ready sandbox.
type warm struct {
	key    string
	p      *proc
	script *os.File // write end of the trampoline's script pipe
	ids    []fileID // workspace and working directory at warm-up
	idle   *time.Timer
}

type fileID struct{ dev, ino uint64 }

var currentPool atomic.Pointer[pool]

// forceWarm (tests only: ARMORY_TEST_SANDBOX_WARM=1) runs every bwrap call
// in a sandbox warmed for it just before, so that the whole suite exercises
// the warm path.
var forceWarm bool

func activePool() *pool { return currentPool.Load() }

// EnablePool turns the warm pool on for the bwrap backend (it is off by
// default: a one-shot process gains nothing from it). Long-running hosts
// (armory serve, armory mcp) enable it. Enabling it again replaces the
// options; sandboxes already warm are torn down. The pool holds, per
// policy in use, up to PerPolicy idle sandboxes: three processes (bwrap,
// its init, the trampoline shell) and a pids cgroup each.
func EnablePool(o PoolOptions) {
	if o.PerPolicy <= 0 {
		o.PerPolicy = 2
	}
	if o.Max <= 0 {
		o.Max = 16
	}
	if o.Idle <= 0 {
		o.Idle = 60 * time.Second
	}
	old := currentPool.Swap(&pool{opts: o, ready: map[string][]*warm{}, warming: map[string]int{}})
	if old != nil {
		old.close()
	}
}

// PoolStats counts the bwrap runs the warm pool saw.
type PoolStats struct {
	// Warm counts the runs served by a warm sandbox, Cold those that found
	// none ready and set theirs up themselves, since the process started
	// (runs while the pool was off are in neither).
	Warm, Cold int64
	// Ready is the number of sandboxes of the current pool ready now.
	Ready int
}

// CurrentPoolStats returns the counts (Ready is 0 when the pool is off).
func CurrentPoolStats() PoolStats {
	st := PoolStats{Warm: warmRuns.Load(), Cold: coldRuns.Load()}
	if pl := activePool(); pl != nil {
		pl.mu.Lock()
		for _, ws := range pl.ready {
			st.Ready += len(ws)
		}
		pl.mu.Unlock()
	}
	return st
}

// ClosePool turns the warm pool off and tears down every warm sandbox; it
// returns once none is left (bounded by the teardown of each).
func ClosePool() {
	if old := currentPool.Swap(nil); old != nil {
		old.close()
	}
}

func (pl *pool) close() {
	pl.mu.Lock()
	pl.closed = true
	var all []*warm
	for _, ws := range pl.ready {
		all = append(all, ws...)
	}
	pl.ready = map[string][]*warm{}
	pl.mu.Unlock()
	for _, w := range all {
		w.idle.Stop()
		w.discard()
	}
	pl.wg.Wait() // warm-ups in flight discard their sandbox themselves
}

// poolKey identifies the sandboxes that can serve r: bwrap's command line
// without the command, the environment and the rlimits (the pids limit is
// part of the cgroup, set at warm-up).
func poolKey(r *resolved, det *Detection, env []string) string {
	var b strings.Builder
	for _, a := range bwrapArgs(r, det, nil) {
		b.WriteString(a)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, e := range env {
		b.WriteString(e)
		b.WriteByte(0)
	}
	b.WriteByte(1)
	for _, rl := range rlimitList(r.Limits) {
		b.WriteString(strconv.Itoa(rl.Resource) + ":" + strconv.FormatUint(rl.Cur, 10) + ":" + strconv.FormatUint(rl.Max, 10) + ",")
	}
	b.WriteString("pids:" + strconv.Itoa(r.Limits.Processes))
	return b.String()
}

// take returns a ready sandbox for key, or nil. A sandbox that died while
// idle, or whose workspace or working directory is no longer the same
// directory (replaced since the warm-up), is torn down instead.
func (pl *pool) take(key string, r *resolved) *warm {
	for {
		pl.mu.Lock()
		ws := pl.ready[key]
		if len(ws) == 0 {
			pl.mu.Unlock()
			coldRuns.Add(1)
			return nil
		}
		w := ws[len(ws)-1]
		ws[len(ws)-1] = nil
		if len(ws) == 1 {
			delete(pl.ready, key)
		} else {
			pl.ready[key] = ws[:len(ws)-1]
		}
		pl.count--
		pl.mu.Unlock()
		w.idle.Stop()
		alive := true
		select {
		case <-w.p.exited:
			alive = false
		default:
		}
		if alive && sameIDs(w.ids, idsOf(r)) {
			warmRuns.Add(1)
			return w
		}
		go w.discard()
	}
}

// refill starts warming sandboxes for key in the background until
// PerPolicy are ready or warming (and Max is not exceeded).
func (pl *pool) refill(key string, r *resolved, det *Detection, env []string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for !pl.closed && len(pl.ready[key])+pl.warming[key] < pl.opts.PerPolicy && pl.count < pl.opts.Max {
		pl.warming[key]++
		pl.count++
		pl.wg.Add(1)
		go pl.warmUp(key, r, det, env)
	}
}

// warmUp starts one sandbox for key and adds it to the ready list.
func (pl *pool) warmUp(key string, r *resolved, det *Detection, env []string) {
	defer pl.wg.Done()
	w := startWarm(key, r, det, env)
	pl.mu.Lock()
	pl.warming[key]--
	if pl.warming[key] == 0 {
		delete(pl.warming, key)
	}
	if w == nil || pl.closed {
		pl.count--
		pl.mu.Unlock()
		if w != nil {
			w.discard()
		}
		return
	}
	pl.ready[key] = append(pl.ready[key], w)
	w.idle = time.AfterFunc(pl.opts.Idle, func() { pl.expire(w) })
	pl.mu.Unlock()
}

// expire tears w down if it is still waiting.
func (pl *pool) expire(w *warm) {
	pl.mu.Lock()
	ws := pl.ready[w.key]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			if len(ws) == 0 {
				delete(pl.ready, w.key)
			} else {
				pl.ready[w.key] = ws
			}
			pl.count--
			pl.mu.Unlock()
			w.discard()
			return
		}
	}
	pl.mu.Unlock()
}

// startWarm builds one warm sandbox, or returns nil when that failed (the
// call that needs it then runs cold and reports any error itself).
func startWarm(key string, r *resolved, det *Detection, env []string) *warm {
	ids := idsOf(r)
	if ids == nil {
		return nil
	}
	scriptR, scriptW, err := os.Pipe()
	if err != nil {
		return nil
	}
	l, err := newBwrapLaunch(r, det, env, trampoline, scriptR)
	if err != nil {
		scriptR.Close()
		scriptW.Close()
		return nil
	}
	p, err := startLaunch(l, time.Now().Add(warmupBound))
	if err != nil {
		scriptW.Close()
		return nil
	}
	return &warm{key: key, p: p, script: scriptW, ids: ids}
}

// run gives w its command and supervises it as a cold run would.
func (w *warm) run(ctx context.Context, r *resolved, argv []string, sink *progressSink) Report {
	start := time.Now()
	script := []byte(trampolineScript(argv))
	deadline := start.Add(r.Timeout)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A script longer than the pipe's buffer is read by the shell as it
		// is written; a sandbox that dies meanwhile makes Write fail (EPIPE),
		// and the deadline bounds a shell that stops reading.
		_ = w.script.SetWriteDeadline(deadline)
		_, _ = w.script.Write(script)
		w.script.Close()
	}()
	out := w.p.supervise(ctx, r, sink, start)
	<-done
	out.Warm = true
	return out
}

// discard tears w down.
func (w *warm) discard() {
	w.script.Close()
	w.p.discard()
}

// trampolineScript is what the trampoline shell runs: close the script
// pipe, then exec argv, every word single-quoted (argv holds no NUL).
func trampolineScript(argv []string) string {
	var b strings.Builder
	b.WriteString("exec 5<&-\nexec")
	for _, a := range argv {
		b.WriteString(" '")
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteByte('\'')
	}
	b.WriteByte('\n')
	return b.String()
}

// idsOf returns the identity (device, inode) of r's workspace and working
// directory, or nil when one cannot be read.
func idsOf(r *resolved) []fileID {
	var out []fileID
	for _, p := range []string{r.workspace, r.dir} {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			return nil
		}
		out = append(out, fileID{uint64(st.Dev), st.Ino})
	}
	return out
}

func sameIDs(a, b []fileID) bool {
	if len(a) != len(b) || a == nil {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
