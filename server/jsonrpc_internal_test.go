package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNeedsToken(t *testing.T) {
	keep := []string{`0`, `1`, `-1`, `9007199254740992`, `-9007199254740992`, `"abc"`, `""`, `"a-b_c:1"`, `"armory-id"`}
	token := []string{`9007199254740993`, `-9007199254740993`, `9223372036854775807`, `1.5`, `1.0`, `-0`, `1e3`, `1E3`,
		`"\u0041"`, `"é"`, `"a\"b"`, `"armory-id:"`, `"armory-id:MQ"`, "\"\xff\""}
	for _, id := range keep {
		if needsToken([]byte(id)) {
			t.Errorf("%s is tokenised", id)
		}
	}
	for _, id := range token {
		if !needsToken([]byte(id)) {
			t.Errorf("%s is kept", id)
		}
	}
}

func TestTokenRoundTrip(t *testing.T) {
	for _, id := range []string{`1.5`, `-0`, "\"\xff\"", `"\u2028"`, `"armory-id:MQ"`, `123456789012345678901234567890`} {
		tok := token([]byte(id))
		var s string
		if err := json.Unmarshal(tok, &s); err != nil || !strings.HasPrefix(s, rpcIDPrefix) {
			t.Fatalf("token %s: %v", tok, err)
		}
		// The library re-encodes the string: any valid encoding maps back.
		re, _ := json.Marshal(s)
		if got := untoken(re); string(got) != id {
			t.Errorf("%s: token %s maps back to %s", id, tok, got)
		}
	}
	for _, notToken := range []string{`"armory-id:!!"`, `"armory-id:eHl6"` /* "xyz", not JSON */, `"other"`, `5`} {
		if got := untoken([]byte(notToken)); got != nil {
			t.Errorf("%s maps to %s", notToken, got)
		}
	}
}

// TestRestoreSplitWrites: the ids and progress tokens of a stream are
// restored however the library's writes cut its events; a token elsewhere
// (in a result's text) is left alone.
func TestRestoreSplitWrites(t *testing.T) {
	tok := string(token([]byte(`1.5`)))
	stream := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":" + tok + "}}\n\n" +
		"event: message\nid: s_1\ndata: {\"jsonrpc\":\"2.0\",\"id\":" + tok + ",\"result\":{\"text\":\"id " + strings.Trim(tok, `"`) + "\"}}\n\n"
	want := strings.NewReplacer(`"id":`+tok, `"id":1.5`, `"progressToken":`+tok, `"progressToken":1.5`).Replace(stream)
	for cut := 1; cut < len(stream); cut += 7 {
		rec := httptest.NewRecorder()
		w := &rpcWriter{ResponseWriter: rec, restore: true}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(stream[:cut]))
		w.Flush()
		w.Write([]byte(stream[cut:]))
		w.finish()
		if rec.Body.String() != want {
			t.Fatalf("cut at %d:\n%s\nwant\n%s", cut, rec.Body.String(), want)
		}
	}
	// An application/json batch answer.
	rec := httptest.NewRecorder()
	w := &rpcWriter{ResponseWriter: rec, restore: true}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(`[{"jsonrpc":"2.0","id":` + tok + `,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]`))
	w.finish()
	if got := rec.Body.String(); got != `[{"jsonrpc":"2.0","id":1.5,"result":{}},{"jsonrpc":"2.0","id":1,"result":{}}]` {
		t.Errorf("JSON batch: %s", got)
	}
}

// FuzzParseRPCBody: no input panics the gate; what it accepts and
// rewrites is valid JSON, and its member scan agrees with encoding/json.
func FuzzParseRPCBody(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`[{"jsonrpc":"2.0","id":1e3,"method":"ping"},{"jsonrpc":"2.0","id":null,"error":{"code":1,"message":"x"}}]`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"\u00e9","x":[1,{"y":"}"}]}}`,
		`{"jsonrpc":"2.0","id":"a\"b","method":"x","params":{"a":"\\"}}`, ` { } `, `[]`, `[1]`, `"x"`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, fail := parseRPCBody(body, "2025-03-26")
		if fail != nil {
			if fail.id != nil && !json.Valid(fail.id) {
				t.Fatalf("error id %q is not JSON", fail.id)
			}
			return
		}
		if b.body != nil && !json.Valid(b.body) {
			t.Fatalf("rewritten body %q is not JSON", b.body)
		}
		if i := skipWS(body, 0); body[i] == '{' {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatal(err)
			}
			n := 0
			eachMember(body[i:], func(kb []byte, vs, ve int) bool {
				key := string(kb)
				n++
				if v, ok := m[key]; ok && !bytes.Equal(bytes.TrimSpace(v), body[i+vs:i+ve]) && strings.Count(string(body), key) == 1 {
					t.Fatalf("member %q: %q, encoding/json %q", key, body[i+vs:i+ve], v)
				}
				return true
			})
			if n < len(m) {
				t.Fatalf("scan found %d members, encoding/json %d", n, len(m))
			}
		}
	})
}

// BenchmarkRPCGate: the gate's cost on a tools/call body whose id needs
// no rewriting (the common case) and on one whose id does, in front of a
// handler that reads the body and answers one event.
func BenchmarkRPCGate(b *testing.B) {
	answer := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n")
	lib := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.Write(answer)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	})
	gate := &rpcGate{next: lib, maxBody: 1 << 20}
	call := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"workspace.read","arguments":{"path":"notes/today.md","offset":0},"_meta":{"progressToken":7}}}`
	}
	for _, c := range []struct {
		name string
		h    http.Handler
		body string
	}{
		{"library_only", lib, call("42")},
		{"gate", gate, call("42")},
		{"gate_token_id", gate, call("42.5")},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest("POST", "/agents/a/mcp", strings.NewReader(c.body))
				r.Header.Set("Content-Type", "application/json")
				r.Header.Set("Mcp-Session-Id", "s")
				w := httptest.NewRecorder()
				c.h.ServeHTTP(w, r)
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}
