package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/armory-dev/armory"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "web", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseDDGResultsPage(t *testing.T) {
	res, err := parseDDG(bytes.NewReader(fixture(t, "ddg_results.html")), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 30 {
		t.Fatalf("got %d results, want 30 (the ad skipped)", len(res))
	}
	want := []SearchResult{
		{"The Go Programming Language", "https://go.dev/", "Go is an open source programming language that makes it simple to build secure, scalable systems."},
		{"Documentation - The Go Programming Language", "https://go.dev/doc/", "The Go programming language is an open source project to make programmers more productive. Go is expressive, concise, clean, and efficient."},
		{"Go (programming language) - Wikipedia", "https://en.wikipedia.org/wiki/Go_(programming_language)", "Go is a high-level general purpose programming language that is statically typed and compiled. It is known for the simplicity of its syntax & the efficiency of development."},
	}
	for i, w := range want {
		if res[i] != w {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, res[i], w)
		}
	}
	// uddg with its own query string, and entities in the snippet.
	tour := res[6]
	if tour.URL != "https://tour.golang.org/welcome/1?lang=en&x=1" || !strings.Contains(tour.Snippet, "<that you can access>") {
		t.Errorf("tour result %+v", tour)
	}
	for _, r := range res {
		if strings.Contains(r.URL, "duckduckgo.com") || strings.Contains(r.Title, "Learn Go Fast") {
			t.Errorf("redirect or ad left in %+v", r)
		}
	}
	// Bounded.
	for _, max := range []int{1, 10, 25} {
		res, _ := parseDDG(bytes.NewReader(fixture(t, "ddg_results.html")), max)
		if len(res) != max {
			t.Errorf("max %d: got %d", max, len(res))
		}
	}
}

func TestParseDDGSpecialPages(t *testing.T) {
	res, err := parseDDG(bytes.NewReader(fixture(t, "ddg_no_results.html")), 10)
	if err != nil || len(res) != 0 {
		t.Errorf("no results page: %v, %v", res, err)
	}
	res, err = parseDDG(bytes.NewReader(fixture(t, "ddg_malformed.html")), 10)
	if err != nil {
		t.Fatalf("malformed page: %v", err)
	}
	want := []SearchResult{
		{"Unclosed title", "https://example.com/unclosed", "snippet with unclosed italics"},
		{"No href here", "https://docs.example.net/page", "Display URL fallback."},
		{"Direct & plain", "https://direct.example.org/a?b=c", "Plain snippet"},
	}
	if len(res) != len(want) {
		t.Fatalf("malformed page: got %d results %+v, want %d", len(res), res, len(want))
	}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("malformed result %d:\n got %+v\nwant %+v", i, res[i], want[i])
		}
	}
	if _, err := parseDDG(bytes.NewReader(fixture(t, "ddg_challenge.html")), 10); err != errSearchChallenge {
		t.Errorf("challenge page: %v", err)
	}
	for _, page := range []string{"", "<html><body><h1>Internal Server Error</h1></body></html>", "\x00\x01binary", strings.Repeat("<div>", 5000)} {
		if _, err := parseDDG(strings.NewReader(page), 10); err != errSearchPageUnknown {
			t.Errorf("page %.40q: %v, want errSearchPageUnknown", page, err)
		}
	}
}

