// Package workspace holds the tools over an agent's files (workspace.read,
// write, edit, delete, list, search, with previews of changes) and the
// confined file access they share (fs.go): paths resolve beneath the
// agent's workspace or a granted root and never leave it.
package workspace

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"unicode/utf8"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// wsPathDoc describes the path argument of every workspace tool.
const wsPathDoc = `Path relative to your workspace. Prefixes: @me/ (your workspace, the default when there is no prefix), @project:{id}/ and @org:{id}/ (shared folders you were granted). Absolute paths and .. above the root are refused.`

// Read is workspace.read: it returns up to ReadLimit bytes of a regular
// text file, with a visible marker when more follows. It follows symbolic
// links only while they stay inside the root, never opens a FIFO, device
// or socket (the open is non-blocking and the type is checked on the open
// descriptor), and refuses binary files. Safe for concurrent use.
type Read struct{}

var _ armory.Tool = (*Read)(nil)

func (*Read) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.read",
		Description: "Read a text file from your workspace (or a granted @project:/@org: folder). Shows at most 64 KB per call with a [truncated ...] marker saying how to read on with offset.",
		InputSchema: args.Schema([]string{"path"}, `"path":{"type":"string","description":`+schemaString(wsPathDoc)+`},"offset":{"type":"integer","minimum":0,"description":"Byte offset to start reading at (default 0); the truncation marker tells you the next one"}`),
	}
}

func (*Read) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapReadFS}, Permission: armory.PermAuto, Category: armory.CatFileRead}
}

// Execute reads the file. Failures: KindInvalid (bad arguments, a folder,
// a binary file, offset past the end), KindNotFound, KindPermission (a path
// leading outside the root, a FIFO/device/socket), KindUnavailable (no
// workspace).
func (t *Read) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.read"
	var a struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	if a.Offset < 0 {
		return armory.Failf(armory.KindInvalid, "offset must be 0 or more")
	}
	tg, err := parseFile(op, inv.Agent, a.Path)
	if err != nil {
		return armory.FailErr(err)
	}
	// O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOCTTY: a
	// terminal never becomes ours. The type is checked on the descriptor.
	fd, err := openIn(op, tg, tg.rel, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY)
	if err != nil {
		return armory.FailErr(fsError(op, tg, err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return armory.FailErr(fsError(op, tg, err))
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFDIR:
		return armory.Failf(armory.KindInvalid, "%s is a folder; use workspace.list to see what is in it", tg)
	default:
		return armory.Failf(armory.KindPermission, "%s is a %s, not a regular file; only regular files can be read", tg, fileKind(st.Mode))
	}
	size := st.Size
	if a.Offset > size {
		return armory.Failf(armory.KindInvalid, "offset %d is past the end of %s (%d bytes)", a.Offset, tg, size)
	}
	want := min(size-a.Offset, ReadLimit)
	// Room for the marker, so the text is built in one buffer.
	buf := make([]byte, want, want+192)
	n, err := preadFull(fd, buf, a.Offset)
	if err != nil {
		return armory.FailErr(fsError(op, tg, err))
	}
	buf = buf[:n]
	if bytes.IndexByte(buf, 0) >= 0 {
		return armory.Failf(armory.KindInvalid, "%s looks binary (it contains NUL bytes; %d bytes in all); workspace.read shows text only", tg, size)
	}
	end := a.Offset + int64(n)
	if end < size {
		// Do not cut a UTF-8 character in two: end before it and let the
		// next read start with it.
		if cut := incompleteRuneTail(buf); cut > 0 {
			buf = buf[:len(buf)-cut]
			end -= int64(cut)
		}
	}
	switch {
	case size == 0:
		buf = append(buf, "[empty file]"...)
	case end < size:
		buf = fmt.Appendf(buf, "\n[truncated: showed bytes %d-%d of %d; %d more bytes not shown; read on with offset %d]", a.Offset, end, size, size-end, end)
	}
	// buf is never used again, so the text can share its memory.
	text := unsafe.String(unsafe.SliceData(buf), len(buf))
	return armory.Result{Success: true, Text: text}
}

// incompleteRuneTail returns how many bytes at the end of b are the start
// of a UTF-8 character that continues beyond b (0 to 3).
func incompleteRuneTail(b []byte) int {
	for i := 1; i <= 3 && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(b[len(b)-i:]) {
				return 0
			}
			return i
		}
	}
	return 0
}

// Write is workspace.write: it creates or replaces a file, creating its
// parent folders. The new content is written to a temporary file in the
// same folder and renamed into place, so readers see the old or the new
// file, never half of one. It never follows a symbolic link (in the
// wsPath or in any parent folder), refuses files with more than one hard
// link, FIFOs and devices, and refuses protected paths (see protected)
// unless AllowProtected is set. Safe for concurrent use.
type Write struct {
	// AllowProtected lets the tool write protected paths such as
	// .git/hooks/ and .bashrc. Off by default.
	AllowProtected bool
}

var _ armory.Tool = (*Write)(nil)

