package web

import (
	"sync"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/netguard"
)

// guardFor returns the dial guard for an agent's network allow-list (np
// not nil): allow-list mode with its rules, on top of o's own allowances
// and resolver.
func (o Options) guardFor(np *armory.NetPolicy) (*netguard.Guard, error) {
	rules, err := netguard.ParseRules(np.Allow)
	if err != nil {
		return nil, armory.E("netguard", armory.KindInvalid, "the network allow-list at "+np.From+" is invalid", err)
	}
	return netguard.New(netguard.Options{AllowHosts: o.AllowHosts, AllowCIDRs: o.AllowCIDRs, Resolver: o.Resolver, AllowOnly: true, Allow: rules}), nil
}

// maxPolicies bounds the per-policy caches; a world builds one policy per
// agent when it loads, so only a library user minting policies per call
// goes past it (and then gets a fresh, uncached value).
const maxPolicies = 4096

// policyCache keeps one value (a guard, a client) per agent network
// policy. Safe for concurrent use.
type policyCache[T any] struct {
	mu sync.Mutex
	m  map[*armory.NetPolicy]T
}

// get returns the value for inv's agent's policy, building it with mk; ok
// is false when the agent has no policy (the caller's default applies).
func (c *policyCache[T]) get(inv armory.Invocation, mk func(*armory.NetPolicy) (T, error)) (v T, ok bool, err error) {
	if inv.Agent == nil || inv.Agent.Net == nil {
		return v, false, nil
	}
	np := inv.Agent.Net
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, hit := c.m[np]; hit {
		return v, true, nil
	}
	if v, err = mk(np); err != nil {
		return v, true, err
	}
	if c.m == nil {
		c.m = map[*armory.NetPolicy]T{}
	}
	if len(c.m) < maxPolicies {
		c.m[np] = v
	}
	return v, true, nil
}

// clientFor returns the web client of inv's agent: its allow-list's, or
// def.
func clientFor(c *policyCache[*webClient], o Options, def *webClient, inv armory.Invocation) (*webClient, error) {
	wc, ok, err := c.get(inv, func(np *armory.NetPolicy) (*webClient, error) {
		g, err := o.guardFor(np)
		if err != nil {
			return nil, err
		}
		return newWebClientWith(o, g), nil
	})
	if !ok {
		return def, nil
	}
	return wc, err
}
