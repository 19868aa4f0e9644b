package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armory-dev/armory/internal/testenv"
)

// shellServer runs each line it reads as a shell command and answers with
// its output and "rc=N".
const shellServer = `while IFS= read -r l; do sh -c "$l" 2>&1; echo "rc=$?"; done`

// ask sends one command to a shellServer and returns its output up to rc=.
func ask(t *testing.T, s *Server, out *bufio.Reader, cmd string) (string, string) {
	t.Helper()
	if _, err := fmt.Fprintln(s.Stdin, cmd); err != nil {
		t.Fatalf("write %q: %v", cmd, err)
	}
	type line struct {
		s   string
		err error
	}
	var b strings.Builder
	for {
		ch := make(chan line, 1)
		go func() { l, err := out.ReadString('\n'); ch <- line{l, err} }()
		select {
		case l := <-ch:
			if l.err != nil {
				t.Fatalf("read after %q: %v (so far %q)", cmd, l.err, b.String())
			}
			if rc, ok := strings.CutPrefix(l.s, "rc="); ok {
				return b.String(), strings.TrimSpace(rc)
			}
			b.WriteString(l.s)
		case <-time.After(hangGuard):
			t.Fatalf("no answer to %q", cmd)
		}
	}
}

func TestStartServerConfinesAndTalks(t *testing.T) {
	forEach(t, confining, func(t *testing.T, b Backend) {
		ws := t.TempDir()
		outside := t.TempDir()
		stderr := &testenv.LockedBuffer{}
		s, err := StartServer(Confinement{Backend: b, Workspace: ws, Limits: Limits{Processes: 32}},
			[]string{"sh", "-c", "echo started >&2; " + shellServer}, stderr)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Stop()
		out := bufio.NewReader(s.Stdout)
		if got, rc := ask(t, s, out, "echo hello"); got != "hello\n" || rc != "0" {
			t.Fatalf("echo: %q rc=%s", got, rc)
		}
		if _, rc := ask(t, s, out, "echo data > note"); rc != "0" {
			t.Fatal("cannot write its workspace")
		}
		if b, err := os.ReadFile(filepath.Join(ws, "note")); err != nil || string(b) != "data\n" {
			t.Fatalf("workspace file: %q %v", b, err)
		}
		if _, rc := ask(t, s, out, "echo x > "+filepath.Join(outside, "escape")); rc == "0" {
			t.Fatal("wrote outside its workspace")
		}
		if _, err := os.Stat(filepath.Join(outside, "escape")); err == nil {
			t.Fatal("file created outside the workspace")
		}
		if got, _ := ask(t, s, out, "ulimit -t"); strings.TrimSpace(got) != "unlimited" {
			t.Errorf("CPU limit of a server: %q, want none by default", got)
		}
		// A background process started by the server dies with it.
		marker := testenv.Marker()
		ask(t, s, out, "sleep 1000 "+marker+" >/dev/null 2>&1 &")
		// The shell answers as soon as it has forked; the child carries the
		// marker only once it has exec'd sleep, which a loaded machine may
		// not have scheduled yet.
		for deadline := time.Now().Add(hangGuard); len(testenv.PIDsWith(marker, false)) == 0; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("background sleep not running")
			}
		}
		status := s.Stop()
		if status == 0 {
			t.Errorf("killed server reported status 0")
		}
		select {
		case <-s.Done():
		default:
			t.Fatal("Done not closed after Stop")
		}
		if left := testenv.PIDsWith(marker, false); len(left) > 0 {
			t.Fatalf("processes left after Stop: %v", left)
		}
		if !strings.Contains(stderr.String(), "started") {
			t.Errorf("stderr not copied: %q", stderr.String())
		}
		if s.Stop() != status {
			t.Error("second Stop changed the status")
		}
	})
}

func TestStartServerExitsOnItsOwn(t *testing.T) {
	forEach(t, allBackends, func(t *testing.T, b Backend) {
		s, err := StartServer(Confinement{Backend: b, Workspace: t.TempDir()}, []string{"sh", "-c", "read x; exit 3"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Stdin.Close() // end of input: read fails, the shell exits
		select {
		case <-s.Done():
		case <-time.After(hangGuard):
			t.Fatal("server did not exit")
		}
		if st := s.Stop(); st != 3 {
			t.Fatalf("status %d, want 3", st)
		}
	})
}

func TestStartServerErrors(t *testing.T) {
	requireBackend(t, BackendBwrap)
	for _, tc := range []struct {
		name string
		p    Confinement
		argv []string
	}{
		{"empty command", Confinement{Workspace: t.TempDir()}, nil},
		{"no workspace", Confinement{}, []string{"true"}},
		{"not found", Confinement{Workspace: t.TempDir()}, []string{"no-such-program-armory"}},
		{"NUL", Confinement{Workspace: t.TempDir()}, []string{"echo", "a\x00b"}},
	} {
		if s, err := StartServer(tc.p, tc.argv, nil); err == nil {
			s.Stop()
			t.Errorf("%s: started", tc.name)
		}
	}
}
