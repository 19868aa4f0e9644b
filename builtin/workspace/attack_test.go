package workspace

// Adversarial tests: each shows an attack on the workspace confinement
// failing. They run against real files in t.TempDir(); most run twice,
// with openat2 and with the no-follow fallback.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/internal/testenv"
)

// TestAttackEscapes tries every tool on paths that lead outside the
// workspace: "..", absolute paths, /proc/self/root, the sibling ws-evil,
// absolute and relative symbolic links to files and folders outside, and
// links into /proc. Every call must fail, no result may show the outside
// secret, and nothing outside may change.
func TestAttackEscapes(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		secret := filepath.Join(f.evil, "secret.txt")
		links := map[string]string{
			"abs-file":   secret,
			"rel-file":   "../ws-evil/secret.txt",
			"abs-dir":    f.evil,
			"rel-dir":    "../ws-evil",
			"deep-rel":   "sub/../../ws-evil",
			"proc-root":  "/proc/self/root" + f.evil,
			"proc-rel":   "../../../../../../../../proc/self/root" + f.evil,
			"proc-cwd":   "/proc/self/cwd",
			"dev-zero":   "/dev/zero",
			"root-slash": "/",
		}
		for name, target := range links {
			if err := os.Symlink(target, filepath.Join(f.ws, name)); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.MkdirAll(filepath.Join(f.ws, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		// An intermediate folder that is a link to outside, one level down.
		if err := os.Symlink(f.evil, filepath.Join(f.ws, "sub", "mid")); err != nil {
			t.Fatal(err)
		}
		before := testenv.Snapshot(t, f.evil)

		paths := []string{
			"../ws-evil/secret.txt", "@me/../ws-evil/secret.txt", "a/../../ws-evil/secret.txt",
			secret, "/proc/self/root" + secret, "@me/" + secret, "@project:web/../ws-evil/secret.txt",
			"abs-file", "rel-file", "abs-dir/secret.txt", "rel-dir/secret.txt", "deep-rel/secret.txt",
			"proc-root/secret.txt", "proc-rel/secret.txt", "proc-cwd/secret.txt", "dev-zero",
			"root-slash" + f.evil + "/secret.txt", "sub/mid/secret.txt",
		}
		for _, p := range paths {
			calls := []struct {
				tool armory.Tool
				args M
			}{
				{&Read{}, M{"path": p}},
				{&Write{}, M{"path": p, "content": "PWNED"}},
				{&Edit{}, M{"path": p, "old_string": "TOP-SECRET", "new_string": "PWNED"}},
				{&Delete{}, M{"path": p, "recursive": true}},
				{&List{}, M{"path": p}},
				{&Search{}, M{"path": p, "pattern": "SECRET"}},
				{&Write{}, M{"path": p + "/new.txt", "content": "PWNED"}},
			}
			for _, c := range calls {
				if _, isLink := links[p]; isLink && c.tool.Spec().Name == "workspace.delete" {
					continue // deleting the link itself is allowed (see TestWorkspaceDelete)
				}
				r := run(t, c.tool, f.env, c.args)
				if r.Success {
					t.Errorf("%s %q succeeded: %.200s", c.tool.Spec().Name, c.args["path"], r.Text)
				}
				if strings.Contains(r.Text, "TOP-SECRET") {
					t.Errorf("%s %q leaked the secret", c.tool.Spec().Name, c.args["path"])
				}
			}
		}
		// Searching and listing the whole workspace never follows the links.
		for _, c := range []struct {
			tool armory.Tool
			args M
		}{
			{&Search{}, M{"pattern": "SECRET"}},
			{&Search{}, M{"glob": "**/secret.txt"}},
			{&List{}, M{"recursive": true}},
		} {
			r := runOK(t, c.tool, f.env, c.args)
			if strings.Contains(r.Text, "TOP-SECRET") || regexp.MustCompile(`(?m)^\S*secret\.txt( \(\d+ bytes\))?$`).MatchString(r.Text) {
				t.Errorf("%s reached outside: %s", c.tool.Spec().Name, r.Text)
			}
		}
		if after := testenv.Snapshot(t, f.evil); after != before {
			t.Fatalf("outside changed:\n%s\nwant\n%s", after, before)
		}
	})
}

// TestAttackSiblingPrefix shows that a root named ws cannot reach ws-evil
// even through a granted root whose path is a string prefix of another.
func TestAttackSiblingPrefix(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		env := &armory.AgentEnv{Workspace: f.ws, Roots: map[string]string{"project:ws": f.ws}}
		for _, p := range []string{"../ws-evil/secret.txt", "@project:ws/../ws-evil/secret.txt", "-evil/secret.txt", "@me/-evil/secret.txt"} {
			r := run(t, &Read{}, env, M{"path": p})
			if r.Success || strings.Contains(r.Text, "TOP-SECRET") {
				t.Fatalf("%q reached the sibling: %s", p, r.Text)
			}
		}
	})
}

