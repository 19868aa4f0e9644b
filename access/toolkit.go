package access

import (
	"fmt"
	"slices"
	"strings"
)

// Toolkit is a code- or world-owned bundle of tools with one switch (seajelly toolkits).
type Toolkit struct {
	Name    string
	Tools   []string
	Default bool   // members' default when an agent says nothing
	Policy  string // prompt text, shown when at least one member is visible
}

// Toolkits indexes the world's toolkits. Immutable; safe for concurrent use.
type Toolkits struct {
	kits   []Toolkit
	byName map[string]int
	of     map[string][]int // tool → indexes of toolkits containing it
}

// NewToolkits indexes kits (order kept: it is the order of policy texts).
func NewToolkits(kits []Toolkit) *Toolkits {
	t := &Toolkits{kits: slices.Clone(kits), byName: map[string]int{}, of: map[string][]int{}}
	for i, k := range t.kits {
		t.byName[k.Name] = i
		for _, tool := range k.Tools {
			if !slices.Contains(t.of[tool], i) {
				t.of[tool] = append(t.of[tool], i)
			}
		}
	}
	return t
}

// All returns the toolkits in world order.
func (t *Toolkits) All() []Toolkit {
	if t == nil {
		return nil
	}
	return t.kits
}

// Has reports whether a toolkit is called name.
func (t *Toolkits) Has(name string) bool {
	if t == nil {
		return false
	}
	_, ok := t.byName[name]
	return ok
}

// Of returns the names of the toolkits that contain tool.
func (t *Toolkits) Of(tool string) []string {
	if t == nil {
		return nil
	}
	var out []string
	for _, i := range t.of[tool] {
		out = append(out, t.kits[i].Name)
	}
	return out
}

// Switches are an agent's "## Toolkits" lines: toolkit or tool name → on/off.
type Switches map[string]bool

// Enabled applies the toolkit rule to tool for an agent with switches sw:
//
//  1. Collect the switches the agent sets for the toolkits that contain the
//     tool. Any false → off (a per-tool true does not override it).
//  2. Any true → the per-tool switch if set, else on.
//  3. No toolkit switch set → if another member of one of the tool's
//     toolkits is set explicitly true, that toolkit counts as on (legacy
//     configs), so: the per-tool switch if set, else on. Otherwise the
//     per-tool switch if set, else the toolkits' default (on only when every
//     toolkit containing the tool defaults on: the safer reading when two
//     toolkits disagree).
//  4. A tool in no toolkit: its per-tool switch, else on.
func (t *Toolkits) Enabled(sw Switches, tool string) bool {
	on, _ := t.explain(sw, tool, false, nil)
	return on
}

// Explain is Enabled with the reasons.
func (t *Toolkits) Explain(sw Switches, tool string) (bool, []string) {
	return t.explain(sw, tool, true, nil)
}

// ExplainFrom is Explain with each reason naming where its switch or
// toolkit was written (src may be nil).
func (t *Toolkits) ExplainFrom(sw Switches, tool string, src *Sources) (bool, []string) {
	return t.explain(sw, tool, true, src)
}

