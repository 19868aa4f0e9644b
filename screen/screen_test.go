package screen

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// loadCommands reads a data table: one command per line, '#' comments and
// blank lines ignored, "⏎" standing for a newline.
func loadCommands(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if s := strings.TrimSpace(line); s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		out = append(out, strings.ReplaceAll(line, "⏎", "\n"))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCatastrophicBlocked(t *testing.T) {
	cmds := loadCommands(t, "catastrophic.txt")
	if len(cmds) < 100 {
		t.Fatalf("catastrophic.txt has %d commands, want at least 100", len(cmds))
	}
	for _, c := range cmds {
		r, ok := wantVerdict(t, c, Block)
		if !ok {
			continue
		}
		if want := "Blocked catastrophic command: " + c; r.Message(c) != want {
			t.Errorf("Message = %q, want %q", r.Message(c), want)
		}
	}
}

func TestEverydayNotBlocked(t *testing.T) {
	cmds := loadCommands(t, "everyday.txt")
	if len(cmds) < 150 {
		t.Fatalf("everyday.txt has %d commands, want at least 150", len(cmds))
	}
	for _, c := range cmds {
		if r := Check(c); r.Verdict == Block {
			t.Errorf("Check(%q) = block %q, want allow or confirm", c, r.Reasons)
		}
	}
}

func TestKnownSafeAllowed(t *testing.T) {
	for _, c := range loadCommands(t, "allow.txt") {
		if r := Check(c); r.Verdict != Allow {
			t.Errorf("Check(%q) = %v %q, want allow", c, r.Verdict, r.Reasons)
		} else if len(r.Reasons) != 0 {
			t.Errorf("Check(%q): allow with reasons %q", c, r.Reasons)
		}
	}
}

func TestDynamicAndUnknownConfirm(t *testing.T) {
	for _, c := range loadCommands(t, "confirm.txt") {
		wantVerdict(t, c, Confirm)
	}
}

// wantVerdict checks that Check(c) gives want with at least one reason; ok
// is false when the verdict differs.
func wantVerdict(t *testing.T, c string, want Verdict) (r Report, ok bool) {
	t.Helper()
	r = Check(c)
	if r.Verdict != want {
		t.Errorf("Check(%q) = %v %q, want %v", c, r.Verdict, r.Reasons, want)
		return r, false
	}
	if len(r.Reasons) == 0 {
		t.Errorf("Check(%q): %v without a reason", c, want)
	}
	return r, true
}

func TestCommandsResolved(t *testing.T) {
	tests := []struct {
		cmd  string
		want [][]string
	}{
		{`sudo -u root rm -rf /`, [][]string{{"rm", "-rf", "/"}}},
		{`env -i A=B timeout -s KILL 5 /bin/rm -r -f x`, [][]string{{"/bin/rm", "-r", "-f", "x"}}},
		{`"r""m" 'a b' \c`, [][]string{{"rm", "a b", "c"}}},
		{`$'\x72m' x`, [][]string{{"rm", "x"}}},
		{`ls | grep "a"`, [][]string{{"ls"}, {"grep", "a"}}},
		{`echo $(pwd) "$HOME"`, [][]string{{"pwd"}, {"echo", "$(pwd)", `"$HOME"`}}},
		{`echo {a,b}c`, [][]string{{"echo", "ac", "bc"}}},
		{`bash -c 'ls -l'`, [][]string{{"bash", "-c", "ls -l"}, {"ls", "-l"}}},
		{`echo a b | xargs rm -f`, [][]string{{"echo", "a", "b"}, {"rm", "-f", "a", "b"}}},
		{`find . -exec grep -l x {} +`, [][]string{{"find", ".", "-exec", "grep", "-l", "x", "{}", "+"}, {"grep", "-l", "x", "{}"}}},
		{`X=1`, [][]string{}},
	}
	for _, tt := range tests {
		got := Check(tt.cmd).Commands
		// find records its inner command during its own rule, after itself.
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Check(%q).Commands = %q, want %q", tt.cmd, got, tt.want)
		}
	}
}

