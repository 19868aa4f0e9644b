// Package netguard is Armory's outbound network policy against server-side
// request forgery (SSRF). The web tools (tool.fetch, web.search,
// tool.browser) dial through a Guard, so the policy is enforced on the
// address actually connected to, at dial time, for the first request and
// for every redirect, whatever the host name resolved to.
//
// Refused by default: loopback, private (RFC 1918, fc00::/7), link-local,
// shared address space (CGNAT, 100.64.0.0/10), multicast, unspecified,
// reserved and documentation ranges (the IANA special-purpose registries as
// kept by code.dny.dev/ssrf), every IPv6 address outside global unicast
// 2000::/3 (so also IPv4-mapped, NAT64 and 6to4 forms are checked by the
// IPv4 address they carry or refused), and the cloud metadata addresses
// (169.254.169.254, fd00:ec2::254, 100.100.100.200, 192.0.0.192,
// 168.63.129.16). A world may allow host names (AllowHosts) or address
// ranges (AllowCIDRs). A metadata address is only allowed by a CIDR that
// names exactly that address, or by allowing its host name: allowing
// 169.254.0.0/16 does not open 169.254.169.254.
//
// A Guard is immutable after New and safe for concurrent use.
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"
)

// Resolver looks up the addresses of a host name. *net.Resolver implements
// it; tests use a fixed table (internal/testenv.Hosts).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Guard. The zero value is the default policy: nothing
// private is reachable, names resolve with net.DefaultResolver.
type Options struct {
	// AllowHosts are host names the world trusts whatever they resolve to:
	// "intranet.example" matches that name exactly (case-insensitive),
	// "*.corp.example" matches every name below corp.example (not the name
	// itself). IP literals may be listed too ("10.1.2.3").
	AllowHosts []string
	// AllowCIDRs are address ranges the world allows although the default
	// policy refuses them, for example 10.20.0.0/16 or, in tests,
	// 127.0.0.0/8. IPv4-mapped IPv6 prefixes are unmapped.
	AllowCIDRs []netip.Prefix
	// AllowOnly puts the guard in allow-list mode: only destinations an
	// Allow rule covers are reachable (see Rule); an empty Allow reaches
	// nothing. Name rules never open what the default policy refuses;
	// address rules do. AllowHosts and AllowCIDRs still apply.
	AllowOnly bool
	Allow     []Rule
	// DenyCIDRs are refused in addition to the built-in list, even when a
	// public address; they lose against AllowCIDRs and AllowHosts.
	DenyCIDRs []netip.Prefix
	// Resolver resolves host names; nil means net.DefaultResolver.
	Resolver Resolver
	// DialTimeout bounds one TCP connect; zero means 10 s.
	DialTimeout time.Duration
}

// MetadataAddrs are the cloud instance-metadata endpoints. They are refused
// unless allowed by name or by a CIDR that covers exactly one address.
var MetadataAddrs = []netip.Addr{
	netip.MustParseAddr("169.254.169.254"), // AWS, GCP, Azure, OpenStack, DigitalOcean, ...
	netip.MustParseAddr("169.254.170.2"),   // AWS ECS task metadata
	netip.MustParseAddr("fd00:ec2::254"),   // AWS IMDS over IPv6
	netip.MustParseAddr("100.100.100.200"), // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"),     // Oracle Cloud
	netip.MustParseAddr("168.63.129.16"),   // Azure wire server (a public address)
}

// Guard applies one policy. Build it with New.
type Guard struct {
	allowHosts  map[string]bool
	allowSuffix []string // ".corp.example"
	allowCIDRs  []netip.Prefix
	denyCIDRs   []netip.Prefix
	ssrf        *ssrf.Guardian
	resolver    Resolver
	dialTimeout time.Duration
	allow       []Rule // non-nil in allow-list mode
}

// New returns a Guard for o. o is copied; later changes to its slices do not
// affect the Guard.
func New(o Options) *Guard {
	g := &Guard{allowHosts: map[string]bool{}, resolver: o.Resolver, dialTimeout: o.DialTimeout}
	if g.resolver == nil {
		g.resolver = net.DefaultResolver
	}
	if g.dialTimeout <= 0 {
		g.dialTimeout = 10 * time.Second
	}
	for _, h := range o.AllowHosts {
		h = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(h)), ".")
		switch {
		case h == "":
		case strings.HasPrefix(h, "*."):
			g.allowSuffix = append(g.allowSuffix, h[1:])
		default:
			if c, ok := CanonicalHost(h); ok {
				h = c
			}
			g.allowHosts[h] = true
		}
	}
	for _, p := range o.AllowCIDRs {
		g.allowCIDRs = append(g.allowCIDRs, unmapPrefix(p))
	}
	if o.AllowOnly {
		g.allow = append([]Rule{}, o.Allow...)
	}
	for _, p := range o.DenyCIDRs {
		g.denyCIDRs = append(g.denyCIDRs, unmapPrefix(p))
	}
	// The built-in ranges of code.dny.dev/ssrf; ports and networks are not
	// its business here (any TCP port is allowed on an allowed address).
	g.ssrf = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())
	return g
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}

