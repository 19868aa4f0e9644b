package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
)

// rawStream is a response body read line by line in the background.
type rawStream struct {
	mu     sync.Mutex
	lines  []string
	done   chan struct{}
	cancel func() // ends the request
}

// stream sends a GET (an MCP event stream or /api/events) and reads its
// body until it ends; the request is cancelled when t ends.
func (e *env) stream(path, token string, hdr ...string) *rawStream {
	e.t.Helper()
	return e.streamReq("GET", path, token, "", append([]string{"Accept", "text/event-stream"}, hdr...)...)
}

// streamReq is stream for any method and body.
func (e *env) streamReq(method, path, token, body string, hdr ...string) *rawStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := http.DefaultClient.Do(e.request(ctx, method, path, token, body, hdr...))
	if err != nil {
		cancel()
		e.t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		e.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, resp.Header)
	}
	s := &rawStream{done: make(chan struct{}), cancel: cancel}
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
	waitChanged := func() {
		t.Helper()
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatal("no notifications/tools/list_changed for the valid token's session")
		}
	}
	waitChanged()
	mcpRevoked.endsWithout(t, "list_changed")

	// A sessionless client's subscriptions/listen stream (2026-07-28).
	listenSecret, listenID := e.tokenID("architect")
	listen := e.listen(listenSecret)
	if err := e.st.RevokeToken(ctx, listenID); err != nil {
		t.Fatal(err)
	}
	if err := ag.Registry.Unregister("skill.echo"); err != nil {
		t.Fatal(err)
	}
	waitChanged()
	listen.endsWithout(t, "list_changed")
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
// metric scrapes /metrics for name's value ("" when absent). A scrape
// that fails is "" too, logged: callers poll until a deadline, and a
// server under a short WriteTimeout on a loaded machine can cut one.
func (e *env) metric(name string) string {
	e.t.Helper()
	st, body, _ := e.do("GET", "/metrics", e.admin, "")
	if st != 200 {
		e.t.Logf("metrics: %d %.200s", st, body)
		return ""
	}
	for _, l := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}