func TestReasons(t *testing.T) {
	tests := []struct{ cmd, reason string }{
		{`rm -rf /`, "rm: recursive forced removal of /"},
		{`rm -r ~`, "rm: recursive removal of ~"},
		{`git push -f origin main`, "git push: force push to main"},
		{`psql -c 'drop database x'`, "psql: DROP DATABASE"},
		{`:(){ :|:& };:`, "fork bomb: function : calls itself in a pipeline or in the background"},
		{`dd if=/dev/zero of=/dev/sda`, "dd: writes onto block device /dev/sda"},
		{`ls > out`, "output redirection to out"},
		{`make`, "make: not a known read-only command"},
		{`if (`, ""}, // parse error: checked below
	}
	for _, tt := range tests {
		r := Check(tt.cmd)
		if tt.reason == "" {
			if r.Verdict != Block || len(r.Reasons) != 1 || !strings.HasPrefix(r.Reasons[0], "parse error") {
				t.Errorf("Check(%q) = %v %q, want a parse error block", tt.cmd, r.Verdict, r.Reasons)
			}
			continue
		}
		found := false
		for _, got := range r.Reasons {
			found = found || got == tt.reason
		}
		if !found {
			t.Errorf("Check(%q).Reasons = %q, want %q among them", tt.cmd, r.Reasons, tt.reason)
		}
	}
}

func TestParseErrorsBlock(t *testing.T) {
	for _, c := range []string{`if (`, `echo "unterminated`, `ls |`, `$(`, "cat <<EOF\n", `bash -c 'if ('`, `foo)`} {
		if r := Check(c); r.Verdict != Block {
			t.Errorf("Check(%q) = %v %q, want block", c, r.Verdict, r.Reasons)
		}
	}
}

func TestLimits(t *testing.T) {
	t.Run("size", func(t *testing.T) {
		c := "echo " + strings.Repeat("a", MaxCommandBytes)
		if r := Check(c); r.Verdict != Block {
			t.Errorf("oversized command: %v %q, want block", r.Verdict, r.Reasons)
		}
		ok := "echo " + strings.Repeat("a", MaxCommandBytes-10)
		if r := Check(ok); r.Verdict != Allow {
			t.Errorf("command just under the limit: %v %q, want allow", r.Verdict, r.Reasons)
		}
	})
	t.Run("brackets", func(t *testing.T) {
		n := MaxNesting + 1
		for _, c := range []string{
			strings.Repeat("(", n) + "ls" + strings.Repeat(")", n),
			strings.Repeat("$(", n) + "ls" + strings.Repeat(")", n),
			"echo " + strings.Repeat("{", n),
		} {
			if r := Check(c); r.Verdict != Block {
				t.Errorf("deep nesting %.20q…: %v %q, want block", c, r.Verdict, r.Reasons)
			}
		}
		n = MaxNesting / 2
		if r := Check(strings.Repeat("( ", n) + "ls" + strings.Repeat(" )", n)); r.Verdict != Allow {
			t.Errorf("nesting under the limit: %v %q, want allow", r.Verdict, r.Reasons)
		}
	})
	t.Run("statements", func(t *testing.T) {
		// if-nesting uses no brackets; the walker's own depth bound applies.
		c := strings.Repeat("if true; then ", MaxNesting+1) + "ls" + strings.Repeat("; fi", MaxNesting+1)
		if r := Check(c); r.Verdict != Block {
			t.Errorf("deep if nesting: %v %q, want block", r.Verdict, r.Reasons)
		}
	})
	t.Run("scripts", func(t *testing.T) {
		c := "ls"
		for i := 0; i <= MaxScriptDepth; i++ {
			c = "eval " + shellQuote(c)
		}
		if r := Check(c); r.Verdict != Block {
			t.Errorf("deep eval nesting: %v %q, want block", r.Verdict, r.Reasons)
		}
		c = "ls"
		for i := 0; i < MaxScriptDepth-1; i++ {
			c = "sh -c " + shellQuote(c)
		}
		if r := Check(c); r.Verdict != Allow {
			t.Errorf("sh -c nesting under the limit: %v %q, want allow", r.Verdict, r.Reasons)
		}
	})
	t.Run("wrappers", func(t *testing.T) {
		// More than maxExpansions rule-bearing words after a wrapper.
		c := "sudo " + strings.Repeat("rm ", maxExpansions+1)
		if r := Check(c); r.Verdict != Block {
			t.Errorf("shadow limit: %v %q, want block", r.Verdict, r.Reasons)
		}
	})
	t.Run("braces", func(t *testing.T) {
		// Expansions beyond maxExpansions are not expanded: never allow.
		if r := Check("rm -rf {1..100000}"); r.Verdict == Allow {
			t.Errorf("huge brace expansion allowed")
		}
		if r := Check("rm -rf " + strings.Repeat("{a,b}", 30)); r.Verdict == Allow {
			t.Errorf("exponential brace expansion allowed")
		}
		if r := Check("echo {1..100000}"); r.Verdict != Allow {
			t.Errorf("echo with huge brace expansion: %v, want allow", r.Verdict)
		}
	})
	t.Run("work", func(t *testing.T) {
		// Many nested analyses: the work budget yields block, not allow.
		// xargs -I runs its command once per literal item: 64 items × a
		// script of 2,000 commands exceeds the work budget.
		c := `printf '%s\n' ` + strings.Repeat("a ", 64) + "| xargs -I{} sh -c '" + strings.Repeat("ls;", 2000) + "'"
		if r := Check(c); r.Verdict != Block {
			t.Errorf("work budget: %v %q, want block", r.Verdict, r.Reasons)
		}
		// A long list of plain commands stays within the budget.
		c = strings.Repeat("ls;", (MaxCommandBytes-10)/3)
		if r := Check(c); r.Verdict != Allow {
			t.Errorf("long command list: %v %q, want allow", r.Verdict, r.Reasons)
		}
	})
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func TestVerdictJSON(t *testing.T) {
	r := Check("rm -rf /")
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"verdict":"block","commands":[["rm","-rf","/"]],"reasons":["rm: recursive forced removal of /"]}`
	if string(b) != want {
		t.Errorf("json = %s, want %s", b, want)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("round trip = %+v, %v", back, err)
	}
	b, _ = json.Marshal(Check("ls"))
	if string(b) != `{"verdict":"allow","commands":[["ls"]],"reasons":[]}` {
		t.Errorf("allow json = %s", b)
	}
	for v, s := range map[Verdict]string{Allow: "allow", Confirm: "confirm", Block: "block"} {
		if v.String() != s {
			t.Errorf("%d.String() = %q", v, v.String())
		}
	}
	if _, err := json.Marshal(Verdict(7)); err == nil {
		t.Error("invalid verdict marshalled")
	}
	var v Verdict
	if err := json.Unmarshal([]byte(`"maybe"`), &v); err == nil {
		t.Error("unknown verdict unmarshalled")
	}
}

func TestMessage(t *testing.T) {
	if got := Check("mkfs /dev/sda").Message("mkfs /dev/sda"); got != "Blocked catastrophic command: mkfs /dev/sda" {
		t.Errorf("block message = %q", got)
	}
	// A command blocked only because it could not be screened is not
	// called catastrophic: the message says why, without echoing it.
	for _, c := range []string{`echo "unclosed`, "echo " + strings.Repeat("x", MaxCommandBytes)} {
		got := Check(c).Message(c)
		if !strings.HasPrefix(got, "Blocked: the command could not be screened (") || strings.Contains(got, "catastrophic") || strings.Contains(got, c) {
			t.Errorf("unscreened block message = %.200q", got)
		}
	}
	// Once it parses, a catastrophic command is named as such.
	if c := "rm -rf / ; echo 'closed'"; !strings.HasPrefix(Check(c).Message(c), "Blocked catastrophic command") {
		t.Errorf("catastrophic: %q %q", Check(c).Reasons, Check(c).Message(c))
	}
	if got := Check("make").Message("make"); !strings.Contains(got, "confirmation") || !strings.Contains(got, "make") {
		t.Errorf("confirm message = %q", got)
	}
	if got := Check("ls").Message("ls"); strings.Contains(got, "Blocked") {
		t.Errorf("allow message = %q", got)
	}
}

