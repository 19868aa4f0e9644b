package trail_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/postgres"
	"github.com/armory-dev/armory/store/sqlite"
	"github.com/jackc/pgx/v5"
)

func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	st, err := sqlite.OpenWith(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func appendN(t *testing.T, st store.Store, n int, tag string) {
	t.Helper()
	for i := range n {
		rec := &audit.Record{ID: audit.NewID(), Phase: audit.PhaseFinish, Agent: tag, Tool: "test.noop", Args: []byte(fmt.Sprintf(`{"i":%d}`, i)), Status: audit.StatusSuccess}
		if err := st.AppendAudit(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
	}
}

func wait(t *testing.T, f *trail.Follower, seq int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.WaitWritten(ctx, seq); err != nil {
		t.Fatalf("the trail did not reach seq %d: %v (status %+v)", seq, err, f.Status())
	}
}

func check(t *testing.T, st store.Store, dir string) trail.Report {
	t.Helper()
	rep, err := trail.Check(context.Background(), st, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.VerifyDir(dir, 0, nil); err != nil {
		t.Fatal(err)
	}
	return rep
}

// A follower started on a store that already holds records catches up
// (across rotated files), then copies new records as they are committed,
// with the store's Seq and hashes.
func TestFollowerCatchesUpAndFollows(t *testing.T) {
	tmp := t.TempDir()
	st := openStore(t, filepath.Join(tmp, "a.db"))
	dir := filepath.Join(tmp, "audit")
	appendN(t, st, 250, "before")
	f := trail.Start(dir, st, trail.Options{MaxRecords: 100, Poll: time.Hour})
	wait(t, f, 250)
	appendN(t, st, 30, "after")
	f.Kick()
	wait(t, f, 280)
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep := check(t, st, dir)
	if rep.Files != 280 || rep.Behind != 0 {
		t.Fatalf("report %+v", rep)
	}
	if _, err := os.Stat(filepath.Join(dir, audit.LogFileName(3))); err != nil {
		t.Fatal("not rotated:", err)
	}
	n := 0
	err := st.IterAudit(context.Background(), func(r *audit.Record) error {
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for r, err := range audit.ReadDir(dir, trail.MaxLine) {
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.ListAudit(context.Background(), store.AuditFilter{AfterSeq: r.Seq - 1, Oldest: true, Limit: 1})
		if err != nil || len(got) != 1 || got[0].Hash != r.Hash || got[0].Agent != r.Agent || string(got[0].Args) != string(r.Args) {
			t.Fatalf("file record %d differs from the store's: %+v", r.Seq, got)
		}
	}
	// What was committed while no follower ran is caught up at the next start.
	appendN(t, st, 40, "offline")
	if rep := check(t, st, dir); rep.Behind != 40 {
		t.Fatalf("lag not reported: %+v", rep)
	}
	f = trail.Start(dir, st, trail.Options{MaxRecords: 100})
	wait(t, f, 320)
	f.Close(context.Background())
	if rep := check(t, st, dir); rep.Behind != 0 || rep.Files != 320 {
		t.Fatalf("after restart: %+v", rep)
	}
}

// Two processes on one store (two store handles on one SQLite file) and
// one trail folder: one writes the folder, the other does not, and the
// folder still gets both processes' records; when the writer stops, the
// other takes the folder over and catches up.
func TestFollowerOneWriterTwoProcesses(t *testing.T) {
	tmp := t.TempDir()
	db := filepath.Join(tmp, "shared.db")
	a, b := openStore(t, db), openStore(t, db)
	dir := filepath.Join(tmp, "audit")
	fa := trail.Start(dir, a, trail.Options{Poll: 10 * time.Millisecond, MaxRecords: 50})
	for deadline := time.Now().Add(30 * time.Second); !fa.Status().Writer; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("A never took the folder")
		}
	}
	fb := trail.Start(dir, b, trail.Options{Poll: 10 * time.Millisecond, MaxRecords: 50})
	var wg sync.WaitGroup
	for _, p := range []struct {
		st  store.Store
		f   *trail.Follower
		tag string
	}{{a, fa, "A"}, {b, fb, "B"}} {
		wg.Go(func() {
			for i := range 60 {
				rec := &audit.Record{ID: audit.NewID(), Phase: audit.PhaseFinish, Agent: p.tag, Tool: "t", Args: []byte(fmt.Sprint(i)), Status: audit.StatusSuccess}
				if err := p.st.AppendAudit(context.Background(), rec); err != nil {
					t.Error(err)
					return
				}
				p.f.Committed(rec)
			}
		})
	}
	wg.Wait()
	wait(t, fa, 120)
	if sa, sb := fa.Status(), fb.Status(); !sa.Writer || sb.Writer {
		t.Fatalf("writers: A %+v, B %+v", sa, sb)
	}
	if err := fa.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	appendN(t, a, 10, "A-after")
	wait(t, fb, 130)
	if !fb.Status().Writer {
		t.Fatal("B did not take the folder over")
	}
	fb.Close(context.Background())
	rep := check(t, a, dir)
	if rep.Files != 130 || rep.Behind != 0 {
		t.Fatalf("report %+v", rep)
	}
	counts := map[string]int{}
	for r, err := range audit.ReadDir(dir, trail.MaxLine) {
		if err != nil {
			t.Fatal(err)
		}
		counts[r.Agent]++
	}
	if counts["A"] != 60 || counts["B"] != 60 || counts["A-after"] != 10 {
		t.Fatalf("records per process in the file: %v", counts)
	}
}

// A folder that is not a copy of this store (an older trail with its own
// chain, or another database's) is left as it is, and the follower says
// why; Check reports the first record that differs.
func TestFollowerRefusesForeignFolder(t *testing.T) {
	tmp := t.TempDir()
	st := openStore(t, filepath.Join(tmp, "a.db"))
	dir := filepath.Join(tmp, "audit")
	old, err := audit.OpenFile(dir, audit.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A trail with a chain of its own (as the file sink wrote beside the
	// store before the trail became the store's copy).
	for range 3 {
		rec := &audit.Record{ID: audit.NewID(), Phase: audit.PhaseFinish, Agent: "old", Tool: "t", Status: audit.StatusSuccess}
		rec.Seal(old.Head())
		if err := old.AppendSealed([]*audit.Record{rec}); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	appendN(t, st, 5, "new")
	f := trail.Start(dir, st, trail.Options{Poll: 10 * time.Millisecond})
	deadline := time.Now().Add(30 * time.Second)
	for f.Status().Err == "" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	st2 := f.Status()
	f.Close(context.Background())
	if st2.Writer || !strings.Contains(st2.Err, "not a copy of this store") {
		t.Fatalf("status %+v", st2)
	}
	if h, err := audit.VerifyDir(dir, 0, nil); err != nil || h.Seq != 3 {
		t.Fatalf("the foreign folder was changed: head %+v, %v", h, err)
	}
	_, err = trail.Check(context.Background(), st, dir)
	var ce *audit.ChainError
	if !errors.As(err, &ce) || ce.Seq != 1 {
		t.Fatalf("check: %v", err)
	}
}

// Check tells a copy that only lags from one that is broken: an edited
// record, a deleted record, a record the store does not have.
func TestCheck(t *testing.T) {
	tmp := t.TempDir()
	st := openStore(t, filepath.Join(tmp, "a.db"))
	dir := filepath.Join(tmp, "audit")
	appendN(t, st, 20, "x")
	f := trail.Start(dir, st, trail.Options{})
	wait(t, f, 20)
	if err := f.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rep := check(t, st, dir); rep.Behind != 0 || rep.Files != 20 || rep.Store != 20 {
		t.Fatalf("report %+v", rep)
	}
	// Another store (another database) does not hold these records.
	other := openStore(t, filepath.Join(tmp, "b.db"))
	appendN(t, other, 20, "y")
	if _, err := trail.Check(context.Background(), other, dir); !errors.Is(err, audit.ErrChain) || !strings.Contains(err.Error(), "not a copy of this store") {
		t.Fatalf("another store's trail passed, or was not called foreign: %v", err)
	}
	empty := openStore(t, filepath.Join(tmp, "c.db"))
	if _, err := trail.Check(context.Background(), empty, dir); !errors.Is(err, audit.ErrChain) || !strings.Contains(err.Error(), "store does not have") {
		t.Fatalf("a trail ahead of the store passed: %v", err)
	}

	log := filepath.Join(dir, audit.LogFileName(1))
	orig, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(orig), "\n")
	// An edited record whose hash was recomputed (so the file's own chain
	// would only break at the next link) is caught against the store.
	edited := strings.Replace(lines[19], `"agent":"x"`, `"agent":"z"`, 1)
	var rec audit.Record
	if err := jsonUnmarshal(edited, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Hash = rec.ComputeHash()
	line, _ := jsonMarshal(&rec)
	if err := os.WriteFile(log, []byte(strings.Join(lines[:19], "")+line+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The head file still names the old hash: rewrite it as a careful
	// forger would.
	if err := writeHead(dir, audit.Head{Seq: 20, Hash: rec.Hash}); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.VerifyDir(dir, 0, nil); err != nil {
		t.Fatalf("the forged file should verify on its own: %v", err)
	}
	_, err = trail.Check(context.Background(), st, dir)
	var ce *audit.ChainError
	if !errors.As(err, &ce) || ce.Seq != 20 || !strings.Contains(ce.Reason, "differs") {
		t.Fatalf("edited record: %v", err)
	}
	// A deleted record in the middle.
	if err := os.WriteFile(log, []byte(strings.Join(lines[:5], "")+strings.Join(lines[6:], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	writeHead(dir, audit.Head{Seq: 20, Hash: mustHash(t, lines[19])})
	if _, err = trail.Check(context.Background(), st, dir); !errors.As(err, &ce) || ce.Seq != 6 {
		t.Fatalf("deleted record: %v", err)
	}
}

// A store that cannot be read is retried without giving the folder up
// (the files are fine; only a failed write or a foreign folder does that).
func TestFollowerKeepsFolderWhenStoreFails(t *testing.T) {
	tmp := t.TempDir()
	st, err := sqlite.OpenWith(filepath.Join(tmp, "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, st, 5, "x")
	f := trail.Start(filepath.Join(tmp, "audit"), st, trail.Options{Poll: 5 * time.Millisecond})
	defer f.Close(context.Background())
	wait(t, f, 5)
	st.Close()
	deadline := time.Now().Add(30 * time.Second)
	for f.Status().Err == "" && time.Now().Before(deadline) {
		f.Kick()
		time.Sleep(5 * time.Millisecond)
	}
	if s := f.Status(); !s.Writer || !strings.Contains(s.Err, "read the store") {
		t.Fatalf("status %+v", s)
	}
}

// Close's last catch-up is bounded by its context even when the store
// stops answering: a real Postgres whose audit table another session holds
// locked. Close returns with the context's error, the files stay behind
// the store, and the next Follower catches them up: nothing is lost.
func TestFollowerCloseBoundedWhenStoreHangs(t *testing.T) {
	dsn := testenv.PostgresSchema(t)
	ctx := context.Background()
	st, err := postgres.OpenWith(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	appendN(t, st, 3, "x")
	dir := filepath.Join(t.TempDir(), "audit")
	// Poll an hour: records appended straight to the store (not handed
	// over by a pipeline) reach the files only at the last catch-up.
	f := trail.Start(dir, st, trail.Options{Poll: time.Hour})
	wait(t, f, 3)
	appendN(t, st, 2, "y")

	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Both tables the follower reads: its last catch-up hangs whatever it
	// asks first, the head or the records.
	if _, err := tx.Exec(ctx, "LOCK TABLE audit_records, audit_head IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Close(cctx) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close with a hung store returned %v, want the context's deadline", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Close did not return after its context ended")
	}
	// The follower's own loop may have copied the two later records before
	// the lock (its step after the first three can still be running when
	// wait returns); nothing past them exists.
	if s := f.Status(); s.Written < 3 || s.Written > 5 {
		t.Fatalf("status %+v, want the files at seq 3 to 5", s)
	}

	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	f2 := trail.Start(dir, st, trail.Options{Poll: 5 * time.Millisecond})
	defer f2.Close(ctx)
	wait(t, f2, 5)
}
