package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
)

// frame is one Server-Sent Event as a client reads it.
type frame struct {
	id, event string
	ev        pipeline.Event
}

// frames is an open /api/events stream read in the background.
type frames struct {
	ch     chan frame
	cancel func()
	done   chan struct{}
}

// sseStream opens path (an /api/events URL) with token and, when not empty,
// Last-Event-ID last; it fails the test unless the stream opens.
func (e *env) sseStream(path, token, last string) *frames {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := e.request(ctx, "GET", path, token, "")
	if last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		e.t.Fatalf("%s: %d", path, resp.StatusCode)
	}
	f := &frames{ch: make(chan frame, 4096), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var cur frame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.event != "" {
					f.ch <- cur
				}
				cur = frame{}
			case strings.HasPrefix(line, "id: "):
				cur.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				cur.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				json.Unmarshal([]byte(line[6:]), &cur.ev)
			}
		}
	}()
	e.t.Cleanup(f.close)
	return f
}

func (f *frames) close() { f.cancel(); <-f.done }

// next returns the stream's next event (waiting at most a minute: a bound,
// not a timing check).
func (f *frames) next(t *testing.T) frame {
	t.Helper()
	select {
	case fr := <-f.ch:
		return fr
	case <-time.After(time.Minute):
		t.Fatal("no event arrived")
		return frame{}
	}
}

// tagCall runs a call of tool (a name that tags it: unknown tools finish too,
// with a call_finished event naming them) as agent.
func (e *env) tagCall(agent, tool string) {
	e.eng.Pipeline().Execute(context.Background(), pipeline.Call{Agent: agent, Tool: tool})
}

// seqOf returns the sequence number of an event id EPOCH-SEQ.
func seqOf(t *testing.T, id string) (string, uint64) {
	t.Helper()
	epoch, n, ok := strings.Cut(id, "-")
	seq, err := strconv.ParseUint(n, 10, 64)
	if !ok || len(epoch) != 16 || err != nil {
		t.Fatalf("event id %q", id)
	}
	return epoch, seq
}

// Every event has an id, increasing along the stream; a client that comes
// back with the last id it read gets what it missed (also what happened
// while it had no stream open), in order, then the live events.
func TestEventIDsAndResume(t *testing.T) {
	e := start(t, server.Options{})
	s := e.sseStream("/api/events", e.admin, "")
	e.tagCall("architect", "t.one")
	e.tagCall("architect", "t.two")
	one, two := s.next(t), s.next(t)
	if one.event != pipeline.EventCallFinished || one.ev.Tool != "t.one" || two.ev.Tool != "t.two" {
		t.Fatalf("events %+v %+v", one, two)
	}
	ep1, seq1 := seqOf(t, one.id)
	ep2, seq2 := seqOf(t, two.id)
	if ep1 != ep2 || seq2 <= seq1 {
		t.Fatalf("ids %q then %q", one.id, two.id)
	}
	s.close()
	e.tagCall("architect", "t.three") // no stream open

	r := e.sseStream("/api/events", e.admin, one.id)
	e.tagCall("architect", "t.four")
	var got []string
	last := seq1
	for range 3 {
		fr := r.next(t)
		_, seq := seqOf(t, fr.id)
		if seq <= last {
			t.Fatalf("id %q after seq %d", fr.id, last)
		}
		last = seq
		got = append(got, fr.event+" "+fr.ev.Tool)
	}
	if want := "call_finished t.two,call_finished t.three,call_finished t.four"; strings.Join(got, ",") != want {
		t.Fatalf("resumed stream: %v", got)
	}
}

