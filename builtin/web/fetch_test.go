package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

// loopback is what tests allow explicitly: their servers listen on 127.0.0.1.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

func fetchArgs(t *testing.T, kv map[string]any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(kv)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func runFetch(t *testing.T, f *Fetch, kv map[string]any) armory.Result {
	t.Helper()
	return f.Execute(context.Background(), armory.Invocation{Args: fetchArgs(t, kv)})
}

func mustOK(t *testing.T, r armory.Result) FetchValue {
	t.Helper()
	if !r.Success {
		t.Fatalf("call failed (%v): %s", r.Kind, r.Text)
	}
	v, ok := r.Value.(FetchValue)
	if !ok {
		t.Fatalf("Value is %T", r.Value)
	}
	return v
}

func mustFail(t *testing.T, r armory.Result, k armory.Kind) {
	t.Helper()
	if r.Success || r.Kind != k {
		t.Fatalf("got success=%v kind=%v, want failure of kind %v; text: %.300s", r.Success, r.Kind, k, r.Text)
	}
}

// port returns the port of a test server.
func port(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	_, p, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const testPage = `<!DOCTYPE html><html><head><title>Test Page</title>
<style>body { color: red }</style><script>var secret = "script-content";</script></head>
<body><h1>Hello</h1><p>First <a href="/x">linked words</a> here.</p>
<noscript>enable javascript</noscript><ul><li>one</li><li>two</li></ul></body></html>`

func TestFetchHTMLAndRaw(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, testPage)
	}))
	defer srv.Close()
	f := NewFetch(Options{AllowCIDRs: loopback})
	r := runFetch(t, f, map[string]any{"url": srv.URL + "/page#frag"})
	v := mustOK(t, r)
	for _, want := range []string{"Test Page", "# Hello", "First linked words here.", "- one\n- two"} {
		if !strings.Contains(r.Text, want) {
			t.Errorf("text lacks %q:\n%s", want, r.Text)
		}
	}
	for _, bad := range []string{"script-content", "color: red", "enable javascript", "<p>"} {
		if strings.Contains(r.Text, bad) {
			t.Errorf("text contains %q:\n%s", bad, r.Text)
		}
	}
	if v.URL != srv.URL+"/page" || v.Status != 200 || v.ContentType != "text/html; charset=utf-8" || v.Bytes != len(testPage) || v.Truncated {
		t.Errorf("value = %+v", v)
	}
	raw := runFetch(t, f, map[string]any{"url": srv.URL, "raw": true})
	mustOK(t, raw)
	if !strings.Contains(raw.Text, `<script>var secret = "script-content";</script>`) {
		t.Errorf("raw text lacks the HTML source:\n%s", raw.Text)
	}
}

func TestFetchHeadersAndCookies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/set":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cret", Path: "/"})
			io.WriteString(w, "set")
		case "/check":
			fmt.Fprintf(w, "cookie=[%s] ua=[%s] enc=[%s]", r.Header.Get("Cookie"), r.UserAgent(), r.Header.Get("Accept-Encoding"))
		case "/redirect-with-cookie":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s3cret", Path: "/"})
			http.Redirect(w, r, "/check", http.StatusFound)
		}
	}))
	defer srv.Close()
	f := NewFetch(Options{AllowCIDRs: loopback})
	mustOK(t, runFetch(t, f, map[string]any{"url": srv.URL + "/set"}))
	for _, p := range []string{"/check", "/redirect-with-cookie"} {
		r := runFetch(t, f, map[string]any{"url": srv.URL + p})
		mustOK(t, r)
		if !strings.Contains(r.Text, "cookie=[]") {
			t.Errorf("%s: a cookie was sent: %s", p, r.Text)
		}
		if !strings.Contains(r.Text, "ua=["+UserAgent+"]") {
			t.Errorf("%s: user agent not sent: %s", p, r.Text)
		}
	}
}