// TestMCPClientThatDoesNotRead: a client sends a batch whose answers are
// far larger than the request (64 reads of large files in one POST of the
// 2025-03-26 revision) and then reads nothing, holding the connection
// open.
// The server's write blocks; it must give up within its write timeout, end
// that response and free what it held, rather than keep a goroutine, the
// answers and the connection for as long as the client likes: the session
// can then be closed and its place is given back.
func TestMCPClientThatDoesNotRead(t *testing.T) {
	e := start(t, server.Options{WriteTimeout: time.Second})
	const version = "2025-03-26"
	tok := e.token("architect")
	id := e.openRawSession("architect", tok, version)

	// Each answer is a read of 64 KiB of '<', which JSON carries as
	// \u003c: 24 MB of answers, far more than the sockets' buffers.
	ws := e.h.World.Workspace("architect")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var batch strings.Builder
	batch.WriteString("[")
	for i := range server.MaxBatch {
		if err := os.WriteFile(filepath.Join(ws, fmt.Sprintf("big%d.txt", i)), []byte(strings.Repeat("<", 64<<10)), 0o644); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			batch.WriteString(",")
		}
		fmt.Fprintf(&batch, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"workspace.read","arguments":{"path":"big%d.txt"}}}`, i+1, i)
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
	if n := strings.Count(string(got), `"result"`); n >= server.MaxBatch {
		t.Fatalf("the whole answer was written (%d results)", n)
	}
}

// TestJSONRPCBatchBounds: a batch (revisions before 2025-06-18) is a
// multiplier, since the MCP library answers its requests at once: it holds
// at most server.MaxBatch messages, and a batch that names one request id
// twice is refused whole (the library answered only the first and ran the
// second anyway, its answer lost). Nothing of a refused batch runs.
func TestJSONRPCBatchBounds(t *testing.T) {
	e := start(t, server.Options{})
	p := newPeer(t, e, e.token("architect"), "2025-03-26")
	batch := func(n int, msg func(i int) string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = msg(i)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	list := func(i int) string { return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/list"}`, i+1) }
	st, body, hdr := p.post("", batch(server.MaxBatch, list))
	if r := rpcReplies(t, body, hdr); st != 200 || len(r) != server.MaxBatch {
		t.Fatalf("a batch of %d: %d, %d replies", server.MaxBatch, st, len(r))
	}
	st, body, hdr = p.post("", batch(server.MaxBatch+1, list))
	if r := rpcReplies(t, body, hdr); st != 400 || len(r) != 1 || r[0].Error == nil || r[0].Error.Code != -32600 || string(r[0].ID) != "null" {
		t.Fatalf("a batch of %d: %d %.300s", server.MaxBatch+1, st, body)
	}

	write := func(id, file string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"workspace.write","arguments":{"path":"` + file + `","content":"x"}}}`
	}
	for _, ids := range [][2]string{{`1`, `1`}, {`"a"`, `"a"`}, {`1.5`, `1.5`}, {`"\u0061"`, `"\u0061"`}} {
		st, body, hdr := p.post("", "["+write(ids[0], "dup-a.txt")+","+write(ids[1], "dup-b.txt")+"]")
		if r := rpcReplies(t, body, hdr); st != 400 || len(r) != 1 || r[0].Error == nil || r[0].Error.Code != -32600 {
			t.Errorf("a batch naming id %s twice: %d %.300s", ids[0], st, body)
		}
	}
	for _, f := range []string{"dup-a.txt", "dup-b.txt"} {
		if _, err := os.Stat(filepath.Join(e.h.World.Workspace("architect"), f)); err == nil {
			t.Errorf("a call of a refused batch ran: %s exists", f)
		}
	}
	// Ids that differ only as the library would read them are two ids.
	st, body, hdr = p.post("", "["+write(`1`, "one-a.txt")+","+write(`1.0`, "one-b.txt")+","+write(`"a"`, "one-c.txt")+","+write(`"\u0061"`, "one-d.txt")+"]")
	if r := rpcReplies(t, body, hdr); st != 200 || len(r) != 4 {
		t.Errorf("a batch of four distinct ids: %d %.300s", st, body)
	}
}

// TestJSONRPCOddMethodsAndParams: method names in another case, with a
// trailing space, a NUL or a look-alike letter are unknown methods; a
// tools/call without an id (a notification) is an invalid request;
// params that are not what a method takes are invalid params; JSON nested
// past the decoders' depth is refused before anything reads it. No call
// runs and nothing is written.
func TestJSONRPCOddMethodsAndParams(t *testing.T) {
	e := start(t, server.Options{})
	p := newPeer(t, e, e.token("architect"), "2025-11-25")
	for _, c := range []struct {
		body   string
		status int
		code   int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":"workspace.write","arguments":{"path":"odd.txt","content":"x"}}}`, 200, -32601},
		{`{"jsonrpc":"2.0","id":1,"method":"TOOLS/LIST"}`, 200, -32601},
		// A request method sent as a notification (no id) would run with
		// its answer nowhere: refused.
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"workspace.write","arguments":{"path":"odd.txt","content":"x"}}}`, 400, -32600},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call ","params":{"name":"workspace.write","arguments":{"path":"odd.txt","content":"x"}}}`, 200, -32601},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call\u0000","params":{"name":"workspace.write","arguments":{"path":"odd.txt","content":"x"}}}`, 200, -32601},
		{`{"jsonrpc":"2.0","id":1,"method":"t\u043eols/call","params":{"name":"workspace.write","arguments":{"path":"odd.txt","content":"x"}}}`, 200, -32601},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["workspace.write",{"path":"odd.txt","content":"x"}]}`, 200, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":["workspace.write"],"arguments":{"path":"odd.txt","content":"x"}}}`, 200, -32602},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`, 400, -32700},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workspace.write","arguments":{"path":"odd.txt","content":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}}`, 400, -32000},
	} {
		st, body, hdr := p.post("", c.body)
		r := rpcReplies(t, body, hdr)
		if st != c.status || len(r) != 1 || r[0].Error == nil || r[0].Error.Code != int64(c.code) {
			t.Errorf("%.120s: %d %.300s, want %d and error %d", c.body, st, body, c.status, c.code)
		}
	}
	if _, err := os.Stat(filepath.Join(e.h.World.Workspace("architect"), "odd.txt")); err == nil {
		t.Error("a call ran")
	}
	if recs, err := e.st.ListAudit(ctx30(t), store.AuditFilter{Agent: "architect", Tool: "workspace.write"}); err != nil || len(recs) != 0 {
		t.Errorf("audit: %d workspace.write records, %v", len(recs), err)
	}
}

