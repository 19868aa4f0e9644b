package registry

import (
	"encoding/json"
	"testing"
)

// WithJustification adds the optional property last, keeps every other key
// and its order, and leaves alone schemas that are not objects or that
// declare the property themselves.
func TestWithJustification(t *testing.T) {
	in := `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}},"required":["b"],"additionalProperties":false}`
	out := string(WithJustification(json.RawMessage(in)))
	want := `{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"},"justification":{"description":` +
		mustJSON(JustificationDescription) + `,"maxLength":2000,"type":"string"}},"required":["b"],"additionalProperties":false}`
	if out != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	if !DeclaresJustification(json.RawMessage(out)) || DeclaresJustification(json.RawMessage(in)) {
		t.Fatal("DeclaresJustification")
	}
	if out := string(WithJustification(json.RawMessage(`{"type":"object"}`))); !DeclaresJustification(json.RawMessage(out)) {
		t.Fatalf("no properties: %s", out)
	}
	for _, same := range []string{
		`{"type":"object","properties":{"justification":{"type":"integer"}}}`,
		`{"type":"array"}`, `true`, `{"type":"object","properties":7}`, `not json`,
	} {
		if out := string(WithJustification(json.RawMessage(same))); out != same {
			t.Errorf("%s became %s", same, out)
		}
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