// TestFetchSSRF: every spelling of an internal address is refused by the
// guard (KindBlocked, not a connection error), while a real server listens
// on 127.0.0.1 at that port; with 127.0.0.0/8 allowed the IPv4 spellings
// reach it, which shows the refusals come from the policy.
func TestFetchSSRF(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "INTERNAL-SECRET") }))
	defer srv.Close()
	p := port(t, srv)
	hosts := testenv.Hosts{
		"rebind.test":  {netip.MustParseAddr("127.0.0.1")},
		"localhost":    {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")},
		"meta.test":    {netip.MustParseAddr("169.254.169.254")},
		"private.test": {netip.MustParseAddr("10.1.2.3")},
	}
	tests := []struct {
		url       string
		reachable bool // with 127.0.0.0/8 allowed, the server answers
	}{
		{"http://127.0.0.1:" + p + "/", true},
		{"http://2130706433:" + p + "/", true},
		{"http://0x7f000001:" + p + "/", true},
		{"http://0177.0.0.1:" + p + "/", true},
		{"http://127.1:" + p + "/", true},
		{"http://[::ffff:127.0.0.1]:" + p + "/", true},
		{"http://rebind.test:" + p + "/", true},
		{"http://localhost:" + p + "/", false}, // ::1 is refused with 127/8 only: the whole name is
		{"http://[::1]:" + p + "/", false},
		{"http://0.0.0.0:" + p + "/", false},
		{"http://169.254.169.254/latest/meta-data/", false},
		{"http://meta.test/latest/meta-data/", false},
		{"http://[fd00:ec2::254]/latest/meta-data/", false},
		{"http://private.test/", false},
		{"http://100.64.0.1/", false},
		{"http://[fe80::1]/", false},
		{"http://224.0.0.1/", false},
	}
	deny := NewFetch(Options{Resolver: hosts})
	allow := NewFetch(Options{Resolver: hosts, AllowCIDRs: loopback})
	for _, tt := range tests {
		r := runFetch(t, deny, map[string]any{"url": tt.url})
		if r.Success || r.Kind != armory.KindBlocked || strings.Contains(r.Text, "INTERNAL-SECRET") {
			t.Errorf("%s: success=%v kind=%v text=%.200s; want blocked", tt.url, r.Success, r.Kind, r.Text)
		}
		if tt.reachable {
			r := runFetch(t, allow, map[string]any{"url": tt.url})
			if !r.Success || !strings.Contains(r.Text, "INTERNAL-SECRET") {
				t.Errorf("%s with 127.0.0.0/8 allowed: kind=%v text=%.200s", tt.url, r.Kind, r.Text)
			}
		}
	}
	// The system resolver's localhost is refused too.
	r := runFetch(t, NewFetch(Options{}), map[string]any{"url": "http://localhost:" + p + "/"})
	mustFail(t, r, armory.KindBlocked)
}

// TestFetchRedirectGuard: an allowed server redirects to internal
// addresses; each hop is checked when dialled.
func TestFetchRedirectGuard(t *testing.T) {
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "INTERNAL-SECRET") }))
	defer secret.Close()
	sp := port(t, secret)
	var target string
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		to := r.URL.Query().Get("to")
		if to == "" {
			io.WriteString(w, "fine")
			return
		}
		http.Redirect(w, r, to, http.StatusFound)
	}))
	defer front.Close()
	fp := port(t, front)
	// The front server is allowed by name only; 127.0.0.1 itself is not.
	hosts := testenv.Hosts{"allowed.test": {netip.MustParseAddr("127.0.0.1")}, "localhost": {netip.MustParseAddr("127.0.0.1")}}
	f := NewFetch(Options{Resolver: hosts, AllowHosts: []string{"allowed.test"}})
	for _, to := range []string{
		"http://127.0.0.1:" + sp + "/",
		"http://localhost:" + sp + "/",
		"http://2130706433:" + sp + "/",
		"http://[::1]:" + sp + "/",
		"http://169.254.169.254/latest/meta-data/",
	} {
		target = "http://allowed.test:" + fp + "/?to=" + to
		r := runFetch(t, f, map[string]any{"url": target})
		mustFail(t, r, armory.KindBlocked)
		if strings.Contains(r.Text, "INTERNAL-SECRET") {
			t.Errorf("redirect to %s leaked", to)
		}
	}
	r := runFetch(t, f, map[string]any{"url": "http://allowed.test:" + fp + "/?to=file:///etc/passwd"})
	mustFail(t, r, armory.KindBlocked)
	// Control: a redirect to the allowed name itself is followed.
	r = runFetch(t, f, map[string]any{"url": "http://allowed.test:" + fp + "/?to=" + "http://allowed.test:" + fp + "/"})
	if !r.Success || !strings.HasSuffix(r.Text, "fine") {
		t.Errorf("redirect within the allowed host refused: %s", r.Text)
	}
	// The same URL as the first case is refused without the allowance.
	mustFail(t, runFetch(t, NewFetch(Options{Resolver: hosts}), map[string]any{"url": target}), armory.KindBlocked)
}

func TestFetchRequiresAllowanceForTestServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	mustOK(t, runFetch(t, NewFetch(Options{AllowCIDRs: loopback}), map[string]any{"url": srv.URL}))
	r := runFetch(t, NewFetch(Options{}), map[string]any{"url": srv.URL})
	mustFail(t, r, armory.KindBlocked)
	if !strings.Contains(r.Text, "loopback") {
		t.Errorf("message does not say why: %s", r.Text)
	}
}

func TestFetchRedirectLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Path, "/r/%d", &n)
		if n == 0 {
			io.WriteString(w, "arrived")
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/r/%d", n-1), http.StatusFound)
	}))
	defer srv.Close()
	f := NewFetch(Options{AllowCIDRs: loopback})
	tests := []struct {
		redirects int
		ok        bool
	}{{0, true}, {1, true}, {5, true}, {6, false}, {20, false}}
	for _, tt := range tests {
		r := runFetch(t, f, map[string]any{"url": fmt.Sprintf("%s/r/%d", srv.URL, tt.redirects)})
		if tt.ok {
			v := mustOK(t, r)
			if !strings.HasSuffix(v.URL, "/r/0") || !strings.Contains(r.Text, "arrived") {
				t.Errorf("%d redirects: %+v %s", tt.redirects, v, r.Text)
			}
			continue
		}
		mustFail(t, r, armory.KindBlocked)
		if !strings.Contains(r.Text, "5 redirects") {
			t.Errorf("%d redirects: message %q does not state the limit", tt.redirects, r.Text)
		}
	}
	// A configured limit applies too.
	r := runFetch(t, NewFetch(Options{AllowCIDRs: loopback, MaxRedirects: 2}), map[string]any{"url": srv.URL + "/r/3"})
	mustFail(t, r, armory.KindBlocked)
}

func TestFetchBodyLimit(t *testing.T) {
	const limit = FetchBodyLimit
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n int
		fmt.Sscanf(r.URL.Path, "/%d", &n)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write(bytes.Repeat([]byte("a"), n))
	}))
	defer srv.Close()
	f := NewFetch(Options{AllowCIDRs: loopback})
	tests := []struct {
		size      int
		truncated bool
	}{{limit - 1, false}, {limit, false}, {limit + 1, true}, {300 << 10, true}}
	for _, tt := range tests {
		r := runFetch(t, f, map[string]any{"url": fmt.Sprintf("%s/%d", srv.URL, tt.size)})
		v := mustOK(t, r)
		if v.Truncated != tt.truncated || v.Bytes != tt.size {
			t.Errorf("size %d: value %+v", tt.size, v)
		}
		body := r.Text[strings.Index(r.Text, "\n\n")+2:]
		if i := strings.Index(body, "\n\n[truncated"); i >= 0 {
			body = body[:i]
		}
		shown := strings.Count(body, "a")
		if want := min(tt.size, limit); shown != want {
			t.Errorf("size %d: showed %d bytes, want %d", tt.size, shown, want)
		}
		marker := fmt.Sprintf("[truncated: showed the first %d of %d bytes; %d bytes cut]", limit, tt.size, tt.size-limit)
		if strings.Contains(r.Text, marker) != tt.truncated {
			t.Errorf("size %d: marker %q present=%v", tt.size, marker, !tt.truncated)
		}
	}
	// UTF-8 is cut at a rune boundary.
	srv2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "a"+strings.Repeat("é", limit))
	}))
	defer srv2.Close()
	r := runFetch(t, f, map[string]any{"url": srv2.URL})
	if !utf8.ValidString(r.Text) {
		t.Error("cut text is not valid UTF-8")
	}
}

