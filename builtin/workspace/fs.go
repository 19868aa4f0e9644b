package workspace

// This file holds what every workspace tool shares: routing prefixes,
// path parsing, the protected-path rule and the file-descriptor based
// confinement primitives. See docs/tools-workspace.md for the model.
//
// Confinement is never a string check on an absolute path. Every root is
// opened once per call as an O_PATH directory descriptor and everything
// below it is reached relative to that descriptor:
//
//   - reads resolve with openat2(RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS):
//     the kernel follows symbolic links only while they stay beneath the
//     root, refuses absolute links, ".." above the root and /proc magic
//     links, and does it atomically in one system call;
//   - changes (write, edit, delete, creating folders) never follow a
//     symbolic link in any component: the parent folder is walked one
//     component at a time with openat(O_NOFOLLOW), and the final name is
//     then handled with *at calls on that pinned parent descriptor. Because
//     no link is followed, the cleaned relative path is the real path, and
//     the protected-path check on it cannot be bypassed by a link;
//   - without openat2 (kernels before 5.6, or a seccomp filter that hides
//     it) reads fall back to the same no-follow walk: still confined, but
//     symbolic links inside the root are not followed.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/armory-dev/armory"
)

// Limits of the workspace tools. Each has a test that shows it holds.
const (
	// ReadLimit is how much of a file workspace.read returns in one call.
	ReadLimit = 64 << 10
	// WriteLimit is the largest content workspace.write accepts and the
	// largest file workspace.edit produces.
	WriteLimit = 8 << 20
	// EditLimit is the largest file workspace.edit loads.
	EditLimit = 8 << 20
	// ListLimit is the most entries workspace.list returns.
	ListLimit = 1000
	// MaxPath is the longest path argument (in bytes) any tool accepts.
	MaxPath = 4096
	// SearchMaxEntries is the most directory entries (files and folders)
	// one workspace.search visits.
	SearchMaxEntries = 20000
	// SearchMaxFiles is the most files whose content one workspace.search reads.
	SearchMaxFiles = 5000
	// SearchFileBytes is how much of each file workspace.search reads.
	SearchFileBytes = 1 << 20
	// SearchMaxResults is the largest max_results workspace.search accepts;
	// SearchDefaultResults is used when max_results is not given.
	SearchMaxResults     = 500
	SearchDefaultResults = 100
	// SearchLineBytes is how much of a matching line workspace.search shows.
	SearchLineBytes = 300
	// SearchPatternLen is the longest regular expression or glob accepted.
	SearchPatternLen = 1024
	// DeleteMaxEntries is the most entries a recursive workspace.delete removes.
	DeleteMaxEntries = 10000
	// WalkMaxDepth is how deep list, search and delete descend.
	WalkMaxDepth = 64
)

// noOpenat2 is set once the kernel has answered ENOSYS to openat2; from
// then on reads use the no-follow walk. Tests set it to exercise that path.
var noOpenat2 atomic.Bool

// wsPath is a parsed path argument: the root it routes to and a cleaned,
// slash-separated path relative to that root ("." for the root itself).
type wsPath struct {
	prefix string // "" for @me, otherwise the Roots key ("project:web")
	dir    string // absolute folder of the root
	rel    string
	raw    string // the argument as given
}

// rootLabel is how a root is named in messages and results: "@me/" or
// "@project:web/".
func (t wsPath) rootLabel() string {
	if t.prefix == "" {
		return "@me/"
	}
	return "@" + t.prefix + "/"
}

// show returns the display form of rel under t's root: plain for @me
// ("src/a.go"), prefixed otherwise ("@project:web/src/a.go"). The result can
// be passed back to any workspace tool.
func (t wsPath) show(rel string) string {
	if rel == "." || rel == "" {
		return t.rootLabel()
	}
	if t.prefix == "" {
		return rel
	}
	return "@" + t.prefix + "/" + rel
}

func (t wsPath) String() string { return t.show(t.rel) }

// prefixes lists the routing prefixes env grants, "@me/" first, then the
// Roots keys sorted.
func grantedPrefixes(env *armory.AgentEnv) string {
	out := []string{"@me/"}
	if env != nil {
		var keys []string
		for k := range env.Roots {
			if k != "me" && k != "" {
				keys = append(keys, "@"+k+"/")
			}
		}
		slices.Sort(keys)
		out = append(out, keys...)
	}
	return strings.Join(out, ", ")
}

