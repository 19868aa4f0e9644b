package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

func needChromium(t *testing.T) {
	t.Helper()
	testenv.LookPath(t, "chromium", "apt-get install chromium")
}

// serveOn starts an httptest server on a given loopback address.
func serveOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func runBrowser(t *testing.T, b *Browser, env *armory.AgentEnv, kv map[string]any) armory.Result {
	t.Helper()
	args, _ := json.Marshal(kv)
	return b.Execute(context.Background(), armory.Invocation{Args: args, Agent: env})
}

var only127001 = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}

func TestBrowserRendersJavaScript(t *testing.T) {
	needChromium(t)
	const page = `<!DOCTYPE html><html><head><title>JS page</title></head><body>
<p>static text</p><div id="out"></div>
<script>document.getElementById("out").textContent = "rendered by script: " + (6 * 7);</script>
<style>.hidden{display:none}</style><p class="hidden">invisible text</p></body></html>`
	srv := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	b := NewBrowser(Options{AllowCIDRs: only127001})
	r := runBrowser(t, b, nil, map[string]any{"url": srv.URL + "/"})
	if !r.Success {
		t.Fatalf("browser failed (%v): %s", r.Kind, r.Text)
	}
	if !strings.Contains(r.Text, "rendered by script: 42") || !strings.Contains(r.Text, "static text") {
		t.Errorf("rendered text lacks the script's output:\n%s", r.Text)
	}
	if strings.Contains(r.Text, "invisible text") || strings.Contains(r.Text, "getElementById") {
		t.Errorf("text has hidden content or source:\n%s", r.Text)
	}
	v := r.Value.(BrowserValue)
	if v.Title != "JS page" || v.Status != 200 || v.URL != srv.URL+"/" || v.Truncated || len(v.Blocked) != 0 {
		t.Errorf("value %+v", v)
	}
	// tool.fetch sees only the source: the text is made by the script.
	fr := runFetch(t, NewFetch(Options{AllowCIDRs: loopback}), map[string]any{"url": srv.URL + "/"})
	if strings.Contains(fr.Text, "rendered by script: 42") {
		t.Error("the fixture does not need JavaScript")
	}
	// Without the allowance the same URL is refused before a browser starts.
	r = runBrowser(t, NewBrowser(Options{}), nil, map[string]any{"url": srv.URL + "/"})
	mustFail(t, r, armory.KindBlocked)
}

// TestBrowserBlocksPageRequests: a page on an allowed server tries to read
// a secret from another loopback address that is not allowed, and the
// cloud metadata address. Synchronous XHR runs before the load event, so
// the result is in the DOM when the text is read.
func TestBrowserBlocksPageRequests(t *testing.T) {
	needChromium(t)
	secret := serveOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		io.WriteString(w, "INTERNAL-SECRET-7731")
	}))
	page := fmt.Sprintf(`<!DOCTYPE html><html><body><pre id="log"></pre><script>
function probe(name, url) {
  let out;
  try {
    const x = new XMLHttpRequest();
    x.open("GET", url, false);
    x.send();
    out = x.status === 200 ? "got " + x.responseText : "refused " + x.status;
  } catch (e) { out = "error " + e.name; }
  document.getElementById("log").textContent += name + ": " + out + "\n";
}
probe("loopback", %q);
probe("metadata", "http://169.254.169.254/latest/meta-data/");
probe("mapped", "http://[::ffff:169.254.169.254]/latest/meta-data/");
</script><img src="http://169.254.169.254/pixel.png"></body></html>`, secret.URL+"/secret")
	srv := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))

	r := runBrowser(t, NewBrowser(Options{AllowCIDRs: only127001}), nil, map[string]any{"url": srv.URL + "/"})
	if !r.Success {
		t.Fatalf("browser failed (%v): %s", r.Kind, r.Text)
	}
	if strings.Contains(r.Text, "INTERNAL-SECRET-7731") {
		t.Fatalf("the page read the secret:\n%s", r.Text)
	}
	if !strings.Contains(r.Text, "loopback: ") || !strings.Contains(r.Text, "metadata: ") {
		t.Fatalf("probes did not run:\n%s", r.Text)
	}
	t.Logf("page text:\n%s", r.Text)
	v := r.Value.(BrowserValue)
	joined := strings.Join(v.Blocked, " ")
	secretHost := strings.TrimPrefix(secret.URL, "http://")
	if !strings.Contains(joined, secretHost) || !strings.Contains(joined, "169.254.169.254") {
		t.Errorf("blocked list %v lacks %s or the metadata address", v.Blocked, secretHost)
	}
	if !strings.Contains(r.Text, "network policy blocked") {
		t.Errorf("text does not report the blocked requests:\n%s", r.Text)
	}

	// Control: with all of 127.0.0.0/8 allowed the same page reads the
	// secret, so the refusal above is the policy's doing.
	r = runBrowser(t, NewBrowser(Options{AllowCIDRs: loopback}), nil, map[string]any{"url": srv.URL + "/"})
	if !r.Success || !strings.Contains(r.Text, "loopback: got INTERNAL-SECRET-7731") {
		t.Errorf("control run did not read the secret (kind %v):\n%s", r.Kind, r.Text)
	}
	if strings.Contains(r.Text, "metadata: got") {
		t.Errorf("metadata reachable with 127.0.0.0/8 allowed:\n%s", r.Text)
	}
}

