// Package registry holds each agent's tool registry: name → Tool for the
// tools the agent can see, built once when the world loads, with run-time
// Register/Unregister for skills. It also renders specs for models and
// protocols (briefing, OpenAI, Anthropic, MCP).
//
// Registries are small: every agent shares one immutable Catalog of tools
// and keeps only a bitset of which catalog tools it sees (plus a map for
// tools registered at run time), so 10,000 agents cost well under 1 KiB
// each (see BenchmarkRegistryMemory).
package registry

import (
	"fmt"
	"math/bits"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/armory-dev/armory"
)

// Catalog is the immutable, sorted set of every tool a world defines. It is
// safe for concurrent use.
type Catalog struct {
	tools []armory.Tool  // sorted by name
	specs []armory.Spec  // specs[i] = tools[i].Spec()
	index map[string]int // name → position
	// channel has bit i set when tools[i] needs a channel context
	// (Manifest.NeedsChannel); listings for a Caller without one leave
	// those tools out.
	channel []uint64
}

// Caller is what a listing's caller carries that decides which of the
// registry's tools it is shown. The zero Caller carries nothing.
type Caller struct {
	// Channel: the caller names a conversation (a channel context), so
	// the tools that need one (Manifest.NeedsChannel) are listed.
	Channel bool
}

// Listed reports whether a tool with manifest m is listed for c.
func (c Caller) Listed(m armory.Manifest) bool { return c.Channel || !m.NeedsChannel }

// NewCatalog builds a catalog. Every tool name must be valid and unique; a
// duplicate is an error of kind KindInvalid naming every duplicate at once.
func NewCatalog(tools []armory.Tool) (*Catalog, error) {
	c := &Catalog{index: make(map[string]int, len(tools))}
	type named struct {
		t armory.Tool
		s armory.Spec
	}
	all := make([]named, 0, len(tools))
	count := map[string]int{}
	var bad []string
	for _, t := range tools {
		s := t.Spec()
		if !armory.ValidToolName(s.Name) {
			bad = append(bad, fmt.Sprintf("invalid tool name %q", s.Name))
			continue
		}
		count[s.Name]++
		all = append(all, named{t, s})
	}
	var dups []string
	for n, k := range count {
		if k > 1 {
			dups = append(dups, n)
		}
	}
	sort.Strings(dups)
	if len(dups) > 0 {
		bad = append(bad, fmt.Sprintf("duplicate tool names: %v", dups))
	}
	if len(bad) > 0 {
		return nil, armory.E("registry.NewCatalog", armory.KindInvalid, fmt.Sprint(bad))
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s.Name < all[j].s.Name })
	c.tools = make([]armory.Tool, len(all))
	c.specs = make([]armory.Spec, len(all))
	c.channel = make([]uint64, (len(all)+63)/64)
	for i, n := range all {
		c.tools[i], c.specs[i] = n.t, n.s
		c.index[n.s.Name] = i
		if n.t.Manifest().NeedsChannel {
			c.channel[i/64] |= 1 << (i % 64)
		}
	}
	return c, nil
}

// Len is the number of tools.
func (c *Catalog) Len() int { return len(c.tools) }

// Names returns every tool name, sorted.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.specs))
	for i, s := range c.specs {
		out[i] = s.Name
	}
	return out
}

// Lookup returns the tool called name.
func (c *Catalog) Lookup(name string) (armory.Tool, bool) {
	i, ok := c.index[name]
	if !ok {
		return nil, false
	}
	return c.tools[i], true
}

// Has reports whether the catalog defines name.
func (c *Catalog) Has(name string) bool { _, ok := c.index[name]; return ok }

// Registry is one agent's tools. Safe for concurrent use.
type Registry struct {
	cat   *Catalog
	mu    sync.RWMutex
	bits  []uint64               // which catalog tools are visible
	extra map[string]armory.Tool // registered at run time (nil when none)
	// watchers are called after each change (OnChange); guarded by mu.
	watchers map[int]func(name string, added bool)
	nextW    int
}

// OnChange registers fn to be called after every successful Register
// (added true) and Unregister (added false), with the tool's name. fn runs
// in the goroutine that made the change, after the registry's lock is
// released, so it may read the registry. The returned function removes
// the watcher.
func (r *Registry) OnChange(fn func(name string, added bool)) (remove func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.watchers == nil {
		r.watchers = map[int]func(string, bool){}
	}
	id := r.nextW
	r.nextW++
	r.watchers[id] = fn
	return func() {
		r.mu.Lock()
		delete(r.watchers, id)
		r.mu.Unlock()
	}
}

