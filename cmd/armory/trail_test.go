package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/store/sqlite"
)

// served is one `armory serve` process.
type served struct {
	cmd   *exec.Cmd
	url   string
	admin string // set on the first start of a store
	mu    sync.Mutex
	log   []string
	done  chan struct{}
}

// startServe starts `armory serve` on world w with extra args and waits
// until it listens.
func startServe(t *testing.T, w string, args ...string) *served {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--world", w, "serve", "--addr", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, done: make(chan struct{})}
	t.Cleanup(func() { cmd.Process.Kill(); <-s.done })
	ready := make(chan struct{})
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(stderr)
		signalled := false
		for sc.Scan() {
			l := sc.Text()
			s.mu.Lock()
			s.log = append(s.log, l)
			if strings.HasPrefix(l, "armory_") {
				s.admin = l
			}
			if _, rest, ok := strings.Cut(l, "listening on "); ok && !signalled {
				s.url, _, _ = strings.Cut(rest, " ")
				signalled = true
				close(ready)
			}
			s.mu.Unlock()
		}
		cmd.Wait()
	}()
	select {
	case <-ready:
	case <-s.done:
		t.Fatalf("serve exited before listening:\n%s", strings.Join(s.log, "\n"))
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not listen")
	}
	return s
}

func (s *served) logText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

// stop ends the process with SIGTERM and waits for it.
func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop on SIGTERM")
	}
}

// call makes one workspace.write through the REST API and returns the
// call's id when the call was acknowledged as a success.
func (s *served) call(client *http.Client, token, agent, tool string, args any) (string, error) {
	body, _ := json.Marshal(map[string]any{"tool": tool, "args": args})
	req, _ := http.NewRequest("POST", s.url+"/api/agents/"+agent+"/calls", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var o struct {
		CallID string `json:"call_id"`
		Status string `json:"status"`
		Result string `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		return "", err
	}
	if resp.StatusCode != 200 || o.Status != "success" {
		return "", fmt.Errorf("call: %d %s %s", resp.StatusCode, o.Status, o.Result)
	}
	return o.CallID, nil
}

// load runs calls from 8 clients against the servers in turn until stop
// is closed or each client made max calls, and returns the ids of the
// acknowledged calls.
func load(t *testing.T, token string, servers []*served, max int, stop <-chan struct{}, acked *atomic.Int64) []string {
	var (
		mu  sync.Mutex
		ids []string
		wg  sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	for c := range 8 {
		wg.Go(func() {
			for i := range max {
				select {
				case <-stop:
					return
				default:
				}
				s := servers[(c+i)%len(servers)]
				id, err := s.call(client, token, "architect", "workspace.write", map[string]any{"path": fmt.Sprintf("c%d/f%d.txt", c, i), "content": "x"})
				if err != nil {
					return // the server went away (or refused): stop this client
				}
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
				acked.Add(1)
			}
		})
	}
	wg.Wait()
	return ids
}

// finishes returns the call ids of the finish records in the JSONL trail.
func finishesInFile(t *testing.T, dir string) map[string]bool {
	t.Helper()
	got := map[string]bool{}
	for r, err := range audit.ReadDir(dir, trail.MaxLine) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Phase == audit.PhaseFinish {
			got[r.ID] = true
		}
	}
	return got
}

// SIGKILL of armory serve under load: every acknowledged call's records are
// in the store, and after a restart the JSONL trail (a copy written after
// commit, lazily synced) is complete and verifies against the store.
func TestCLIServeKilledUnderLoad(t *testing.T) {
	w := initWorld(t)
	s := startServe(t, w)
	token := s.admin
	if token == "" {
		t.Fatal("no admin token")
	}
	stop := make(chan struct{})
	var acked atomic.Int64
	var ids []string
	loaded := make(chan struct{})
	go func() {
		defer close(loaded)
		ids = load(t, token, []*served{s}, 500, stop, &acked)
	}()
	for deadline := time.Now().Add(120 * time.Second); acked.Load() < 150; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d calls acknowledged", acked.Load())
		}
	}
	if err := s.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-s.done
	close(stop)
	<-loaded
	if len(ids) < 150 {
		t.Fatalf("%d acknowledged calls", len(ids))
	}

	st, err := sqlite.OpenWith(filepath.Join(w, ".armory", "armory.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for _, id := range ids {
		recs, err := st.ListAudit(ctx, store.AuditFilter{CallID: id})
		if err != nil || len(recs) != 2 {
			t.Fatalf("acknowledged call %s has %d records in the store (%v)", id, len(recs), err)
		}
	}
	if err := st.VerifyAudit(ctx); err != nil {
		t.Fatal(err)
	}

	// Restart: the follower catches the file trail up from the store.
	s2 := startServe(t, w)
	s2.stop(t)
	r := armoryCmd(t, nil, "--world", w, "audit", "verify")
	if r.code != 0 || !strings.Contains(r.stdout, "jsonl: chain verified, a copy of the store's records") || strings.Contains(r.stdout, "behind") {
		t.Fatalf("verify after restart: %+v\nserve log:\n%s", r, s2.logText())
	}
	dir := filepath.Join(w, ".armory", "audit")
	rep, err := trail.Check(ctx, st, dir)
	if err != nil || rep.Behind != 0 {
		t.Fatalf("check: %+v %v", rep, err)
	}
	inFile := finishesInFile(t, dir)
	for _, id := range ids {
		if !inFile[id] {
			t.Fatalf("acknowledged call %s is missing from the JSONL trail after restart", id)
		}
	}
}

// Two armory serve processes on one world (one SQLite store): calls through
// both end up in the one JSONL trail, which only one of them writes, and
// which verifies against the store with nothing missing.
func TestCLITwoServersOneTrail(t *testing.T) {
	w := initWorld(t)
	a := startServe(t, w)
	token := a.admin
	b := startServe(t, w)
	var acked atomic.Int64
	ids := load(t, token, []*served{a, b}, 40, make(chan struct{}), &acked)
	if len(ids) != 8*40 {
		t.Fatalf("%d of %d calls acknowledged", len(ids), 8*40)
	}
	// Each process says in its metrics whether it writes the trail.
	writers := 0
	for _, s := range []*served{a, b} {
		req, _ := http.NewRequest("GET", s.url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case strings.Contains(string(body), "\narmory_audit_trail_writer 1\n"):
			writers++
			if !strings.Contains(string(body), "\narmory_audit_trail_behind ") {
				t.Error("the writer does not report how far behind the trail is")
			}
		case !strings.Contains(string(body), "\narmory_audit_trail_writer 0\n"):
			t.Errorf("metrics lack armory_audit_trail_writer:\n%s", body)
		}
	}
	if writers != 1 {
		t.Errorf("%d processes say they write the trail", writers)
	}
	a.stop(t)
	b.stop(t)
	if !strings.Contains(a.logText()+b.logText(), "another process writes the JSONL audit trail") {
		t.Errorf("neither server said that the other writes the trail:\nA:\n%s\nB:\n%s", a.logText(), b.logText())
	}
	r := armoryCmd(t, nil, "--world", w, "audit", "verify")
	if r.code != 0 || strings.Contains(r.stdout, "behind") {
		t.Fatalf("verify: %+v", r)
	}
	inFile := finishesInFile(t, filepath.Join(w, ".armory", "audit"))
	for _, id := range ids {
		if !inFile[id] {
			t.Fatalf("call %s is missing from the JSONL trail", id)
		}
	}
}
