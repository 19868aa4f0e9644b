package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/example"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store/postgres"
)

// replica is one server of a deployment: its own host and store handle
// over the shared world folder and database, and its own trail follower
// on the shared JSONL folder.
func startTrailReplica(t *testing.T, dir, dsn string) (*env, *trail.Follower) {
	t.Helper()
	h, err := roster.Open(dir, roster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := postgres.OpenWith(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fol := trail.Start(filepath.Join(dir, ".armory", "audit"), st, trail.Options{})
	t.Cleanup(func() { fol.Close(context.Background()); st.Close() }) // registered first: runs after the server stops
	return serveHost(t, h, st, pipeline.Options{AfterAudit: fol.Committed}, server.Options{}), fol
}

// Two replicas on one Postgres database and one world folder are one
// system: an approval asked through A shows on B's /api/events and its
// decision through B on A's (each replica streams its own events once),
// and calls through both end up in the one JSONL trail, complete and
// verified against the store.
func TestReplicasShareEventsAndTrail(t *testing.T) {
	dsn := postgresSchema(t)
	dir := filepath.Join(t.TempDir(), "w")
	if err := example.Write(dir); err != nil {
		t.Fatal(err)
	}
	a, fa := startTrailReplica(t, dir, dsn)
	b, fb := startTrailReplica(t, dir, dsn)
	admin, err := server.EnsureAdminToken(context.Background(), a.st)
	if err != nil || admin == "" {
		t.Fatalf("admin: %v", err)
	}
	a.admin, b.admin = admin, admin
	evA, evB := a.events(admin), b.events(admin)

	status, body, _ := a.do("POST", "/api/agents/architect/calls", admin, `{"tool":"workspace.delete","args":{"path":"x"}}`)
	var o pipeline.Outcome
	if status != 202 || json.Unmarshal([]byte(body), &o) != nil || o.ApprovalID == "" {
		t.Fatalf("call through A: %d %s", status, body)
	}
	id := o.ApprovalID
	got := evB.waitFor(t, func(e pipeline.Event) bool { return e.Kind == pipeline.EventApprovalRequested && e.ApprovalID == id })
	if got.Agent != "architect" || got.Tool != "workspace.delete" {
		t.Fatalf("B's event: %+v", got)
	}
	if status, body, _ := b.do("POST", "/api/approvals/"+id+"/deny", admin, `{"reason":"no"}`); status != 200 {
		t.Fatalf("deny through B: %d %s", status, body)
	}
	evA.waitFor(t, func(e pipeline.Event) bool { return e.Kind == pipeline.EventApprovalDecided && e.ApprovalID == id })
	// A's own request came back over the bus before B's decision did (one
	// database, notifications in commit order); it was not streamed twice.
	for name, ev := range map[string]*sse{"A": evA, "B": evB} {
		n := 0
		ev.mu.Lock()
		for _, e := range ev.events {
			if e.Kind == pipeline.EventApprovalRequested && e.ApprovalID == id {
				n++
			}
		}
		ev.mu.Unlock()
		if n != 1 {
			t.Errorf("%s streamed the approval request %d times", name, n)
		}
	}
	evB.waitFor(t, func(e pipeline.Event) bool { return e.Kind == pipeline.EventApprovalDecided && e.ApprovalID == id })

	// Calls through both replicas at once; one of them writes the trail.
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	for c := range 8 {
		r := []*env{a, b}[c%2]
		wg.Go(func() {
			for i := range 25 {
				status, body, _ := r.do("POST", "/api/agents/architect/calls", admin, fmt.Sprintf(`{"tool":"workspace.write","args":{"path":"c%d/%d","content":"x"}}`, c, i))
				var o pipeline.Outcome
				if status != 200 || json.Unmarshal([]byte(body), &o) != nil || o.Status != audit.StatusSuccess {
					t.Errorf("call: %d %s", status, body)
					return
				}
				mu.Lock()
				ids = append(ids, o.CallID)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if (fa.Status().Writer) == (fb.Status().Writer) {
		t.Fatalf("writers: A %+v, B %+v", fa.Status(), fb.Status())
	}
	head, err := a.st.AuditHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	writer := fa
	if fb.Status().Writer {
		writer = fb
	}
	ctx := ctx30(t)
	if err := writer.WaitWritten(ctx, head.Seq); err != nil {
		t.Fatal(err)
	}
	trailDir := filepath.Join(dir, ".armory", "audit")
	rep, err := trail.Check(ctx, b.st, trailDir)
	if err != nil || rep.Files < head.Seq {
		t.Fatalf("check: %+v %v", rep, err)
	}
	inFile := map[string]bool{}
	for r, err := range audit.ReadDir(trailDir, trail.MaxLine) {
		if err != nil {
			t.Fatal(err)
		}
		if r.Phase == audit.PhaseFinish {
			inFile[r.ID] = true
		}
	}
	for _, id := range ids {
		if !inFile[id] {
			t.Fatalf("call %s is missing from the JSONL trail", id)
		}
	}
	if len(ids) != 200 {
		t.Fatalf("%d calls acknowledged", len(ids))
	}
}
