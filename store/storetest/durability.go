package storetest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// A strict Store (the default) keeps its durable point at its last durable
// commit and makes no background syncs.
func testDurablePointStrict(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	c0 := commitCounts(t, s)
	if c0.Mode != store.Strict {
		t.Fatalf("default durability mode %q, want strict", c0.Mode)
	}
	var last int64
	for i := range 5 {
		r := Record(i)
		mustAppend(t, ctx, s, r)
		last = r.Seq
		if c := commitCounts(t, s); c.DurableSeq != last {
			t.Fatalf("after appending seq %d: durable point %d", last, c.DurableSeq)
		}
	}
	if c := commitCounts(t, s); c.Syncs != 0 || c.Durable != c0.Durable+5 || c.Relaxed != c0.Relaxed {
		t.Fatalf("strict store: commits %+v → %+v, want 5 more durable ones and no syncs", c0, c)
	}
}

// RunBatched checks a store.Batched Store; open must open Stores in that
// mode (two calls with one t share a database, as in Run). Every commit is
// relaxed and visible at once to another Store; the syncer makes it
// durable within the window (seen through the Store's counters, never
// through timings), covering many commits per sync; Close syncs what is
// left.
func RunBatched(t *testing.T, open Opener) {
	t.Run("VisibleAcrossStoresAndSynced", func(t *testing.T) { testBatchedVisibleAndSynced(t, open) })
	t.Run("CloseSyncs", func(t *testing.T) { testBatchedCloseSyncs(t, open) })
}

