// Package toolargs holds what every tool written in Go here does with its
// JSON arguments: strict decoding into a struct and the JSON Schema that
// describes them (the built-in tools and the world services use it).
package toolargs

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

// Timeouts are a tool's time limits: Default when a call gives no
// timeout_secs, at most Max. Tools keep them in their options and fill them
// with WithDefaults.
type Timeouts struct {
	Default, Max time.Duration
}

// WithDefaults returns t with zero (or negative) fields set to def and max,
// and Max raised to Default when below it.
func (t Timeouts) WithDefaults(def, max time.Duration) Timeouts {
	if t.Default <= 0 {
		t.Default = def
	}
	if t.Max <= 0 {
		t.Max = max
	}
	if t.Max < t.Default {
		t.Max = t.Default
	}
	return t
}

// Prop is the "timeout_secs" property of a tool's input schema; what
// begins its description ("Time limit in seconds"), the defaults end it.
func (t Timeouts) Prop(what string) string {
	return fmt.Sprintf(`"timeout_secs":{"type":"number","minimum":0,"maximum":%d,"description":"%s (default %d, at most %d)"}`,
		int(t.Max/time.Second), what, int(t.Default/time.Second), int(t.Max/time.Second))
}

// Call turns a call's timeout_secs into its time limit: Default when the
// call gives 0, else the time asked for, at most Max. A negative value is
// an error of kind KindInvalid.
func (t Timeouts) Call(tool string, secs float64) (time.Duration, error) {
	if secs < 0 {
		return 0, armory.E(tool, armory.KindInvalid, "timeout_secs must be 0 or more")
	}
	if secs == 0 {
		return t.Default, nil
	}
	d := time.Duration(secs * float64(time.Second))
	if d > t.Max || d <= 0 {
		d = t.Max
	}
	return d, nil
}
