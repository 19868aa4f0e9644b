package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestCLIToken(t *testing.T) {
	w := initWorld(t)
	env := []string{"ARMORY_WORLD=" + w}
	r := armoryCmd(t, env, "token", "create", "reviewer", "--name", "ci")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "armory_") || !strings.Contains(r.stderr, "(agent reviewer) created") {
		t.Fatalf("create: %+v", r)
	}
	secret := strings.TrimSpace(r.stdout)
	if r = armoryCmd(t, env, "token", "create", "--admin"); r.code != 0 || !strings.HasPrefix(r.stdout, "armory_") {
		t.Fatalf("create --admin: %+v", r)
	}
	for _, bad := range [][]string{{"token", "create"}, {"token", "create", "--admin", "reviewer"}, {"token", "create", "a", "b"}} {
		if r := armoryCmd(t, env, bad...); r.code != exitUsage {
			t.Errorf("%v: %+v", bad, r)
		}
	}
	if r := armoryCmd(t, env, "token", "create", "ghost"); r.code != exitInvalid || !strings.Contains(r.stderr, "unknown agent") {
		t.Errorf("unknown agent: %+v", r)
	}
	r = armoryCmd(t, env, "token", "list", "--json")
	var ts []struct {
		ID, Agent string
		Admin     bool
		RevokedAt string `json:"revoked_at"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &ts) != nil || len(ts) != 2 || ts[0].Agent != "reviewer" || !ts[1].Admin {
		t.Fatalf("list: %+v", r)
	}
	if strings.Contains(r.stdout, secret) || strings.Contains(r.stdout, "hash") {
		t.Fatal("token list shows a secret or its hash")
	}
	if r = armoryCmd(t, env, "token", "revoke", ts[0].ID); r.code != 0 {
		t.Fatalf("revoke: %+v", r)
	}
	if r = armoryCmd(t, env, "token", "revoke", ts[0].ID); r.code != exitInvalid || !strings.Contains(r.stderr, "already revoked") {
		t.Fatalf("revoke twice: %+v", r)
	}
	if r = armoryCmd(t, env, "token", "list"); r.code != 0 || !strings.Contains(r.stdout, "revoked ") || !strings.Contains(r.stdout, "agent:reviewer") {
		t.Fatalf("list: %+v", r)
	}
}

type bearerRT string

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func TestCLIServe(t *testing.T) {
	w := initWorld(t)
	cmd := exec.Command(binary, "--world", w, "serve", "--addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var admin, url string
	timeout := time.After(60 * time.Second)
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("serve exited before listening")
			}
			if strings.HasPrefix(l, "armory_") {
				admin = l
			}
			if _, rest, ok := strings.Cut(l, "listening on "); ok {
				url, _, _ = strings.Cut(rest, " ")
			}
		case <-timeout:
			t.Fatal("no listening line")
		}
	}
	if admin == "" {
		t.Fatal("no admin token printed on first start")
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", resp, err)
	}
	resp.Body.Close()
	resp, _ = http.Get(url + "/api/agents")
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 401 || !strings.Contains(string(b), `"unauthenticated"`) {
		t.Fatalf("no token: %d %s", resp.StatusCode, b)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url + "/agents/reviewer/mcp", HTTPClient: &http.Client{Transport: bearerRT(admin)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, names := testenv.MCPTools(t, ctx, cs); !slices.Equal(withoutServices(names), []string{"devtools.word-count", "workspace.read", "workspace.search"}) || !slices.Contains(names, "syscall.inbox") {
		t.Fatalf("reviewer tools over MCP: %v", names)
	}
	cs.Close()

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve did not exit 0 on SIGTERM: %v", err)
	}

	// A second start finds the admin token and prints none.
	r := armoryCmd(t, nil, "--world", w, "token", "list", "--json")
	if r.code != 0 || strings.Count(r.stdout, `"admin": true`) != 1 {
		t.Fatalf("tokens after first start: %+v", r)
	}
}

func TestCLIMCPStdio(t *testing.T) {
	w := initWorld(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "cli-test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(binary, "--world", w, "mcp", "architect")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.write", Arguments: map[string]any{"path": "s.txt", "content": "stdio"}})
	if err != nil || res.IsError {
		t.Fatalf("write over stdio: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "workspace.write", Arguments: map[string]any{"path": 7}})
	if err != nil || !res.IsError {
		t.Fatalf("refused call over stdio: %v %+v", err, res)
	}
	cs.Close()
	r := armoryCmd(t, nil, "--world", w, "audit", "--agent", "architect", "--tool", "workspace.write", "--json")
	if r.code != 0 || !strings.Contains(r.stdout, `"session": "architect:default"`) {
		t.Fatalf("stdio calls were not audited: %+v", r)
	}
}

// README's main command: `armory serve --example` writes the example world
// into ./demo-world (never into the current folder itself), serves it and
// says how to connect; a second start reuses the world.
func TestCLIServeExample(t *testing.T) {
	cwd := t.TempDir()
	for round := 0; round < 2; round++ {
		cmd := exec.Command(binary, "serve", "--example", "--addr", "127.0.0.1:0")
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "ARMORY_WORLD=")
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		var url string
		var out []string
		for sc.Scan() {
			l := sc.Text()
			out = append(out, l)
			if _, rest, ok := strings.Cut(l, "listening on "); ok {
				url, _, _ = strings.Cut(rest, " ")
			}
			if strings.Contains(l, "Authorization: Bearer") {
				break
			}
		}
		all := strings.Join(out, "\n")
		if url == "" || !strings.Contains(all, "/agents/AGENT/mcp (agents: architect,") || !strings.Contains(all, "token create architect") {
			cmd.Process.Kill()
			t.Fatalf("round %d output:\n%s", round, all)
		}
		if (round == 0) != strings.Contains(all, "created an admin token (shown only now") || (round == 1) != strings.Contains(all, "make another with: armory --world demo-world token create --admin") {
			cmd.Process.Kill()
			t.Fatalf("round %d: the admin token is shown on the first start, the way to another on the next:\n%s", round, all)
		}
		if (round == 0) != strings.Contains(all, "wrote the example world to demo-world") {
			cmd.Process.Kill()
			t.Fatalf("round %d: the world is written once:\n%s", round, all)
		}
		resp, err := http.Get(url + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", resp, err)
		}
		resp.Body.Close()
		cmd.Process.Signal(syscall.SIGTERM)
		go io.Copy(io.Discard, stderr)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("serve did not exit cleanly on SIGTERM: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(cwd, "demo-world", "world-config.yaml")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cwd, "world-config.yaml")); err == nil {
		t.Fatal("the example world was written into the current folder")
	}
}

// TestCLIServeMCPSessionSettings: the session limits come from the
// world's mcp_sessions, a serve flag overriding one of them, and show in
// the metrics.
func TestCLIServeMCPSessionSettings(t *testing.T) {
	w := initWorld(t, "mcp_sessions:\n  max_per_token: 2\n  max_total: 50\n  idle_timeout: 5m")
	if r := armoryCmd(t, nil, "--world", w, "serve", "--mcp-sessions", "-1"); r.code != exitUsage {
		t.Errorf("a negative limit: %+v", r)
	}
	srv := startServe(t, w, "--mcp-sessions", "7")
	url, admin := srv.url, srv.admin
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`armory_mcp_sessions_limit{limit="per_token"} 2`, `armory_mcp_sessions_limit{limit="total"} 7`, "armory_mcp_sessions 0", "armory_mcp_session_idle_timeout_seconds 300"} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("metrics lack %q", want)
		}
	}
	srv.stop(t)
}
