package netguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/armory-dev/armory/internal/testenv"
)

func TestParseHostAddr(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" = not an IP literal
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"0X7F000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"0177.0.0.01", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"},
		{"0", "0.0.0.0"},
		{"0.0.0.0", "0.0.0.0"},
		{"169.254.169.254", "169.254.169.254"},
		{"0xa9fea9fe", "169.254.169.254"},
		{"[::1]", "::1"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"[::ffff:7f00:1]", "127.0.0.1"},
		{"[fd00:ec2::254]", "fd00:ec2::254"},
		{"127.0.0.1.", "127.0.0.1"},
		{"example.com", ""},
		{"1.2.3.4.5", ""},
		{"256.1.1.1", ""},
		{"1.2.3.256", ""},
		{"4294967296", ""},
		{"08.1.1.1", ""}, // 8 is not octal
		{"0xg", ""},
		{"", ""},
		{"1..1", ""},
		{"localhost", ""},
	}
	for _, tt := range tests {
		got, ok := CanonicalHost(tt.in)
		if tt.want == "" {
			if ok {
				t.Errorf("CanonicalHost(%q) = %q, want not an address", tt.in, got)
			}
			continue
		}
		if !ok || got != tt.want {
			t.Errorf("CanonicalHost(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
		}
	}
}

func TestCheckAddrDefaultPolicy(t *testing.T) {
	g := New(Options{})
	blocked := []string{
		"127.0.0.1", "127.255.255.254", "::1", "::ffff:127.0.0.1", "0.0.0.0", "::",
		"10.0.0.1", "172.16.5.4", "192.168.1.1", "100.64.0.1", "169.254.1.1",
		"169.254.169.254", "fd00:ec2::254", "100.100.100.200", "192.0.0.192", "168.63.129.16",
		"224.0.0.1", "ff02::1", "fe80::1", "fc00::1", "64:ff9b::7f00:1", "2002:7f00:1::1",
		"255.255.255.255", "192.0.2.1",
	}
	for _, s := range blocked {
		if err := g.CheckAddr(s, netip.MustParseAddr(s)); err == nil {
			t.Errorf("CheckAddr(%s) = nil, want refused", s)
		} else if _, ok := IsBlocked(err); !ok {
			t.Errorf("CheckAddr(%s) error %T is not a *BlockedError", s, err)
		}
	}
	for _, s := range []string{"8.8.8.8", "93.184.216.34", "2606:4700::1111", "1.1.1.1"} {
		if err := g.CheckAddr(s, netip.MustParseAddr(s)); err != nil {
			t.Errorf("CheckAddr(%s) = %v, want allowed", s, err)
		}
	}
}

func TestCheckAddrAllowances(t *testing.T) {
	g := New(Options{
		AllowCIDRs: []netip.Prefix{
			netip.MustParsePrefix("127.0.0.0/8"),
			netip.MustParsePrefix("169.254.0.0/16"),
			netip.MustParsePrefix("::ffff:10.0.0.0/104"), // mapped form of 10.0.0.0/8
			netip.MustParsePrefix("100.100.100.200/32"),
		},
		DenyCIDRs: []netip.Prefix{netip.MustParsePrefix("8.8.8.0/24")},
	})
	tests := []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1", true},
		{"::ffff:127.0.0.1", true},
		{"10.9.8.7", true},
		{"169.254.1.1", true},
		{"169.254.169.254", false}, // metadata needs an exact allowance
		{"100.100.100.200", true},  // exact /32
		{"::1", false},
		{"192.168.0.1", false},
		{"8.8.8.8", false}, // extra deny
		{"1.1.1.1", true},
	}
	for _, tt := range tests {
		err := g.CheckAddr("", netip.MustParseAddr(tt.addr))
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddr(%s) = %v, want ok=%v", tt.addr, err, tt.ok)
		}
	}
}

