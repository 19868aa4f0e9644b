package pipeline

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/store"
)

// TestMain lets the test binary act as a second armory process.
func TestMain(m *testing.M) {
	switch os.Getenv("ARMORY_GUARD_HELPER") {
	case "":
		os.Exit(m.Run())
	case "caps":
		os.Exit(helperCaps())
	case "crash":
		os.Exit(helperCrash())
	case "resume":
		os.Exit(helperResume())
	}
}

// helperCaps makes N calls in session "xproc" and prints how many ran.
func helperCaps() int {
	f, err := openFixture(os.Getenv("ARMORY_GUARD_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer f.st.Close()
	n, _ := strconv.Atoi(os.Getenv("ARMORY_GUARD_N"))
	ok := 0
	for i := 0; i < n; i++ {
		o := f.p.Execute(context.Background(), Call{Agent: "dev", Tool: "test.noop", Session: "xproc", Args: json.RawMessage(fmt.Sprintf(`{"p":%d,"i":%d}`, os.Getpid(), i))})
		if o.Status == audit.StatusSuccess {
			ok++
		}
	}
	fmt.Println(ok)
	return 0
}

// helperCrash calls forever, printing each call id once its outcome is
// returned (that is, once its finish entry is durable).
func helperCrash() int {
	f, err := openFixture(os.Getenv("ARMORY_GUARD_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	for i := 0; ; i++ {
		o := f.p.Execute(context.Background(), Call{Agent: "ops", Tool: "test.noop", Session: fmt.Sprintf("crash-%d", i/100), Args: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		if o.Status == audit.StatusSuccess {
			fmt.Println(o.CallID)
		}
	}
}

func helper(t *testing.T, dir, kind string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"ARMORY_GUARD_HELPER=" + kind, "ARMORY_GUARD_DIR=" + dir}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// Caps are exact across processes sharing one store: two processes making
// 500 calls each against a cap of 400 run exactly 400 tools in all.
func TestCapExactAcrossProcesses(t *testing.T) {
	f := newFixture(t)
	if err := f.st.SetLimitOverride(context.Background(), "xproc", "tool_invocations", 400); err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for i := 0; i < 2; i++ {
		c := helper(t, f.dir, "caps", "ARMORY_GUARD_N=500")
		var b strings.Builder
		c.Stdout = &b
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, c), append(outs, &b)
	}
	total := 0
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("helper %d: %v", i, err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(outs[i].String()))
		if err != nil {
			t.Fatalf("helper %d printed %q", i, outs[i].String())
		}
		total += n
	}
	if total != 400 {
		t.Fatalf("%d tools ran across two processes; the cap is 400", total)
	}
	counters, _ := f.st.Counters(context.Background(), "xproc")
	if counters["tool_invocations"] != 400 {
		t.Fatalf("counter = %d", counters["tool_invocations"])
	}
	if err := f.st.VerifyAudit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A process killed with SIGKILL in the middle of a stream of calls loses
// nothing it reported: every call that returned success has its finish
// record, and the chain verifies.
func TestCrashKeepsEveryReturnedCall(t *testing.T) {
	f := newFixture(t)
	c := helper(t, f.dir, "crash")
	out, err := c.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	var ids []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		ids = append(ids, sc.Text())
		if len(ids) == 200 {
			c.Process.Signal(syscall.SIGKILL)
			break
		}
	}
	c.Wait()
	if len(ids) < 200 {
		t.Fatalf("the helper reported only %d calls", len(ids))
	}
	// Reopen as a new process would.
	f2, err := openFixture(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f2.st.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, id := range ids {
		recs, err := f2.st.ListAudit(ctx, store.AuditFilter{CallID: id})
		if err != nil {
			t.Fatal(err)
		}
		finished := false
		for _, r := range recs {
			finished = finished || (r.Phase == audit.PhaseFinish && r.Status == audit.StatusSuccess)
		}
		if !finished {
			t.Fatalf("call %s returned success but has no finish record after the crash", id)
		}
	}
	if err := f2.st.VerifyAudit(ctx); err != nil {
		t.Fatalf("chain after crash: %v", err)
	}
}