func TestUnwrapDDG(t *testing.T) {
	tests := []struct{ in, want string }{
		{"//duckduckgo.com/l/?uddg=https%3A%2F%2Fgo.dev%2F&rut=abc", "https://go.dev/"},
		{"https://duckduckgo.com/l/?uddg=http%3A%2F%2Fa.example%2Fb%3Fc%3Dd%26e%3Df", "http://a.example/b?c=d&e=f"},
		{"/l/?uddg=https%3A%2F%2Frel.example%2F", "https://rel.example/"},
		{"https://plain.example/x", "https://plain.example/x"},
		{"//duckduckgo.com/l/?uddg=javascript%3Aalert(1)", ""},
		{"//duckduckgo.com/l/?uddg=", ""},
		{"//duckduckgo.com/l/?rut=x", ""},
		{"https://duckduckgo.com/y.js?ad_domain=x", ""},
		{"javascript:alert(1)", ""},
		{"mailto:a@b.c", ""},
		{"", ""},
		{"http://%zz", ""},
	}
	for _, tt := range tests {
		got, ok := unwrapDDG(tt.in)
		if (tt.want == "") == ok || got != tt.want {
			t.Errorf("unwrapDDG(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}

// ddgServer serves recorded result pages as DuckDuckGo's /html/ endpoint.
type ddgServer struct {
	*httptest.Server
	mu      sync.Mutex
	queries []url.Values
}

func newDDGServer(t *testing.T) *ddgServer {
	s := &ddgServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.queries = append(s.queries, r.URL.Query())
		s.mu.Unlock()
		if r.URL.Path != "/html/" {
			http.NotFound(w, r)
			return
		}
		q := r.URL.Query().Get("q")
		w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		switch q {
		case "ratelimited":
			w.WriteHeader(http.StatusAccepted)
			w.Write(fixture(t, "ddg_challenge.html"))
		case "challenge":
			w.Write(fixture(t, "ddg_challenge.html"))
		case "nothing":
			w.Write(fixture(t, "ddg_no_results.html"))
		case "broken":
			w.Write(fixture(t, "ddg_malformed.html"))
		case "error":
			w.Write([]byte("<html><body>Oops</body></html>"))
		default:
			w.Write(fixture(t, "ddg_results.html"))
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func runSearch(t *testing.T, s *Search, args string) armory.Result {
	t.Helper()
	return s.Execute(context.Background(), armory.Invocation{Args: json.RawMessage(args)})
}

func TestWebSearch(t *testing.T) {
	srv := newDDGServer(t)
	s := NewSearch(Options{AllowCIDRs: loopback, SearchEndpoint: srv.URL + "/html/"})
	r := runSearch(t, s, `{"query":"golang tutorial"}`)
	if !r.Success {
		t.Fatalf("search failed: %s", r.Text)
	}
	v := r.Value.(SearchValue)
	if v.Query != "golang tutorial" || len(v.Results) != SearchDefaultResults {
		t.Errorf("value: query %q, %d results", v.Query, len(v.Results))
	}
	if v.Results[0].URL != "https://go.dev/" || !strings.Contains(r.Text, "1. The Go Programming Language\n   https://go.dev/\n   Go is an open source") {
		t.Errorf("text:\n%s", r.Text)
	}
	if got := srv.queries[len(srv.queries)-1].Get("q"); got != "golang tutorial" {
		t.Errorf("server saw q=%q", got)
	}

	tests := []struct {
		args  string
		n     int
		kind  armory.Kind
		inTxt string
	}{
		{`{"query":"golang","max_results":25}`, 25, 0, "25 results"},
		{`{"query":"golang","max_results":3,"region":"de-de"}`, 3, 0, "3 results"},
		{`{"query":"nothing"}`, 0, 0, "No results"},
		{`{"query":"broken"}`, 3, 0, "3 results"},
		{`{"query":"challenge"}`, 0, armory.KindUnavailable, "challenge"},
		{`{"query":"ratelimited"}`, 0, armory.KindUnavailable, "HTTP 202"},
		{`{"query":"error"}`, 0, armory.KindUnavailable, "layout"},
		{`{"query":"golang","max_results":26}`, 0, armory.KindInvalid, "between 1 and 25"},
		{`{"query":"golang","max_results":-1}`, 0, armory.KindInvalid, "max_results"},
		{`{"query":"   "}`, 0, armory.KindInvalid, "empty"},
		{`{}`, 0, armory.KindInvalid, "empty"},
		{`{"query":"` + strings.Repeat("x", SearchMaxQuery+1) + `"}`, 0, armory.KindInvalid, "limit"},
		{`{"query":"golang","region":"x&q=y"}`, 0, armory.KindInvalid, "region"},
		{`{"query":"golang","page":2}`, 0, armory.KindInvalid, "unknown argument"},
	}
	for _, tt := range tests {
		r := runSearch(t, s, tt.args)
		if tt.kind != 0 {
			if r.Success || r.Kind != tt.kind || !strings.Contains(r.Text, tt.inTxt) {
				t.Errorf("%.60s: success=%v kind=%v text=%q", tt.args, r.Success, r.Kind, r.Text)
			}
			continue
		}
		if !r.Success || !strings.Contains(r.Text, tt.inTxt) {
			t.Errorf("%.60s: kind=%v text=%q", tt.args, r.Kind, r.Text)
			continue
		}
		if n := len(r.Value.(SearchValue).Results); n != tt.n {
			t.Errorf("%.60s: %d results, want %d", tt.args, n, tt.n)
		}
	}
	if got := srv.queries[len(srv.queries)-1]; got.Get("kl") != "" {
		t.Errorf("region leaked into a later query: %v", got)
	}
	found := false
	for _, q := range srv.queries {
		found = found || q.Get("kl") == "de-de"
	}
	if !found {
		t.Error("region was not sent as kl")
	}
}

// TestWebSearchGuarded: the endpoint goes through the same dial guard.
func TestWebSearchGuarded(t *testing.T) {
	srv := newDDGServer(t)
	s := NewSearch(Options{SearchEndpoint: srv.URL + "/html/"})
	r := runSearch(t, s, `{"query":"golang"}`)
	if r.Success || r.Kind != armory.KindBlocked {
		t.Errorf("unallowed local endpoint: success=%v kind=%v %s", r.Success, r.Kind, r.Text)
	}
	if len(srv.queries) != 0 {
		t.Error("the server was reached")
	}
}

func TestNewWebSearchBadEndpointPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for a bad endpoint")
		}
	}()
	NewSearch(Options{SearchEndpoint: "ftp://x/"})
}

func FuzzParseDDG(f *testing.F) {
	for _, n := range []string{"ddg_results.html", "ddg_no_results.html", "ddg_malformed.html", "ddg_challenge.html"} {
		f.Add(fixture(f, n), 10)
	}
	f.Add([]byte(`<div class="result"><a class="result__a" href="/l/?uddg=http%3A%2F%2Fx">t</a></div>`), 1)
	f.Fuzz(func(t *testing.T, page []byte, max int) {
		if max < 1 || max > SearchMaxResults {
			max = SearchDefaultResults
		}
		res, err := parseDDG(bytes.NewReader(page), max)
		if err != nil && res != nil {
			t.Fatal("results with an error")
		}
		if len(res) > max {
			t.Fatalf("%d results for max %d", len(res), max)
		}
		seen := map[string]bool{}
		for _, r := range res {
			u, err := url.Parse(r.URL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				t.Fatalf("bad result URL %q", r.URL)
			}
			if r.Title == "" || len(r.Title) > 1024 || len(r.Snippet) > 1024 {
				t.Fatalf("bad result %+v", r)
			}
			if seen[r.URL] {
				t.Fatalf("duplicate %q", r.URL)
			}
			seen[r.URL] = true
		}
	})
}

func BenchmarkParseDDG(b *testing.B) {
	page := fixture(b, "ddg_results.html")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if res, err := parseDDG(bytes.NewReader(page), SearchMaxResults); err != nil || len(res) != SearchMaxResults {
			b.Fatal(err)
		}
	}
}
