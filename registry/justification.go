package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// JustificationProperty is the optional argument that every rendered input
// schema (MCP, OpenAI, Anthropic) carries besides the tool's own: a model
// that was refused by loop detection continues by calling again with it.
// The pipeline takes it out of the arguments before validation (the tool
// never sees it) and audits it. A tool whose own schema declares a property
// of that name keeps it: the schema is rendered unchanged, the argument
// goes to the tool, and a justification then comes only through the
// surfaces' own fields (REST "justification", MCP _meta, --justification).
const JustificationProperty = "justification"

// JustificationDescription is the schema description of the property.
const JustificationDescription = "Optional, for Armory (not passed to the tool): when Armory refused this call as a loop, why calling it again is right. It is recorded in the audit trail. Leave it out otherwise."

// DeclaresJustification reports whether the object schema declares a
// property named JustificationProperty itself.
func DeclaresJustification(schema json.RawMessage) bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return false
	}
	_, ok := s.Properties[JustificationProperty]
	return ok
}

// WithJustification returns schema with the optional JustificationProperty
// added to its properties (keys keep their order; the property comes last).
// A schema that is not a JSON object, is not of type "object", or declares
// the property itself is returned unchanged.
func WithJustification(schema json.RawMessage) json.RawMessage {
	top, err := decodeObject(schema)
	if err != nil {
		return schema
	}
	var typ string
	if json.Unmarshal(top.get("type"), &typ) != nil || typ != "object" {
		return schema
	}
	props := &object{}
	if raw := top.get("properties"); raw != nil {
		if props, err = decodeObject(raw); err != nil {
			return schema
		}
	}
	if props.get(JustificationProperty) != nil {
		return schema
	}
	prop, _ := json.Marshal(map[string]any{"type": "string", "maxLength": MaxJustificationBytes, "description": JustificationDescription})
	props.set(JustificationProperty, prop)
	top.set("properties", props.encode())
	return top.encode()
}

// object is a JSON object that keeps its keys' order.
type object struct {
	keys []string
	vals []json.RawMessage
}

func decodeObject(raw json.RawMessage) (*object, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object")
	}
	o := &object{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(k, v)
	}
	return o, nil
}

func (o *object) get(k string) json.RawMessage {
	for i, key := range o.keys {
		if key == k {
			return o.vals[i]
		}
	}
	return nil
}

func (o *object) set(k string, v json.RawMessage) {
	for i, key := range o.keys {
		if key == k {
			o.vals[i] = v
			return
		}
	}
	o.keys, o.vals = append(o.keys, k), append(o.vals, v)
}

func (o *object) encode() json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.vals[i])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// MaxJustificationBytes bounds a justification, however it came.
const MaxJustificationBytes = 2000
