package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCLIServeBatchedDurability: world-config.yaml durability: batched
// reaches the store armory serve opens: a side-effecting call is answered,
// and a background sync then makes its records durable, as the metrics
// show (the mode, the syncs, the durable point).
func TestCLIServeBatchedDurability(t *testing.T) {
	w := initWorld(t, "durability: batched\ndurability_window: 20ms")
	srv := startServe(t, w)
	url, admin := srv.url, srv.admin
	do := func(method, path, body string) string {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return string(out)
	}
	if out := do("POST", "/api/agents/architect/calls", `{"tool":"workspace.write","args":{"path":"d.txt","content":"x"}}`); !strings.Contains(out, `"status":"success"`) {
		t.Fatalf("call: %s", out)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		m := do("GET", "/metrics", "")
		if strings.Contains(m, `armory_audit_durability_mode{mode="batched"} 1`+"\n") &&
			!strings.Contains(m, "armory_audit_syncs_total 0\n") && !strings.Contains(m, "armory_audit_durable_seq 0\n") &&
			strings.Contains(m, `armory_audit_commits_total{durability="durable"} 0`+"\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no batched sync in the metrics after a minute:\n%s", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	srv.stop(t)
}
