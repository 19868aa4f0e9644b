package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	"github.com/armory-dev/armory"
)

// Limits of the workspace tools.
const (
	// ReadLimit is how much of a file workspace.read returns.
	ReadLimit = 64 << 10
	// WriteLimit is the largest content workspace.write accepts.
	WriteLimit = 8 << 20
	// ListLimit is the most entries workspace.list returns.
	ListLimit = 1000
)

// resolvePath turns a tool path argument into a path relative to the
// agent's workspace root. "@me/" is the workspace itself. Confinement is
// enforced by os.Root when the path is opened; this only rejects what can
// never be valid.
func resolvePath(tool, p string, allowEmpty bool) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", armory.E(tool, armory.KindInvalid, "path contains a NUL byte")
	}
	p = strings.TrimPrefix(p, "@me/")
	if p == "@me" {
		p = ""
	}
	if strings.HasPrefix(p, "@") {
		return "", armory.E(tool, armory.KindInvalid, fmt.Sprintf("unknown workspace prefix in %q (use a path relative to your workspace, or @me/)", p))
	}
	if path.IsAbs(p) {
		return "", armory.E(tool, armory.KindInvalid, fmt.Sprintf("path %q is absolute; use a path relative to your workspace", p))
	}
	p = path.Clean("/" + p)[1:] // lexical clean, never above the root
	if p == "" {
		if !allowEmpty {
			return "", armory.E(tool, armory.KindInvalid, "path is empty")
		}
		p = "."
	}
	return p, nil
}

// openWorkspace opens the agent's workspace as an os.Root, creating it on
// first use.
func openWorkspace(tool string, env *armory.AgentEnv) (*os.Root, error) {
	if env == nil || env.Workspace == "" {
		return nil, armory.E(tool, armory.KindUnavailable, "this agent has no workspace")
	}
	if err := os.MkdirAll(env.Workspace, 0o750); err != nil {
		return nil, armory.E(tool, armory.KindInternal, "cannot create workspace", err)
	}
	r, err := os.OpenRoot(env.Workspace)
	if err != nil {
		return nil, armory.E(tool, armory.KindInternal, "cannot open workspace", err)
	}
	return r, nil
}

// fsError turns an error from os.Root into a message for the model.
func fsError(tool, p string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return armory.E(tool, armory.KindNotFound, fmt.Sprintf("no such file: %s", p))
	case errors.Is(err, fs.ErrPermission):
		return armory.E(tool, armory.KindPermission, fmt.Sprintf("permission denied: %s", p))
	case strings.Contains(err.Error(), "path escapes from parent"):
		return armory.E(tool, armory.KindPermission, fmt.Sprintf("path %s leaves the workspace", p))
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return armory.E(tool, armory.KindInvalid, fmt.Sprintf("%s: %v", p, pe.Err))
	}
	return armory.E(tool, armory.KindInternal, p, err)
}

// Read is workspace.read.
type Read struct{}

var _ armory.Tool = (*Read)(nil)

func (*Read) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.read",
		Description: "Read a file from the agent workspace. Output is truncated at 64 KB; use offset to read further.",
		InputSchema: schema([]string{"path"}, `"path":{"type":"string","description":"File path relative to the workspace (or @me/...)"},"offset":{"type":"integer","minimum":0,"description":"Byte offset to start reading at (default 0)"}`),
	}
}

func (*Read) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapReadFS}, Permission: armory.PermAuto, Category: armory.CatFileRead}
}

func (t *Read) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.read"
	var a struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
	}
	if err := decodeArgs(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	if a.Offset < 0 {
		return armory.Failf(armory.KindInvalid, "offset must be 0 or more")
	}
	p, err := resolvePath(op, a.Path, false)
	if err != nil {
		return armory.FailErr(err)
	}
	root, err := openWorkspace(op, inv.Agent)
	if err != nil {
		return armory.FailErr(err)
	}
	defer root.Close()
	// O_NONBLOCK: opening a FIFO must not hang; only regular files are read.
	f, err := root.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return armory.FailErr(fsError(op, a.Path, err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return armory.FailErr(fsError(op, a.Path, err))
	}
	if fi.IsDir() {
		return armory.Failf(armory.KindInvalid, "%s is a directory; use workspace.list", a.Path)
	}
	if !fi.Mode().IsRegular() {
		return armory.Failf(armory.KindInvalid, "%s is not a regular file", a.Path)
	}
	if a.Offset > 0 {
		if _, err := f.Seek(a.Offset, io.SeekStart); err != nil {
			return armory.FailErr(fsError(op, a.Path, err))
		}
	}
	buf := make([]byte, ReadLimit)
	n, err := io.ReadFull(f, buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return armory.FailErr(fsError(op, a.Path, err))
	}
	text := string(buf[:n])
	if rest := fi.Size() - a.Offset - int64(n); rest > 0 {
		text += fmt.Sprintf("\n[truncated: showed bytes %d-%d of %d; %d more bytes not shown; read on with offset %d]", a.Offset, a.Offset+int64(n), fi.Size(), rest, a.Offset+int64(n))
	}
	return armory.Result{Success: true, Text: text}
}

// Write is workspace.write.
type Write struct{}

var _ armory.Tool = (*Write)(nil)

func (*Write) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.write",
		Description: "Write content to a file in the agent workspace, creating parent folders. Replaces the file atomically.",
		InputSchema: schema([]string{"path", "content"}, `"path":{"type":"string","description":"File path relative to the workspace (or @me/...)"},"content":{"type":"string","description":"The whole new content of the file"}`),
	}
}

