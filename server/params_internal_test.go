package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheckPath: a request target that checkPath accepts is already clean
// (the router has nothing to redirect), and each of its segments is one
// path value (no segment decodes to a separator, a dot segment or a control
// character); the router answers it itself, never with a redirect.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/", "/api/audit", "//api/audit", "/api/../api/audit", "/api/agents/%2e%2e/tools",
		"/api/agents/a%2Fb/tools", "/api/agents/a%00/tools", "/api/audit/", "/api/agents/%2E/tools", "/a%5Cb", "/%ff",
		"/api/agents/x%20y/tools", "/agents/a/mcp"} {
		f.Add(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/agents/{id}/tools", func(w http.ResponseWriter, r *http.Request) {
		if v := r.PathValue("id"); strings.ContainsAny(v, "/\\") || v == "." || v == ".." {
			panic("path value " + v)
		}
	})
	mux.HandleFunc("/", func(http.ResponseWriter, *http.Request) {})
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil || !strings.HasPrefix(target, "/") || u.RawQuery != "" || u.Fragment != "" || strings.Contains(target, "?") {
			return
		}
		r := &http.Request{Method: "GET", URL: u, Host: "localhost", RequestURI: target, Header: http.Header{}}
		if checkPath(r) != nil {
			return
		}
		if p := u.Path; path.Clean(p) != p {
			t.Fatalf("accepted %q, whose path %q is not clean", target, p)
		}
		if !utf8.ValidString(u.Path) {
			t.Fatalf("accepted %q: not UTF-8", target)
		}
		for _, seg := range strings.Split(u.EscapedPath()[1:], "/") {
			d, _ := url.PathUnescape(seg)
			if strings.ContainsAny(d, "/\\\x00") || d == "." || d == ".." {
				t.Fatalf("accepted %q with segment %q", target, d)
			}
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		if rec.Code/100 == 3 {
			t.Fatalf("accepted %q, which the router redirects (%d to %s)", target, rec.Code, rec.Header().Get("Location"))
		}
	})
}

func TestStrictQuery(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		ok   bool
		want string
	}{
		{"", true, ""},
		{"agent=a&limit=5", true, ""},
		{"agent=a%20b", true, ""},
		{"%61gent=a", true, ""}, // an escaped name is the same name
		{"agent=%zz", false, "malformed query"},
		{"agent=a;limit=5", false, "malformed query"},
		{"agent=a&agent=a", false, `"agent" is repeated`},
		{"agent", false, `"agent" is empty`},
		{"agent=a%7F", false, "control character"},
		{"agent=%c3%28", false, "not UTF-8"},
		{"other=1", false, `unknown query parameter "other" (this endpoint takes agent, limit)`},
	} {
		_, err := strictQuery(tc.raw, []string{"agent", "limit"})
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("strictQuery(%q) = %v, want ok=%v %q", tc.raw, err, tc.ok, tc.want)
		}
	}
	if _, err := strictQuery("x=1", nil); err == nil || !strings.Contains(err.Error(), "takes none") {
		t.Errorf("no parameters: %v", err)
	}
}

// BenchmarkRequestChecks is the cost checkPath and strictQuery add to a
// GET /api/audit with a full filter.
func BenchmarkRequestChecks(b *testing.B) {
	r := httptest.NewRequest("GET", "/api/audit?agent=architect&tool=workspace.write&status=success&since=1h&limit=100", nil)
	for b.Loop() {
		if checkPath(r) != nil {
			b.Fatal("path")
		}
		if _, err := strictQuery(r.URL.RawQuery, auditParams); err != nil {
			b.Fatal(err)
		}
	}
}
