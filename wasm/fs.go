package wasm

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
	experimentalsys "github.com/tetratelabs/wazero/experimental/sys"
	"github.com/tetratelabs/wazero/experimental/sysfs"
	"github.com/tetratelabs/wazero/sys"
	"golang.org/x/sys/unix"
)

// A module sees the file system WASI shows it, and nothing else: an empty,
// read-only tree (rootFS) with the tool's granted workspace folders mounted
// at /workspace/<path> (grantFS). wazero's own directory mount
// (sysfs.DirFS) joins the module's path to the host folder and lets the
// host resolve it, so a symbolic link inside the workspace pointing at
// /etc, or one the module makes (../../..), leads out of the folder; a
// grantFS resolves every path through an os.Root, which follows links
// only while they stay inside the folder (the kernel's openat, one
// element at a time: no race with a link swapped in meanwhile).
//
// On top of the confinement: a module never makes links (symbolic or
// hard); it never opens, creates or changes anything under .git, .ssh or
// .armory (world.IsProtectedName), by name or — for reads — through a
// link (the opened file's real path is checked); and it changes nothing
// through a symbolic link, so a link such as hooks -> .git/hooks planted
// in a writable folder cannot carry a write into a protected place.
// Opening a FIFO, device or socket fails (a FIFO would block the call
// past its timeout in the host).

// errno maps a host error to the errno the module reads.
func errno(err error) experimentalsys.Errno {
	if err == nil {
		return 0
	}
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent" {
		return experimentalsys.EPERM
	}
	var le *os.LinkError
	if errors.As(err, &le) && le.Err.Error() == "path escapes from parent" {
		return experimentalsys.EPERM
	}
	return experimentalsys.UnwrapOSError(err)
}

// rel turns a path wazero hands a mount into one for os.Root: relative,
// clean, "." for the folder itself.
func rel(p string) string {
	p = path.Clean("/" + p)
	if p == "/" {
		return "."
	}
	return p[1:]
}

func protectedPath(p string) bool {
	return slices.ContainsFunc(strings.Split(p, "/"), world.IsProtectedName)
}

// grantFS is one granted workspace folder. Its root is bound for each call
// (bind) before the module runs and closed after; an instance made ahead
// of its call holds a grantFS with no root yet, and runs no code until
// then.
type grantFS struct {
	experimentalsys.UnimplementedFS
	write bool
	root  *os.Root
	// real is the folder's path as the kernel names it
	// (/proc/self/fd), "" when that cannot be read.
	real string
}

var _ experimentalsys.FS = (*grantFS)(nil)

func (g *grantFS) bind(root *os.Root) {
	g.root, g.real = root, ""
	if d, err := root.Open("."); err == nil {
		g.real = fdPath(d)
		d.Close()
	}
}

// fdPath returns the path the kernel gives an open file, or "".
func fdPath(f *os.File) string {
	sc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var p string
	_ = sc.Control(func(fd uintptr) {
		p, _ = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd)))
	})
	return p
}