// notify calls the watchers (without the lock held).
func (r *Registry) notify(name string, added bool) {
	r.mu.RLock()
	fns := make([]func(string, bool), 0, len(r.watchers))
	for _, fn := range r.watchers {
		fns = append(fns, fn)
	}
	r.mu.RUnlock()
	for _, fn := range fns {
		fn(name, added)
	}
}

// New builds a registry holding the catalog tools for which visible returns
// true.
func New(cat *Catalog, visible func(name string) bool) *Registry {
	r := &Registry{cat: cat, bits: make([]uint64, (len(cat.tools)+63)/64)}
	for i, s := range cat.specs {
		if visible(s.Name) {
			r.bits[i/64] |= 1 << (i % 64)
		}
	}
	return r
}

func (r *Registry) hasBit(i int) bool { return r.bits[i/64]&(1<<(i%64)) != 0 }

// UnknownTool is the error for a name the registry does not hold: kind
// KindNotFound, message "Unknown tool: <name>".
func UnknownTool(name string) error {
	return armory.E("registry.Lookup", armory.KindNotFound, "Unknown tool: "+name)
}

// Lookup returns the tool called name, or UnknownTool(name). name may be
// the tool's name or the name the OpenAI and Anthropic renderings give it
// (APIName: "devtools__word-count" for devtools.word-count), so a call a
// model makes with the name it was shown resolves on every surface; the
// tool's Spec().Name is its real name.
func (r *Registry) Lookup(name string) (armory.Tool, error) {
	t, _, err := r.Find(name)
	return t, err
}

// Find is Lookup that also returns the tool's real name (name itself
// unless name was a provider name), without calling the tool's Spec.
func (r *Registry) Find(name string) (armory.Tool, string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if t, ok := r.lookup(name); ok {
		return t, name, nil
	}
	if real, ok := r.fromAPI(name); ok {
		if t, ok := r.lookup(real); ok {
			return t, real, nil
		}
	}
	return nil, "", UnknownTool(name)
}

func (r *Registry) lookup(name string) (armory.Tool, bool) {
	if i, ok := r.cat.index[name]; ok && r.hasBit(i) {
		return r.cat.tools[i], true
	}
	t, ok := r.extra[name]
	return t, ok
}

// fromAPI maps a provider name back to the one tool of the registry whose
// APIName it is. Real names have a dot, API names none, so only a name
// without one is searched (a scan of the agent's tools, on the rare call
// that uses the provider name). Two tools with the same API name resolve
// to neither (NewNameMap refuses to render such a set). Called with r.mu
// held.
func (r *Registry) fromAPI(name string) (string, bool) {
	if name == "" || strings.IndexByte(name, '.') >= 0 || len(name) > 64 {
		return "", false
	}
	found := ""
	check := func(real string) bool {
		if APIName(real) != name {
			return true
		}
		if found != "" && found != real {
			found = ""
			return false // ambiguous
		}
		found = real
		return true
	}
	for wi, w := range r.bits {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			if !check(r.cat.specs[wi*64+b].Name) {
				return "", false
			}
			w &^= 1 << b
		}
	}
	for real := range r.extra {
		if !check(real) {
			return "", false
		}
	}
	return found, found != ""
}

// Resolve returns the real name of the tool that name (a real name or a
// provider name, see Lookup) names in the registry.
func (r *Registry) Resolve(name string) (string, bool) {
	_, real, err := r.Find(name)
	return real, err == nil
}

// Has reports whether the registry holds a tool whose real name is name
// (provider names are not resolved; see Lookup and Resolve).
func (r *Registry) Has(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.lookup(name)
	return ok
}

// Len is the number of tools the registry holds.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	n := len(r.extra)
	for _, w := range r.bits {
		n += bits.OnesCount64(w)
	}
	return n
}

// Register adds t at run time. It is the low-level primitive: it checks
// names, not policy. A caller that registers for an agent goes through
// the roster's Register, which decides first whether the agent may have
// the tool (access, groups, toolkits, requirements), as for a catalog tool.
//
// A name the registry already holds is a KindConflict error; so is a name
// the world's catalog defines, unless t is that catalog tool itself (which
// re-enables it): a tool registered at run time never takes the name of a
// catalog tool, visible to this agent or not, so nothing can pass itself
// off as a built-in. An invalid name is KindInvalid.
func (r *Registry) Register(t armory.Tool) error {
	name := t.Spec().Name
	if !armory.ValidToolName(name) {
		return armory.E("registry.Register", armory.KindInvalid, fmt.Sprintf("invalid tool name %q", name))
	}
	if err := r.register(name, t); err != nil {
		return err
	}
	r.notify(name, true)
	return nil
}

