package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/armory-dev/armory"
)

// geminiServer is a scripted Gemini API on 127.0.0.1, written from the
// API's wire format: it records the requests and answers status and body.
type geminiServer struct {
	*httptest.Server
	mu     sync.Mutex
	keys   []string
	bodies []map[string]any
	paths  []string
	status int
	body   string
}

func newGeminiServer(t *testing.T) *geminiServer {
	g := &geminiServer{status: 200}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(b, &m)
		g.mu.Lock()
		g.keys = append(g.keys, r.Header.Get("X-Goog-Api-Key"))
		g.bodies = append(g.bodies, m)
		g.paths = append(g.paths, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		status, body := g.status, g.body
		g.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(g.Close)
	return g
}

const groundedAnswer = `{"candidates":[{"content":{"role":"model","parts":[{"text":"Go 1.26 is the latest release."},{"text":" It came out in February."}]},
"finishReason":"STOP","groundingMetadata":{"webSearchQueries":["latest go release"],
"groundingChunks":[{"web":{"uri":"https://go.dev/doc/devel/release","title":"go.dev"}},{"web":{"uri":"https://example.org/go","title":"example.org"}}]}}]}`

func googleCall(t *testing.T, g *GoogleSearch, args string) armory.Result {
	t.Helper()
	return g.Execute(context.Background(), armory.Invocation{Args: json.RawMessage(args), Agent: &armory.AgentEnv{ID: "a"}})
}

func TestGoogleSearchGrounded(t *testing.T) {
	srv := newGeminiServer(t)
	srv.body = groundedAnswer
	t.Setenv(GeminiKeyEnv, "AIza-test-key")
	g := NewGoogleSearch(Options{AllowCIDRs: loopback, GeminiEndpoint: srv.URL + "/v1beta/", GeminiModel: "gemini-test"})
	r := googleCall(t, g, `{"query":"What is the latest Go release?"}`)
	if !r.Success {
		t.Fatalf("result %+v", r)
	}
	v := r.Value.(GoogleValue)
	if v.Answer != "Go 1.26 is the latest release. It came out in February." || len(v.Sources) != 2 || v.Sources[0].URL != "https://go.dev/doc/devel/release" || v.Queries[0] != "latest go release" {
		t.Errorf("value %+v", v)
	}
	for _, want := range []string{"Sources:\n1. go.dev\n   https://go.dev/doc/devel/release", "Searched: latest go release"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, r.Text)
		}
	}
	// The request: the model's generateContent, the key in its header only,
	// the question as the user's content, the google_search tool on.
	if srv.paths[0] != "POST /v1beta/models/gemini-test:generateContent?" || srv.keys[0] != "AIza-test-key" {
		t.Errorf("request %s key %q", srv.paths[0], srv.keys[0])
	}
	b, _ := json.Marshal(srv.bodies[0])
	if !strings.Contains(string(b), `"google_search":{}`) || !strings.Contains(string(b), `"text":"What is the latest Go release?"`) || strings.Contains(string(b), "AIza") {
		t.Errorf("request body %s", b)
	}
	if strings.Contains(r.Text, "AIza") {
		t.Errorf("the key reached the result")
	}
}

func TestGoogleSearchFailures(t *testing.T) {
	srv := newGeminiServer(t)
	g := NewGoogleSearch(Options{AllowCIDRs: loopback, GeminiEndpoint: srv.URL})
	t.Setenv(GeminiKeyEnv, "")
	if r := googleCall(t, g, `{"query":"q"}`); r.Success || r.Kind != armory.KindUnavailable || !strings.Contains(r.Text, GeminiKeyEnv) {
		t.Errorf("no key: %+v", r)
	}
	if len(srv.paths) != 0 {
		t.Errorf("a call without a key reached the API")
	}
	t.Setenv(GeminiKeyEnv, "k")
	for _, tc := range []struct {
		name, args string
		status     int
		body       string
		kind       armory.Kind
		says       string
	}{
		{"empty query", `{"query":"  "}`, 200, groundedAnswer, armory.KindInvalid, "query is empty"},
		{"long query", `{"query":"` + strings.Repeat("x", GoogleMaxQuery+1) + `"}`, 200, groundedAnswer, armory.KindInvalid, "limit"},
		{"unknown argument", `{"query":"q","model":"x"}`, 200, groundedAnswer, armory.KindInvalid, "unknown argument"},
		{"bad key", `{"query":"q"}`, 403, `{"error":{"code":403,"message":"API key not valid","status":"PERMISSION_DENIED"}}`, armory.KindPermission, GeminiKeyEnv},
		{"rate limited", `{"query":"q"}`, 429, `{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED"}}`, armory.KindUnavailable, "rate limiting"},
		{"server error", `{"query":"q"}`, 500, `{"error":{"code":500,"message":"internal","status":"INTERNAL"}}`, armory.KindUnavailable, "HTTP 500"},
		{"not json", `{"query":"q"}`, 200, `<html>`, armory.KindUnavailable, "could not be read"},
		{"blocked", `{"query":"q"}`, 200, `{"promptFeedback":{"blockReason":"SAFETY"}}`, armory.KindBlocked, "SAFETY"},
		{"no candidates", `{"query":"q"}`, 200, `{"candidates":[]}`, armory.KindUnavailable, "no answer"},
		{"empty answer", `{"query":"q"}`, 200, `{"candidates":[{"content":{"parts":[]},"finishReason":"MAX_TOKENS"}]}`, armory.KindUnavailable, "MAX_TOKENS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.mu.Lock()
			srv.status, srv.body = tc.status, tc.body
			srv.mu.Unlock()
			r := googleCall(t, g, tc.args)
			if r.Success || r.Kind != tc.kind || !strings.Contains(r.Text, tc.says) {
				t.Errorf("result %+v, want kind %v saying %q", r, tc.kind, tc.says)
			}
		})
	}
}

// The endpoint goes through the same dial guard as tool.fetch: a Gemini
// endpoint on a private address is refused unless the world opens it.
func TestGoogleSearchEndpointGuarded(t *testing.T) {
	srv := newGeminiServer(t)
	srv.body = groundedAnswer
	t.Setenv(GeminiKeyEnv, "k")
	g := NewGoogleSearch(Options{GeminiEndpoint: srv.URL})
	if r := googleCall(t, g, `{"query":"q"}`); r.Success || r.Kind != armory.KindBlocked {
		t.Errorf("loopback endpoint without an allowance: %+v", r)
	}
	if len(srv.paths) != 0 {
		t.Errorf("the guarded endpoint was reached")
	}
}

func TestGoogleSearchManifestNeedsKey(t *testing.T) {
	m := NewGoogleSearch(Options{}).Manifest()
	if len(m.Requires) != 1 || m.Requires[0] != (armory.Requirement{Kind: armory.RequirementEnv, Name: GeminiKeyEnv}) || !m.Has(armory.CapNetwork) {
		t.Errorf("manifest %+v", m)
	}
}
