package world

import (
	"fmt"

	"github.com/armory-dev/armory/netguard"
)

// NetAllow is a network allow-list of the web tools (tool.fetch, web.search,
// tool.browser): world-config.yaml "network: allow: [...]" for the world,
// config.md "## Network" list items for one agent (which replace the
// world's). Entries are validated with netguard.ParseRule.
type NetAllow struct {
	Allow []Item
	File  string
	Line  int
}

// From is where the list is set, as file:line.
func (n *NetAllow) From() string { return fmt.Sprintf("%s:%d", n.File, n.Line) }

// Entries returns the entries as written.
func (n *NetAllow) Entries() []string { return itemValues(n.Allow) }

var networkKeys = []string{"allow"}

func parseNetworkYAML(r nodeReader, p pair) *NetAllow {
	n := &NetAllow{File: r.file, Line: p.k.Line, Allow: []Item{}}
	fields, ok := r.mapping(p.v, "network")
	if !ok {
		return nil
	}
	for _, f := range fields {
		switch f.key {
		case "allow":
			items, _ := r.strList(f.v, "network.allow")
			n.Allow = checkNetEntries(r.ds, r.file, items, "network.allow")
		default:
			r.unknownKey(f, "network", networkKeys)
		}
	}
	return n
}

// checkNetEntries keeps the valid entries and reports the others.
func checkNetEntries(ds *Diagnostics, file string, items []Item, what string) []Item {
	out := []Item{}
	for _, it := range items {
		if _, err := netguard.ParseRule(it.Value); err != nil {
			ds.Errorf(file, it.Line, "%s: %v (want a host name, *.domain, *, an address or a range such as 10.20.0.0/16, each optionally with :port)", what, err)
			continue
		}
		out = append(out, it)
	}
	return out
}

// parseNetworkMD reads config.md "## Network": list items are entries.
func parseNetworkMD(cfg *AgentConfig, ds *Diagnostics) *NetAllow {
	s := cfg.Sections["network"]
	if s == nil {
		return nil
	}
	for _, kv := range s.KVs {
		ds.Errorf(cfg.File, kv.Line, "network: want \"- entry\" (a host, *.domain, an address or a range, optionally :port), got %q", kv.Key+": "+kv.Value)
	}
	return &NetAllow{File: cfg.File, Line: s.Line, Allow: checkNetEntries(ds, cfg.File, s.Items, "network")}
}