func (*Write) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.write",
		Description: "Create or replace a file in your workspace with the given content (at most 8 MB), creating parent folders. The file is replaced atomically. Symbolic links are not followed; protected paths (.git/hooks, .git/config, .armory, .ssh, shell start-up files) are refused.",
		InputSchema: args.Schema([]string{"path", "content"}, `"path":{"type":"string","description":`+schemaString(wsPathDoc)+`},"content":{"type":"string","description":"The whole new content of the file"}`),
	}
}

func (*Write) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapWriteFS}, Permission: armory.PermAuto, Category: armory.CatFileWrite}
}

// writeArgs are the arguments of workspace.write (Execute and Preview).
type writeArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

// Execute writes the file. Failures: KindInvalid (bad arguments, content
// over WriteLimit, a folder), KindPermission (protected path, symbolic link,
// hard link, non-regular file, a path leading outside), KindNotFound (a
// granted root that does not exist), KindUnavailable (no workspace, disk full).
func (t *Write) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.write"
	var a writeArgs
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	if a.Content == nil {
		return armory.Failf(armory.KindInvalid, "content is required (use \"\" for an empty file)")
	}
	if len(*a.Content) > WriteLimit {
		return armory.Failf(armory.KindInvalid, "content is %d bytes; the limit is %d", len(*a.Content), WriteLimit)
	}
	tg, err := parseFile(op, inv.Agent, a.Path)
	if err != nil {
		return armory.FailErr(err)
	}
	dirfd, base, err := openToChange(op, tg, "write", t.AllowProtected, true)
	if err != nil {
		return armory.FailErr(err)
	}
	defer unix.Close(dirfd)
	created, err := writeAtomic(op, tg, dirfd, base, []byte(*a.Content), nil)
	if err != nil {
		return armory.FailErr(err)
	}
	verb := "replaced"
	if created {
		verb = "created"
	}
	return armory.Result{
		Success: true,
		Text:    fmt.Sprintf("%s %s (%d bytes)", verb, tg, len(*a.Content)),
		Value:   map[string]any{"path": tg.String(), "bytes": len(*a.Content), "created": created},
	}
}

// splitRel splits a cleaned relative path into its folder ("." at the
// root) and last name.
func splitRel(rel string) (dir, base string) {
	i := strings.LastIndexByte(rel, '/')
	if i < 0 {
		return ".", rel
	}
	return rel[:i], rel[i+1:]
}

// List is workspace.list: it lists a folder (folders end in /, files show
// their size, links show their wsPath and are never followed). Recursive
// listing does not descend into .git folders and stops at ListLimit
// entries or WalkMaxDepth levels. Safe for concurrent use.
type List struct{}

var _ armory.Tool = (*List)(nil)

func (*List) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.list",
		Description: "List files and folders in your workspace or a granted @project:/@org: folder (folders end in /). At most 1000 entries.",
		InputSchema: args.Schema(nil, `"path":{"type":"string","description":`+schemaString("Folder to list. "+wsPathDoc+" Default: the workspace itself.")+`},"recursive":{"type":"boolean","description":"Descend into subfolders (not into .git)"}`),
	}
}

func (*List) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerSafe, Capabilities: []armory.Capability{armory.CapReadFS}, Permission: armory.PermAuto, Category: armory.CatFileRead}
}

// Execute lists the folder. Failures: KindInvalid, KindNotFound,
// KindPermission, KindUnavailable, KindTimeout when ctx ends.
func (t *List) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.list"
	var a struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	tg, err := parseTarget(op, inv.Agent, a.Path)
	if err != nil {
		return armory.FailErr(err)
	}
	fd, err := openIn(op, tg, tg.rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK)
	if err != nil {
		if err == unix.ENOTDIR {
			return armory.Failf(armory.KindInvalid, "%s is not a folder; use workspace.read for files", tg)
		}
		return armory.FailErr(fsError(op, tg, err))
	}
	defer unix.Close(fd)
	var lines []string
	truncated := false
	err = walkTree(ctx, fd, "", 1, ListLimit+1, func(e *walkEntry) (bool, error) {
		if len(lines) >= ListLimit {
			truncated = true
			return false, errStopWalk
		}
		switch e.st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			lines = append(lines, e.rel+"/")
			return a.Recursive && !strings.EqualFold(e.name, ".git"), nil
		case unix.S_IFREG:
			lines = append(lines, fmt.Sprintf("%s (%d bytes)", e.rel, e.st.Size))
		case unix.S_IFLNK:
			buf := make([]byte, 512)
			n, err := unix.Readlinkat(e.dirfd, e.name, buf)
			if err != nil {
				n = 0
			}
			lines = append(lines, fmt.Sprintf("%s -> %s (symbolic link)", e.rel, strings.ToValidUTF8(string(buf[:n]), "?")))
		default:
			lines = append(lines, fmt.Sprintf("%s (%s)", e.rel, fileKind(e.st.Mode)))
		}
		return false, nil
	})
	if err != nil && err != errStopWalk {
		if ctx.Err() != nil {
			return wsCtxFail(op, ctx.Err())
		}
		return armory.FailErr(fsError(op, tg, err))
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(strings.ToValidUTF8(l, "?"))
	}
	if len(lines) == 0 {
		b.WriteString("(empty)")
	}
	if truncated {
		fmt.Fprintf(&b, "\n[truncated at %d entries; list a subfolder to see more]", ListLimit)
	}
	return armory.Result{Success: true, Text: b.String()}
}