func TestBrowserRedirectToBlocked(t *testing.T) {
	needChromium(t)
	secret := serveOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "INTERNAL-SECRET-7731")
	}))
	srv := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, secret.URL+"/", http.StatusFound)
	}))
	r := runBrowser(t, NewBrowser(Options{AllowCIDRs: only127001}), nil, map[string]any{"url": srv.URL + "/"})
	mustFail(t, r, armory.KindBlocked)
	if strings.Contains(r.Text, "INTERNAL-SECRET") {
		t.Errorf("leak: %s", r.Text)
	}
}

func TestBrowserScreenshot(t *testing.T) {
	needChromium(t)
	srv := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<html><body style="background:#08f"><h1>Screenshot me</h1></body></html>`)
	}))
	ws := filepath.Join(t.TempDir(), "ws")
	env := &armory.AgentEnv{ID: "a1", Workspace: ws}
	b := NewBrowser(Options{AllowCIDRs: only127001})
	for _, full := range []bool{false, true} {
		r := runBrowser(t, b, env, map[string]any{"url": srv.URL + "/", "screenshot": true, "full_page": full})
		if !r.Success {
			t.Fatalf("screenshot failed (%v): %s", r.Kind, r.Text)
		}
		if len(r.Artifacts) != 1 || r.Artifacts[0].MIMEType != "image/png" || !strings.HasPrefix(r.Artifacts[0].Path, "screenshots/") {
			t.Fatalf("artifacts %+v", r.Artifacts)
		}
		data, err := os.ReadFile(filepath.Join(ws, r.Artifacts[0].Path))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(data)) != r.Artifacts[0].Size {
			t.Errorf("size %d, artifact says %d", len(data), r.Artifacts[0].Size)
		}
		img, err := png.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("not a PNG: %v", err)
		}
		if bnd := img.Bounds(); bnd.Dx() < 100 || bnd.Dy() < 100 {
			t.Errorf("image is %v", bnd)
		}
		if v := r.Value.(BrowserValue); v.Screenshot != r.Artifacts[0].Path {
			t.Errorf("value %+v", v)
		}
	}
	// Without a workspace a screenshot is refused before the browser starts.
	r := runBrowser(t, b, nil, map[string]any{"url": srv.URL + "/", "screenshot": true})
	mustFail(t, r, armory.KindUnavailable)
}

// TestBrowserScreenshotConfined: a screenshots symlink leading out of the
// workspace is refused; nothing is written outside.
func TestBrowserScreenshotConfined(t *testing.T) {
	needChromium(t)
	srv := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "x") }))
	dir := t.TempDir()
	ws, outside := filepath.Join(dir, "ws"), filepath.Join(dir, "outside")
	for _, d := range []string{ws, outside} {
		if err := os.Mkdir(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(ws, "screenshots")); err != nil {
		t.Fatal(err)
	}
	r := runBrowser(t, NewBrowser(Options{AllowCIDRs: only127001}), &armory.AgentEnv{Workspace: ws}, map[string]any{"url": srv.URL, "screenshot": true})
	mustFail(t, r, armory.KindPermission)
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("wrote outside the workspace: %v", ents)
	}
}

func TestBrowserTimeoutAndLimits(t *testing.T) {
	needChromium(t)
	release := make(chan struct{})
	big := strings.Repeat("word ", 20<<10) // 100 KB of text
	srv := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			fmt.Fprintf(w, "<html><body><p>%s</p></body></html>", big)
		case "/missing":
			http.NotFound(w, r)
		default:
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	defer close(release)
	b := NewBrowser(Options{AllowCIDRs: only127001, Timeout: 2 * time.Second, MaxTimeout: 3 * time.Second, BodyLimit: 16 << 10})
	r := runBrowser(t, b, nil, map[string]any{"url": srv.URL + "/slow"})
	mustFail(t, r, armory.KindTimeout)
	r = runBrowser(t, b, nil, map[string]any{"url": srv.URL + "/slow", "timeout_secs": 3600})
	mustFail(t, r, armory.KindTimeout)
	if !strings.Contains(r.Text, "3s") {
		t.Errorf("timeout not capped at MaxTimeout: %s", r.Text)
	}

	b = NewBrowser(Options{AllowCIDRs: only127001, BodyLimit: 16 << 10})
	r = runBrowser(t, b, nil, map[string]any{"url": srv.URL + "/big"})
	if !r.Success {
		t.Fatalf("big page (%v): %s", r.Kind, r.Text)
	}
	v := r.Value.(BrowserValue)
	if !v.Truncated || v.Bytes > 16<<10 || !strings.Contains(r.Text, "[truncated: showed the first") {
		t.Errorf("big page: value %+v", v)
	}
	r = runBrowser(t, b, nil, map[string]any{"url": srv.URL + "/missing"})
	mustFail(t, r, armory.KindNotFound)
}

func TestBrowserInvalidArgs(t *testing.T) {
	b := NewBrowser(Options{})
	for _, args := range []string{
		`{}`, `{"url":"file:///etc/passwd"}`, `{"url":"chrome://settings"}`, `{"url":"javascript:alert(1)"}`,
		`{"url":"https://example.com","wait_ms":10001}`, `{"url":"https://example.com","full_page":true}`,
		`{"url":"https://example.com","timeout_secs":-2}`, `{"url":"https://example.com","x":1}`,
	} {
		r := b.Execute(context.Background(), armory.Invocation{Args: json.RawMessage(args)})
		if r.Success || r.Kind != armory.KindInvalid {
			t.Errorf("%s: success=%v kind=%v %s", args, r.Success, r.Kind, r.Text)
		}
	}
	r := runBrowser(t, NewBrowser(Options{ChromiumPath: "/nonexistent/chromium"}), nil, map[string]any{"url": "https://example.com/"})
	mustFail(t, r, armory.KindUnavailable)
}
