package workspace

import (
	"context"
	"errors"
	"fmt"
	"path"

	"golang.org/x/sys/unix"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// Delete is workspace.delete: it removes a file, a symbolic link (never
// its target) or an empty folder; a folder with content only with
// recursive set. It never removes a root itself, and never a protected
// path nor a folder holding one (unless AllowProtected is set). A
// recursive delete first checks the whole tree (at most DeleteMaxEntries
// entries, WalkMaxDepth levels) and removes nothing when a check fails.
// No symbolic link is followed. Safe for concurrent use.
type Delete struct {
	// AllowProtected lets the tool delete protected paths. Off by default.
	AllowProtected bool
}

var _ armory.Tool = (*Delete)(nil)

func (*Delete) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.delete",
		Description: "Delete a file or an empty folder in your workspace. A folder with content is deleted only with recursive: true (at most 10000 entries). Never deletes the workspace root or protected paths (.git, .git/hooks, .git/config, .armory, .ssh, shell start-up files).",
		InputSchema: args.Schema([]string{"path"},
			`"path":{"type":"string","description":`+schemaString(wsPathDoc)+`},`+
				`"recursive":{"type":"boolean","description":"Delete a folder with everything inside it (default false)"}`),
	}
}

func (*Delete) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerCritical, Capabilities: []armory.Capability{armory.CapWriteFS}, Permission: armory.PermConfirm, Category: armory.CatFileDelete}
}

// deleteArgs are the arguments of workspace.delete (Execute and Preview).
type deleteArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
}

// Execute deletes. Failures: KindInvalid (bad arguments, the root itself,
// too many entries or levels), KindNotFound, KindPermission (protected
// path inside, a path leading outside or through a link), KindConflict (a
// non-empty folder without recursive), KindTimeout when ctx ends.
func (t *Delete) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.delete"
	var a deleteArgs
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	if a.Path == "" {
		return armory.Failf(armory.KindInvalid, "path is empty; give the file or folder to delete")
	}
	tg, err := parseTarget(op, inv.Agent, a.Path)
	if err != nil {
		return armory.FailErr(err)
	}
	if tg.rel == "." {
		return armory.Failf(armory.KindInvalid, "refusing to delete %s itself; delete the files inside it instead", tg.rootLabel())
	}
	dirfd, base, err := openToChange(op, tg, "delete", t.AllowProtected, false)
	if err != nil {
		return armory.FailErr(err)
	}
	defer unix.Close(dirfd)
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return armory.FailErr(fsError(op, tg, err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		if err := unix.Unlinkat(dirfd, base, 0); err != nil {
			return armory.FailErr(fsError(op, tg, err))
		}
		what := "file"
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			what = "symbolic link (its target was not touched)"
		} else if st.Mode&unix.S_IFMT != unix.S_IFREG {
			what = fileKind(st.Mode)
		}
		return armory.Result{Success: true, Text: fmt.Sprintf("deleted %s %s", what, tg), Value: map[string]any{"path": tg.String(), "entries": 1}}
	}
	err = unix.Unlinkat(dirfd, base, unix.AT_REMOVEDIR)
	if err == nil {
		return armory.Result{Success: true, Text: fmt.Sprintf("deleted empty folder %s", tg), Value: map[string]any{"path": tg.String(), "entries": 1}}
	}
	if err != unix.ENOTEMPTY && err != unix.EEXIST {
		return armory.FailErr(fsError(op, tg, err))
	}
	if !a.Recursive {
		return armory.Failf(armory.KindConflict, "%s is a folder that is not empty; set recursive to true to delete it with everything inside", tg)
	}

	// Pass 1: check the whole tree before removing anything.
	sub, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return armory.FailErr(fsError(op, tg, symlinkErr(dirfd, base, err)))
	}
	entries := 0
	var refuse error
	err = walkTree(ctx, sub, "", 1, DeleteMaxEntries+1, func(e *walkEntry) (bool, error) {
		entries++
		rel := path.Join(tg.rel, e.rel)
		switch {
		case entries > DeleteMaxEntries:
			refuse = armory.E(op, armory.KindInvalid, fmt.Sprintf("%s holds more than %d entries; nothing was deleted (delete its subfolders one by one)", tg, DeleteMaxEntries))
		case e.depth >= WalkMaxDepth && e.st.Mode&unix.S_IFMT == unix.S_IFDIR:
			refuse = armory.E(op, armory.KindInvalid, fmt.Sprintf("%s is nested deeper than %d levels; nothing was deleted (delete its deepest subfolders first)", tg, WalkMaxDepth))
		case !t.AllowProtected && protectedReason(rel) != "":
			refuse = armory.E(op, armory.KindPermission, fmt.Sprintf("%s holds the protected path %s (%s); nothing was deleted", tg, tg.show(rel), protectedReason(rel)))
		}
		if refuse != nil {
			return false, errStopWalk
		}
		return true, nil
	})
	unix.Close(sub)
	switch {
	case ctx.Err() != nil:
		return wsCtxFail(op, ctx.Err())
	case refuse != nil:
		return armory.FailErr(refuse)
	case err != nil && err != errStopWalk:
		return armory.FailErr(fsError(op, tg, err))
	}

	// Pass 2: remove bottom-up, by descriptor, without following links.
	removed, err := removeTree(ctx, dirfd, base, 0)
	if err != nil {
		if ctx.Err() != nil {
			return wsCtxFail(op, ctx.Err())
		}
		fe := fsError(op, tg, err)
		return armory.Failf(armory.KindOf(fe), "deleting %s stopped after %d entries: %s", tg, removed, armory.Message(fe))
	}
	return armory.Result{Success: true, Text: fmt.Sprintf("deleted folder %s and the %d entries inside it", tg, removed-1), Value: map[string]any{"path": tg.String(), "entries": removed}}
}

// errTooDeep stops removeTree beyond WalkMaxDepth.
var errTooDeep = errors.New("folder nested too deeply")

// removeTree removes the folder name in parent and everything in it,
// opening each folder with O_NOFOLLOW on its parent's descriptor, and
// returns how many entries it removed (the folder included).
func removeTree(ctx context.Context, parent int, name string, depth int) (int, error) {
	if depth > WalkMaxDepth {
		return 0, errTooDeep
	}
	fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, err
	}
	defer unix.Close(fd)
	removed := 0
	for {
		names, err := readNames(fd, 1024)
		if err != nil {
			return removed, err
		}
		if len(names) == 0 {
			break
		}
		progress := false
		for _, n := range names {
			if err := ctx.Err(); err != nil {
				return removed, err
			}
			var st unix.Stat_t
			if unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				k, err := removeTree(ctx, fd, n, depth+1)
				removed += k
				if err != nil {
					return removed, err
				}
			} else if err := unix.Unlinkat(fd, n, 0); err == nil {
				removed++
			} else if err != unix.ENOENT {
				return removed, err
			}
			progress = true
		}
		if !progress {
			break
		}
		if _, err := unix.Seek(fd, 0, 0); err != nil {
			return removed, err
		}
	}
	if err := unix.Unlinkat(parent, name, unix.AT_REMOVEDIR); err != nil {
		return removed, err
	}
	return removed + 1, nil
}
