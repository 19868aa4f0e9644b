package netguard

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Rule is one entry of an allow-list (Options.Allow), parsed by ParseRule:
//
//	api.example.com      that host name, any port
//	*.corp.example       every name below corp.example
//	api.example.com:8443 that name on port 8443 only
//	*                    any host name
//	10.20.0.0/16         every address of the range, any port
//	10.20.0.0/16:5432    the range on port 5432 only ([fd00::/8]:443 for IPv6)
//	10.20.1.2            one address (as a /32 or /128)
//	10.20.1.2:8080, [fd00::1]:8080
//
// A name rule matches the host name a request names; it never opens an
// address the default policy refuses (private, loopback, link-local,
// metadata …): the address dialled is checked whatever the name, so a name
// that resolves or rebinds to a private address stays refused. Only an
// address rule (a range or an address) opens refused addresses, and a
// metadata address only when the rule names exactly that address.
type Rule struct {
	// Host is the name ("api.example.com"), the suffix (".corp.example"
	// for "*.corp.example") or "*" for any name; empty for an address rule.
	Host string
	// Prefix is the range of an address rule.
	Prefix netip.Prefix
	// Port, when not zero, is the only port the rule allows.
	Port uint16
	// Text is the rule as written.
	Text string
}

// ParseRule parses one allow-list entry (see Rule). Errors say what is wrong
// with the entry.
func ParseRule(s string) (Rule, error) {
	text := strings.TrimSpace(s)
	r := Rule{Text: text}
	if text == "" {
		return r, fmt.Errorf("empty entry")
	}
	body := text
	// A port: "host:port", "a.b.c.d/n:port", "[v6]:port", "[v6/n]:port".
	if strings.HasPrefix(body, "[") {
		end := strings.Index(body, "]")
		if end < 0 {
			return r, fmt.Errorf("%q: missing ]", text)
		}
		rest := body[end+1:]
		body = body[1:end]
		if rest != "" {
			p, ok := strings.CutPrefix(rest, ":")
			if !ok {
				return r, fmt.Errorf("%q: want [address]:port", text)
			}
			port, err := parsePort(p)
			if err != nil {
				return r, fmt.Errorf("%q: %v", text, err)
			}
			r.Port = port
		}
	} else if strings.Count(body, ":") == 1 {
		h, p, _ := strings.Cut(body, ":")
		port, err := parsePort(p)
		if err != nil {
			return r, fmt.Errorf("%q: %v", text, err)
		}
		body, r.Port = h, port
	}
	// An address or a range.
	if strings.Contains(body, "/") {
		p, err := netip.ParsePrefix(body)
		if err != nil {
			return r, fmt.Errorf("%q is not an address range such as 10.20.0.0/16: %v", text, err)
		}
		if p.Masked() != p {
			return r, fmt.Errorf("%q has host bits set; did you mean %s?", text, p.Masked())
		}
		r.Prefix = unmapPrefix(p)
		return r, nil
	}
	if a, err := netip.ParseAddr(body); err == nil {
		a = a.Unmap().WithZone("")
		r.Prefix = netip.PrefixFrom(a, a.BitLen())
		return r, nil
	}
	if strings.Contains(body, ":") {
		return r, fmt.Errorf("%q: write an IPv6 address with a port as [address]:port", text)
	}
	// A name.
	h := strings.TrimSuffix(strings.ToLower(body), ".")
	switch {
	case h == "*":
		r.Host = "*"
		return r, nil
	case strings.HasPrefix(h, "*."):
		if !validName(h[2:]) {
			return r, fmt.Errorf("%q is not a host name, address or range", text)
		}
		r.Host = h[1:]
		return r, nil
	}
	if _, ok := ParseHostAddr(h); ok {
		return r, fmt.Errorf("%q: write addresses in dotted form (such as 10.1.2.3)", text)
	}
	if !validName(h) {
		return r, fmt.Errorf("%q is not a host name, address or range", text)
	}
	r.Host = h
	return r, nil
}

func parsePort(p string) (uint16, error) {
	n, err := strconv.ParseUint(p, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("port %q must be a number from 1 to 65535", p)
	}
	return uint16(n), nil
}

func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// ParseRules parses every entry; the first error stops it.
func ParseRules(entries []string) ([]Rule, error) {
	out := make([]Rule, 0, len(entries))
	for _, e := range entries {
		r, err := ParseRule(e)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (r Rule) portOK(port uint16) bool { return r.Port == 0 || port == 0 || r.Port == port }

// nameMatches reports whether the name rule r covers host (lower case, no
// trailing dot).
func (r Rule) nameMatches(host string) bool {
	switch {
	case r.Host == "":
		return false
	case r.Host == "*":
		return true
	case strings.HasPrefix(r.Host, "."):
		return strings.HasSuffix(host, r.Host)
	}
	return host == r.Host
}

// addrOpened reports whether an address rule covers ip on port, metadata
// addresses only by a rule naming exactly that address.
func (g *Guard) addrOpened(ip netip.Addr, port uint16) bool {
	isMeta := slices.Contains(MetadataAddrs, ip)
	for _, r := range g.allow {
		if r.Host == "" && r.Prefix.Contains(ip) && r.portOK(port) && (!isMeta || r.Prefix.Bits() == ip.BitLen()) {
			return true
		}
	}
	return false
}

// checkAllowList applies the allow-list to a connection to ip on port for
// the requested host (a name or an IP literal). port 0 means "not known
// yet" (resolving, before the dial): only the address is checked then.
func (g *Guard) checkAllowList(host string, ip netip.Addr, port uint16) error {
	ip = ip.Unmap().WithZone("")
	if g.addrOpened(ip, port) {
		return nil
	}
	name := strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	_, literal := ParseHostAddr(name)
	named := false
	for _, r := range g.allow {
		if (r.Host == "*" || !literal && r.nameMatches(name)) && r.portOK(port) {
			named = true
			break
		}
	}
	if !named {
		what := name
		if port != 0 {
			what = net.JoinHostPort(name, strconv.Itoa(int(port)))
		}
		return &BlockedError{Host: host, Addr: ip, Reason: "not in the network allow-list (" + what + ")"}
	}
	// A name rule never opens what the default policy refuses.
	return g.checkDefault(host, ip)
}

// AllowList returns the allow-list rules as written (nil when the guard has
// none: the default policy).
func (g *Guard) AllowList() []string {
	if g.allow == nil {
		return nil
	}
	out := make([]string, len(g.allow))
	for i, r := range g.allow {
		out[i] = r.Text
	}
	return out
}
