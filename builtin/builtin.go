// Package builtin holds Armory's built-in tools, one file each (or one file
// per small family). Every tool is stateless and safe for concurrent use:
// what it needs about the calling agent arrives in the armory.Invocation.
package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/armory-dev/armory"
)

// All returns a new instance of every built-in tool, with default options
// (see AllWith).
func All() []armory.Tool { return AllWith(WebOptions{}, ProcessOptions{}) }

// AllWith returns every built-in tool; web tools use web (SSRF allowances,
// limits, the search endpoint), process tools proc (timeouts, limits).
func AllWith(web WebOptions, proc ProcessOptions) []armory.Tool {
	return []armory.Tool{
		&Read{}, &Write{}, &List{}, &Edit{}, &Search{}, &Delete{},
		NewFetch(web), NewWebSearch(web), NewBrowser(web),
		NewCLI(proc), NewPython(proc),
	}
}

// decodeArgs decodes a tool's JSON arguments strictly into v: unknown
// fields, trailing data and wrong types are errors a model can read.
func decodeArgs(tool string, raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return armory.E(tool, armory.KindInvalid, fmt.Sprintf("argument %q must be %s, got %s", te.Field, jsonType(te.Type.Kind().String()), te.Value))
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return armory.E(tool, armory.KindInvalid, "unknown argument "+strings.TrimPrefix(err.Error(), "json: unknown field "))
		}
		return armory.E(tool, armory.KindInvalid, "arguments must be a JSON object: "+err.Error())
	}
	if _, err := dec.Token(); err != io.EOF {
		return armory.E(tool, armory.KindInvalid, "arguments must be one JSON object")
	}
	return nil
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int64", "int32", "uint", "uint64", "float64":
		return "a number"
	case "slice":
		return "a list"
	case "map", "struct":
		return "an object"
	}
	return goKind
}

// schema builds a JSON Schema object from property definitions.
func schema(required []string, props string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}
