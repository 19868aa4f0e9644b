package world

import "testing"

func TestClosest(t *testing.T) {
	known := []string{"tool access", "toolbox", "toolkits", "permissions", "limits"}
	for _, tc := range []struct{ in, want string }{
		{"Tool Acess", "tool access"},
		{"permisions", "permissions"},
		{"toolkit", "toolkits"},
		{"limtis", "limits"}, // a swap is one edit
		{"provider", ""},     // nothing near
		{"ab", ""},           // too short to guess
	} {
		if got := Closest(tc.in, known); got != tc.want {
			t.Errorf("Closest(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"abc", "", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"tool_invocatons", "tool_invocations", 1}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