// TestAttackSymlinkFinal shows that write and edit never write through a
// link, even one pointing inside the workspace, and that delete removes the
// link, not its target.
func TestAttackSymlinkFinal(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		mustWrite(t, filepath.Join(f.ws, "real.txt"), "real")
		if err := os.Symlink("real.txt", filepath.Join(f.ws, "inner-link")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("missing.txt", filepath.Join(f.ws, "dangling")); err != nil {
			t.Fatal(err)
		}
		wantFail(t, run(t, &Write{}, f.env, M{"path": "inner-link", "content": "x"}), armory.KindPermission, "symbolic link")
		wantFail(t, run(t, &Write{}, f.env, M{"path": "dangling", "content": "x"}), armory.KindPermission, "symbolic link")
		wantFail(t, run(t, &Edit{}, f.env, M{"path": "inner-link", "old_string": "real", "new_string": "x"}), armory.KindPermission, "symbolic link")
		if _, err := os.Stat(filepath.Join(f.ws, "missing.txt")); !os.IsNotExist(err) {
			t.Fatal("write through a dangling link created its target")
		}
		if testenv.ReadFile(t, filepath.Join(f.ws, "real.txt")) != "real" {
			t.Fatal("target changed")
		}
		// Reading an inner link is fine with openat2, refused by the fallback.
		r := run(t, &Read{}, f.env, M{"path": "inner-link"})
		if noOpenat2.Load() {
			wantFail(t, r, armory.KindPermission, "symbolic link")
		} else if !r.Success || r.Text != "real" {
			t.Fatalf("inner link read: %v %q", r.Success, r.Text)
		}
	})
}

// TestAttackSymlinkIntermediate: a folder in the path is a link (to
// outside, or inside to .git): changes are refused whatever it points at.
func TestAttackSymlinkIntermediate(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		mustWrite(t, filepath.Join(f.ws, "realdir/a.txt"), "a")
		mustWrite(t, filepath.Join(f.ws, ".git/config"), "[core]\n")
		if err := os.MkdirAll(filepath.Join(f.ws, ".git/hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		for link, target := range map[string]string{"dl": "realdir", "hk": ".git/hooks", "g": ".git", "out": f.evil} {
			if err := os.Symlink(target, filepath.Join(f.ws, link)); err != nil {
				t.Fatal(err)
			}
		}
		before := testenv.Snapshot(t, f.ws)
		for _, p := range []string{"dl/b.txt", "dl/a.txt", "hk/pre-commit", "g/hooks/pre-commit", "g/config", "out/x", "g/HEAD"} {
			r := run(t, &Write{}, f.env, M{"path": p, "content": "#!/bin/sh\necho pwned\n"})
			if r.Success {
				t.Errorf("write %q succeeded", p)
			}
			r = run(t, &Edit{}, f.env, M{"path": p, "old_string": "[core]", "new_string": "[core]\n\thooksPath = /tmp"})
			if r.Success {
				t.Errorf("edit %q succeeded", p)
			}
			r = run(t, &Delete{}, f.env, M{"path": p})
			if r.Success {
				t.Errorf("delete %q succeeded", p)
			}
		}
		if after := testenv.Snapshot(t, f.ws); after != before {
			t.Fatalf("workspace changed:\n%s", after)
		}
	})
}

