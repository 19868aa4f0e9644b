package services

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// tool is one service tool: a spec, a manifest and the function that runs
// it. The caller is the Invocation's agent, set by the pipeline; no tool
// takes the caller from its arguments, so an agent cannot act as another.
type tool struct {
	spec armory.Spec
	man  armory.Manifest
	run  func(ctx context.Context, c call) armory.Result
}

var _ armory.Tool = (*tool)(nil)

func (t *tool) Spec() armory.Spec         { return t.spec }
func (t *tool) Manifest() armory.Manifest { return t.man }

// Execute runs the tool for the Invocation's agent. Without an agent (a
// library caller that set none) it fails with KindInvalid: every service
// tool acts as someone.
func (t *tool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	if inv.Agent == nil || inv.Agent.ID == "" {
		return armory.Failf(armory.KindInvalid, "%s acts on behalf of the calling agent, and this call names none", t.spec.Name)
	}
	return t.run(ctx, call{op: t.spec.Name, agent: inv.Agent.ID, inv: inv})
}

// call is one call of a service tool.
type call struct {
	op    string
	agent string // the caller, from the pipeline: inv.Agent.ID
	inv   armory.Invocation
}

// decode decodes the call's arguments strictly into v.
func (c call) decode(v any) error { return args.Decode(c.op, c.inv.Args, v) }

// fail is a failed result of kind k, written for the model.
func (c call) fail(k armory.Kind, format string, a ...any) armory.Result {
	return armory.Failf(k, format, a...)
}

// jsonResult is a successful result whose text is v as indented JSON and
// whose Value is v.
func jsonResult(v any) armory.Result {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return armory.Failf(armory.KindInternal, "rendering the result: %v", err)
	}
	return armory.Result{Success: true, Text: string(b), Value: v}
}

// schema is a JSON Schema object with the given required properties.
func schema(required []string, props ...string) json.RawMessage {
	return args.Schema(required, strings.Join(props, ","))
}

// prop is one schema property: "name":{...}.
func prop(name, def string) string { return `"` + name + `":` + def }

// str is a string property's schema with a description.
func str(desc string) string { return `{"type":"string","description":` + quote(desc) + `}` }

// integer is an integer property's schema with a description.
func integer(desc string) string { return `{"type":"integer","description":` + quote(desc) + `}` }

// boolean is a boolean property's schema with a description.
func boolean(desc string) string { return `{"type":"boolean","description":` + quote(desc) + `}` }

// stringList is a string-list property's schema with a description.
func stringList(desc string) string {
	return `{"type":"array","items":{"type":"string"},"description":` + quote(desc) + `}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
