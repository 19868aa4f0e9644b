package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
)

// rawStream is a response body read line by line in the background.
type rawStream struct {
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

// stream sends a GET (an MCP event stream or /api/events) and reads its
// body until it ends; the request is cancelled when t ends.
func (e *env) stream(path, token string, hdr ...string) *rawStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		e.t.Fatalf("GET %s: %d %s", path, resp.StatusCode, resp.Header)
	}
	s := &rawStream{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			s.mu.Lock()
			s.lines = append(s.lines, sc.Text())
			s.mu.Unlock()
		}
	}()
	e.t.Cleanup(func() { cancel(); <-s.done })
	return s
}

func (s *rawStream) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

// endsWithout waits (bounded) until the stream ends, failing as soon as it
// carries what.
func (s *rawStream) endsWithout(t *testing.T, what string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if strings.Contains(s.text(), what) {
			t.Fatalf("the stream carried %q:\n%s", what, s.text())
		}
		select {
		case <-s.done:
			if strings.Contains(s.text(), what) {
				t.Fatalf("the stream carried %q:\n%s", what, s.text())
			}
			return
		case <-deadline:
			t.Fatalf("the stream is still open:\n%s", s.text())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// openRawSession initializes an MCP session of agent at version with raw
// HTTP and returns its id.
func (e *env) openRawSession(agent, token, version string) string {
	e.t.Helper()
	st, body, h := e.rpc("POST", agent, token, version, "", initBody(version))
	id := h.Get("Mcp-Session-Id")
	if st != 200 || id == "" {
		e.t.Fatalf("initialize: %d %s", st, body)
	}
	if st, body, _ := e.rpc("POST", agent, token, version, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); st != http.StatusAccepted {
		e.t.Fatalf("initialized: %d %s", st, body)
	}
	return id
}

// TestRevokedTokenStreamsEnd: a token revoked while its event streams are
// open gets nothing more on them. An admin token's /api/events stream and
// an agent token's MCP event stream (GET, standalone) are open when the
// token is revoked; the next event (a call's call_finished, a
// notifications/tools/list_changed) reaches the streams of valid tokens
// but not theirs: their streams end instead.
func TestRevokedTokenStreamsEnd(t *testing.T) {
	e := start(t, server.Options{})
	ctx := ctx30(t)

	// /api/events of an admin token revoked mid-stream.
	secret, tok, err := server.CreateToken(ctx, e.st, "", true, "revoked while streaming")
	if err != nil {
		t.Fatal(err)
	}
	witness := e.events(e.admin)
	revoked := e.stream("/api/events", secret)
	if err := e.st.RevokeToken(ctx, tok.ID); err != nil {
		t.Fatal(err)
	}
	if st, body, _ := e.do("POST", "/api/agents/architect/calls", e.admin, `{"tool":"workspace.list","args":{"path":"."}}`); st != 200 {
		t.Fatalf("call: %d %s", st, body)
	}
	witness.waitFor(t, kind(pipeline.EventCallFinished))
	revoked.endsWithout(t, "call_finished")

	// The MCP event stream of an agent token revoked mid-stream.
	const version = "2025-11-25"
	mcpSecret, mcpID := e.tokenID("architect")
	session := e.openRawSession("architect", mcpSecret, version)
	mcpRevoked := e.stream("/agents/architect/mcp", mcpSecret, "Mcp-Session-Id", session, "Mcp-Protocol-Version", version)
	changed := make(chan struct{}, 8)
	e.mcp("architect", e.token("architect"), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	if err := e.st.RevokeToken(ctx, mcpID); err != nil {
		t.Fatal(err)
	}
	ag, _ := e.h.Agent("architect")
	if err := ag.Registry.Register(skillTool{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed for the valid token's session")
	}
	mcpRevoked.endsWithout(t, "list_changed")
}

// dialSmallWindow connects to the server with a receive buffer as small as
// the kernel allows: a client that reads nothing stops the server's writes
// after a few kilobytes.
func (e *env) dialSmallWindow() net.Conn {
	e.t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 1024)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

// metric returns the value of a metric line ("name{labels}") of /metrics.
func (e *env) metric(name string) string {
	e.t.Helper()
	st, body, _ := e.do("GET", "/metrics", e.admin, "")
	if st != 200 {
		e.t.Fatalf("metrics: %d %s", st, body)
	}
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestMCPClientThatDoesNotRead: a client sends a batch whose answers are
// far larger than the request (2,000 tools/list in one POST of the
// 2025-03-26 revision) and then reads nothing, holding the connection open.
// The server's write blocks; it must give up within its write timeout, end
// that response and free what it held, rather than keep a goroutine, the
// answers and the connection for as long as the client likes: the session
// can then be closed and its place is given back.
func TestMCPClientThatDoesNotRead(t *testing.T) {
	e := start(t, server.Options{WriteTimeout: time.Second})
	const version = "2025-03-26"
	tok := e.token("architect")
	id := e.openRawSession("architect", tok, version)

	var batch strings.Builder
	batch.WriteString("[")
	for i := range 2000 {
		if i > 0 {
			batch.WriteString(",")
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i+1)
	}
	batch.WriteString("]")
	conn := e.dialSmallWindow()
	fmt.Fprintf(conn, "POST /agents/architect/mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: %s\r\nMcp-Session-Id: %s\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(e.url, "http://"), tok, version, id, batch.Len(), batch.String())

	for deadline := time.Now().Add(30 * time.Second); e.metric("armory_stalled_writes_total") != "1"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server still writes to a client that reads nothing; armory_stalled_writes_total %q", e.metric("armory_stalled_writes_total"))
		}
	}
	if st, body, _ := e.rpc("DELETE", "architect", tok, version, id, ""); st != http.StatusNoContent && st != http.StatusOK {
		t.Fatalf("DELETE: %d %s", st, body)
	}
	for deadline := time.Now().Add(30 * time.Second); e.metric("armory_mcp_sessions") != "0"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the session's place is still taken: armory_mcp_sessions %s", e.metric("armory_mcp_sessions"))
		}
	}
	// The response was cut: the client gets what was sent, then the end.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if n := strings.Count(string(got), `"tools":`); n >= 2000 {
		t.Fatalf("the whole answer was written (%d results)", n)
	}
}
