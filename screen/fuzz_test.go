package screen

import (
	"strings"
	"testing"
)

// failedClosed reports whether a Block comes only from a parse error,
// an exceeded limit or an internal error.
func failedClosed(r Report) bool {
	for _, reason := range r.Reasons {
		if strings.HasPrefix(reason, "parse error") || strings.Contains(reason, "screening limit") ||
			strings.HasPrefix(reason, "internal error") {
			return true
		}
	}
	return false
}

// FuzzCheck checks that Check never panics, that a Block verdict always
// comes with a reason, and that wrapping a blocked command in sudo,
// ( … ), true && … or $( … ) never lowers its verdict.
func FuzzCheck(f *testing.F) {
	for _, name := range []string{"catastrophic.txt", "everyday.txt", "allow.txt", "confirm.txt"} {
		for _, c := range loadCommands(f, name) {
			f.Add(c)
		}
	}
	f.Fuzz(func(t *testing.T, c string) {
		r := Check(c)
		if r.Verdict < Allow || r.Verdict > Block {
			t.Fatalf("Check(%q): invalid verdict %d", c, r.Verdict)
		}
		if r.Verdict != Allow && len(r.Reasons) == 0 {
			t.Fatalf("Check(%q) = %v without a reason", c, r.Verdict)
		}
		if r.Commands == nil || r.Reasons == nil {
			t.Fatalf("Check(%q): nil slices in report", c)
		}
		_ = r.Message(c)
		if r.Verdict != Block || failedClosed(r) {
			// A parse error or exceeded limit is not a command: wrapping
			// "!" in "sudo !" makes a valid command of it.
			return
		}
		for _, wrap := range wrappings[:4] {
			w := wrap(c)
			if got := Check(w).Verdict; got < Block {
				t.Fatalf("Check(%q) = %v, but Check(%q) = block", w, got, c)
			}
		}
	})
}