// TestAttackProtected: protected paths are refused however they are
// spelled, before anything (even a parent folder) is created.
func TestAttackProtected(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		mustWrite(t, filepath.Join(f.ws, "repo/.git/config"), "[core]\n")
		mustWrite(t, filepath.Join(f.ws, "repo/.git/hooks/pre-commit.sample"), "#!/bin/sh\n")
		mustWrite(t, filepath.Join(f.ws, "repo/main.go"), "package main\n")
		mustWrite(t, filepath.Join(f.ws, ".bashrc"), "# rc\n")
		before := testenv.Snapshot(t, f.ws)
		paths := []string{
			".git/hooks/pre-commit", ".GIT/hooks/pre-commit", ".git/HOOKS/x", "a/../.git/hooks/x", "./.git/config",
			".git", "repo/.git", "repo/.git/config", "repo/.Git/Hooks/post-checkout", "repo/.git/hooks/pre-commit.sample",
			".git./hooks/x", ".armory/policy.yaml", "x/.ARMORY/y", ".ssh/authorized_keys", "home/.SSH/config",
			".\u017fsh/authorized_keys", ".bashrc", ".BASHRC", ".bash_profile", ".profile", ".zshrc", ".bash_login", ".zprofile",
			"sub/dir/.zshrc", "@project:web/.git/hooks/pre-push", "@project:web/.bashrc",
		}
		for _, p := range paths {
			wantFail(t, run(t, &Write{}, f.env, M{"path": p, "content": "pwned"}), armory.KindPermission, "protected path")
			wantFail(t, run(t, &Edit{}, f.env, M{"path": p, "old_string": "[core]", "new_string": "pwned"}), armory.KindPermission, "protected path")
			wantFail(t, run(t, &Delete{}, f.env, M{"path": p, "recursive": true}), armory.KindPermission, "protected path")
		}
		// A folder holding a protected path cannot be deleted, and nothing
		// in it is removed.
		wantFail(t, run(t, &Delete{}, f.env, M{"path": "repo", "recursive": true}), armory.KindPermission, "holds the protected path repo/.git")
		if after := testenv.Snapshot(t, f.ws); after != before {
			t.Fatalf("workspace changed:\n%s\nwant\n%s", after, before)
		}
		if _, err := os.Stat(filepath.Join(f.proj, ".git")); !os.IsNotExist(err) {
			t.Fatal("a protected parent folder was created")
		}
		// Opting in lifts the protection.
		wantOK(t, run(t, &Write{AllowProtected: true}, f.env, M{"path": ".git/hooks/pre-commit", "content": "ok"}))
		wantOK(t, run(t, &Edit{AllowProtected: true}, f.env, M{"path": ".bashrc", "old_string": "# rc", "new_string": "# rc2"}))
		wantOK(t, run(t, &Delete{AllowProtected: true}, f.env, M{"path": "repo", "recursive": true}))
		// Reading protected files is allowed.
		wantOK(t, run(t, &Read{}, f.env, M{"path": ".bashrc"}))
	})
}