// parseTarget routes a path argument to a root and cleans it. It is pure:
// it touches no file. It fails with KindInvalid for a NUL byte, an
// over-long path, an absolute path, a malformed prefix or ".." climbing
// above the root; KindPermission for a prefix the agent was not granted;
// KindUnavailable when the agent has no such folder configured.
func parseTarget(op string, env *armory.AgentEnv, p string) (wsPath, error) {
	t := wsPath{raw: p}
	if strings.IndexByte(p, 0) >= 0 {
		return t, armory.E(op, armory.KindInvalid, "path contains a NUL byte")
	}
	if len(p) > MaxPath {
		return t, armory.E(op, armory.KindInvalid, fmt.Sprintf("path is %d bytes long; the limit is %d", len(p), MaxPath))
	}
	if env == nil {
		return t, armory.E(op, armory.KindUnavailable, "this agent has no workspace")
	}
	rest := p
	if strings.HasPrefix(p, "@") {
		key, after, _ := strings.Cut(p[1:], "/")
		rest = after
		switch {
		case key == "me":
		case env.Roots[key] != "":
			t.prefix = key
		case strings.HasPrefix(key, "project:") || strings.HasPrefix(key, "org:"):
			return t, armory.E(op, armory.KindPermission, fmt.Sprintf("you have no access to @%s/; your prefixes are: %s", key, grantedPrefixes(env)))
		default:
			return t, armory.E(op, armory.KindInvalid, fmt.Sprintf("unknown prefix @%s/; your prefixes are: %s (a file whose name starts with @ is written @me/@name)", key, grantedPrefixes(env)))
		}
	}
	if t.prefix == "" {
		t.dir = env.Workspace
	} else {
		t.dir = env.Roots[t.prefix]
	}
	if t.dir == "" {
		return t, armory.E(op, armory.KindUnavailable, "this agent has no workspace")
	}
	if !filepath.IsAbs(t.dir) {
		return t, armory.E(op, armory.KindUnavailable, fmt.Sprintf("the folder of %s is misconfigured (not an absolute path)", t.rootLabel()))
	}
	if strings.HasPrefix(rest, "/") {
		return t, armory.E(op, armory.KindInvalid, fmt.Sprintf("path %q is absolute; use a path relative to %s (your prefixes are: %s)", p, t.rootLabel(), grantedPrefixes(env)))
	}
	if rest == "" {
		t.rel = "."
		return t, nil
	}
	t.rel = path.Clean(rest)
	if t.rel == ".." || strings.HasPrefix(t.rel, "../") {
		return t, armory.E(op, armory.KindInvalid, fmt.Sprintf("path %q climbs above %s with ..; use a path inside it", p, t.rootLabel()))
	}
	return t, nil
}

// parseFile is parseTarget for tools that need a file name, not a root.
func parseFile(op string, env *armory.AgentEnv, p string) (wsPath, error) {
	if p == "" {
		return wsPath{}, armory.E(op, armory.KindInvalid, "path is empty; give a file path such as notes/todo.md")
	}
	t, err := parseTarget(op, env, p)
	if err != nil {
		return t, err
	}
	if t.rel == "." {
		return t, armory.E(op, armory.KindInvalid, fmt.Sprintf("path %q names the root folder %s itself; give a file path inside it", p, t.rootLabel()))
	}
	if strings.HasSuffix(p, "/") {
		return t, armory.E(op, armory.KindInvalid, fmt.Sprintf("path %q ends with /; give a file name", p))
	}
	return t, nil
}

// shellStartup are file names a login or interactive shell executes.
var shellStartup = []string{
	".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile",
	".zshrc", ".zprofile", ".zshenv", ".zlogin", ".zlogout",
}

// protected reports why the cleaned relative path rel may not be written,
// edited or deleted, or "" when it may. The rule, applied at any depth and
// case-insensitively (Unicode simple folding, trailing dots and spaces
// ignored): a ".git" entry itself, ".git/hooks" and everything below it,
// ".git/config", any ".armory" or ".ssh" folder and everything below it,
// and shell start-up files such as .bashrc and .profile.
func protectedReason(rel string) string {
	if rel == "." || rel == "" {
		return ""
	}
	parts := strings.Split(rel, "/")
	last := len(parts) - 1
	for i, raw := range parts {
		c := strings.TrimRight(raw, ". ")
		if c == "" {
			continue
		}
		switch {
		case strings.EqualFold(c, ".git"):
			if i == last {
				return ".git"
			}
			next := strings.TrimRight(parts[i+1], ". ")
			if strings.EqualFold(next, "hooks") {
				return ".git/hooks/"
			}
			if strings.EqualFold(next, "config") {
				return ".git/config"
			}
		case strings.EqualFold(c, ".armory"):
			return ".armory/"
		case strings.EqualFold(c, ".ssh"):
			return ".ssh/"
		}
		if i == last {
			for _, s := range shellStartup {
				if strings.EqualFold(c, s) {
					return "shell start-up file " + s
				}
			}
		}
	}
	return ""
}

