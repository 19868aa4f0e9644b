package access

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchWorld generates a world of agents × tools × groups × toolkits. Tools
// are named like real ones ("fam3.tool17"); a quarter of groups' entries are
// families.
func benchWorld(agents, tools, groups, toolkits int) (accs []*ToolAccess, kits *Toolkits, names []string) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < tools; i++ {
		names = append(names, fmt.Sprintf("fam%d.tool%d", i%20, i))
	}
	priv := map[string][]string{}
	for g := 0; g < groups; g++ {
		var entries []string
		for k := 0; k < 15; k++ {
			entries = append(entries, names[r.IntN(tools)])
		}
		if g%4 == 0 {
			entries = append(entries, fmt.Sprintf("fam%d", g))
		}
		priv[fmt.Sprintf("group%d", g)] = entries
	}
	p, err := NewPrivileges(priv, names...)
	if err != nil {
		panic(err)
	}
	var tk []Toolkit
	for k := 0; k < toolkits; k++ {
		tk = append(tk, Toolkit{Name: fmt.Sprintf("kit%d", k), Tools: []string{names[r.IntN(tools)], names[r.IntN(tools)], names[r.IntN(tools)]}, Default: k%2 == 0})
	}
	kits = NewToolkits(tk)
	for a := 0; a < agents; a++ {
		gs := []string{fmt.Sprintf("group%d", r.IntN(groups)), fmt.Sprintf("group%d", r.IntN(groups))}
		ovr := []string{names[r.IntN(tools)], names[r.IntN(tools)]}
		accs = append(accs, p.Resolve(gs, ovr))
	}
	return accs, kits, names
}

// BenchmarkCanAccess: world of 1,000 agents × 200 tools × 10 groups × 20
// toolkits; each op is one CanAccess of a pseudo-random (agent, tool) pair.
// Target: ≤ 100 ns/op and 0 allocs/op.
func BenchmarkCanAccess(b *testing.B) {
	accs, _, names := benchWorld(1000, 200, 10, 20)
	// Pre-draw the pairs so the benchmark measures CanAccess, not the RNG.
	const n = 1 << 16
	type pair struct {
		a *ToolAccess
		t string
	}
	pairs := make([]pair, n)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range pairs {
		pairs[i] = pair{accs[r.IntN(len(accs))], names[r.IntN(len(names))]}
	}
	granted := 0
	for _, p := range pairs {
		if p.a.CanAccess(p.t) {
			granted++
		}
	}
	if granted == 0 || granted == n {
		b.Fatalf("%d of %d pairs granted: the generated world is wrong", granted, n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := pairs[i&(n-1)]
		sink = p.a.CanAccess(p.t)
	}
}

var sink bool

// BenchmarkEnabled measures the toolkit rule on the same world.
func BenchmarkEnabled(b *testing.B) {
	_, kits, names := benchWorld(1, 200, 10, 20)
	sw := Switches{"kit1": true, "kit2": false, names[5]: true}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		kits.Enabled(sw, names[i%len(names)])
	}
}