// TestAttackSwapRace flips a folder between a real folder and a link to
// outside (absolute and relative) while the tools read, write, edit,
// list, search and delete through it. Nothing outside may ever be read or
// written.
func TestAttackSwapRace(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		mustWrite(t, filepath.Join(f.evil, "victim.txt"), "TOP-SECRET victim")
		dir := filepath.Join(f.ws, "d")
		mustWrite(t, filepath.Join(dir, "secret.txt"), "inside")
		mustWrite(t, filepath.Join(dir, "victim.txt"), "inside victim")
		before := testenv.Snapshot(t, f.evil)

		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		// Two links to outside, one absolute and one relative. The flipper
		// swaps d with one of them atomically (renameat2 RENAME_EXCHANGE),
		// so "d" is always either the real folder or a link to outside.
		links := []string{dir + ".abs", dir + ".rel"}
		if err := os.Symlink(f.evil, links[0]); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../ws-evil", links[1]); err != nil {
			t.Fatal(err)
		}
		swaps := 0
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				l := links[i/2%2]
				if err := unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, l, unix.RENAME_EXCHANGE); err != nil {
					panic(err)
				}
				swaps++
				runtime.Gosched() // let the tools see each state
			}
		}()
		const rounds = 300
		ok, failed := 0, 0
		for i := range rounds {
			calls := []struct {
				tool armory.Tool
				args M
			}{
				{&Read{}, M{"path": "d/secret.txt"}},
				{&Read{}, M{"path": "d/victim.txt"}},
				{&Write{}, M{"path": "d/victim.txt", "content": fmt.Sprintf("written %d", i)}},
				{&Write{}, M{"path": fmt.Sprintf("d/new%d.txt", i), "content": "x"}},
				{&Edit{}, M{"path": "d/secret.txt", "old_string": "e", "new_string": "E", "replace_all": true}},
				{&Edit{}, M{"path": "d/secret.txt", "old_string": "E", "new_string": "e", "replace_all": true}},
				{&List{}, M{"path": "d"}},
				{&Search{}, M{"path": "d", "pattern": "SECRET|victim"}},
				{&Delete{}, M{"path": fmt.Sprintf("d/new%d.txt", i)}},
			}
			for _, c := range calls {
				r := run(t, c.tool, f.env, c.args)
				if r.Success {
					ok++
				} else {
					failed++
				}
				if strings.Contains(r.Text, "TOP-SECRET") {
					close(stop)
					wg.Wait()
					t.Fatalf("round %d: %s %v read outside: %s", i, c.tool.Spec().Name, c.args, r.Text)
				}
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("%d swaps; %d calls succeeded (folder real), %d failed (folder swapped)", swaps, ok, failed)
		if after := testenv.Snapshot(t, f.evil); after != before {
			t.Fatalf("outside changed:\n%s\nwant\n%s", after, before)
		}
	})
}

// TestAttackHardLink: a hard link to a file outside the workspace. The
// decision (docs/tools-workspace.md): reading it is allowed (it is a name
// inside the workspace, and making it needed access to the file); write
// and edit refuse any file with more than one link, so the outside file
// never changes; delete removes only the name inside.
func TestAttackHardLink(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		outside := filepath.Join(f.evil, "secret.txt")
		if err := os.Link(outside, filepath.Join(f.ws, "hl")); err != nil {
			t.Skipf("cannot make a hard link here: %v", err)
		}
		wantFail(t, run(t, &Write{}, f.env, M{"path": "hl", "content": "PWNED"}), armory.KindPermission, "2 hard links")
		wantFail(t, run(t, &Edit{}, f.env, M{"path": "hl", "old_string": "TOP", "new_string": "PWNED"}), armory.KindPermission, "2 hard links")
		r := run(t, &Read{}, f.env, M{"path": "hl"})
		if !r.Success || r.Text != "TOP-SECRET" {
			t.Fatalf("documented behaviour: read of a hard link succeeds, got %q", r.Text)
		}
		wantOK(t, run(t, &Delete{}, f.env, M{"path": "hl"}))
		if testenv.ReadFile(t, outside) != "TOP-SECRET" {
			t.Fatal("outside file changed")
		}
	})
}