// openToChange is where write, edit and delete go once t is parsed: it
// refuses a protected t (unless allow, the tool's AllowProtected; verb names
// the change in the message) and opens the folder that holds t (see
// openParent; create makes missing folders). The caller closes dirfd.
func openToChange(op string, t wsPath, verb string, allow, create bool) (dirfd int, base string, err error) {
	if why := protectedReason(t.rel); why != "" && !allow {
		return -1, "", armory.E(op, armory.KindPermission, fmt.Sprintf("%s is a protected path (%s); workspace tools never %s it", t, why, verb))
	}
	dirfd, base, err = openParent(op, t, create)
	if err != nil {
		return -1, "", fsError(op, t, err)
	}
	return dirfd, base, nil
}

// openRoot opens t's root folder as an O_PATH directory descriptor. The
// agent's own workspace (@me/) is created on first use; granted roots must
// already exist. The caller closes the descriptor.
func openRoot(op string, t wsPath) (int, error) {
	for try := 0; ; try++ {
		fd, err := unix.Open(t.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			return fd, nil
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOENT && t.prefix == "" && try == 0 {
			if merr := os.MkdirAll(t.dir, 0o750); merr == nil {
				continue
			}
		}
		return -1, armory.E(op, armory.KindUnavailable, fmt.Sprintf("%s is not available", t.rootLabel()), err)
	}
}

// openParent opens t's root and, beneath it without following any
// symbolic link, the folder that holds t (making missing folders when
// create is set); it returns that folder's descriptor, which the caller
// closes, and t's last name. Every tool that changes a path starts here.
// A root that cannot be opened is an *armory.Error; a failure beneath it
// is the bare errno, for fsError (or for the caller to tell ENOENT apart).
func openParent(op string, t wsPath, create bool) (dirfd int, base string, err error) {
	rootfd, err := openRoot(op, t)
	if err != nil {
		return -1, "", err
	}
	defer unix.Close(rootfd)
	dir, base := splitRel(t.rel)
	dirfd, err = walkDir(rootfd, dir, create)
	return dirfd, base, err
}

// openIn opens rel beneath t's root with flags, following symbolic links
// only while they stay inside (see openBeneath); every tool that reads
// starts here. The caller closes the descriptor. A root that cannot be
// opened is an *armory.Error; a failure beneath it is the bare errno.
func openIn(op string, t wsPath, rel string, flags int) (int, error) {
	rootfd, err := openRoot(op, t)
	if err != nil {
		return -1, err
	}
	defer unix.Close(rootfd)
	return openBeneath(rootfd, rel, flags, true)
}

// openBeneath opens rel (cleaned, relative) beneath the directory rootfd.
// With follow, symbolic links are followed while they stay beneath rootfd
// (openat2 only); without it, or without openat2, no link is followed at
// all. It never leaves rootfd: ".." above it, absolute links and /proc
// magic links fail with EXDEV or ELOOP.
func openBeneath(rootfd int, rel string, flags int, follow bool) (int, error) {
	flags |= unix.O_CLOEXEC
	if !noOpenat2.Load() {
		res := uint64(unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS)
		if !follow {
			res |= unix.RESOLVE_NO_SYMLINKS
		}
		how := unix.OpenHow{Flags: uint64(flags), Resolve: res}
		for try := 0; try < 32; try++ {
			fd, err := unix.Openat2(rootfd, rel, &how)
			switch err {
			case unix.EAGAIN, unix.EINTR: // a concurrent rename; the kernel asks to retry
				continue
			case unix.ENOSYS:
				noOpenat2.Store(true)
			default:
				return fd, err
			}
			break
		}
		if !noOpenat2.Load() {
			return -1, unix.EAGAIN
		}
	}
	if rel == "." {
		return unix.Openat(rootfd, ".", flags, 0)
	}
	dir, base := path.Split(rel)
	dirfd, err := walkDir(rootfd, strings.TrimSuffix(dir, "/"), false)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, base, flags|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, symlinkErr(dirfd, base, err)
	}
	return fd, nil
}