func TestFetchDownloadLimitAndGzipBomb(t *testing.T) {
	// 64 MiB of zeros gzip to about 64 KB: a bomb for a naive client.
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range 64 {
		zw.Write(zeros)
	}
	zw.Close()
	// Incompressible data, gzipped: the compressed size is the limit hit.
	noise := make([]byte, 1<<20)
	rand.Read(noise)
	var noisy bytes.Buffer
	zw = gzip.NewWriter(&noisy)
	zw.Write(noise)
	zw.Close()
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	io.WriteString(zw, "<html><body><p>compressed hello</p></body></html>")
	zw.Close()

	gzipped := map[string]struct {
		ctype string
		body  []byte
	}{
		"/bomb":   {"text/plain", bomb.Bytes()},
		"/noisy":  {"application/octet-stream", noisy.Bytes()},
		"/small":  {"text/html", small.Bytes()},
		"/broken": {"", []byte("this is not gzip at all")},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g, ok := gzipped[r.URL.Path]; ok {
			w.Header().Set("Content-Encoding", "gzip")
			if g.ctype != "" {
				w.Header().Set("Content-Type", g.ctype)
			}
			w.Write(g.body)
			return
		}
		switch r.URL.Path {
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			w.Write(bytes.Repeat([]byte("b"), 3<<20))
		}
	}))
	defer srv.Close()

	f := NewFetch(Options{AllowCIDRs: loopback})
	r := runFetch(t, f, map[string]any{"url": srv.URL + "/bomb"})
	v := mustOK(t, r)
	if v.Bytes != FetchDownloadLimit || !v.Truncated || !strings.Contains(r.Text, "download stopped at its size limit") {
		t.Errorf("bomb: value %+v, text tail %q", v, r.Text[max(0, len(r.Text)-200):])
	}
	if len(r.Text) > FetchBodyLimit+1024 {
		t.Errorf("bomb: returned %d bytes of text", len(r.Text))
	}

	// A small configured limit: decoded and compressed bytes are both capped.
	small64 := NewFetch(Options{AllowCIDRs: loopback, BodyLimit: 16 << 10, DownloadLimit: 64 << 10})
	for _, p := range []string{"/bomb", "/noisy", "/big"} {
		r := runFetch(t, small64, map[string]any{"url": srv.URL + p})
		v := mustOK(t, r)
		if !v.Truncated || v.Bytes > 64<<10 {
			t.Errorf("%s: value %+v", p, v)
		}
	}

	r = runFetch(t, f, map[string]any{"url": srv.URL + "/small"})
	mustOK(t, r)
	if !strings.Contains(r.Text, "compressed hello") || strings.Contains(r.Text, "<p>") {
		t.Errorf("gzip html: %s", r.Text)
	}
	mustFail(t, runFetch(t, f, map[string]any{"url": srv.URL + "/broken"}), armory.KindUnavailable)
}

func TestFetchBinaryBase64(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	big := make([]byte, FetchBodyLimit+100)
	rand.Read(big)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/img":
			w.Header().Set("Content-Type", "image/png")
			w.Write(png)
		case "/sniff": // no content type: sniffed
			w.Header()["Content-Type"] = nil
			w.Write(png)
		case "/big":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(big)
		}
	}))
	defer srv.Close()
	f := NewFetch(Options{AllowCIDRs: loopback})
	for _, p := range []string{"/img", "/sniff"} {
		r := runFetch(t, f, map[string]any{"url": srv.URL + p})
		v := mustOK(t, r)
		if v.ContentType != "image/png" || v.Bytes != len(png) || v.Truncated {
			t.Errorf("%s: value %+v", p, v)
		}
		enc := r.Text[strings.LastIndex(r.Text, "base64:\n")+len("base64:\n"):]
		got, err := base64.StdEncoding.DecodeString(enc)
		if err != nil || !bytes.Equal(got, png) {
			t.Errorf("%s: base64 does not decode to the image: %v", p, err)
		}
		if !strings.Contains(r.Text, "image/png") {
			t.Errorf("%s: text does not name the content type", p)
		}
	}
	r := runFetch(t, f, map[string]any{"url": srv.URL + "/big"})
	v := mustOK(t, r)
	if !v.Truncated || v.Bytes != len(big) {
		t.Errorf("big: %+v", v)
	}
	enc := r.Text[strings.LastIndex(r.Text, "base64:\n")+len("base64:\n"):]
	enc = enc[:strings.Index(enc, "\n")]
	got, err := base64.StdEncoding.DecodeString(enc)
	if err != nil || !bytes.Equal(got, big[:FetchBodyLimit]) {
		t.Errorf("big: base64 is not the first %d bytes: %v (%d)", FetchBodyLimit, err, len(got))
	}
}

func TestFetchTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-body" {
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	f := NewFetch(Options{AllowCIDRs: loopback, Timeout: 200 * time.Millisecond, MaxTimeout: 300 * time.Millisecond})
	for _, p := range []string{"/slow", "/slow-body"} {
		r := runFetch(t, f, map[string]any{"url": srv.URL + p})
		mustFail(t, r, armory.KindTimeout)
		// A huge timeout_secs is capped at MaxTimeout: the call still ends.
		r = runFetch(t, f, map[string]any{"url": srv.URL + p, "timeout_secs": 3600})
		mustFail(t, r, armory.KindTimeout)
		if !strings.Contains(r.Text, "300ms") {
			t.Errorf("timeout message does not state the capped limit: %s", r.Text)
		}
	}
}

func TestFetchCallTimeout(t *testing.T) {
	o := Options{}.withDefaults()
	for _, tt := range []struct {
		secs float64
		want time.Duration
	}{{0, 30 * time.Second}, {5, 5 * time.Second}, {0.5, 500 * time.Millisecond}, {120, 120 * time.Second}, {121, 120 * time.Second}, {1e300, 120 * time.Second}} {
		if got, err := o.timeouts().Call("tool.fetch", tt.secs); err != nil || got != tt.want {
			t.Errorf("Call(%v) = %v, %v; want %v", tt.secs, got, err, tt.want)
		}
	}
	if _, err := o.timeouts().Call("tool.fetch", -1); armory.KindOf(err) != armory.KindInvalid {
		t.Errorf("a negative timeout_secs: %v", err)
	}
}

