package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
)

// eventStream reads /api/events in the background.
type eventStream struct {
	mu     sync.Mutex
	events []pipeline.Event
	more   chan struct{}
}

func streamEvents(t *testing.T, url, token string) *eventStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("events: %v %v", resp, err)
	}
	es := &eventStream{more: make(chan struct{}, 1)}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			var e pipeline.Event
			if !ok || json.Unmarshal([]byte(data), &e) != nil {
				continue
			}
			es.mu.Lock()
			es.events = append(es.events, e)
			es.mu.Unlock()
			select {
			case es.more <- struct{}{}:
			default:
			}
		}
	}()
	return es
}

// waitFor returns the first event that ok accepts, waiting at most a
// minute (a bound, not a timing check).
func (es *eventStream) waitFor(t *testing.T, what string, ok func(pipeline.Event) bool) pipeline.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		es.mu.Lock()
		for _, e := range es.events {
			if ok(e) {
				es.mu.Unlock()
				return e
			}
		}
		seen := append([]pipeline.Event(nil), es.events...)
		es.mu.Unlock()
		select {
		case <-es.more:
		case <-deadline:
			t.Fatalf("no %s event on the server's stream; it had %+v", what, seen)
		}
	}
}

// A server shows what the CLI does beside it on the same world and
// store (the default SQLite file): a call made with `armory call` in
// another process, the approval it asks for, and a human's decision with
// `armory approvals approve` all stream on `armory serve`'s /api/events,
// each once.
func TestCLIEventsReachTheServer(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	// No process listens yet (no server runs): a CLI call writes no event
	// anywhere.
	if r := armoryCmd(t, env, "call", "architect", "workspace.list", "--args", `{}`); r.code != 0 {
		t.Fatalf("call: %+v", r)
	}
	if n := testenv.SQLiteRows(t, filepath.Join(w, ".armory", "armory.db-events"), "events"); n != 0 {
		t.Fatalf("%d events written while no process listened", n)
	}
	// A server listens to the other processes from its start (its skills
	// module follows their skill changes: docs/skills.md), so a CLI call
	// beside it writes its events.
	s := startServe(t, w)
	if r := armoryCmd(t, env, "call", "architect", "workspace.list", "--args", `{}`); r.code != 0 {
		t.Fatalf("call: %+v", r)
	}
	if n := testenv.SQLiteRows(t, filepath.Join(w, ".armory", "armory.db-events"), "events"); n == 0 {
		t.Fatal("no event written beside a listening server")
	}
	ev := streamEvents(t, s.url, s.admin)

	r := armoryCmd(t, env, "call", "architect", "workspace.delete", "--args", `{"path":"notes.txt"}`)
	var o pipeline.Outcome
	if json.Unmarshal([]byte(r.stdout), &o) != nil || o.ApprovalID == "" {
		t.Fatalf("call: %+v", r)
	}
	ev.waitFor(t, "approval_requested", func(e pipeline.Event) bool {
		return e.Kind == pipeline.EventApprovalRequested && e.ApprovalID == o.ApprovalID && e.Tool == "workspace.delete"
	})
	ev.waitFor(t, "call_finished (pending)", func(e pipeline.Event) bool {
		return e.Kind == pipeline.EventCallFinished && e.Message == "call "+o.CallID && e.Status == "pending"
	})
	if r := armoryCmd(t, env, "approvals", "deny", o.ApprovalID, "--reason", "keep the notes"); r.code != 0 {
		t.Fatalf("deny: %+v", r)
	}
	d := ev.waitFor(t, "approval_decided", func(e pipeline.Event) bool {
		return e.Kind == pipeline.EventApprovalDecided && e.ApprovalID == o.ApprovalID
	})
	if d.Status != "denied" || !strings.Contains(d.Message, "by ") {
		t.Fatalf("decision event %+v", d)
	}
	ev.mu.Lock()
	n := 0
	for _, e := range ev.events {
		if e.Kind == pipeline.EventApprovalRequested && e.ApprovalID == o.ApprovalID {
			n++
		}
	}
	ev.mu.Unlock()
	if n != 1 {
		t.Errorf("the approval request streamed %d times", n)
	}
	s.stop(t)
}
