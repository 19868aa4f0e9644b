package workspace

import (
	"context"
	"errors"
	"fmt"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"
	"golang.org/x/sys/unix"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// PreviewLimit bounds the files (before and after) a preview diffs; larger
// changes are described by their sizes only. MaxPreviewBytes bounds the
// diff itself (cut with a note past it).
const (
	PreviewLimit    = 1 << 20
	MaxPreviewBytes = 64 << 10
)

var (
	_ armory.Previewer = (*Write)(nil)
	_ armory.Previewer = (*Edit)(nil)
)

// readCurrent reads the file a write or edit would change, following no
// symbolic link (as those tools do). A missing file (or folder) is
// exists false, not an error.
func readCurrent(op string, env *armory.AgentEnv, path string) (tg wsPath, content string, exists bool, err error) {
	tg, err = parseFile(op, env, path)
	if err != nil {
		return tg, "", false, err
	}
	dirfd, base, err := openParent(op, tg, false)
	if err == unix.ENOENT {
		return tg, "", false, nil
	}
	if err != nil {
		return tg, "", false, fsError(op, tg, err)
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return tg, "", false, nil
	}
	if err != nil {
		return tg, "", false, fsError(op, tg, symlinkErr(dirfd, base, err))
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return tg, "", false, fsError(op, tg, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return tg, "", false, armory.E(op, armory.KindPermission, tg.String()+" is not a regular file")
	}
	if st.Size > PreviewLimit {
		return tg, "", true, errTooLarge{st.Size}
	}
	buf := make([]byte, st.Size)
	n, err := preadFull(fd, buf, 0)
	if err != nil {
		return tg, "", false, fsError(op, tg, err)
	}
	return tg, string(buf[:n]), true, nil
}

type errTooLarge struct{ size int64 }

func (e errTooLarge) Error() string { return fmt.Sprintf("%d bytes", e.size) }

// unified returns the unified diff of a change of tg from old to new,
// bounded by PreviewLimit and MaxPreviewBytes.
func unified(tg wsPath, exists bool, old, new string) string {
	from := "a/" + tg.String()
	if !exists {
		from = "/dev/null"
	}
	if len(new) > PreviewLimit {
		return fmt.Sprintf("%s: %d bytes → %d bytes (too large to show a diff; the limit is %d bytes)\n", tg, len(old), len(new), PreviewLimit)
	}
	if strings.IndexByte(old, 0) >= 0 || strings.IndexByte(new, 0) >= 0 {
		return fmt.Sprintf("%s: binary content, %d bytes → %d bytes\n", tg, len(old), len(new))
	}
	d := udiff.Unified(from, "b/"+tg.String(), old, new)
	if d == "" {
		return fmt.Sprintf("%s: no change\n", tg)
	}
	if len(d) > MaxPreviewBytes {
		cut := strings.LastIndexByte(d[:MaxPreviewBytes], '\n') + 1
		d = d[:cut] + fmt.Sprintf("… diff cut at %d bytes (it is %d bytes)\n", cut, len(d))
	}
	return d
}

// Preview returns the unified diff that the write would make against the
// current file (from /dev/null for a new file). It changes nothing.
func (t *Write) Preview(ctx context.Context, inv armory.Invocation) (string, error) {
	const op = "workspace.write"
	var a writeArgs
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return "", err
	}
	if a.Content == nil {
		return "", armory.E(op, armory.KindInvalid, "content is required")
	}
	tg, old, exists, err := readCurrent(op, inv.Agent, a.Path)
	var big errTooLarge
	if errors.As(err, &big) {
		return fmt.Sprintf("%s: %d bytes → %d bytes (too large to show a diff; the limit is %d bytes)\n", tg, big.size, len(*a.Content), PreviewLimit), nil
	}
	if err != nil {
		return "", err
	}
	return unified(tg, exists, old, *a.Content), nil
}

// Preview returns the unified diff that the edit would make against the
// current file, or an error saying why the edit would fail (old_string
// absent or not unique). It changes nothing.
func (t *Edit) Preview(ctx context.Context, inv armory.Invocation) (string, error) {
	const op = "workspace.edit"
	var a editArgs
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return "", err
	}
	if a.OldString == nil || a.NewString == nil || *a.OldString == "" {
		return "", armory.E(op, armory.KindInvalid, "old_string and new_string are required")
	}
	tg, old, exists, err := readCurrent(op, inv.Agent, a.Path)
	var big errTooLarge
	if errors.As(err, &big) {
		return fmt.Sprintf("%s: %d bytes, too large to show a diff (the limit is %d bytes)\n", tg, big.size, PreviewLimit), nil
	}
	if err != nil {
		return "", err
	}
	if !exists {
		return "", armory.E(op, armory.KindNotFound, tg.String()+" does not exist")
	}
	switch n := strings.Count(old, *a.OldString); {
	case n == 0:
		return "", armory.E(op, armory.KindInvalid, "old_string is not in "+tg.String()+"; the edit would fail")
	case n > 1 && !a.ReplaceAll:
		return "", armory.E(op, armory.KindInvalid, fmt.Sprintf("old_string occurs %d times in %s; the edit would fail", n, tg))
	}
	var out string
	if a.ReplaceAll {
		out = strings.ReplaceAll(old, *a.OldString, *a.NewString)
	} else {
		out = strings.Replace(old, *a.OldString, *a.NewString, 1)
	}
	return unified(tg, true, old, out), nil
}

var _ armory.Previewer = (*Delete)(nil)

// Preview returns, for a file, the unified diff of its deletion (every line
// removed, to /dev/null); for a folder, a line saying so. It changes
// nothing.
func (t *Delete) Preview(ctx context.Context, inv armory.Invocation) (string, error) {
	const op = "workspace.delete"
	var a deleteArgs
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return "", err
	}
	tg, old, exists, err := readCurrent(op, inv.Agent, a.Path)
	var big errTooLarge
	switch {
	case errors.As(err, &big):
		return fmt.Sprintf("%s: deleted, %d bytes (too large to show a diff; the limit is %d bytes)\n", tg, big.size, PreviewLimit), nil
	case armory.KindOf(err) == armory.KindPermission && a.Recursive:
		return fmt.Sprintf("%s: not a regular file; a recursive delete removes it with everything in it\n", tg), nil
	case err != nil:
		return "", err
	case !exists:
		return "", armory.E(op, armory.KindNotFound, tg.String()+" does not exist")
	}
	if strings.IndexByte(old, 0) >= 0 {
		return fmt.Sprintf("%s: deleted, binary content, %d bytes\n", tg, len(old)), nil
	}
	d := udiff.Unified("a/"+tg.String(), "/dev/null", old, "")
	if len(d) > MaxPreviewBytes {
		cut := strings.LastIndexByte(d[:MaxPreviewBytes], '\n') + 1
		d = d[:cut] + fmt.Sprintf("… diff cut at %d bytes (it is %d bytes)\n", cut, len(d))
	}
	return d, nil
}
