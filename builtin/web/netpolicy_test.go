package web

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

// An agent's network allow-list: an address entry opens exactly that
// address and port; a host entry (even one that resolves or rebinds to
// loopback) opens no private address; redirects are checked per hop.
func TestFetchAgentAllowList(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/jump" {
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
			return
		}
		io.WriteString(w, "INTERNAL-SECRET")
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "OTHER-SECRET") }))
	defer other.Close()
	p, op := port(t, srv), port(t, other)
	hosts := testenv.Hosts{"public.test": {netip.MustParseAddr("127.0.0.1")}, "intra.test": {netip.MustParseAddr("127.0.0.1")}}
	f := NewFetch(Options{Resolver: hosts})
	call := func(np *armory.NetPolicy, u string) armory.Result {
		return f.Execute(context.Background(), armory.Invocation{Args: fetchArgs(t, map[string]any{"url": u}), Agent: &armory.AgentEnv{ID: "a", Net: np}})
	}
	opened := &armory.NetPolicy{Allow: []string{"127.0.0.1:" + p}, From: "world-config.yaml:3"}
	if r := call(opened, "http://127.0.0.1:"+p+"/"); !r.Success || !strings.Contains(r.Text, "INTERNAL-SECRET") {
		t.Errorf("allowed address and port: %v %.200s", r.Kind, r.Text)
	}
	if r := call(opened, "http://intra.test:"+p+"/"); !r.Success {
		t.Errorf("a name resolving into the allowed address: %v %.200s", r.Kind, r.Text)
	}
	for _, u := range []string{"http://127.0.0.1:" + op + "/", "http://[::1]:" + p + "/", "http://127.0.0.1:" + p + "/jump"} {
		if r := call(opened, u); r.Success || r.Kind != armory.KindBlocked || strings.Contains(r.Text, "SECRET") {
			t.Errorf("%s: %v %.200s; want blocked", u, r.Kind, r.Text)
		}
	}
	// Only a public host allowed: private ranges stay closed, by literal, by
	// another name, and by the allowed name rebinding to loopback.
	public := &armory.NetPolicy{Allow: []string{"public.test", "*.example.com"}, From: "archetype/r/config.md:9"}
	for _, u := range []string{"http://public.test:" + p + "/", "http://127.0.0.1:" + p + "/", "http://intra.test:" + p + "/", "http://169.254.169.254/", "http://10.0.0.1/"} {
		r := call(public, u)
		if r.Success || r.Kind != armory.KindBlocked || strings.Contains(r.Text, "SECRET") {
			t.Errorf("only public.test allowed: %s: %v %.200s; want blocked", u, r.Kind, r.Text)
		}
		if !strings.Contains(r.Text, "network allow-list") {
			t.Errorf("refusal does not say how to open it: %s", r.Text)
		}
	}
	// The default policy (no list) still refuses loopback; the tool's own
	// options are not changed by an agent's list.
	if r := call(nil, "http://127.0.0.1:"+p+"/"); r.Success {
		t.Error("no allow-list reached loopback")
	}
	// A bad entry (a library user's) is an error, not an open door.
	if r := call(&armory.NetPolicy{Allow: []string{"10.0.0.1/8"}, From: "x"}, "http://127.0.0.1:"+p+"/"); r.Success || r.Kind != armory.KindInvalid {
		t.Errorf("bad entry: %v %.200s", r.Kind, r.Text)
	}
}

// tool.browser under an agent's allow-list: the page's own address is
// opened by an address entry; what the page's script reaches for (another
// loopback address, the metadata address) stays blocked; a list naming only
// a public host opens no loopback page.
func TestBrowserAgentAllowList(t *testing.T) {
	needChromium(t)
	secret := serveOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Access-Control-Allow-Origin", "*")
		io.WriteString(w, "INTERNAL-SECRET-9120")
	}))
	page := `<!DOCTYPE html><html><body><pre id="log"></pre><script>
function probe(name, url) {
  let out;
  try { const x = new XMLHttpRequest(); x.open("GET", url, false); x.send(); out = x.status === 200 ? "got " + x.responseText : "refused " + x.status; }
  catch (e) { out = "error " + e.name; }
  document.getElementById("log").textContent += name + ": " + out + "\n";
}
probe("loopback", "` + secret.URL + `/secret");
probe("metadata", "http://169.254.169.254/latest/meta-data/");
</script></body></html>`
	srv := serveOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, page)
	}))
	b := NewBrowser(Options{})
	opened := &armory.AgentEnv{ID: "r", Net: &armory.NetPolicy{Allow: []string{"127.0.0.1:" + port(t, srv)}, From: "config.md:3"}}
	r := runBrowser(t, b, opened, map[string]any{"url": srv.URL + "/"})
	if !r.Success || !strings.Contains(r.Text, "loopback: ") {
		t.Fatalf("allowed page: %v %s", r.Kind, r.Text)
	}
	if strings.Contains(r.Text, "INTERNAL-SECRET-9120") || strings.Contains(r.Text, "metadata: got") {
		t.Fatalf("the page reached past the allow-list:\n%s", r.Text)
	}
	public := &armory.AgentEnv{ID: "r", Net: &armory.NetPolicy{Allow: []string{"example.com", "*"}, From: "config.md:3"}}
	r = runBrowser(t, b, public, map[string]any{"url": srv.URL + "/"})
	if r.Success || r.Kind != armory.KindBlocked || !strings.Contains(r.Text, "network allow-list") {
		t.Errorf("only public hosts allowed, loopback page: %v %.300s", r.Kind, r.Text)
	}
}
