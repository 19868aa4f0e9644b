package roster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
)

// PipelineTool is a tool that the guarded pipeline supplies rather than a
// built-in, a toolbox or an upstream server: approval.list and
// approval.decide. Its spec, manifest and which agents get it are known
// when the world loads, so it is in the catalog and in every agent's
// registry from the start and every surface (tool list, access explain,
// REST, MCP tools/list) shows the same tools. Its Execute only says that it
// runs through the pipeline; package pipeline swaps in the implementation at
// its lookup stage.
type PipelineTool struct {
	spec  armory.Spec
	man   armory.Manifest
	grant func(*world.AgentConfig) bool
	// why says what gives an agent this tool, for explanations.
	why string
}

// Spec implements armory.Tool.
func (t *PipelineTool) Spec() armory.Spec { return t.spec }

// Manifest implements armory.Tool.
func (t *PipelineTool) Manifest() armory.Manifest { return t.man }

// Execute implements armory.Tool: a pipeline tool has no implementation of
// its own.
func (t *PipelineTool) Execute(context.Context, armory.Invocation) armory.Result {
	return armory.Failf(armory.KindUnavailable, "%s runs only through the guarded pipeline", t.spec.Name)
}

// Grants reports whether an agent with config cfg gets the tool.
func (t *PipelineTool) Grants(cfg *world.AgentConfig) bool { return cfg != nil && t.grant(cfg) }

var _ armory.Tool = (*PipelineTool)(nil)

func hasApprovalScope(c *world.AgentConfig) bool { return len(c.Policy.ApprovalScope) > 0 }

const approvalWhy = "the tool_approval capability (config.md \"## Capabilities\")"

// The pipeline tools of approval agents: agents whose config.md grants
// tool_approval.
var (
	ApprovalList = &PipelineTool{
		spec: armory.Spec{Name: "approval.list", Description: "List the tool calls waiting for your approval (within your tool_approval scope).",
			InputSchema: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`)},
		man:   armory.Manifest{Danger: armory.DangerSafe, Capabilities: []armory.Capability{armory.CapReadState}, Permission: armory.PermAuto, Category: armory.CatAgent},
		grant: hasApprovalScope, why: approvalWhy,
	}
	ApprovalDecide = &PipelineTool{
		spec: armory.Spec{Name: "approval.decide", Description: "Approve, deny or escalate (to a human) a tool call waiting for your approval.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string","description":"approval id from approval.list"},"decision":{"type":"string","enum":["approve","deny","escalate"]},"reason":{"type":"string","description":"why; recorded in the audit trail"}},"required":["id","decision","reason"],"additionalProperties":false}`)},
		man:   armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapWriteState}, Permission: armory.PermAuto, Category: armory.CatAgent},
		grant: hasApprovalScope, why: approvalWhy,
	}
)

// PipelineTools are every tool the pipeline supplies.
func PipelineTools() []*PipelineTool { return []*PipelineTool{ApprovalList, ApprovalDecide} }

// pipelineName reports whether name is a pipeline tool's: reserved, in
// the catalog or not (no agent of the world may get it yet).
func pipelineName(name string) bool {
	for _, pt := range PipelineTools() {
		if pt.spec.Name == name {
			return true
		}
	}
	return false
}

// pipelineDecision explains a pipeline tool: the agent's config decides,
// not groups or toolkits.
func pipelineDecision(t *PipelineTool, ag *Agent) (bool, []string) {
	if t.Grants(ag.Def.Config) {
		return true, []string{fmt.Sprintf("added by the pipeline: the agent has %s", t.why)}
	}
	return false, []string{fmt.Sprintf("added by the pipeline only for agents with %s; this agent has none", t.why)}
}

// Tool sources, as `tool list --long` shows them.
const (
	SourceBuiltin  = "built-in"
	SourceToolbox  = "toolbox"
	SourceUpstream = "upstream" // the upstream module's tools
	SourcePipeline = "pipeline"
	SourceRunTime  = "run time"
)

// Source says where tool name of agent ag comes from: built-in, toolbox
// (with its name), the engine module that contributed it (upstream: an
// MCP server), pipeline (added by the guarded pipeline) or run time (registered after the world loaded, for example a
// skill's tool).
func (h *Roster) Source(ag *Agent, name string) string {
	// The tool the agent's registry holds decides, not the name: a name
	// registered at run time is never a catalog tool's.
	if ag != nil && ag.Registry.RunTime(name) {
		if t, err := ag.Registry.Lookup(name); err == nil {
			if o, ok := t.(Origin); ok && !reservedSource(o.Origin()) {
				return o.Origin()
			}
		}
		return SourceRunTime
	}
	if !h.Catalog.Has(name) {
		return ""
	}
	if tb, ok := h.box[name]; ok {
		return SourceToolbox + " " + tb
	}
	if _, ok := h.pipe[name]; ok {
		return SourcePipeline
	}
	if src, ok := h.module[name]; ok {
		return src
	}
	return SourceBuiltin
}

// reservedSource reports whether src cannot be a run-time tool's origin:
// empty, or a source Armory gives its own tools (a tool cannot claim to be
// a built-in, so be run before admission, by naming itself one).
func reservedSource(src string) bool {
	switch src {
	case "", SourceBuiltin, SourceToolbox, SourcePipeline, SourceRunTime, SourceUpstream, "builtin":
		return true
	}
	return strings.HasPrefix(src, SourceToolbox+" ")
}

// checkModuleSource refuses a module source that is empty, not a short
// lower-case name, or one of the sources Armory gives its own tools.
func checkModuleSource(src string) error {
	const op = "roster.New"
	switch src {
	case SourceBuiltin, SourceToolbox, SourcePipeline, SourceRunTime, "builtin":
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("module source %q is reserved for Armory's own tools", src))
	}
	ok := src != "" && len(src) <= 32 && src[0] >= 'a' && src[0] <= 'z'
	for i := 0; ok && i < len(src); i++ {
		c := src[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-'
	}
	if !ok {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("module source %q: want a lower-case name of at most 32 letters, digits and '-'", src))
	}
	return nil
}
