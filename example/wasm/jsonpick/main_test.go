package main

import (
	"encoding/json"
	"testing"
)

func TestPick(t *testing.T) {
	var doc any
	json.Unmarshal([]byte(`{"items":[{"id":1,"name":"a"},{"id":2}],"meta":{"b":{"x":1},"a":{"x":2}}}`), &doc)
	tests := []struct {
		path string
		want string
		ok   bool
	}{
		{"items.0.name", `"a"`, true},
		{"items.-1.id", `2`, true},
		{"items.*.id", `[1,2]`, true},
		{"items.*.name", `["a"]`, true},
		{"meta.*.x", `[2,1]`, true}, // members in key order
		{".items.1", `{"id":2}`, true},
		{"", `{"items":[{"id":1,"name":"a"},{"id":2}],"meta":{"a":{"x":2},"b":{"x":1}}}`, true},
		{"items.2", ``, false},
		{"items.x", ``, false},
		{"nope", ``, false},
		{"items.0.name.more", ``, false},
	}
	for _, tc := range tests {
		v, ok := pick(doc, split(tc.path))
		got, _ := json.Marshal(v)
		if ok != tc.ok || (ok && string(got) != tc.want) {
			t.Errorf("pick %q = %s %v, want %s %v", tc.path, got, ok, tc.want, tc.ok)
		}
	}
}
