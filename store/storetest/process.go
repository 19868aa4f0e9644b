package storetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// Tamper checks that VerifyAudit finds records changed behind the Store's
// back, naming the right seq. exec runs one SQL statement on the database
// that open(t) uses.
func Tamper(t *testing.T, open Opener, exec func(t *testing.T, query string)) {
	tests := []struct {
		name    string
		queries []string
		wantSeq int64
		wantMsg string
	}{
		{"intact", nil, 0, ""},
		{"edit a field", []string{`UPDATE audit_records SET agent = 'mallory' WHERE seq = 17`}, 17, "hash mismatch"},
		{"edit args", []string{`UPDATE audit_records SET args = '{"path":"/etc/shadow"}' WHERE seq = 5`}, 5, "hash mismatch"},
		{"delete a record", []string{`DELETE FROM audit_records WHERE seq = 17`}, 17, "missing"},
		{"swap two records", []string{
			`UPDATE audit_records SET seq = -1 WHERE seq = 17`,
			`UPDATE audit_records SET seq = 17 WHERE seq = 18`,
			`UPDATE audit_records SET seq = 18 WHERE seq = -1`,
		}, 17, "hash mismatch"},
		{"truncate the tail", []string{`DELETE FROM audit_records WHERE seq > 25`}, 26, "truncated"},
		{"head moved", []string{`UPDATE audit_head SET seq = 40`}, 31, "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxT(t)
			s := open(t)
			for i := range 30 {
				mustAppend(t, ctx, s, Record(i))
			}
			for _, q := range tc.queries {
				exec(t, q)
			}
			err := s.VerifyAudit(ctx)
			if tc.wantSeq == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *audit.ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("want a ChainError, got %v", err)
			}
			if ce.Seq != tc.wantSeq || !strings.Contains(ce.Reason, tc.wantMsg) {
				t.Fatalf("got %q, want seq %d with %q", err, tc.wantSeq, tc.wantMsg)
			}
		})
	}
}

// Environment of a helper process.
const (
	helperEnv = "ARMORY_STORETEST_HELPER_DSN"
	// Per helper process:
	helperAcquires = 500 // Acquire and Admit calls against max 400
	helperAppends  = 200 // audit records
)

// childStore opens the Store of a child process, on the database its
// parent put in the environment variable env; nil when this process is not
// such a child. It exits the process when the Store cannot be opened.
func childStore(env, what string, open func(dsn string) (store.Store, error)) store.Store {
	dsn := os.Getenv(env)
	if dsn == "" {
		return nil
	}
	s, err := open(dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, what+": open:", err)
		os.Exit(2)
	}
	return s
}

