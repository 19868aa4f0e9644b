package netguard

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/armory-dev/armory/internal/testenv"
)

func TestParseRule(t *testing.T) {
	for in, want := range map[string]Rule{
		"api.example.com":      {Host: "api.example.com"},
		"API.Example.com.":     {Host: "api.example.com"},
		"*.corp.example":       {Host: ".corp.example"},
		"*":                    {Host: "*"},
		"*:443":                {Host: "*", Port: 443},
		"api.example.com:8443": {Host: "api.example.com", Port: 8443},
		"10.20.0.0/16":         {Prefix: netip.MustParsePrefix("10.20.0.0/16")},
		"10.20.0.0/16:5432":    {Prefix: netip.MustParsePrefix("10.20.0.0/16"), Port: 5432},
		"10.20.1.2":            {Prefix: netip.MustParsePrefix("10.20.1.2/32")},
		"10.20.1.2:8080":       {Prefix: netip.MustParsePrefix("10.20.1.2/32"), Port: 8080},
		"[fd00::1]:8080":       {Prefix: netip.MustParsePrefix("fd00::1/128"), Port: 8080},
		"fd00::/8":             {Prefix: netip.MustParsePrefix("fd00::/8")},
		"[fd00::/8]:443":       {Prefix: netip.MustParsePrefix("fd00::/8"), Port: 443},
	} {
		got, err := ParseRule(in)
		want.Text = in
		if err != nil || got != want {
			t.Errorf("ParseRule(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "10.20.0.1/16", "10.0.0.0/33", "host:0", "host:70000", "host:x", "fd00::1:80x", "bad host", "a..b", "0x7f000001", "[fd00::1", "[fd00::1]x"} {
		if r, err := ParseRule(bad); err == nil {
			t.Errorf("ParseRule(%q) = %+v, want an error", bad, r)
		}
	}
}

func allowGuard(t *testing.T, hosts testenv.Hosts, entries ...string) *Guard {
	t.Helper()
	rules, err := ParseRules(entries)
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{AllowOnly: true, Allow: rules, Resolver: hosts})
}

// Allowing a public host opens that host and nothing else: no private,
// loopback, link-local or metadata address, by literal or by a name that
// resolves (or rebinds) there, the allowed name included.
func TestAllowListPublicHostKeepsPrivateClosed(t *testing.T) {
	pub := netip.MustParseAddr("93.184.216.34")
	g := allowGuard(t, nil, "public.example")
	if err := g.CheckAddr("public.example", pub); err != nil {
		t.Errorf("allowed host at a public address: %v", err)
	}
	for _, a := range []string{"127.0.0.1", "10.0.0.5", "192.168.1.1", "169.254.169.254", "fd00::1", "::1", "100.64.0.1", "172.16.0.1"} {
		ip := netip.MustParseAddr(a)
		if err := g.CheckAddr("public.example", ip); err == nil {
			t.Errorf("public.example rebound to %s: allowed", a)
		}
		if err := g.CheckAddr(a, ip); err == nil {
			t.Errorf("literal %s: allowed", a)
		}
	}
	if err := g.CheckAddr("other.example", pub); err == nil || !strings.Contains(err.Error(), "not in the network allow-list") {
		t.Errorf("another public name: %v", err)
	}
	if err := g.CheckURL(&url.URL{Scheme: "http", Host: "other.example"}); err == nil {
		t.Error("CheckURL of a name not in the list passed")
	}
	// The same for a suffix rule and for "*" (any public host).
	for _, entry := range []string{"*.example", "*"} {
		g := allowGuard(t, nil, entry)
		if err := g.CheckAddr("public.example", pub); err != nil {
			t.Errorf("%s: public: %v", entry, err)
		}
		for _, a := range []string{"127.0.0.1", "10.0.0.5", "169.254.169.254"} {
			if err := g.CheckAddr("public.example", netip.MustParseAddr(a)); err == nil {
				t.Errorf("%s: public.example at %s allowed", entry, a)
			}
		}
	}
}

// Only an address rule opens a refused range, and only that range; the
// metadata address needs a rule naming exactly it.
func TestAllowListRanges(t *testing.T) {
	g := allowGuard(t, nil, "10.20.0.0/16", "169.254.0.0/16")
	for a, ok := range map[string]bool{"10.20.1.1": true, "10.21.0.1": false, "127.0.0.1": false, "8.8.8.8": false, "169.254.1.1": true, "169.254.169.254": false} {
		if err := g.CheckAddr("x", netip.MustParseAddr(a)); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed=%v", a, err, ok)
		}
	}
	if err := allowGuard(t, nil, "169.254.169.254").CheckAddr("x", netip.MustParseAddr("169.254.169.254")); err != nil {
		t.Errorf("metadata address named exactly: %v", err)
	}
	if err := allowGuard(t, nil).CheckAddr("x", netip.MustParseAddr("8.8.8.8")); err == nil {
		t.Error("an empty allow-list reaches a public address")
	}
}

// At dial time the port and the address actually dialled decide.
func TestAllowListDial(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("other")) }))
	defer other.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	otherPort := other.Listener.Addr().(*net.TCPAddr).Port
	hosts := testenv.Hosts{"rebind.example": {netip.MustParseAddr("127.0.0.1")}, "intra.example": {netip.MustParseAddr("127.0.0.1")}}

	get := func(g *Guard, host string, p int) error {
		c := &http.Client{Transport: g.Transport()}
		u := "http://" + net.JoinHostPort(host, strconv.Itoa(p)) + "/"
		if err := g.CheckURL(&url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(p))}); err != nil {
			return err
		}
		resp, err := c.Get(u)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	// A name rule for a name resolving to loopback: refused (rebinding).
	if err := get(allowGuard(t, hosts, "rebind.example", "*"), "rebind.example", port); err == nil {
		t.Error("name rule opened loopback")
	} else if _, ok := IsBlocked(err); !ok {
		t.Errorf("not a policy refusal: %v", err)
	}
	// An address rule with the server's port: that port only.
	g := allowGuard(t, hosts, "127.0.0.1:"+strconv.Itoa(port))
	if err := get(g, "127.0.0.1", port); err != nil {
		t.Errorf("allowed address and port: %v", err)
	}
	if err := get(g, "intra.example", port); err != nil {
		t.Errorf("a name resolving into an allowed address: %v", err)
	}
	if err := get(g, "127.0.0.1", otherPort); err == nil {
		t.Error("another port of an allowed address was reachable")
	}
}