func (r *Registry) register(name string, t armory.Tool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.cat.index[name]; ok && r.hasBit(i) {
		return armory.E("registry.Register", armory.KindConflict, "tool already registered: "+name)
	}
	if _, ok := r.extra[name]; ok {
		return armory.E("registry.Register", armory.KindConflict, "tool already registered: "+name)
	}
	if i, ok := r.cat.index[name]; ok {
		if !SameTool(r.cat.tools[i], t) {
			return armory.E("registry.Register", armory.KindConflict, fmt.Sprintf("the world defines a tool named %s already; a tool added at run time cannot take its name", name))
		}
		r.bits[i/64] |= 1 << (i % 64) // re-enable a catalog tool
		return nil
	}
	if r.extra == nil {
		r.extra = map[string]armory.Tool{}
	}
	r.extra[name] = t
	return nil
}

// SameTool reports whether a and b are the same tool value: == for
// comparable values (pointers, the usual case), false otherwise
// (comparing values that are not — a struct holding a slice, map or func,
// also behind an interface field of a comparable type — would panic).
func SameTool(a, b armory.Tool) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if reflect.TypeOf(a) != reflect.TypeOf(b) || !reflect.ValueOf(a).Comparable() {
		return false
	}
	return a == b
}

// RunTimeTools returns the tools registered at run time (not catalog
// tools) that the registry holds, in no order; nil when none.
func (r *Registry) RunTimeTools() []armory.Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.extra) == 0 {
		return nil
	}
	out := make([]armory.Tool, 0, len(r.extra))
	for _, t := range r.extra {
		out = append(out, t)
	}
	return out
}

// RunTime reports whether name is a tool registered at run time (not a
// catalog tool) that the registry holds.
func (r *Registry) RunTime(name string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.extra[name]
	return ok
}

// Unregister removes the tool called name. A name the registry does not
// hold is UnknownTool(name).
func (r *Registry) Unregister(name string) error {
	if err := r.unregister(name); err != nil {
		return err
	}
	r.notify(name, false)
	return nil
}

func (r *Registry) unregister(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.extra[name]; ok {
		delete(r.extra, name)
		if len(r.extra) == 0 {
			r.extra = nil
		}
		return nil
	}
	if i, ok := r.cat.index[name]; ok && r.hasBit(i) {
		r.bits[i/64] &^= 1 << (i % 64)
		return nil
	}
	return UnknownTool(name)
}

// Specs returns the specs of the tools the registry lists for a caller
// without a channel context (SpecsFor(Caller{})), sorted by name so that
// prompts (and their caches) are deterministic.
func (r *Registry) Specs() []armory.Spec { return r.SpecsFor(Caller{}) }

// SpecsFor returns the specs of the tools the registry lists for c: every
// tool it holds but those that need a context c does not carry (a tool
// whose manifest sets NeedsChannel, for a caller without a channel). Every
// surface lists an agent's tools through it (or ToolsFor), so the listings
// agree. Sorted by name.
func (r *Registry) SpecsFor(c Caller) []armory.Spec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]armory.Spec, 0, len(r.extra)+8)
	for wi, w := range r.bits {
		if !c.Channel {
			w &^= r.cat.channel[wi]
		}
		for w != 0 {
			b := bits.TrailingZeros64(w)
			out = append(out, r.cat.specs[wi*64+b])
			w &^= 1 << b
		}
	}
	if len(r.extra) > 0 {
		for _, t := range r.extra {
			if c.Listed(t.Manifest()) {
				out = append(out, t.Spec())
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// Tools returns the tools the registry lists for a caller without a
// channel context (ToolsFor(Caller{})), sorted by name.
func (r *Registry) Tools() []armory.Tool { return r.ToolsFor(Caller{}) }

// ToolsFor returns the tools the registry lists for c (see SpecsFor),
// sorted by name.
func (r *Registry) ToolsFor(c Caller) []armory.Tool {
	specs := r.SpecsFor(c)
	out := make([]armory.Tool, 0, len(specs))
	for _, s := range specs {
		if t, err := r.Lookup(s.Name); err == nil {
			out = append(out, t)
		}
	}
	return out
}