// HelperProcess is the body of a child process started by CrossProcess.
// Call it from a test named TestHelperProcess; it returns at once unless
// the process was started as a helper. open opens a Store on dsn.
func HelperProcess(t *testing.T, open func(dsn string) (store.Store, error)) {
	s := childStore(helperEnv, "helper", open)
	if s == nil {
		return
	}
	// Wait until the parent releases every helper at once.
	io.Copy(io.Discard, os.Stdin)
	ctx := context.Background()
	var (
		acquired, appended atomic.Int64
		admitted           atomic.Int64
		failed             atomic.Bool
		next               atomic.Int64
		wg                 sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= helperAcquires; i = next.Add(1) {
				var (
					ok  bool
					err error
				)
				if i%2 == 0 {
					_, ok, err = s.Acquire(ctx, "sess", "tool_calls", 1, 400)
				} else {
					var res store.AdmitResult
					res, err = s.Admit(ctx, &store.AdmitRequest{Session: "sess", Record: StartRecord("sess", int(i)),
						Acquire: []store.Acquisition{acq("tool_calls", 1, 400)}, MaxRuntime: time.Hour})
					ok = res.Admitted
					if ok {
						admitted.Add(1)
					}
				}
				if err != nil {
					fmt.Fprintln(os.Stderr, "helper: acquire:", err)
					failed.Store(true)
					return
				}
				if ok {
					acquired.Add(1)
				}
			}
		})
	}
	var nextRec atomic.Int64
	for range 16 {
		wg.Go(func() {
			for i := nextRec.Add(1); i <= helperAppends; i = nextRec.Add(1) {
				if err := s.AppendAudit(ctx, Record(int(i))); err != nil {
					fmt.Fprintln(os.Stderr, "helper: append:", err)
					failed.Store(true)
					return
				}
				appended.Add(1)
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "helper: close:", err)
		failed.Store(true)
	}
	if failed.Load() {
		os.Exit(3)
	}
	fmt.Printf("\nhelper-result acquired=%d appended=%d admitted=%d\n", acquired.Load(), appended.Load(), admitted.Load())
	os.Exit(0)
}

var resultLine = regexp.MustCompile(`helper-result acquired=(\d+) appended=(\d+) admitted=(\d+)`)

// CrossProcess re-executes the test binary as two helper processes
// (TestHelperProcess, see HelperProcess) that share the database at dsn.
// Each makes 500 calls against a maximum of 400 on one counter, half of
// them Acquire and half Admit (with a start record), and appends 200 audit
// records, concurrently. It then checks, through a Store opened with open:
// exactly 400 acquisitions and admissions succeeded in total, the counter is
// 400, and the audit chain holds the 400 appended records plus one per
// admission, and verifies.
func CrossProcess(t *testing.T, dsn string, open func(dsn string) (store.Store, error)) {
	const children = 2
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout strings.Builder
		stderr strings.Builder
	}
	var kids []*child
	for range children {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")}
		c.cmd.Env = append(os.Environ(), helperEnv+"="+dsn)
		c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
		in, err := c.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.stdin = in
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		kids = append(kids, c)
	}
	for _, c := range kids {
		c.stdin.Close() // go
	}
	var acquired, appended, admitted int64
	for i, c := range kids {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\nstdout:\n%s\nstderr:\n%s", i, err, c.stdout.String(), c.stderr.String())
		}
		m := resultLine.FindStringSubmatch(c.stdout.String())
		if m == nil {
			t.Fatalf("helper %d printed no result:\n%s\n%s", i, c.stdout.String(), c.stderr.String())
		}
		a, _ := strconv.ParseInt(m[1], 10, 64)
		p, _ := strconv.ParseInt(m[2], 10, 64)
		d, _ := strconv.ParseInt(m[3], 10, 64)
		t.Logf("helper %d: %d acquisitions succeeded (%d of them admissions), %d records appended", i, a, d, p)
		acquired += a
		appended += p
		admitted += d
	}
	if acquired != 400 {
		t.Fatalf("%d acquisitions succeeded across processes, want exactly 400", acquired)
	}
	if appended != children*helperAppends {
		t.Fatalf("%d records appended, want %d", appended, children*helperAppends)
	}
	s, err := open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := ctxT(t)
	m, err := s.Counters(ctx, "sess")
	if err != nil || m["tool_calls"] != 400 {
		t.Fatalf("counter %v, %v", m, err)
	}
	n, _ := countAudit(t, ctx, s)
	if n != children*helperAppends+admitted {
		t.Fatalf("%d audit records stored, want %d", n, children*helperAppends+admitted)
	}
	if err := s.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkAppend measures AppendAudit from 64 concurrent goroutines (the
// pipeline's target load) and reports records/s, plus cpu-µs/rec: the CPU
// time this process spent per record (callers, committer and, for an
// embedded database, the database itself), which a busy shared machine
// disturbs far less than wall time. Each record is durable when its call
// returns (per the backend's durability setting).
func BenchmarkAppend(b *testing.B, s store.Store) {
	const workers = 64
	ctx := context.Background()
	recs := make([]*audit.Record, 1024)
	for i := range recs {
		recs[i] = Record(i)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu0, cpuOK := processCPU()
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				r := *recs[i%int64(len(recs))] // shallow copy: AppendAudit copies what it keeps
				r.Time = time.Time{}
				if err := s.AppendAudit(ctx, &r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "records/s")
	if cpu1, ok := processCPU(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-µs/rec")
	}
}

// NewerSchema checks that a Store refuses a database whose schema is newer
// than the program (a later version of Armory migrated it): open fails and
// says so, and nothing is migrated. db is a fresh database, exec runs one
// SQL statement on it.
func NewerSchema(t *testing.T, db string, open func(db string) (store.Store, error), exec func(t *testing.T, query string)) {
	s, err := open(db)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	exec(t, `UPDATE schema_version SET version = 999 WHERE version = (SELECT MAX(version) FROM schema_version)`)
	if s, err := open(db); err == nil || !strings.Contains(err.Error(), "newer than this program") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("open of a newer schema: %v", err)
	}
}