// TestConcurrent runs Check from many goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	cmds := append(loadCommands(t, "catastrophic.txt"), loadCommands(t, "everyday.txt")...)
	want := make([]Verdict, len(cmds))
	for i, c := range cmds {
		want[i] = Check(c).Verdict
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := range cmds {
				k := (i + g*31) % len(cmds)
				if got := Check(cmds[k]).Verdict; got != want[k] {
					t.Errorf("concurrent Check(%q) = %v, want %v", cmds[k], got, want[k])
				}
			}
		}(g)
	}
	wg.Wait()
}

// TestWrappingNeverLowers checks the fuzz property on the data tables.
func TestWrappingNeverLowers(t *testing.T) {
	for _, c := range loadCommands(t, "catastrophic.txt") {
		checkWrapping(t, c)
	}
}

var wrappings = []func(string) string{
	func(c string) string { return "sudo " + c },
	func(c string) string { return "( " + c + "\n)" },
	func(c string) string { return "true && " + c },
	func(c string) string { return "echo $( " + c + "\n)" },
	func(c string) string { return "{ " + c + "\n}" },
	func(c string) string { return "bash -c " + shellQuote(c) },
}

func checkWrapping(t *testing.T, c string) {
	t.Helper()
	base := Check(c).Verdict
	for _, wrap := range wrappings {
		w := wrap(c)
		if got := Check(w).Verdict; got < base {
			t.Errorf("Check(%q) = %v, lower than Check(%q) = %v", w, got, c, base)
		}
	}
}