// The server keeps the last EventReplay events: a client that missed more
// is told so by a gap event (its id is where the stream is complete from),
// followed by the events still kept. So is a client whose id is from
// another run of the server; an id that is not one is a 400.
func TestEventResumeGap(t *testing.T) {
	e := start(t, server.Options{EventReplay: 2})
	s := e.sseStream("/api/events", e.admin, "")
	e.tagCall("architect", "t.one")
	one := s.next(t)
	s.close()
	for _, tool := range []string{"t.two", "t.three", "t.four"} {
		e.tagCall("architect", tool)
	}
	r := e.sseStream("/api/events", e.admin, one.id)
	gap := r.next(t)
	if gap.event != engine.EventGap || gap.ev.Kind != engine.EventGap || !strings.Contains(gap.ev.Message, "last 2 events") {
		t.Fatalf("first event after a gap: %+v", gap)
	}
	_, gapSeq := seqOf(t, gap.id)
	for _, want := range []string{"t.three", "t.four"} {
		fr := r.next(t)
		if _, seq := seqOf(t, fr.id); fr.ev.Tool != want || seq <= gapSeq {
			t.Fatalf("after the gap (id %s): %+v, want %s", gap.id, fr, want)
		}
	}
	r.close()
	// Resuming from the gap's id: nothing missed any more.
	r = e.sseStream("/api/events", e.admin, gap.id)
	e.tagCall("architect", "t.five")
	if fr := r.next(t); fr.ev.Tool != "t.three" {
		t.Fatalf("resumed from the gap: %+v", fr)
	}

	other := e.sseStream("/api/events", e.admin, "0123456789abcdef-1")
	if fr := other.next(t); fr.event != engine.EventGap || !strings.Contains(fr.ev.Message, "restarted") {
		t.Fatalf("an id of another run: %+v", fr)
	}
	for _, bad := range []string{"x", "0123456789abcdef", "0123456789abcdeg-1", "0123456789abcdef--1", "0123456789abcdef-1 x"} {
		if code, body := e.openStream("GET", "/api/events", e.admin, "", "Last-Event-ID", bad); code != 400 || !strings.Contains(body, "Last-Event-ID") {
			t.Errorf("Last-Event-ID %q: %d %s", bad, code, body)
		}
	}
}

// msgModule declares the event kind "message" and keeps its Env.
type msgModule struct{ env engine.Env }

func (*msgModule) Name() string { return "services" }
func (m *msgModule) Provision(_ context.Context, env engine.Env) (engine.Contribution, error) {
	m.env = env
	return engine.Contribution{EventKinds: []string{"message"}}, nil
}
func (*msgModule) Close() error { return nil }

// ?kind= and ?agent= select a stream's events, a module's kinds too;
// unknown kinds and agents are refused.
func TestEventFilters(t *testing.T) {
	m := &msgModule{}
	e := serve(t, engine.Options{World: testenv.ExampleWorld(t), DB: filepath.Join(t.TempDir(), "armory.db"), Modules: []engine.Module{m}}, server.Options{})
	admin, err := server.EnsureAdminToken(context.Background(), e.st)
	if err != nil {
		t.Fatal(err)
	}
	calls := e.sseStream("/api/events?kind=call_finished&agent=architect", admin, "")
	msgs := e.sseStream("/api/events?kind=message,limit_reached", admin, "")
	e.tagCall("reviewer", "t.reviewer")
	if err := m.env.Publish(pipeline.Event{Kind: "message", Agent: "reviewer", Ref: "m1"}); err != nil {
		t.Fatal(err)
	}
	e.tagCall("architect", "t.architect")
	if fr := calls.next(t); fr.ev.Tool != "t.architect" || fr.ev.Agent != "architect" {
		t.Fatalf("?kind=call_finished&agent=architect: %+v", fr)
	}
	if fr := msgs.next(t); fr.event != "message" || fr.ev.Ref != "m1" {
		t.Fatalf("?kind=message: %+v", fr)
	}
	for path, want := range map[string]string{
		"/api/events?kind=nope":                  `unknown event kind \"nope\"`,
		"/api/events?kind=call_finished,":        `unknown event kind \"\"`,
		"/api/events?kind=gap":                   `unknown event kind \"gap\"`,
		"/api/events?agent=ghost":                `unknown agent \"ghost\"`,
		"/api/events?agent=architect&agent=x":    "",
		"/api/events?kind=message&kind=call_fin": "",
	} {
		code, body := e.openStream("GET", path, admin, "")
		if code != 400 && code != 404 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
}

// An agent token streams its own agent's events only — live and
// replayed — and cannot ask for another agent's.
func TestEventsOfAnAgentToken(t *testing.T) {
	e := start(t, server.Options{})
	rev := e.token("reviewer")
	s := e.sseStream("/api/events", rev, "")
	e.tagCall("architect", "t.architect")
	e.tagCall("reviewer", "t.reviewer")
	first := s.next(t)
	if first.ev.Agent != "reviewer" || first.ev.Tool != "t.reviewer" {
		t.Fatalf("the reviewer's stream: %+v", first)
	}
	s.close()
	e.tagCall("architect", "t.architect2")
	e.tagCall("reviewer", "t.reviewer2")
	r := e.sseStream("/api/events?agent=reviewer", rev, first.id)
	if fr := r.next(t); fr.ev.Agent != "reviewer" || fr.ev.Tool != "t.reviewer2" {
		t.Fatalf("the reviewer's resumed stream: %+v", fr)
	}
	for _, path := range []string{"/api/events?agent=architect", "/api/events?agent=ghost"} {
		if code, body := e.openStream("GET", path, rev, ""); code != 403 || !strings.Contains(body, "permission") {
			t.Errorf("%s with the reviewer's token: %d %s", path, code, body)
		}
	}
}