// walkDir opens the folder rel beneath rootfd one component at a time
// with O_NOFOLLOW, so that no symbolic link is ever followed; with create
// it makes missing folders (0750) on the way. It returns an O_PATH
// descriptor the caller closes. A symbolic link component fails with ELOOP.
func walkDir(rootfd int, rel string, create bool) (int, error) {
	cur, err := unix.Openat(rootfd, ".", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if rel == "." || rel == "" {
		return cur, nil
	}
	for _, c := range strings.Split(rel, "/") {
		var fd int
		for try := 0; ; try++ {
			fd, err = unix.Openat(cur, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err == unix.ENOENT && create && try < 2 {
				if merr := unix.Mkdirat(cur, c, 0o750); merr != nil && merr != unix.EEXIST {
					err = merr
					break
				}
				continue
			}
			break
		}
		if err != nil {
			err = symlinkErr(cur, c, err)
			unix.Close(cur)
			return -1, err
		}
		unix.Close(cur)
		cur = fd
	}
	return cur, nil
}

// symlinkErr turns the ENOTDIR or ELOOP that O_NOFOLLOW gives for a
// symbolic link into ELOOP, and leaves other errors alone.
func symlinkErr(dirfd int, name string, err error) error {
	if err != unix.ENOTDIR && err != unix.ELOOP {
		return err
	}
	var st unix.Stat_t
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.ELOOP
	}
	return err
}

// fsError turns a system error about t into a message for the model.
func fsError(op string, t wsPath, err error) error {
	var ae *armory.Error
	if errors.As(err, &ae) {
		return err
	}
	var errno unix.Errno
	if !errors.As(err, &errno) {
		return armory.E(op, armory.KindInternal, t.String(), err)
	}
	s := t.String()
	switch errno {
	case unix.ENOENT:
		return armory.E(op, armory.KindNotFound, fmt.Sprintf("%s does not exist (list a folder with workspace.list to see what is there)", s))
	case unix.EXDEV:
		return armory.E(op, armory.KindPermission, fmt.Sprintf("%s leads outside %s (through a symbolic link or a mount); only paths inside it can be used", s, t.rootLabel()))
	case unix.ELOOP:
		return armory.E(op, armory.KindPermission, fmt.Sprintf("%s goes through a symbolic link that is not followed here (links are never followed when changing files, nor into /proc); use the real path", s))
	case unix.ENOTDIR:
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("a part of %s is not a folder", s))
	case unix.EISDIR:
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("%s is a folder", s))
	case unix.ENAMETOOLONG:
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("a name in %s is too long (at most 255 bytes per name)", s))
	case unix.EACCES, unix.EPERM, unix.EROFS:
		return armory.E(op, armory.KindPermission, fmt.Sprintf("permission denied: %s", s))
	case unix.ENOTEMPTY, unix.EEXIST:
		return armory.E(op, armory.KindConflict, fmt.Sprintf("%s is a folder that is not empty", s))
	case unix.ENOSPC, unix.EDQUOT:
		return armory.E(op, armory.KindUnavailable, "no space left for "+s)
	case unix.EAGAIN:
		return armory.E(op, armory.KindConflict, fmt.Sprintf("%s kept changing while it was opened; try again", s))
	}
	return armory.E(op, armory.KindInternal, s, err)
}

// preadFull reads len(buf) bytes at off, or fewer at end of file.
func preadFull(fd int, buf []byte, off int64) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := unix.Pread(fd, buf[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// fileType names the kind of a non-regular file for messages.
func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return "folder"
	case unix.S_IFLNK:
		return "symbolic link"
	case unix.S_IFIFO:
		return "named pipe (FIFO)"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR, unix.S_IFBLK:
		return "device"
	}
	return "regular file"
}