func (*Write) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapWriteFS}, Permission: armory.PermAuto, Category: armory.CatFileWrite}
}

func (t *Write) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.write"
	var a struct {
		Path    string `json:"path"`
		Content string `json:"content"`
	}
	if err := decodeArgs(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	if len(a.Content) > WriteLimit {
		return armory.Failf(armory.KindInvalid, "content is %d bytes; the limit is %d", len(a.Content), WriteLimit)
	}
	p, err := resolvePath(op, a.Path, false)
	if err != nil {
		return armory.FailErr(err)
	}
	if p == "." {
		return armory.Failf(armory.KindInvalid, "path names the workspace itself; give a file name")
	}
	root, err := openWorkspace(op, inv.Agent)
	if err != nil {
		return armory.FailErr(err)
	}
	defer root.Close()
	if dir := path.Dir(p); dir != "." {
		if err := root.MkdirAll(dir, 0o750); err != nil {
			return armory.FailErr(fsError(op, a.Path, err))
		}
	}
	if fi, err := root.Lstat(p); err == nil {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return armory.Failf(armory.KindPermission, "%s is a symbolic link; refusing to write through it", a.Path)
		case fi.IsDir():
			return armory.Failf(armory.KindInvalid, "%s is a directory", a.Path)
		case !fi.Mode().IsRegular():
			return armory.Failf(armory.KindPermission, "%s is not a regular file", a.Path)
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			return armory.Failf(armory.KindPermission, "%s has %d hard links; refusing to write a file shared with another path", a.Path, st.Nlink)
		}
	}
	// Write a temporary file beside the target and rename it into place,
	// so a reader never sees half a file and a failure leaves nothing behind.
	tmp := path.Join(path.Dir(p), fmt.Sprintf(".%s.armory-tmp-%d", path.Base(p), os.Getpid()))
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return armory.FailErr(fsError(op, a.Path, err))
	}
	_, werr := io.WriteString(f, a.Content)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = root.Rename(tmp, p)
	}
	if werr != nil {
		_ = root.Remove(tmp)
		return armory.FailErr(fsError(op, a.Path, werr))
	}
	return armory.Result{Success: true, Text: fmt.Sprintf("wrote %d bytes to %s", len(a.Content), p), Value: map[string]any{"path": p, "bytes": len(a.Content)}}
}

// List is workspace.list.
type List struct{}

var _ armory.Tool = (*List)(nil)

func (*List) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.list",
		Description: "List files and folders in the agent workspace (folders end in /).",
		InputSchema: schema(nil, `"path":{"type":"string","description":"Folder relative to the workspace (default: the workspace itself)"},"recursive":{"type":"boolean","description":"Descend into subfolders"}`),
	}
}

func (*List) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerSafe, Capabilities: []armory.Capability{armory.CapReadFS}, Permission: armory.PermAuto, Category: armory.CatFileRead}
}

func (t *List) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.list"
	var a struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := decodeArgs(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	p, err := resolvePath(op, a.Path, true)
	if err != nil {
		return armory.FailErr(err)
	}
	root, err := openWorkspace(op, inv.Agent)
	if err != nil {
		return armory.FailErr(err)
	}
	defer root.Close()
	fi, err := root.Stat(p)
	if err != nil {
		return armory.FailErr(fsError(op, a.Path, err))
	}
	if !fi.IsDir() {
		return armory.Failf(armory.KindInvalid, "%s is not a folder", a.Path)
	}
	var lines []string
	truncated := false
	walkErr := fs.WalkDir(root.FS(), p, func(name string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return nil // unreadable entry: skip, keep listing
		}
		if name == p {
			return nil
		}
		if len(lines) >= ListLimit {
			truncated = true
			return fs.SkipAll
		}
		rel := strings.TrimPrefix(name, p+"/")
		if p == "." {
			rel = name
		}
		switch {
		case d.IsDir():
			lines = append(lines, rel+"/")
			if !a.Recursive {
				return fs.SkipDir
			}
		case d.Type()&fs.ModeSymlink != 0:
			lines = append(lines, rel+" -> (symlink)")
		default:
			size := int64(-1)
			if info, err := d.Info(); err == nil {
				size = info.Size()
			}
			lines = append(lines, fmt.Sprintf("%s (%d bytes)", rel, size))
		}
		return nil
	})
	if walkErr != nil && !errors.Is(walkErr, fs.SkipAll) {
		return armory.FailErr(fsError(op, a.Path, walkErr))
	}
	sort.Strings(lines)
	text := strings.Join(lines, "\n")
	if len(lines) == 0 {
		text = "(empty)"
	}
	if truncated {
		text += fmt.Sprintf("\n[truncated at %d entries; list a subfolder to see more]", ListLimit)
	}
	return armory.Result{Success: true, Text: text}
}