// BlockedError is returned (possibly wrapped in *url.Error or *net.OpError)
// when the policy refuses a destination.
type BlockedError struct {
	Host   string     // the host name or literal as requested
	Addr   netip.Addr // the refused address (invalid when the scheme or host was refused)
	Reason string     // "loopback address", "cloud metadata address", ...
}

func (e *BlockedError) Error() string {
	if !e.Addr.IsValid() {
		return fmt.Sprintf("network policy refuses %s: %s", e.Host, e.Reason)
	}
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("network policy refuses %s (%s): %s", e.Host, e.Addr, e.Reason)
	}
	return fmt.Sprintf("network policy refuses %s: %s", e.Addr, e.Reason)
}

// IsBlocked reports whether err (or an error it wraps) is a *BlockedError,
// and returns it.
func IsBlocked(err error) (*BlockedError, bool) {
	var b *BlockedError
	ok := errors.As(err, &b)
	return b, ok
}

// HostAllowed reports whether host (a name or an IP literal in any form
// CanonicalHost accepts) is on the AllowHosts list.
func (g *Guard) HostAllowed(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if c, ok := CanonicalHost(h); ok {
		h = c
	}
	if g.allowHosts[h] {
		return true
	}
	for _, s := range g.allowSuffix {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// CheckAddr returns nil when the policy lets a connection to ip happen, and
// a *BlockedError otherwise. host is only used in the error, and in
// allow-list mode to match name rules (the port is checked when dialling).
func (g *Guard) CheckAddr(host string, ip netip.Addr) error {
	if g.allow != nil {
		return g.checkAllowList(host, ip, 0)
	}
	return g.checkDefault(host, ip)
}

// checkDefault is the default policy with AllowCIDRs and DenyCIDRs.
func (g *Guard) checkDefault(host string, ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	isMeta := slices.Contains(MetadataAddrs, ip)
	for _, p := range g.allowCIDRs {
		if p.Contains(ip) && (!isMeta || p.Bits() == ip.BitLen()) {
			return nil
		}
	}
	block := func(reason string) error { return &BlockedError{Host: host, Addr: ip, Reason: reason} }
	if isMeta {
		return block("cloud metadata address")
	}
	for _, p := range g.denyCIDRs {
		if p.Contains(ip) {
			return block("denied by the world's network policy (" + p.String() + ")")
		}
	}
	if err := g.ssrf.SafeAddr(ip); err != nil {
		return block(classify(ip))
	}
	return nil
}

// classify names the kind of a refused address for messages.
func classify(ip netip.Addr) string {
	cgnat := netip.MustParsePrefix("100.64.0.0/10")
	ula := netip.MustParsePrefix("fc00::/7")
	switch {
	case ip.IsLoopback():
		return "loopback address"
	case ip.IsUnspecified() || (ip.Is4() && ip.As4()[0] == 0):
		return "unspecified address"
	case ip.IsLinkLocalUnicast():
		return "link-local address"
	case ip.IsMulticast():
		return "multicast address"
	case ip.IsPrivate() && !ula.Contains(ip):
		return "private address"
	case ula.Contains(ip):
		return "unique local (private) IPv6 address"
	case cgnat.Contains(ip):
		return "shared address space (CGNAT)"
	}
	return "special-purpose or reserved address"
}

// CanonicalHost parses host as an IPv4 address the way browsers do (WHATWG
// URL standard): one to four dot-separated parts, each decimal, octal
// (leading 0) or hexadecimal (0x), the last part filling the remaining
// bytes, so "2130706433", "0x7f000001", "0177.0.0.1" and "127.1" are all
// 127.0.0.1. It also accepts bracketed or bare IPv6 literals. It returns the
// canonical text of the address and true, or ("", false) when host is not
// an IP literal.
func CanonicalHost(host string) (string, bool) {
	a, ok := ParseHostAddr(host)
	if !ok {
		return "", false
	}
	return a.String(), true
}

// ParseHostAddr is CanonicalHost returning the address. IPv4-mapped IPv6
// addresses are unmapped.
func ParseHostAddr(host string) (netip.Addr, bool) {
	h := strings.TrimSuffix(host, ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if strings.Contains(h, ":") {
		a, err := netip.ParseAddr(h)
		if err != nil {
			return netip.Addr{}, false
		}
		return a.Unmap().WithZone(""), true
	}
	if h == "" {
		return netip.Addr{}, false
	}
	parts := strings.Split(h, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v := last
	for i, n := range nums[:len(nums)-1] {
		v |= n << (8 * (3 - i))
	}
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Part(p string) (uint64, bool) {
	if p == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(p) >= 2 && (p[:2] == "0x" || p[:2] == "0X"):
		p, base = p[2:], 16
		if p == "" {
			return 0, true
		}
	case len(p) >= 2 && p[0] == '0':
		p, base = p[1:], 8
	}
	if len(p) > 12 {
		return 0, false
	}
	n, err := strconv.ParseUint(p, base, 64)
	if err != nil || n > 1<<32-1 {
		return 0, false
	}
	return n, true
}

// CheckURL refuses URLs whose scheme is not http or https, that have no
// host, or whose host is an IP literal the policy refuses. It is an early,
// friendly check; the dial-time check is the one that holds (names are
// resolved only there).
func (g *Guard) CheckURL(u *url.URL) error {
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return &BlockedError{Host: u.Redacted(), Reason: fmt.Sprintf("scheme %q is not allowed (only http and https)", u.Scheme)}
	}
	host := u.Hostname()
	if host == "" {
		return &BlockedError{Host: u.Redacted(), Reason: "the URL has no host"}
	}
	if g.HostAllowed(host) {
		return nil
	}
	if g.allow != nil {
		port := urlPort(u)
		if a, ok := ParseHostAddr(host); ok {
			return g.checkAllowList(host, a, port)
		}
		name := strings.TrimSuffix(strings.ToLower(host), ".")
		for _, r := range g.allow {
			if r.Host == "" || (r.nameMatches(name) && r.portOK(port)) {
				return nil // decided when the name is resolved and dialled
			}
		}
		return &BlockedError{Host: u.Redacted(), Reason: fmt.Sprintf("not in the network allow-list (%s)", net.JoinHostPort(name, strconv.Itoa(int(port))))}
	}
	if a, ok := ParseHostAddr(host); ok {
		return g.CheckAddr(host, a)
	}
	return nil
}

// urlPort is the port a request to u connects to.
func urlPort(u *url.URL) uint16 {
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err == nil {
		return uint16(p)
	}
	if strings.EqualFold(u.Scheme, "https") {
		return 443
	}
	return 80
}

// Resolve returns the addresses to connect to for host, after the policy:
// an IP literal (in any form ParseHostAddr accepts) is used as is, a name
// is resolved. It fails with a *BlockedError when any address is refused
// (a name with one private address among public ones is refused outright),
// or with the resolver's error.
func (g *Guard) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	allowed := g.HostAllowed(host)
	if a, ok := ParseHostAddr(host); ok {
		if !allowed {
			if err := g.CheckAddr(host, a); err != nil {
				return nil, err
			}
		}
		return []netip.Addr{a}, nil
	}
	addrs, err := g.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if !allowed {
			if err := g.CheckAddr(host, a); err != nil {
				return nil, err
			}
		}
		out = append(out, a)
	}
	return out, nil
}

// DialContext connects to addr ("host:port") over TCP after the policy: it
// resolves the host itself (so what is checked is what is dialled) and
// checks the address again in the dialer's Control hook, right before the
// connect system call. network must be "tcp", "tcp4" or "tcp6". It is
// suitable for http.Transport.DialContext.
func (g *Guard) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "tcp", "tcp4", "tcp6":
	default:
		return nil, &BlockedError{Host: addr, Reason: "network " + network + " is not allowed"}
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	addrs, err := g.Resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	allowed := g.HostAllowed(host)
	d := net.Dialer{
		Timeout: g.dialTimeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			if allowed {
				return nil
			}
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return &BlockedError{Host: host, Reason: "unparsable dial address " + address}
			}
			if g.allow != nil {
				return g.checkAllowList(host, ap.Addr(), ap.Port())
			}
			return g.CheckAddr(host, ap.Addr())
		},
	}
	var firstErr error
	for _, a := range addrs {
		if (network == "tcp4" && !a.Is4()) || (network == "tcp6" && a.Is4()) {
			continue
		}
		c, err := d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = &net.AddrError{Err: "no address of the requested family", Addr: host}
	}
	return nil, firstErr
}