// TestMCPSessionIDsGuessed: session ids that are not a session the token
// opened — made up, very long, the owner's own id in another case or with
// a suffix — are unknown sessions (404, -32001) on every method; none is
// audited as a probe (no open session of another owner is named), nothing
// runs. A second event stream on one's own session is refused (one stream
// per session: streams are bounded by sessions).
func TestMCPSessionIDsGuessed(t *testing.T) {
	e := start(t, server.Options{})
	const version = "2025-11-25"
	tok := e.token("architect")
	own := e.openRawSession("architect", tok, version)
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"workspace.write","arguments":{"path":"guess.txt","content":"x"}}}`
	for _, id := range []string{
		"0", "00000000000000000000000000000000", strings.Repeat("A", 60<<10),
		strings.ToLower(own), strings.ToUpper(own), own + "x", own[:len(own)-1], "../" + own, own + "," + own,
	} {
		if id == own {
			continue // an id of digits only has no case
		}
		for _, m := range []string{"POST", "GET", "DELETE"} {
			body := ""
			if m == "POST" {
				body = call
			}
			st, got, _ := e.rpc(m, "architect", tok, version, id, body)
			if st != http.StatusNotFound || decodeRPCErr(t, got).Error.Code != -32001 {
				t.Errorf("%s with session %.40q: %d %.200s", m, id, st, got)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(e.h.World.Workspace("architect"), "guess.txt")); err == nil {
		t.Error("a call with a guessed session ran")
	}
	if recs, err := e.st.ListAudit(ctx30(t), store.AuditFilter{Tool: "mcp.session"}); err != nil || len(recs) != 0 {
		t.Errorf("guesses audited as probes of a live session: %d, %v", len(recs), err)
	}
	// The owner's session still works, and takes one event stream.
	if st, body, _ := e.rpc("POST", "architect", tok, version, own, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); st != 200 {
		t.Fatalf("the owner's session: %d %.200s", st, body)
	}
	e.stream("/agents/architect/mcp", tok, "Mcp-Session-Id", own, "Mcp-Protocol-Version", version)
	st, body, _ := e.rpc("GET", "architect", tok, version, own, "")
	if st != http.StatusConflict || decodeRPCErr(t, body).Error.Code == 0 {
		t.Errorf("a second event stream on one session: %d %.200s", st, body)
	}
}

// TestSlowRequestBodyIsCut: a client that sends its headers and then its
// body a byte at a time (slow loris) on the MCP endpoint, whose response
// has no deadline, is cut at the read timeout: the connection is closed
// and no session is opened.
func TestSlowRequestBodyIsCut(t *testing.T) {
	e := start(t, server.Options{ReadTimeout: time.Second})
	tok := e.token("architect")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := initBody("2025-11-25")
	fmt.Fprintf(conn, "POST /agents/architect/mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n",
		strings.TrimPrefix(e.url, "http://"), tok, len(body))
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		io.Copy(io.Discard, conn)
	}()
	// One byte every 100 ms would take minutes; the server must not wait.
	for i := 0; ; i++ {
		if i == len(body)-1 {
			t.Fatal("the whole body was read")
		}
		select {
		case <-closed:
			if n := e.metric("armory_mcp_sessions"); n != "0" {
				t.Fatalf("sessions open: %s", n)
			}
			return
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{body[i]}); err != nil {
			<-closed
			return
		}
	}
}

// TestSessionHeaderControlCharacters: an X-Armory-Session or
// Mcp-Session-Id header holding a control character (an escape sequence
// for the terminal of whoever reads the trail, a NUL) never reaches Armory:
// net/http refuses the request line by line, and no session is opened.
func TestSessionHeaderControlCharacters(t *testing.T) {
	e := start(t, server.Options{})
	tok := e.token("architect")
	body := initBody("2025-11-25")
	for _, h := range []string{"X-Armory-Session: a\x1b[2Jb", "X-Armory-Session: a\x00b", "Mcp-Session-Id: a\x01b", "X-Armory-Session: a\x7fb"} {
		conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "POST /agents/architect/mcp HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			strings.TrimPrefix(e.url, "http://"), tok, h, len(body), body)
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		status, err := bufio.NewReader(conn).ReadString('\n')
		conn.Close()
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 400") {
			t.Errorf("%q: %q %v", h, status, err)
		}
	}
	if n := e.metric("armory_mcp_sessions"); n != "0" {
		t.Fatalf("sessions open: %s", n)
	}
	if recs, err := e.st.ListAudit(ctx30(t), store.AuditFilter{}); err != nil || len(recs) != 0 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
}

// listenBody is a sessionless subscriptions/listen for tool list changes.
const listenBody = `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},` + rpcMeta + `}}`

var listenHeaders = []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream",
	"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "subscriptions/listen"}

// listen opens a subscriptions/listen stream and waits (bounded) for its
// acknowledgement.
func (e *env) listen(token string) *rawStream {
	e.t.Helper()
	s := e.streamReq("POST", "/agents/architect/mcp", token, listenBody, listenHeaders...)
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(s.text(), "acknowledged"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			e.t.Fatalf("no acknowledgement on the listen stream: %s", s.text())
		}
	}
	return s
}

// TestListenStreamsBounded: a sessionless subscriptions/listen stream
// (2026-07-28) lasts as long as its client keeps it, like a session, so it
// counts as one: a token may keep at most MCPSessionsPerToken of them (and
// sessions) open; the next is refused with 403 and JSON-RPC -32002, and
// closing one frees its place. Before, one token could hold any number,
// each with its goroutines, for as long as it liked.
func TestListenStreamsBounded(t *testing.T) {
	e := start(t, server.Options{MCPSessionsPerToken: 3})
	tok := e.token("architect")
	var open []*rawStream
	for range 3 {
		open = append(open, e.listen(tok))
	}
	if n := e.metric("armory_mcp_sessions"); n != "3" {
		t.Errorf("armory_mcp_sessions %s with three listen streams", n)
	}
	refused := func() (int, string) {
		return e.openStream("POST", "/agents/architect/mcp", tok, listenBody, listenHeaders...)
	}
	if st, body := refused(); st != http.StatusForbidden || decodeRPCErr(t, body).Error.Code != -32002 {
		t.Fatalf("a fourth listen stream: %d %s", st, body)
	}
	// Ordinary sessionless requests are not limited.
	if _, err := connectAt(t, e.url, "architect", tok, "2026-07-28", nil, nil).ListTools(ctx30(t), nil); err != nil {
		t.Errorf("a sessionless request at the limit: %v", err)
	}
	open[0].cancel()
	<-open[0].done
	for deadline := time.Now().Add(30 * time.Second); e.metric("armory_mcp_sessions") != "2"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a closed listen stream kept its place: %s", e.metric("armory_mcp_sessions"))
		}
	}
	e.listen(tok)
}
