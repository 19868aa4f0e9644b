package compact

import "testing"

func TestValidScalar(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want bool
	}{
		{"0", true}, {"-0", true}, {"12", true}, {"1.5", true}, {"-1.5e10", true}, {"1E+3", true}, {"2e-7", true},
		{"true", true}, {"false", true}, {"null", true},
		{"", false}, {"-", false}, {"01", false}, {"1.", false}, {".5", false}, {"1e", false}, {"1e+", false},
		{"+1", false}, {"0x10", false}, {"NaN", false}, {"True", false}, {"nul", false}, {"1-2", false},
	} {
		if got := validScalar([]byte(tc.lit)); got != tc.want {
			t.Errorf("validScalar(%q) = %v, want %v", tc.lit, got, tc.want)
		}
	}
}

// TestWalkerMalformed: the walker rejects malformed objects instead of
// reading fields out of them.
func TestWalkerMalformed(t *testing.T) {
	skip := func(b []byte) func([]byte, int) (int, bool) {
		return func(_ []byte, vs int) (int, bool) { return skipValue(b, vs) }
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{}`, true},
		{`{ "a" : [ 1 , { "b" : "c\"d" } ] , "e" : null }`, true},
		{`{"a":"\\\\"}`, true},
		{`{"a":"\\\"}`, false},
		{`{`, false},
		{`{"a"}`, false},
		{`{"a":}`, false},
		{`{"a":1,}`, false},
		{`{"a":1 "b":2}`, false},
		{`{"a":[1,2}`, false},
		{`{"a":tru}`, false},
		{`{a:1}`, false},
		{`{"a":1}}`, false}, // trailing bytes: complete() rejects
		{`[]`, false},
	} {
		b := []byte(tc.in)
		end, ok := walkObject(b, 0, skip(b))
		if got := complete(b, end, ok); got != tc.want {
			t.Errorf("walk %s = %v, want %v", tc.in, got, tc.want)
		}
	}
}