// writeAtomic replaces (or creates) the file base in the folder dirfd with
// data: it writes a temporary file beside it, syncs it and renames it into
// place, so a reader sees the old or the new content, never a mix, and the
// rename replaces the name without ever writing through a link. It refuses
// a symbolic link, a folder, a non-regular file and a file with more than
// one hard link. With expect, the file must still be the one described
// (same inode, size and modification time), else KindConflict. It reports
// whether the file was created.
func writeAtomic(op string, t wsPath, dirfd int, base string, data []byte, expect *unix.Stat_t) (bool, error) {
	var st unix.Stat_t
	created := false
	mode := uint32(0o644)
	switch err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); {
	case err == unix.ENOENT:
		if expect != nil {
			return false, armory.E(op, armory.KindConflict, fmt.Sprintf("%s was removed while it was being edited", t))
		}
		created = true
	case err != nil:
		return false, fsError(op, t, err)
	default:
		if err := checkWritable(op, t, &st); err != nil {
			return false, err
		}
		if expect != nil && !sameFile(&st, expect) {
			return false, armory.E(op, armory.KindConflict, fmt.Sprintf("%s changed while it was being edited; read it again and retry", t))
		}
		mode = st.Mode & 0o777
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".armory-tmp-" + hex.EncodeToString(rnd[:])
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
	if err != nil {
		return false, fsError(op, t, err)
	}
	werr := writeFull(fd, data)
	if werr == nil && !created {
		werr = unix.Fchmod(fd, mode) // keep the old permissions despite the umask
	}
	if werr == nil {
		werr = unix.Fsync(fd)
	}
	if cerr := unix.Close(fd); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = unix.Renameat(dirfd, tmp, dirfd, base)
	}
	if werr != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return false, fsError(op, t, werr)
	}
	return created, nil
}

// checkWritable refuses what write and edit never replace.
func checkWritable(op string, t wsPath, st *unix.Stat_t) error {
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return armory.E(op, armory.KindPermission, fmt.Sprintf("%s is a symbolic link; refusing to write through it (write to the real path instead)", t))
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("%s is a folder; give a file path", t))
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return armory.E(op, armory.KindPermission, fmt.Sprintf("%s is a %s, not a regular file; refusing to write it", t, fileKind(st.Mode)))
	case st.Nlink > 1:
		return armory.E(op, armory.KindPermission, fmt.Sprintf("%s has %d hard links; refusing to change a file shared with another path", t, st.Nlink))
	}
	return nil
}

func sameFile(a, b *unix.Stat_t) bool {
	return a.Dev == b.Dev && a.Ino == b.Ino && a.Size == b.Size && a.Mtim == b.Mtim
}

func writeFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// errStopWalk ends walkTree early without an error.
var errStopWalk = errors.New("stop walk")

// walkEntry is one entry walkTree visits.
type walkEntry struct {
	rel   string      // path relative to the folder the walk started in
	name  string      // last component
	dirfd int         // open folder holding the entry (valid during visit only)
	st    unix.Stat_t // lstat of the entry: links are not followed
	depth int         // 1 for entries of the start folder
}

// walkTree visits the entries below the folder open at fd, depth first and
// sorted by name, without following symbolic links: a folder is descended
// by openat(O_NOFOLLOW|O_DIRECTORY) on its parent's descriptor, so a folder
// swapped for a link during the walk is skipped, never followed. visit
// returns whether to descend into a folder entry; errStopWalk stops the
// walk. Entries that vanish during the walk are skipped. maxNames bounds
// the names read from one folder. It returns ctx's error when ctx ends.
func walkTree(ctx context.Context, fd int, prefix string, depth, maxNames int, visit func(*walkEntry) (bool, error)) error {
	names, err := readNames(fd, maxNames)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		e := walkEntry{name: name, dirfd: fd, depth: depth}
		if prefix == "" {
			e.rel = name
		} else {
			e.rel = prefix + "/" + name
		}
		if unix.Fstatat(fd, name, &e.st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		descend, err := visit(&e)
		if err != nil {
			return err
		}
		if !descend || e.st.Mode&unix.S_IFMT != unix.S_IFDIR || depth >= WalkMaxDepth {
			continue
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // vanished or swapped for a link: skip it
		}
		err = walkTree(ctx, sub, e.rel, depth+1, maxNames, visit)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// readNames reads up to max names from the folder open at fd (without "."
// and ".."), sorted.
func readNames(fd int, max int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for len(names) < max {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], max-len(names), names)
	}
	slices.Sort(names)
	return names, nil
}

// ctxFail is the result for a call whose context ended.
func wsCtxFail(op string, err error) armory.Result {
	if errors.Is(err, context.DeadlineExceeded) {
		return armory.Failf(armory.KindTimeout, "%s ran out of time; narrow the request and retry", op)
	}
	return armory.Failf(armory.KindTimeout, "%s was cancelled", op)
}

// jsonString returns s as a JSON string literal, for schemas.
func schemaString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
