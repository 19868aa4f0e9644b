package sandbox

import (
	"errors"
	"strings"
	"testing"
)

func TestLineProgress(t *testing.T) {
	long := strings.Repeat("x", LineHold+10)
	cases := []struct {
		name   string
		chunks [][2]string // stream, chunk
		want   []string    // messages, flush included
	}{
		{"lines", [][2]string{{"stdout", "a\nb\n"}}, []string{"a\nb\n"}},
		{"partial joined", [][2]string{{"stdout", "a\nb"}, {"stdout", "c\nd"}}, []string{"a\n", "bc\n", "d"}},
		{"streams apart", [][2]string{{"stdout", "o"}, {"stderr", "e\n"}, {"stdout", "k\n"}}, []string{"[stderr] e\n", "ok\n"}},
		{"long line forwarded", [][2]string{{"stdout", long}}, []string{long}},
		{"long tail after newline", [][2]string{{"stdout", "a\n" + long}}, []string{"a\n" + long}},
		{"short tail held", [][2]string{{"stdout", "a\nbc"}}, []string{"a\n", "bc"}},
		{"invalid utf8", [][2]string{{"stdout", "\xff\n"}}, []string{"\uFFFD\n"}},
		{"flush both", [][2]string{{"stdout", "o"}, {"stderr", "e"}}, []string{"o", "[stderr] e"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			p, flush := LineProgress(func(m string) { got = append(got, m) })
			for _, ch := range c.chunks {
				p(ch[0], []byte(ch[1]))
			}
			flush()
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("messages %q, want %q", got, c.want)
			}
		})
	}
	if p, flush := LineProgress(nil); p != nil {
		t.Error("nil fn gave a ProgressFunc")
	} else {
		flush()
	}
}

// StdoutTee sees every byte, far beyond MaxOutput; the kept output does not.
func TestStdoutTee(t *testing.T) {
	forEach(t, []Backend{BackendBwrap, BackendNone}, func(t *testing.T, b Backend) {
		var tee countWriter
		out := run(t, Confinement{Backend: b, Workspace: ws(t), MaxOutput: 100, StdoutTee: &tee}, nil, "head", "-c", "3000000", "/dev/zero")
		if tee.n != 3000000 || out.StdoutTotal != 3000000 || len(out.Stdout) > 100+40 {
			t.Errorf("tee %d, total %d, kept %d", tee.n, out.StdoutTotal, len(out.Stdout))
		}
	})
}

type countWriter struct{ n int }

func (c *countWriter) Write(p []byte) (int, error) { c.n += len(p); return len(p), nil }

func TestRequirement(t *testing.T) {
	if err := Requirement("chroot"); !errors.Is(err, ErrPolicy) {
		t.Errorf("unknown backend: %v", err)
	}
	if err := Requirement(string(BackendNone)); err != nil {
		t.Errorf("none with MaybeRunHelper called: %v", err)
	}
	if err, best := Requirement(""), Detect().Best; (err == nil) != (best != "") {
		t.Errorf("auto: %v with best %q", err, best)
	}
}
