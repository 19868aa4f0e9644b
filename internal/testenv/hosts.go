package testenv

import (
	"context"
	"net"
	"net/netip"
	"strings"
)

// Hosts is a fixed name → addresses table, a netguard.Resolver that never touches the
// network (like /etc/hosts alone). Names are matched case-insensitively,
// without a trailing dot. Unknown names fail with a *net.DNSError whose
// IsNotFound is true.
type Hosts map[string][]netip.Addr

// LookupNetIP implements netguard.Resolver. network is "ip", "ip4" or "ip6".
func (h Hosts) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	var out []netip.Addr
	for _, a := range h[name] {
		switch {
		case network == "ip4" && !a.Unmap().Is4(), network == "ip6" && !a.Is6():
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}