// TestAttackSpecialFiles: a FIFO inside the workspace is refused without
// blocking (no writer ever opens it), by every tool; a device node (made
// when the test runs as root) is refused without being read.
func TestAttackSpecialFiles(t *testing.T) {
	modes(t, func(t *testing.T) {
		f := newWS(t)
		fifo := filepath.Join(f.ws, "pipe")
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		wantFail(t, run(t, &Read{}, f.env, M{"path": "pipe"}), armory.KindPermission, "named pipe (FIFO)")
		wantFail(t, run(t, &Write{}, f.env, M{"path": "pipe", "content": "x"}), armory.KindPermission, "named pipe (FIFO)")
		wantFail(t, run(t, &Edit{}, f.env, M{"path": "pipe", "old_string": "a", "new_string": "b"}), armory.KindPermission, "named pipe (FIFO)")
		r := runOK(t, &Search{}, f.env, M{"pattern": "x"})
		r = run(t, &List{}, f.env, M{})
		if !r.Success || r.Text != "pipe (named pipe (FIFO))" {
			t.Fatalf("list: %q", r.Text)
		}
		if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
			t.Fatal("the FIFO was replaced")
		}
		wantOK(t, run(t, &Delete{}, f.env, M{"path": "pipe"}))

		// /dev/zero reached by a link is outside anyway.
		if err := os.Symlink("/dev/zero", filepath.Join(f.ws, "zero")); err != nil {
			t.Fatal(err)
		}
		wantFail(t, run(t, &Read{}, f.env, M{"path": "zero"}), armory.KindPermission, "")
		// A device node inside the workspace (root only).
		dev := filepath.Join(f.ws, "zero-dev")
		if err := syscall.Mknod(dev, syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
			t.Logf("no device node test (not root?): %v", err)
			return
		}
		wantFail(t, run(t, &Read{}, f.env, M{"path": "zero-dev"}), armory.KindPermission, "device")
		wantFail(t, run(t, &Write{}, f.env, M{"path": "zero-dev", "content": "x"}), armory.KindPermission, "device")
		r = runOK(t, &Search{}, f.env, M{"pattern": "x", "glob": "zero-dev"})
	})
}

// TestAttackMalformedPaths: NUL bytes, empty paths, over-long paths and
// names are refused by every tool with an invalid-argument error.
func TestAttackMalformedPaths(t *testing.T) {
	f := newWS(t)
	long := strings.Repeat("a", MaxPath+1)
	longName := strings.Repeat("n", 300)
	for _, tool := range allWorkspaceTools() {
		name := tool.Spec().Name
		for _, p := range []string{"a\x00b", "\x00", long, "@me/" + long[:MaxPath]} {
			args := M{"path": p, "content": "x", "old_string": "a", "new_string": "b", "pattern": "x"}
			args = onlyKnown(tool, args)
			r := run(t, tool, f.env, args)
			if r.Success || r.Kind != armory.KindInvalid {
				t.Errorf("%s %.20q: %v %q", name, p, r.Kind, r.Text)
			}
		}
		r := run(t, tool, f.env, onlyKnown(tool, M{"path": longName, "content": "x", "old_string": "a", "new_string": "b", "pattern": "x"}))
		if r.Success || !strings.Contains(r.Text, "too long") && r.Kind != armory.KindNotFound {
			t.Errorf("%s long name: %v %q", name, r.Kind, r.Text)
		}
	}
	// Empty path: file tools refuse, list and search use the root.
	for _, tool := range []armory.Tool{&Read{}, &Write{}, &Edit{}, &Delete{}} {
		r := run(t, tool, f.env, onlyKnown(tool, M{"path": "", "content": "x", "old_string": "a", "new_string": "b"}))
		wantFail(t, r, armory.KindInvalid, "path is empty")
	}
	if entries, _ := os.ReadDir(f.ws); len(entries) > 1 {
		t.Fatalf("malformed paths created files: %v", entries)
	}
}

// onlyKnown keeps the arguments tool's schema declares.
func onlyKnown(tool armory.Tool, args M) M {
	s := string(tool.Spec().InputSchema)
	out := M{}
	for k, v := range args {
		if strings.Contains(s, `"`+k+`":{`) {
			out[k] = v
		}
	}
	return out
}