// Transport returns a new http.Transport that dials through g, ignores
// proxy settings from the environment (Proxy is nil), and does not
// decompress bodies on its own (DisableCompression), so that callers can
// bound compressed and decompressed sizes themselves.
func (g *Guard) Transport() *http.Transport {
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            g.DialContext,
		ForceAttemptHTTP2:      true,
		DisableCompression:     true,
		MaxIdleConns:           32,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        30 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 1 << 20,
	}
}

// CheckRedirect returns an http.Client.CheckRedirect function that allows at
// most max redirects (the max+1-th is refused with an error saying so) and
// only to http and https URLs. Addresses are checked when dialled.
func CheckRedirect(max int) func(req *http.Request, via []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) > max {
			return &TooManyRedirectsError{Max: max, URL: req.URL.Redacted()}
		}
		switch strings.ToLower(req.URL.Scheme) {
		case "http", "https":
			return nil
		}
		return &BlockedError{Host: req.URL.Redacted(), Reason: fmt.Sprintf("redirect to scheme %q is not allowed (only http and https)", req.URL.Scheme)}
	}
}

// TooManyRedirectsError is returned by the function of CheckRedirect when a
// response asks for one redirect more than allowed.
type TooManyRedirectsError struct {
	Max int
	URL string // the redirect target that was refused
}

func (e *TooManyRedirectsError) Error() string {
	return fmt.Sprintf("stopped after %d redirects (the limit); the next one pointed to %s", e.Max, e.URL)
}