// checkChange allows a change at p: nothing protected on the way, and no
// symbolic link among its elements (the last may be one when the change
// does not follow it: finalLink).
func (g *grantFS) checkChange(p string, finalLink bool) experimentalsys.Errno {
	if g.root == nil {
		return experimentalsys.ENOENT
	}
	if !g.write {
		return experimentalsys.EROFS
	}
	if protectedPath(p) {
		return experimentalsys.EPERM
	}
	if p == "." {
		return 0
	}
	elems := strings.Split(p, "/")
	for i := range elems {
		fi, err := g.root.Lstat(strings.Join(elems[:i+1], "/"))
		if errors.Is(err, fs.ErrNotExist) {
			return 0 // the rest does not exist yet: the change fails or creates it
		}
		if err != nil {
			return errno(err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 && (i < len(elems)-1 || !finalLink) {
			return experimentalsys.EPERM
		}
	}
	return 0
}

// OpenFile implements experimentalsys.FS.
func (g *grantFS) OpenFile(name string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	if g.root == nil {
		return nil, experimentalsys.ENOENT
	}
	p := rel(name)
	changes := flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR|experimentalsys.O_CREAT|experimentalsys.O_TRUNC|experimentalsys.O_APPEND) != 0
	if changes {
		if e := g.checkChange(p, false); e != 0 {
			return nil, e
		}
	} else if protectedPath(p) {
		return nil, experimentalsys.EPERM
	}
	if flag&experimentalsys.O_NOFOLLOW != 0 {
		if fi, err := g.root.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, experimentalsys.ELOOP
		}
	}
	of := syscall.O_NONBLOCK | syscall.O_NOCTTY
	switch {
	case flag&experimentalsys.O_RDWR != 0:
		of |= os.O_RDWR
	case flag&experimentalsys.O_WRONLY != 0:
		of |= os.O_WRONLY
	}
	for _, m := range []struct {
		from experimentalsys.Oflag
		to   int
	}{
		{experimentalsys.O_APPEND, os.O_APPEND}, {experimentalsys.O_CREAT, os.O_CREATE},
		{experimentalsys.O_EXCL, os.O_EXCL}, {experimentalsys.O_TRUNC, os.O_TRUNC},
		{experimentalsys.O_DIRECTORY, syscall.O_DIRECTORY}, {experimentalsys.O_SYNC, os.O_SYNC},
		{experimentalsys.O_DSYNC, syscall.O_DSYNC},
	} {
		if flag&m.from != 0 {
			of |= m.to
		}
	}
	f, err := g.root.OpenFile(p, of, perm&0o777)
	if err != nil {
		return nil, errno(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, errno(err)
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		f.Close()
		return nil, experimentalsys.EACCES
	}
	if !changes && !g.inside(f) {
		f.Close()
		return nil, experimentalsys.EPERM
	}
	wf, e := (&sysfs.AdaptFS{FS: &opened{f: f, g: g, p: p}}).OpenFile(p, flag, perm)
	if e != 0 {
		f.Close()
		return nil, e
	}
	return &file{File: wf, f: f, append: flag&experimentalsys.O_APPEND != 0}, 0
}

// inside reports whether an opened file's real place (the kernel's name
// for it) is in the folder and clear of protected names: a file reached
// through a link inside the folder is checked where it really is. The
// folder's own path is read again from its root when the file is not
// under it: the folder may have been renamed since it was bound (the root
// follows it).
func (g *grantFS) inside(f *os.File) bool {
	if g.real == "" {
		return true // no /proc: the names were checked
	}
	rp := fdPath(f)
	if rp == "" {
		return true
	}
	r, ok := under(rp, g.real)
	if !ok {
		if d, err := g.root.Open("."); err == nil {
			real := fdPath(d)
			d.Close()
			if real != "" && real != g.real {
				g.real = real
				r, ok = under(rp, real)
			}
		}
	}
	return ok && !protectedPath(r)
}

// under returns p relative to dir, when p is dir or below it.
func under(p, dir string) (string, bool) {
	r, ok := strings.CutPrefix(p, dir)
	if !ok || (r != "" && !strings.HasPrefix(r, "/")) {
		return "", false
	}
	return strings.TrimPrefix(r, "/"), true
}

// Lstat implements experimentalsys.FS.
func (g *grantFS) Lstat(name string) (sys.Stat_t, experimentalsys.Errno) {
	if g.root == nil {
		return sys.Stat_t{}, experimentalsys.ENOENT
	}
	p := rel(name)
	if protectedPath(p) {
		return sys.Stat_t{}, experimentalsys.EPERM
	}
	fi, err := g.root.Lstat(p)
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Stat implements experimentalsys.FS.
func (g *grantFS) Stat(name string) (sys.Stat_t, experimentalsys.Errno) {
	if g.root == nil {
		return sys.Stat_t{}, experimentalsys.ENOENT
	}
	p := rel(name)
	if protectedPath(p) {
		return sys.Stat_t{}, experimentalsys.EPERM
	}
	fi, err := g.root.Stat(p)
	if err != nil {
		return sys.Stat_t{}, errno(err)
	}
	return sys.NewStat_t(fi), 0
}

// Readlink implements experimentalsys.FS.
func (g *grantFS) Readlink(name string) (string, experimentalsys.Errno) {
	if g.root == nil {
		return "", experimentalsys.ENOENT
	}
	p := rel(name)
	if protectedPath(p) {
		return "", experimentalsys.EPERM
	}
	dst, err := g.root.Readlink(p)
	return dst, errno(err)
}

// Mkdir implements experimentalsys.FS.
func (g *grantFS) Mkdir(name string, perm fs.FileMode) experimentalsys.Errno {
	p := rel(name)
	if e := g.checkChange(p, false); e != 0 {
		return e
	}
	return errno(g.root.Mkdir(p, perm&0o777))
}

// Chmod implements experimentalsys.FS.
func (g *grantFS) Chmod(name string, perm fs.FileMode) experimentalsys.Errno {
	p := rel(name)
	if e := g.checkChange(p, false); e != 0 {
		return e
	}
	return errno(g.root.Chmod(p, perm&0o777))
}

// Rename implements experimentalsys.FS: a link is renamed, not followed.
func (g *grantFS) Rename(from, to string) experimentalsys.Errno {
	pf, pt := rel(from), rel(to)
	if e := g.checkChange(pf, true); e != 0 {
		return e
	}
	if e := g.checkChange(pt, true); e != 0 {
		return e
	}
	return errno(g.root.Rename(pf, pt))
}

// Rmdir implements experimentalsys.FS.
func (g *grantFS) Rmdir(name string) experimentalsys.Errno {
	p := rel(name)
	if e := g.checkChange(p, true); e != 0 {
		return e
	}
	if p == "." {
		return experimentalsys.EPERM
	}
	fi, err := g.root.Lstat(p)
	if err != nil {
		return errno(err)
	}
	if !fi.IsDir() {
		return experimentalsys.ENOTDIR
	}
	return errno(g.root.Remove(p))
}

// Unlink implements experimentalsys.FS: a link is removed, not followed.
func (g *grantFS) Unlink(name string) experimentalsys.Errno {
	p := rel(name)
	if e := g.checkChange(p, true); e != 0 {
		return e
	}
	fi, err := g.root.Lstat(p)
	if err != nil {
		return errno(err)
	}
	if fi.IsDir() {
		return experimentalsys.EISDIR
	}
	return errno(g.root.Remove(p))
}

// Link implements experimentalsys.FS: refused (a hard link to a file under
// .git would let a later write reach it).
func (g *grantFS) Link(_, _ string) experimentalsys.Errno {
	if g.write {
		return experimentalsys.EPERM
	}
	return experimentalsys.EROFS
}

// Symlink implements experimentalsys.FS: refused (a module's link could
// lead the workspace's other tools, or a later call, out of the folder).
func (g *grantFS) Symlink(_, _ string) experimentalsys.Errno {
	if g.write {
		return experimentalsys.EPERM
	}
	return experimentalsys.EROFS
}

// Utimens implements experimentalsys.FS.
func (g *grantFS) Utimens(name string, atim, mtim int64) experimentalsys.Errno {
	p := rel(name)
	if e := g.checkChange(p, false); e != 0 {
		return e
	}
	return errno(g.root.Chtimes(p, nsTime(atim), nsTime(mtim)))
}

// nsTime is a WASI time for os.Root.Chtimes: UTIME_OMIT keeps the time
// (the zero time.Time).
func nsTime(ns int64) time.Time {
	if ns == experimentalsys.UTIME_OMIT {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// file is a file or folder a module opened in a granted folder: wazero's
// own file over the *os.File we opened (reads, writes, seeks, directory
// listings), with what that one leaves out for a plain fs.File (append
// mode, truncate, sync).
type file struct {
	experimentalsys.File
	f      *os.File
	append bool
}

func (f *file) IsAppend() bool { return f.append }

func (f *file) SetAppend(on bool) experimentalsys.Errno {
	if dir, e := f.IsDir(); e != 0 {
		return e
	} else if dir {
		return experimentalsys.EISDIR
	}
	sc, err := f.f.SyscallConn()
	if err != nil {
		return experimentalsys.EBADF
	}
	var e error
	if err := sc.Control(func(fd uintptr) {
		var fl int
		if fl, e = unix.FcntlInt(fd, unix.F_GETFL, 0); e != nil {
			return
		}
		if on {
			fl |= unix.O_APPEND
		} else {
			fl &^= unix.O_APPEND
		}
		_, e = unix.FcntlInt(fd, unix.F_SETFL, fl)
	}); err != nil {
		return experimentalsys.EBADF
	}
	if e != nil {
		return errno(e)
	}
	f.append = on
	return 0
}

func (f *file) Truncate(size int64) experimentalsys.Errno {
	if dir, e := f.IsDir(); e != 0 {
		return e
	} else if dir {
		return experimentalsys.EISDIR
	}
	if size < 0 {
		return experimentalsys.EINVAL
	}
	return errno(f.f.Truncate(size))
}

func (f *file) Sync() experimentalsys.Errno {
	if _, e := f.IsDir(); e != 0 {
		return e
	}
	return errno(f.f.Sync())
}

func (f *file) Datasync() experimentalsys.Errno { return f.Sync() }

// opened is the fs.FS through which wazero's file wraps a file we opened:
// its first Open hands that file over; a later one (wazero reopens a
// folder to list it again from the start) opens the same path again,
// read-only, inside the grant.
type opened struct {
	f *os.File
	g *grantFS
	p string
}

func (o *opened) Open(string) (fs.File, error) {
	if f := o.f; f != nil {
		o.f = nil
		return f, nil
	}
	if o.g.root == nil {
		return nil, fs.ErrNotExist
	}
	f, err := o.g.root.Open(o.p)
	if err != nil {
		return nil, err
	}
	if !o.g.inside(f) {
		f.Close()
		return nil, fs.ErrPermission
	}
	return f, nil
}

// rootFS is the tree around the grants: /, /workspace and the folders that
// lead to each grant, empty and read-only. Any other path does not exist,
// so a module asking for /etc/passwd reads "no such file".
type rootFS struct {
	experimentalsys.FS // wazero's adapter over the tree (tree)
	t                  *tree
}

var _ experimentalsys.FS = (*rootFS)(nil)

// newRootFS builds the tree for the grants' guest paths.
func newRootFS(guest []string) *rootFS {
	t := &tree{dirs: map[string][]string{".": nil}}
	linked := map[string]bool{} // folders listed in their parent
	add := func(p string) {
		for ; p != "." && !linked[p]; p = path.Dir(p) {
			linked[p] = true
			parent := path.Dir(p)
			t.dirs[parent] = append(t.dirs[parent], path.Base(p))
			if _, ok := t.dirs[p]; !ok {
				t.dirs[p] = nil
			}
		}
	}
	add(rel(world.WasmWorkspace))
	for _, g := range guest {
		add(rel(g))
	}
	for k := range t.dirs {
		slices.Sort(t.dirs[k])
	}
	return &rootFS{FS: &sysfs.AdaptFS{FS: t}, t: t}
}

// OpenFile implements experimentalsys.FS: folders open for reading only.
func (r *rootFS) OpenFile(name string, flag experimentalsys.Oflag, perm fs.FileMode) (experimentalsys.File, experimentalsys.Errno) {
	_, ok := r.t.dirs[rel(name)]
	switch {
	case ok && flag&(experimentalsys.O_WRONLY|experimentalsys.O_RDWR) != 0:
		return nil, experimentalsys.EISDIR
	case !ok && flag&experimentalsys.O_CREAT != 0:
		return nil, experimentalsys.EROFS
	case !ok:
		return nil, experimentalsys.ENOENT
	}
	return r.FS.OpenFile(rel(name), experimentalsys.O_RDONLY, 0)
}

func (r *rootFS) Readlink(name string) (string, experimentalsys.Errno) {
	if _, ok := r.t.dirs[rel(name)]; ok {
		return "", experimentalsys.EINVAL
	}
	return "", experimentalsys.ENOENT
}
func (*rootFS) Mkdir(string, fs.FileMode) experimentalsys.Errno { return experimentalsys.EROFS }
func (*rootFS) Chmod(string, fs.FileMode) experimentalsys.Errno { return experimentalsys.EROFS }
func (*rootFS) Rename(string, string) experimentalsys.Errno     { return experimentalsys.EROFS }
func (*rootFS) Rmdir(string) experimentalsys.Errno              { return experimentalsys.EROFS }
func (*rootFS) Unlink(string) experimentalsys.Errno             { return experimentalsys.EROFS }
func (*rootFS) Link(string, string) experimentalsys.Errno       { return experimentalsys.EROFS }
func (*rootFS) Symlink(string, string) experimentalsys.Errno    { return experimentalsys.EROFS }
func (*rootFS) Utimens(string, int64, int64) experimentalsys.Errno {
	return experimentalsys.EROFS
}

// tree is rootFS's folders as an fs.FS.
type tree struct {
	dirs map[string][]string // folder (relative to /) → its children
}

func (t *tree) Open(name string) (fs.File, error) {
	p := rel(name)
	kids, ok := t.dirs[p]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &treeDir{name: path.Base("/" + p), kids: kids, ino: fakeIno(p)}, nil
}

// treeDir is an open folder of tree.
type treeDir struct {
	name string
	kids []string
	ino  uint64
	next int
}

func (d *treeDir) Stat() (fs.FileInfo, error) { return dirInfo{d.name, d.ino}, nil }
func (d *treeDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.name, Err: syscall.EISDIR}
}
func (d *treeDir) Close() error { return nil }

func (d *treeDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.kids[d.next:]
	if n > 0 && len(rest) == 0 {
		return nil, io.EOF
	}
	if n > 0 && n < len(rest) {
		rest = rest[:n]
	}
	d.next += len(rest)
	out := make([]fs.DirEntry, len(rest))
	for i, k := range rest {
		out[i] = fs.FileInfoToDirEntry(dirInfo{k, 0})
	}
	return out, nil
}

type dirInfo struct {
	name string
	ino  uint64
}

func (i dirInfo) Name() string       { return i.name }
func (i dirInfo) Size() int64        { return 0 }
func (i dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o555 }
func (i dirInfo) ModTime() time.Time { return time.Time{} }
func (i dirInfo) IsDir() bool        { return true }
func (i dirInfo) Sys() any           { return &sys.Stat_t{Ino: i.ino, Mode: fs.ModeDir | 0o555, Nlink: 1} }

// fakeIno gives a virtual folder a stable, non-zero inode number (a Go
// program skips directory entries whose inode is 0).
func fakeIno(p string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p))
	return h.Sum64() | 1
}

// openGrants opens the tool's granted folders in the workspace, in order.
// A folder must be a real folder inside the workspace, reached without a
// symbolic link; a missing one is made (empty) only when granted for
// writing. The caller closes the roots.
func openGrants(op, workspace string, files []world.WasmFile) ([]*os.Root, error) {
	ws, err := os.OpenRoot(workspace)
	if err != nil {
		return nil, armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot open the agent's workspace: %v", err))
	}
	defer ws.Close()
	var roots []*os.Root
	fail := func(err error) ([]*os.Root, error) {
		for _, r := range roots {
			r.Close()
		}
		return nil, err
	}
	for _, g := range files {
		p := g.Path
		if p != "." {
			if _, why := cleanFolder(ws, p); why != "" {
				return fail(armory.E(op, armory.KindInvalid, fmt.Sprintf("the granted folder %s %s", p, why)))
			}
			fi, err := ws.Lstat(p)
			switch {
			case errors.Is(err, fs.ErrNotExist) && g.Write:
				if err := ws.MkdirAll(p, 0o750); err != nil {
					return fail(armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot create the granted folder %s in the workspace: %v", p, err)))
				}
				if _, why := cleanFolder(ws, p); why != "" {
					return fail(armory.E(op, armory.KindInvalid, fmt.Sprintf("the granted folder %s %s", p, why)))
				}
			case errors.Is(err, fs.ErrNotExist):
				return fail(armory.E(op, armory.KindNotFound, fmt.Sprintf("the workspace has no folder %s, which this tool reads (granted read-only, so it is not created): create it, or put the files there first", p)))
			case err != nil:
				return fail(armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot reach the granted folder %s: %v", p, err)))
			case !fi.IsDir():
				return fail(armory.E(op, armory.KindInvalid, fmt.Sprintf("the granted folder %s is not a folder in the workspace", p)))
			}
		}
		r, err := ws.OpenRoot(p)
		if err != nil {
			return fail(armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot open the granted folder %s: %v", p, err)))
		}
		roots = append(roots, r)
	}
	return roots, nil
}

// cleanFolder walks p in the workspace: no element may be a symbolic link
// (a grant names a real folder). It reports whether p exists.
func cleanFolder(ws *os.Root, p string) (bool, string) {
	elems := strings.Split(p, "/")
	for i := range elems {
		fi, err := ws.Lstat(strings.Join(elems[:i+1], "/"))
		if errors.Is(err, fs.ErrNotExist) {
			return false, ""
		}
		if err != nil {
			return false, fmt.Sprintf("cannot be reached: %v", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return false, fmt.Sprintf("is reached through the symbolic link %s; a grant must name a real folder of the workspace", strings.Join(elems[:i+1], "/"))
		}
		if i < len(elems)-1 && !fi.IsDir() {
			return false, fmt.Sprintf("is below %s, which is not a folder", strings.Join(elems[:i+1], "/"))
		}
	}
	return true, ""
}