func TestFetchStatusAndCharset(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/latin1":
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			w.Write([]byte("caf\xe9"))
		case "/meta":
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html><head><meta charset=\"windows-1252\"></head><body>na\xefve</body></html>"))
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"a":1}`)
		case "/forbidden":
			http.Error(w, "go away", http.StatusForbidden)
		case "/teapot":
			w.WriteHeader(418)
		case "/down":
			http.Error(w, "down", http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	f := NewFetch(Options{AllowCIDRs: loopback})
	r := runFetch(t, f, map[string]any{"url": srv.URL + "/latin1"})
	if mustOK(t, r); !strings.HasSuffix(r.Text, "café") {
		t.Errorf("latin1: %q", r.Text)
	}
	r = runFetch(t, f, map[string]any{"url": srv.URL + "/meta"})
	if mustOK(t, r); !strings.HasSuffix(r.Text, "naïve") {
		t.Errorf("meta charset: %q", r.Text)
	}
	r = runFetch(t, f, map[string]any{"url": srv.URL + "/json"})
	if mustOK(t, r); !strings.HasSuffix(r.Text, `{"a":1}`) {
		t.Errorf("json: %q", r.Text)
	}
	for p, k := range map[string]armory.Kind{"/missing": armory.KindNotFound, "/forbidden": armory.KindPermission, "/teapot": armory.KindInvalid, "/down": armory.KindUnavailable} {
		r := runFetch(t, f, map[string]any{"url": srv.URL + p})
		mustFail(t, r, k)
		if v, ok := r.Value.(FetchValue); !ok || v.Status < 400 {
			t.Errorf("%s: value %+v", p, r.Value)
		}
	}
	r = runFetch(t, f, map[string]any{"url": srv.URL + "/missing"})
	if !strings.Contains(r.Text, "404") || !strings.Contains(r.Text, "404 page not found") {
		t.Errorf("404 text: %q", r.Text)
	}
}

func TestFetchInvalidArgs(t *testing.T) {
	f := NewFetch(Options{Resolver: testenv.Hosts{}})
	tests := []struct {
		args string
		kind armory.Kind
	}{
		{`{}`, armory.KindInvalid},
		{`{"url":""}`, armory.KindInvalid},
		{`{"url":"example.com"}`, armory.KindInvalid},
		{`{"url":"ftp://example.com/"}`, armory.KindInvalid},
		{`{"url":"file:///etc/passwd"}`, armory.KindInvalid},
		{`{"url":"http://"}`, armory.KindInvalid},
		{`{"url":"http://exa mple.com/"}`, armory.KindInvalid},
		{`{"url":"https://example.com","timeout_secs":-1}`, armory.KindInvalid},
		{`{"url":"https://example.com","method":"POST"}`, armory.KindInvalid},
		{`{"url":"https://example.com","raw":"yes"}`, armory.KindInvalid},
		{`{"url":"https://no-such-host.test/"}`, armory.KindNotFound},
	}
	for _, tt := range tests {
		r := f.Execute(context.Background(), armory.Invocation{Args: json.RawMessage(tt.args)})
		if r.Success || r.Kind != tt.kind || r.Text == "" {
			t.Errorf("%s: success=%v kind=%v text=%q; want kind %v", tt.args, r.Success, r.Kind, r.Text, tt.kind)
		}
	}
}

// TestFetchIgnoresEnvironmentProxy: HTTP_PROXY is not used (it would route
// requests around the dial guard).
func TestFetchIgnoresEnvironmentProxy(t *testing.T) {
	proxyHits := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxyHits++
		io.WriteString(w, "via proxy")
	}))
	defer proxy.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "direct") }))
	defer srv.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	hosts := testenv.Hosts{"site.test": {netip.MustParseAddr("127.0.0.1")}}
	f := NewFetch(Options{Resolver: hosts, AllowHosts: []string{"site.test"}})
	r := runFetch(t, f, map[string]any{"url": "http://site.test:" + port(t, srv) + "/"})
	mustOK(t, r)
	if !strings.HasSuffix(r.Text, "direct") || proxyHits != 0 {
		t.Errorf("text %q, proxy hits %d", r.Text, proxyHits)
	}
}

func TestWebToolManifests(t *testing.T) {
	for _, tool := range []armory.Tool{NewFetch(Options{}), NewSearch(Options{}), NewBrowser(Options{})} {
		s, m := tool.Spec(), tool.Manifest()
		if !armory.ValidToolName(s.Name) || s.Description == "" {
			t.Errorf("%s: bad spec", s.Name)
		}
		var sch struct {
			Type       string                    `json:"type"`
			Properties map[string]map[string]any `json:"properties"`
		}
		if err := json.Unmarshal(s.InputSchema, &sch); err != nil || sch.Type != "object" {
			t.Errorf("%s: input schema: %v", s.Name, err)
		}
		for name, p := range sch.Properties {
			if d, _ := p["description"].(string); d == "" {
				t.Errorf("%s: argument %s has no description", s.Name, name)
			}
		}
		if !json.Valid(s.OutputSchema) {
			t.Errorf("%s: output schema is not JSON", s.Name)
		}
		if m.Danger != armory.DangerCautious || !m.Has(armory.CapNetwork) || m.Category != armory.CatWeb || m.Permission != armory.PermAuto {
			t.Errorf("%s: manifest %+v", s.Name, m)
		}
		if s.Name == "tool.browser" {
			if !m.Has(armory.CapWriteFS) || len(m.Requires) != 1 || m.Requires[0] != (armory.Requirement{Kind: "binary", Name: "chromium"}) {
				t.Errorf("browser manifest %+v", m)
			}
		} else if len(m.Capabilities) != 1 {
			t.Errorf("%s: capabilities %v", s.Name, m.Capabilities)
		}
	}
}

// BenchmarkFetchLocal measures one tool.fetch of a 100 KB HTML page from a
// local server, HTML-to-text included.
func BenchmarkFetchLocal(b *testing.B) {
	page := "<html><body>" + strings.Repeat(`<p>Some <a href="/x">linked</a> text, <b>bold</b> and more.</p><script>x()</script>`, 1200) + "</body></html>"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	defer srv.Close()
	f := NewFetch(Options{AllowCIDRs: loopback})
	args, _ := json.Marshal(map[string]any{"url": srv.URL})
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if r := f.Execute(context.Background(), armory.Invocation{Args: args}); !r.Success {
			b.Fatal(r.Text)
		}
	}
}