func (t *Toolkits) explain(sw Switches, tool string, why bool, src *Sources) (bool, []string) {
	src = src.orNone()
	var reasons []string
	say := func(format string, args ...any) {
		if why {
			reasons = append(reasons, fmt.Sprintf(format, args...))
		}
	}
	perTool, perToolSet := sw[tool]
	var kits []int
	if t != nil {
		kits = t.of[tool]
	}
	if len(kits) == 0 {
		if perToolSet {
			say("in no toolkit; switched %s by its own \"%s: %t\" line%s", onOff(perTool), tool, perTool, at(src.Switches, tool))
			return perTool, reasons
		}
		return true, reasons
	}
	anyTrue := false
	for _, i := range kits {
		k := t.kits[i]
		if v, set := sw[k.Name]; set {
			if !v {
				say("toolkit %q is switched off (\"%s: false\"%s); a per-tool switch cannot override that", k.Name, k.Name, atIn(src.Switches, k.Name))
				return false, reasons
			}
			anyTrue = true
		}
	}
	if anyTrue {
		if perToolSet {
			say("toolkit switched on, tool switched %s by \"%s: %t\"%s", onOff(perTool), tool, perTool, at(src.Switches, tool))
			return perTool, reasons
		}
		names, pos := quoteKits(t, kits, sw, true, src)
		say("toolkit %s switched on%s", names, pos)
		return true, reasons
	}
	// No toolkit switch set: is another member explicitly on (legacy)?
	for _, i := range kits {
		for _, m := range t.kits[i].Tools {
			if m != tool && sw[m] {
				if perToolSet {
					say("toolkit %q counts as on because its member %q is switched on%s (legacy config); tool switched %s by \"%s: %t\"%s", t.kits[i].Name, m, at(src.Switches, m), onOff(perTool), tool, perTool, at(src.Switches, tool))
					return perTool, reasons
				}
				say("toolkit %q counts as on because its member %q is switched on%s (legacy config)", t.kits[i].Name, m, at(src.Switches, m))
				return true, reasons
			}
		}
	}
	if perToolSet {
		say("switched %s by its own \"%s: %t\" line%s (no toolkit switch set)", onOff(perTool), tool, perTool, at(src.Switches, tool))
		return perTool, reasons
	}
	def := true
	for _, i := range kits {
		if !t.kits[i].Default {
			def = false
			say("toolkit %q is off by default and the agent does not switch it on%s", t.kits[i].Name, at(src.Toolkits, t.kits[i].Name))
		}
	}
	if def {
		names, pos := quoteKits(t, kits, sw, false, src)
		say("toolkit %s on by default%s", names, pos)
	}
	return def, reasons
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// atIn returns " at where" for key of m, or "" when the position is unknown.
func atIn(m map[string]string, key string) string {
	if s, ok := m[key]; ok && s != "" {
		return " at " + s
	}
	return ""
}

// quoteKits names the toolkits (switched ones only when onlySet) and says
// where each was switched (or, not switched, defined): " (a; b)".
func quoteKits(t *Toolkits, kits []int, sw Switches, onlySet bool, src *Sources) (names, pos string) {
	var ns, ps []string
	for _, i := range kits {
		n := t.kits[i].Name
		if _, set := sw[n]; set || !onlySet {
			ns = append(ns, fmt.Sprintf("%q", n))
			m := src.Toolkits
			if set {
				m = src.Switches
			}
			if p, ok := m[n]; ok && p != "" {
				ps = append(ps, p)
			}
		}
	}
	if len(ps) > 0 {
		pos = " (" + strings.Join(ps, "; ") + ")"
	}
	return strings.Join(ns, ", "), pos
}

// Decision is whether a tool is visible to an agent, with every reason.
type Decision struct {
	Visible bool     `json:"visible"`
	Public  bool     `json:"public"`
	Reasons []string `json:"reasons"`
}

// Input is what Decide needs about one tool for one agent. Unmet lists the
// tool's requirements that are not met, each with why (checked by the
// caller: the policy does no I/O).
type Input struct {
	Tool     string
	Defined  bool // a tool with this name exists in the world's catalog
	Access   *ToolAccess
	Toolkits *Toolkits
	Switches Switches
	Unmet    []string
	// Withheld lists other reasons outside this policy that keep the tool
	// from the agent (a toolbox tool its "## Toolbox" does not list).
	Withheld []string
	// Sources, when set, makes each reason name where its rule was written.
	Sources *Sources
}

// Decide applies Visible = CanAccess and toolkit-enabled and requirements met,
// and says why.
func Decide(in Input) Decision {
	d := Decision{Public: in.Access.IsPublic(in.Tool)}
	// An undefined tool's first reason says why it is missing (withheld, or
	// not defined at all); the policy reasons after it say what access it
	// would have, so they say so.
	policy := func(r []string) []string { return r }
	if !in.Defined {
		cond := "if it were defined: "
		if len(in.Withheld) > 0 {
			d.Reasons = append(d.Reasons, in.Withheld...)
			cond = "if it were available: "
		} else {
			d.Reasons = append(d.Reasons, "no tool named "+in.Tool+" is defined in this world")
		}
		policy = func(r []string) []string {
			out := make([]string, len(r))
			for i, x := range r {
				out[i] = cond + x
			}
			return out
		}
	}
	acc, r := in.Access.ExplainFrom(in.Tool, in.Sources)
	d.Reasons = append(d.Reasons, policy(r)...)
	on, r := in.Toolkits.ExplainFrom(in.Switches, in.Tool, in.Sources)
	d.Reasons = append(d.Reasons, policy(r)...)
	if IsAlwaysOn(in.Tool) {
		on = true // always-on tools ignore toolkits too
	}
	for _, u := range in.Unmet {
		d.Reasons = append(d.Reasons, "requirement not met: "+u)
	}
	if in.Defined {
		d.Reasons = append(d.Reasons, in.Withheld...)
	}
	d.Visible = in.Defined && acc && on && len(in.Unmet) == 0 && len(in.Withheld) == 0
	return d
}
