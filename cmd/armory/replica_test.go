package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
)

// replicaDB returns a DSN on a fresh Postgres schema, dropped when t ends.
func replicaDB(t *testing.T) string { return testenv.PostgresSchema(t) }

// slowMarkWorld is the example world with devtools.slow-mark, a
// confirm-level side-effecting tool: it appends its tag to
// $AGENT_WORKSPACE/effect.log, then sleeps.
func slowMarkWorld(t *testing.T) string {
	t.Helper()
	w := initWorld(t)
	tb := filepath.Join(w, "toolbox", "devtools")
	yml, err := os.ReadFile(filepath.Join(tb, "toolbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	yml = append(yml, []byte(`  - name: slow-mark
    description: Record a tag in the workspace, then take a while
    binary: bin/slow-mark
    args:
      - {name: tag, type: positional, required: true, description: "tag to record"}
      - {name: seconds, type: positional, required: true, description: "how long to take"}
    danger: dangerous
    capabilities: [process_exec, write_fs]
    category: other
    permission: confirm
    timeout: 60s
    max_output: 4096
`)...)
	script := "#!/bin/sh\nset -eu\necho \"$1\" >> \"$AGENT_WORKSPACE/effect.log\"\nsleep \"$2\"\necho \"marked $1\"\n"
	cfgPath := filepath.Join(w, "archetype", "architect", "config.md")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("- word-count\n"), []byte("- word-count\n- slow-mark\n"), 1)
	for path, b := range map[string][]byte{filepath.Join(tb, "toolbox.yaml"): yml, filepath.Join(tb, "bin", "slow-mark"): []byte(script), cfgPath: cfg} {
		if err := os.WriteFile(path, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// marks returns how many times slow-mark ran with tag, in any process.
func marks(t *testing.T, w, tag string) int {
	t.Helper()
	n := 0
	filepath.WalkDir(w, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "effect.log" {
			b, _ := os.ReadFile(p)
			for _, l := range strings.Split(string(b), "\n") {
				if l == tag {
					n++
				}
			}
		}
		return nil
	})
	return n
}

// replicaLease is the replicas' run lease: short, so that the test is, and
// long enough that a loaded machine does not delay a renewal past it.
const replicaLease = "2s"

// replica is one `armory serve` process.
type replica struct {
	cmd *exec.Cmd
	url string
}

func startReplica(t *testing.T, env []string) *replica {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--run-lease", replicaLease, "--warm-sandboxes", "0")
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), "listening on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				found <- u
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case u := <-found:
		return &replica{cmd: cmd, url: u}
	case <-time.After(60 * time.Second):
		t.Fatal("serve never listened")
	}
	return nil
}

// call posts a call to the replica as the admin and decodes the outcome.
func (r *replica) call(token, body string) (callOut, error) {
	req, _ := http.NewRequest("POST", r.url+"/api/agents/architect/calls", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return callOut{}, err
	}
	defer resp.Body.Close()
	var o callOut
	b, _ := io.ReadAll(resp.Body)
	// The body is the outcome whatever the status; the status is the
	// outcome's (200 success, 202 pending, 503 interrupted, an error
	// status for any other failure).
	want := map[string]int{"success": 200, "pending": 202, "interrupted": 503}
	if json.Unmarshal(b, &o) != nil || o.Status == "" || want[o.Status] != 0 && resp.StatusCode != want[o.Status] ||
		want[o.Status] == 0 && resp.StatusCode < 400 {
		return o, fmt.Errorf("call %s: %d %s", body, resp.StatusCode, b)
	}
	return o, nil
}

// Two replicas (armory serve) on one Postgres database and one world: a
// replica SIGKILLed while it runs an approved side-effecting call does not
// leave the call stuck. Resumed on the other replica, the call answers
// within its wait with the interrupted outcome, the audit trail records it,
// and the tool ran once. A replica that stays alive keeps its claim on a
// call that runs longer than several leases.
func TestReplicaKilledDuringApprovedCall(t *testing.T) {
	w := slowMarkWorld(t)
	env := []string{"ARMORY_WORLD=" + w, "ARMORY_DB=" + replicaDB(t)}
	r := armoryCmd(t, env, "token", "create", "--admin")
	if r.code != 0 {
		t.Fatalf("token: %+v", r)
	}
	token := strings.TrimSpace(r.stdout)
	a, b := startReplica(t, env), startReplica(t, env)

	// Ask on A, approve, resume on A: the tool starts there.
	pending, err := a.call(token, `{"tool":"devtools.slow-mark","args":{"tag":"killed","seconds":"30"}}`)
	if err != nil || pending.Status != "pending" || pending.ApprovalID == "" {
		t.Fatalf("want pending: %+v %v", pending, err)
	}
	id := pending.ApprovalID
	if r := armoryCmd(t, env, "approvals", "approve", id, "--reason", "go"); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	go a.call(token, `{"resume":"`+id+`","wait":"60s"}`)
	deadline := time.Now().Add(60 * time.Second)
	for marks(t, w, "killed") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the tool never started on replica A")
		}
		time.Sleep(20 * time.Millisecond)
	}
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.cmd.Wait()
	killed := time.Now()

	// Resume on B: it answers within its wait, with the interrupted outcome.
	o, err := b.call(token, `{"resume":"`+id+`","wait":"60s"}`)
	t.Logf("B answered %s after A was killed (lease %s)", time.Since(killed).Round(time.Millisecond), replicaLease)
	if err != nil || o.Status != "interrupted" || !strings.HasPrefix(o.Result, pipeline.InterruptedResult) || o.ApprovalID != id {
		t.Fatalf("resume on B after A was killed: %+v %v", o, err)
	}
	// Later resumes (either surface) return the same; the tool never reruns.
	if again, err := b.call(token, `{"resume":"`+id+`"}`); err != nil || again.Status != "interrupted" || again.Result != o.Result {
		t.Fatalf("second resume: %+v %v", again, err)
	}
	r = armoryCmd(t, env, "call", "--resume", id)
	if c := callJSON(t, r); c.Status != "interrupted" || r.code != 1 {
		t.Fatalf("CLI resume: %+v", r)
	}
	if n := marks(t, w, "killed"); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
	// The audit trail has the interrupted call's start (written by A) and
	// its interrupted finish (written by B), and verifies.
	type rec struct {
		ID, Status, Phase string
		ApprovalID        string `json:"approval_id"`
	}
	auditOf := func(status string) map[string]rec {
		r := armoryCmd(t, env, "audit", "--tool", "devtools.slow-mark", "--status", status, "--json")
		var recs []rec
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &recs) != nil {
			t.Fatalf("audit --status %s: %+v", status, r)
		}
		byID := map[string]rec{}
		for _, x := range recs {
			if x.ApprovalID == id {
				byID[x.ID] = x
			}
		}
		return byID
	}
	started := auditOf("running")
	if len(started) != 1 {
		t.Fatalf("start entries of the approved run: %+v", started)
	}
	var dead string
	for dead = range started {
	}
	if !strings.Contains(strings.Join(o.Reasons, " "), dead) {
		t.Fatalf("the outcome does not name the interrupted call %s: %+v", dead, o)
	}
	// The interrupted call's finish, and one entry per resume that answered
	// (B twice, the CLI once).
	ended := auditOf("interrupted")
	if f, ok := ended[dead]; !ok || f.Phase != "finish" || len(ended) != 4 || ended[o.CallID].Phase != "finish" {
		t.Fatalf("interrupted entries: %+v", ended)
	}
	if r = armoryCmd(t, env, "audit", "verify"); !strings.Contains(r.stdout, "store: chain verified") {
		t.Fatalf("verify: %+v", r)
	}

	// A live replica keeps its claim: B runs a call for 7 s (over three
	// leases) while another process (the CLI) waits for it and gets B's
	// result.
	pending, err = b.call(token, `{"tool":"devtools.slow-mark","args":{"tag":"live","seconds":"7"}}`)
	if err != nil || pending.Status != "pending" {
		t.Fatalf("want pending: %+v %v", pending, err)
	}
	id = pending.ApprovalID
	if r := armoryCmd(t, env, "approvals", "approve", id); r.code != 0 {
		t.Fatalf("approve: %+v", r)
	}
	runner := make(chan callOut, 1)
	go func() { o, _ := b.call(token, `{"resume":"`+id+`","wait":"60s"}`); runner <- o }()
	for deadline := time.Now().Add(60 * time.Second); marks(t, w, "live") == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tool never started on replica B")
		}
	}
	r = armoryCmd(t, env, "--run-lease", replicaLease, "call", "--resume", id, "--wait", "60s")
	waited := callJSON(t, r)
	ran := <-runner
	if ran.Status != "success" || !strings.Contains(ran.Result, "marked live") || waited.Status != "success" || waited.Result != ran.Result ||
		!strings.Contains(strings.Join(waited.Reasons, " "), ran.CallID) {
		t.Fatalf("runner %+v, waiter %+v", ran, waited)
	}
	if n := marks(t, w, "live"); n != 1 {
		t.Fatalf("the tool ran %d times", n)
	}
}