func TestHostAllowed(t *testing.T) {
	g := New(Options{AllowHosts: []string{"Intranet.Example.", "*.corp.example", "0x0a000001"}})
	for host, want := range map[string]bool{
		"intranet.example": true, "INTRANET.example.": true, "a.intranet.example": false,
		"x.corp.example": true, "a.b.corp.example": true, "corp.example": false, "evilcorp.example": false,
		"10.0.0.1": true, "167772161": true, "10.0.0.2": false,
	} {
		if got := g.HostAllowed(host); got != want {
			t.Errorf("HostAllowed(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	g := New(Options{})
	for _, raw := range []string{
		"file:///etc/passwd", "gopher://x/", "ftp://example.com/", "http:///path",
		"http://127.0.0.1/", "http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/",
		"http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/", "http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := g.CheckURL(u); err == nil {
			t.Errorf("CheckURL(%s) = nil, want refused", raw)
		}
	}
	for _, raw := range []string{"https://example.com/", "HTTP://example.com/x", "http://8.8.8.8/"} {
		u, _ := url.Parse(raw)
		if err := g.CheckURL(u); err != nil {
			t.Errorf("CheckURL(%s) = %v, want nil", raw, err)
		}
	}
}

func TestResolveRefusesNamesResolvingInside(t *testing.T) {
	hosts := testenv.Hosts{
		"evil.test":   {netip.MustParseAddr("127.0.0.1")},
		"mixed.test":  {netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("10.0.0.1")},
		"meta.test":   {netip.MustParseAddr("169.254.169.254")},
		"mapped.test": {netip.MustParseAddr("::ffff:192.168.0.1")},
		"public.test": {netip.MustParseAddr("8.8.8.8")},
	}
	g := New(Options{Resolver: hosts})
	ctx := context.Background()
	for _, h := range []string{"evil.test", "mixed.test", "meta.test", "mapped.test"} {
		if _, err := g.Resolve(ctx, h); err == nil {
			t.Errorf("Resolve(%s) allowed", h)
		} else if _, ok := IsBlocked(err); !ok {
			t.Errorf("Resolve(%s) = %v, want a BlockedError", h, err)
		}
	}
	if a, err := g.Resolve(ctx, "public.test"); err != nil || len(a) != 1 {
		t.Errorf("Resolve(public.test) = %v, %v", a, err)
	}
	var dnsErr *net.DNSError
	if _, err := g.Resolve(ctx, "unknown.test"); !errors.As(err, &dnsErr) || !dnsErr.IsNotFound {
		t.Errorf("Resolve(unknown.test) = %v, want not found", err)
	}
	// Allowing the name lets it through whatever it resolves to.
	g2 := New(Options{Resolver: hosts, AllowHosts: []string{"evil.test"}})
	if _, err := g2.Resolve(ctx, "evil.test"); err != nil {
		t.Errorf("allowed host refused: %v", err)
	}
}

// TestDialAgainstRealServer dials a real listener on 127.0.0.1 by many
// spellings: refused by default, connected when 127.0.0.0/8 is allowed.
func TestDialAgainstRealServer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "inside") }))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	hosts := testenv.Hosts{"rebind.test": {netip.MustParseAddr("127.0.0.1")}, "localhost": {netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}}
	spellings := []string{"127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "rebind.test"}

	deny := New(Options{Resolver: hosts})
	allow := New(Options{Resolver: testenv.Hosts{"rebind.test": {netip.MustParseAddr("127.0.0.1")}}, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	for _, h := range spellings {
		addr := net.JoinHostPort(strings.Trim(h, "[]"), port)
		if c, err := deny.DialContext(context.Background(), "tcp", addr); err == nil {
			c.Close()
			t.Errorf("default policy dialled %s", addr)
		} else if _, ok := IsBlocked(err); !ok {
			t.Errorf("dial %s: %v, want a BlockedError", addr, err)
		}
		c, err := allow.DialContext(context.Background(), "tcp", addr)
		if err != nil {
			t.Errorf("allowing 127.0.0.0/8, dial %s: %v", addr, err)
			continue
		}
		c.Close()
	}
	// localhost resolves to loopback and is refused, also via the system resolver.
	for _, r := range []Resolver{hosts, nil} {
		if _, err := New(Options{Resolver: r}).DialContext(context.Background(), "tcp", "localhost:"+port); err == nil {
			t.Errorf("localhost dialled with resolver %T", r)
		}
	}
	if _, err := deny.DialContext(context.Background(), "udp", "8.8.8.8:53"); err == nil {
		t.Error("udp dial allowed")
	}
}

func TestCheckRedirect(t *testing.T) {
	f := CheckRedirect(5)
	req := func(raw string) *http.Request { u, _ := url.Parse(raw); return &http.Request{URL: u} }
	via := make([]*http.Request, 5)
	if err := f(req("https://example.com/"), via); err != nil {
		t.Errorf("5th redirect refused: %v", err)
	}
	var tm *TooManyRedirectsError
	if err := f(req("https://example.com/"), make([]*http.Request, 6)); !errors.As(err, &tm) {
		t.Errorf("6th redirect: %v, want TooManyRedirectsError", err)
	}
	if err := f(req("file:///etc/passwd"), via[:1]); err == nil {
		t.Error("redirect to file: allowed")
	}
}

func BenchmarkCheckAddr(b *testing.B) {
	g := New(Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}})
	a := netip.MustParseAddr("93.184.216.34")
	b.ReportAllocs()
	for b.Loop() {
		if g.CheckAddr("", a) != nil {
			b.Fatal("refused")
		}
	}
}

func FuzzParseHostAddr(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "0x7f.1", "0177.0.0.1", "2130706433", "[::1]", "::ffff:1.2.3.4", "a.b", "1.2.3.4.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := ParseHostAddr(s)
		if !ok {
			return
		}
		if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
			t.Fatalf("ParseHostAddr(%q) = %v", s, a)
		}
		// Canonical text parses back to the same address.
		b, ok := ParseHostAddr(a.String())
		if !ok || b != a {
			t.Fatalf("round trip %q -> %v -> %v", s, a, b)
		}
	})
}
