// Package args holds what every built-in tool does with its JSON
// arguments: strict decoding into a struct and the JSON Schema that
// describes them.
package args

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/armory-dev/armory"
)

// Decode decodes a tool's JSON arguments strictly into v: unknown
// fields, trailing data and wrong types are errors a model can read.
func Decode(tool string, raw json.RawMessage, v any) error {
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

// Schema builds a JSON Schema object from property definitions.
func Schema(required []string, props string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `,"additionalProperties":false}`)
}

// Timeout turns a call's timeout_secs into its time limit: def when the
// call gives none (0 or less), else the time asked for, at most max.
func Timeout(secs float64, def, max time.Duration) time.Duration {
	if secs <= 0 {
		return def
	}
	d := time.Duration(secs * float64(time.Second))
	if d > max || d <= 0 {
		d = max
	}
	return d
}
