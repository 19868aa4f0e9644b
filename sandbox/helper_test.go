package sandbox

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestHelperLastStepAllocatesNothing holds the helper's contract: from the
// first rlimit to execve nothing allocates, so a lowered RLIMIT_AS cannot
// starve the helper's Go runtime. The limits are set to their current
// values (nothing changes in this process) and the command does not exist,
// so execve fails and the step returns.
func TestHelperLastStepAllocatesNothing(t *testing.T) {
	var rls []rlimit
	for _, res := range []int{unix.RLIMIT_AS, unix.RLIMIT_NOFILE, unix.RLIMIT_FSIZE} {
		var cur unix.Rlimit
		if err := unix.Getrlimit(res, &cur); err != nil {
			t.Fatal(err)
		}
		rls = append(rls, rlimit{Resource: res, Cur: cur.Cur, Max: cur.Max})
	}
	missing := t.TempDir() + "/no-such-command"
	p, err := newExecPlan(missing, []string{missing, "arg"}, []string{"A=1", "B=2"}, rls)
	if err != nil {
		t.Fatal(err)
	}
	var step int
	var errno unix.Errno
	allocs := testing.AllocsPerRun(100, func() { step, errno = p.limitAndExec() })
	if allocs != 0 {
		t.Errorf("the last step allocates %v times per run; it must not allocate at all", allocs)
	}
	if step != len(rls) || errno != unix.ENOENT {
		t.Errorf("limitAndExec = step %d, %v; want execve (step %d) failing with ENOENT", step, errno, len(rls))
	}
}

// TestMemoryLimitBelowHelperReservation runs a command whose memory limit
// is below the address space the helper's Go runtime has reserved when it
// sets the limits, with an environment large enough (20,000 variables)
// that building it for execve takes megabytes of fresh address space. A
// helper that allocates after lowering RLIMIT_AS dies there ("fatal
// error: runtime: cannot allocate memory", exit 2) at every run, not by
// luck of load; the command itself fits easily and must run.
func TestMemoryLimitBelowHelperReservation(t *testing.T) {
	env := map[string]string{}
	for i := range 20000 {
		env["ARMORY_BALLAST_"+strconv.Itoa(i)] = "x"
	}
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		for _, limit := range []int64{MinMemory, 64 << 20} {
			t.Run(mib(limit), func(t *testing.T) {
				p := Confinement{Backend: b, Workspace: ws(t), Env: env, Limits: Limits{Memory: limit}}
				out := run(t, p, nil, "sh", "-c", `echo "ok $ARMORY_BALLAST_19999"`)
				if string(out.Stdout) != "ok x\n" || out.ExitCode != 0 {
					t.Fatalf("a command that fits in %s did not run: exit %d, stdout %q, stderr %.300q",
						mib(limit), out.ExitCode, out.Stdout, out.Stderr)
				}
			})
		}
	})
}

// TestMemoryLimitBelowMinimum: a limit too low for the sandbox to start a
// command is a configuration error naming the limit and the minimum, at
// every backend, and nothing runs.
func TestMemoryLimitBelowMinimum(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		for _, limit := range []int64{1, 4 << 20, MinMemory - 1} {
			w := ws(t)
			p := Confinement{Backend: b, Workspace: w, Limits: Limits{Memory: limit}}
			out, err := Run(t.Context(), p, []string{"sh", "-c", "echo ran > ran"}, nil)
			if !errors.Is(err, ErrPolicy) {
				t.Fatalf("limit %d: err %v (report %+v), want ErrPolicy", limit, err, out)
			}
			for _, want := range []string{fmt.Sprintf("%d bytes", limit), fmt.Sprintf("minimum of %d bytes (8 MiB)", MinMemory)} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("limit %d: error %q does not say %q", limit, err, want)
				}
			}
			if unix.Access(w+"/ran", unix.F_OK) == nil {
				t.Errorf("limit %d: the command ran", limit)
			}
		}
		// The minimum itself is accepted and runs a shell.
		out := run(t, Confinement{Backend: b, Workspace: ws(t), Limits: Limits{Memory: MinMemory}}, nil, "sh", "-c", "echo ok")
		if string(out.Stdout) != "ok\n" {
			t.Errorf("a shell under the minimum limit: %+v %q", out, out.Stderr)
		}
	})
}