// waitFor polls cond, bounded (it is the outcome that is checked, not how
// soon it comes).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testBatchedVisibleAndSynced(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s1, s2 := open(t), open(t)
	c0 := commitCounts(t, s1)
	if c0.Mode != store.Batched {
		t.Fatalf("mode %q, want batched", c0.Mode)
	}
	// A lone admission: committed and visible to the other Store, caps
	// included, when Admit returns.
	res, err := s1.Admit(ctx, &store.AdmitRequest{Session: "b", Record: StartRecord("b", 1),
		Acquire: []store.Acquisition{acq("tool_calls", 1, 2)}})
	if err != nil || !res.Admitted {
		t.Fatalf("Admit: %+v %v", res, err)
	}
	if h, err := s2.AuditHead(ctx); err != nil || h.Seq != 1 {
		t.Fatalf("other store's head after a batched admission: %+v %v", h, err)
	}
	if c, err := s2.Counters(ctx, "b"); err != nil || c["tool_calls"] != 1 {
		t.Fatalf("other store's counters after a batched admission: %v %v", c, err)
	}
	// The cap holds across the Stores at once, with no sync in between
	// needed.
	if res, err := s2.Admit(ctx, &store.AdmitRequest{Session: "b", Record: StartRecord("b", 2),
		Acquire: []store.Acquisition{acq("tool_calls", 1, 2)}}); err != nil || !res.Admitted {
		t.Fatalf("second Admit: %+v %v", res, err)
	}
	if res, err := s1.Admit(ctx, &store.AdmitRequest{Session: "b", Record: StartRecord("b", 3),
		Acquire: []store.Acquisition{acq("tool_calls", 1, 2)}}); err != nil || res.Admitted {
		t.Fatalf("third Admit over the cap of 2 across Stores: %+v %v", res, err)
	}
	// Many concurrent appends: all relaxed, none durable on its own.
	const n = 200
	var wg sync.WaitGroup
	var last atomic.Int64
	for i := range n {
		wg.Go(func() {
			r := Record(i)
			if err := s1.AppendAudit(ctx, r); err != nil {
				t.Error(err)
				return
			}
			for cur := last.Load(); r.Seq > cur && !last.CompareAndSwap(cur, r.Seq); cur = last.Load() {
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if h, err := s2.AuditHead(ctx); err != nil || h.Seq != n+2 {
		t.Fatalf("other store's head: %+v %v, want seq %d", h, err, n+2)
	}
	c1 := commitCounts(t, s1)
	if c1.Durable != c0.Durable || c1.Relaxed == c0.Relaxed {
		t.Fatalf("batched store: commits %+v → %+v, want relaxed ones only", c0, c1)
	}
	// Within the window a sync makes them durable: the durable point
	// reaches the last record.
	waitFor(t, "the durable point reaching the last record", func() bool {
		return commitCounts(t, s1).DurableSeq >= last.Load()
	})
	c2 := commitCounts(t, s1)
	if c2.Syncs < 1 || c2.Syncs > c2.Relaxed {
		t.Fatalf("syncs %d for %d relaxed commits: want at least one, never more than commits", c2.Syncs, c2.Relaxed)
	}
	// The other Store committed two admissions; its own syncer covers
	// them.
	waitFor(t, "the other store's sync", func() bool {
		c := commitCounts(t, s2)
		return c.Syncs >= 1 && c.DurableSeq >= 2
	})
	if err := s2.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

func testBatchedCloseSyncs(t *testing.T, open Opener) {
	ctx := ctxT(t)
	s := open(t)
	var last int64
	for i := range 10 {
		r := Record(i)
		mustAppend(t, ctx, s, r)
		last = r.Seq
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c := commitCounts(t, s); c.DurableSeq != last || c.Syncs < 1 {
		t.Fatalf("after Close: %+v, want the durable point at %d", c, last)
	}
}

// Environment of a crash helper process.
const crashEnv = "ARMORY_STORETEST_CRASH_DSN"

// CrashHelperProcess is the body of a child process started by
// CrashProcess: it appends records from 8 goroutines until killed, and
// prints "ack <id>" for each record once AppendAudit returned it. Call it
// from a test named TestCrashHelperProcess; it returns at once unless the
// process was started as one. open opens a Store on dsn (in the mode under
// test).
func CrashHelperProcess(t *testing.T, open func(dsn string) (store.Store, error)) {
	s := childStore(crashEnv, "crash helper", open)
	if s == nil {
		return
	}
	ctx := context.Background()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i < 1_000_000; i = next.Add(1) {
				r := Record(int(i))
				if err := s.AppendAudit(ctx, r); err != nil {
					fmt.Fprintln(os.Stderr, "crash helper: append:", err)
					os.Exit(3)
				}
				mu.Lock()
				fmt.Fprintf(os.Stdout, "ack %s\n", r.ID) // os.Stdout is unbuffered: one write each
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}

// CrashProcess starts a child process (TestCrashHelperProcess, see
// CrashHelperProcess) appending to the database at dsn, kills it with
// SIGKILL once it acknowledged some hundreds of records, and checks,
// through a Store opened with open, that every record it acknowledged is
// in the store and that the chain verifies. A crash of the process loses
// nothing acknowledged, in either durability mode; what Batched risks is a
// power loss or an operating-system crash, which a test cannot cause.
func CrashProcess(t *testing.T, dsn string, open func(dsn string) (store.Store, error)) {
	const acks = 500
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+dsn)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	acked := map[string]bool{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		id, ok := strings.CutPrefix(sc.Text(), "ack ")
		if !ok {
			continue // the test binary's own output
		}
		acked[id] = true
		if len(acked) == acks && !killed {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true // read on: acknowledgements written before the kill count too
		}
	}
	werr := cmd.Wait()
	if !killed {
		t.Fatalf("the helper ended before %d acknowledgements (%d): %v\n%s", acks, len(acked), werr, stderr.String())
	}
	s, err := open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := ctxT(t)
	var stored int
	err = s.IterAudit(ctx, func(r *audit.Record) error {
		stored++
		delete(acked, r.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(acked) > 0 {
		t.Fatalf("%d acknowledged records missing after the process was killed (%d stored)", len(acked), stored)
	}
	t.Logf("killed after %d acknowledgements; %d records stored", acks, stored)
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}
