package roster

import (
	"fmt"
	"slices"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/access"
)

// Tools registered at run time (a skill's tools, acquired by an agent) are
// not in the catalog: they join one agent's registry through Register,
// which applies the same policy as to a catalog tool — access (groups,
// overrides, the legacy list), toolkits and requirements — so acquiring a
// skill never gives an agent a tool the policy keeps from it. A run-time
// tool never takes the name of a catalog tool (registry.Register refuses
// it), so none can pass itself off as a built-in, and its source is what
// its Origin says, never "built-in": the pipeline admits it before it
// runs, as any tool whose code Armory does not ship.

// Origin is what a tool registered at run time says of where it comes
// from ("skill text-tools"): the source `tool list --long`, REST and
// explain show for it. A run-time tool without one shows SourceRunTime.
type Origin interface {
	Origin() string
}

// RunTimeSource explains tools that are not in the catalog but that an
// agent may get at run time (the skills module's): what defines one and
// how the agent gets it. Set with SetRunTimeSource; nil means none.
type RunTimeSource interface {
	// About returns, for agent ag, the reasons that say what defines
	// the run-time tool name and whether ag holds it (ok false when
	// nothing defines it for ag), and the tool itself when it is
	// available in this process (nil for one defined but unavailable:
	// the reasons say why).
	About(ag *Agent, name string) (t armory.Tool, reasons []string, ok bool)
}

type runTimeHolder struct{ src RunTimeSource }

// SetRunTimeSource sets the source that explains run-time tools. Safe for
// concurrent use with every reader.
func (h *Roster) SetRunTimeSource(src RunTimeSource) {
	h.runTime.Store(&runTimeHolder{src: src})
}

func (h *Roster) runTimeSource() RunTimeSource {
	if p := h.runTime.Load(); p != nil {
		return p.src
	}
	return nil
}

// DecideRunTime says whether agent ag may have the run-time tool t, with
// every reason: the policy a catalog tool of that name would meet, and
// t's requirements.
func (h *Roster) DecideRunTime(ag *Agent, t armory.Tool) access.Decision {
	return h.decideRunTime(ag, t, ag.src)
}

// decideRunTime is DecideRunTime with the reasons naming where each rule
// was written from src (nil: nowhere).
func (h *Roster) decideRunTime(ag *Agent, t armory.Tool, src *access.Sources) access.Decision {
	name := t.Spec().Name
	var unmet []string
	for _, r := range t.Manifest().Requires {
		if why := checkRequirement(r, h.opts, h.World.Sandbox); why != "" {
			unmet = append(unmet, why)
		}
	}
	in := access.Input{Tool: name, Defined: true, Access: ag.Access, Toolkits: h.Toolkits, Switches: ag.Switches, Unmet: unmet, Sources: src}
	if h.Taken(name) {
		in.Withheld = []string{fmt.Sprintf("the world defines a tool named %s already; a tool added at run time cannot take its name", name)}
	}
	return access.Decide(in)
}

// Taken reports whether name is a tool name of the world that no tool
// added at run time may take: a catalog tool's, or a pipeline tool's
// (reserved even while no agent gets it).
func (h *Roster) Taken(name string) bool { return h.Catalog.Has(name) || pipelineName(name) }

// Register adds the run-time tool t to agent ag's registry when the
// policy lets ag have it (DecideRunTime), and returns the decision.
// Errors (*armory.Error): KindPermission when the policy withholds it
// (the message gives the reasons without the files and lines of the
// world's rules, as it may reach the agent's model, to which config.md is
// never sent; the decision has them); KindConflict for a name the world
// defines (Taken) or the registry holds already; KindInvalid for a bad name.
// Safe for concurrent use.
func (h *Roster) Register(ag *Agent, t armory.Tool) (access.Decision, error) {
	const op = "roster.Register"
	name := t.Spec().Name
	if h.Taken(name) {
		return access.Decision{}, armory.E(op, armory.KindConflict, fmt.Sprintf("the world defines a tool named %s already; a tool added at run time cannot take its name", name))
	}
	d := h.DecideRunTime(ag, t)
	if !d.Visible {
		plain := h.decideRunTime(ag, t, nil)
		return d, armory.E(op, armory.KindPermission, fmt.Sprintf("agent %s may not have %s: %s", ag.ID, name, joinReasons(plain.Reasons)))
	}
	if err := ag.Registry.Register(t); err != nil {
		return d, err
	}
	return d, nil
}

// Unregister removes the run-time tool name from agent ag's registry. A
// catalog tool is not removed this way (KindConflict); a name the
// registry does not hold is KindNotFound.
func (h *Roster) Unregister(ag *Agent, name string) error {
	if h.Catalog.Has(name) {
		return armory.E("roster.Unregister", armory.KindConflict, name+" is a tool of the world's catalog, not one added at run time")
	}
	return ag.Registry.Unregister(name)
}

// explainRunTime explains a tool the catalog does not define: a run-time
// tool ag holds, or one the run-time source defines for it.
func (h *Roster) explainRunTime(ag *Agent, name string) (access.Decision, bool) {
	var t armory.Tool
	var about []string
	known := false
	if src := h.runTimeSource(); src != nil {
		t, about, known = src.About(ag, name)
	}
	held, err := ag.Registry.Lookup(name)
	if err == nil && ag.Registry.RunTime(name) {
		t = held
		known = true
	}
	if !known {
		return access.Decision{}, false
	}
	if t == nil {
		// Defined, but not available in this process (a WASM tool without
		// a runtime): why, then what the policy would say.
		return access.Decide(access.Input{Tool: name, Access: ag.Access, Toolkits: h.Toolkits, Switches: ag.Switches, Withheld: about, Sources: ag.src}), true
	}
	d := h.DecideRunTime(ag, t)
	holds := ag.Registry.RunTime(name)
	switch {
	case holds:
		about = append(slices.Clone(about), fmt.Sprintf("registered at run time (source: %s)", h.Source(ag, name)))
	case d.Visible:
		d.Reasons = append(slices.Clone(d.Reasons), "the policy would let the agent have it once registered")
	}
	d.Visible = holds
	d.Reasons = append(about, d.Reasons...)
	return d, true
}

func joinReasons(rs []string) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += "; "
		}
		out += r
	}
	return out
}
