package workspace

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// Edit is workspace.edit: exact string replacement in a file. old_string
// must occur exactly once unless replace_all is set; the result says how
// many occurrences were replaced. The file is loaded (at most EditLimit
// bytes) and replaced atomically like workspace.write, and only if it did
// not change in between (else KindConflict). It follows no symbolic link,
// refuses files with more than one hard link and non-regular files, and
// refuses protected paths unless AllowProtected is set. Safe for
// concurrent use.
type Edit struct {
	// AllowProtected lets the tool edit protected paths. Off by default.
	AllowProtected bool
}

var _ armory.Tool = (*Edit)(nil)

func (*Edit) Spec() armory.Spec {
	return armory.Spec{
		Name:        "workspace.edit",
		Description: "Edit a file in your workspace by replacing an exact string. old_string must match the file exactly (whitespace and indentation included) and occur once, unless replace_all is true. Says how many occurrences were replaced.",
		InputSchema: args.Schema([]string{"path", "old_string", "new_string"},
			`"path":{"type":"string","description":`+schemaString(wsPathDoc)+`},`+
				`"old_string":{"type":"string","minLength":1,"description":"The exact text to replace; include enough surrounding lines to make it unique"},`+
				`"new_string":{"type":"string","description":"The text to put in its place (may be empty to delete old_string)"},`+
				`"replace_all":{"type":"boolean","description":"Replace every occurrence instead of requiring exactly one (default false)"}`),
	}
}

func (*Edit) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerDangerous, Capabilities: []armory.Capability{armory.CapReadFS, armory.CapWriteFS}, Permission: armory.PermAuto, Category: armory.CatFileWrite}
}

// editArgs are the arguments of workspace.edit (Execute and Preview).
type editArgs struct {
	Path       string  `json:"path"`
	OldString  *string `json:"old_string"`
	NewString  *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
}

// Execute edits the file. Failures: KindInvalid (bad arguments, old_string
// absent or not unique, a file over EditLimit or a result over WriteLimit,
// a binary file), KindNotFound, KindPermission (protected path, symbolic
// link, hard link, non-regular file), KindConflict (the file changed
// during the edit).
func (t *Edit) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.edit"
	var a editArgs
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	switch {
	case a.OldString == nil || a.NewString == nil:
		return armory.Failf(armory.KindInvalid, "old_string and new_string are required")
	case *a.OldString == "":
		return armory.Failf(armory.KindInvalid, "old_string is empty; give the exact text to replace (to write a whole file use workspace.write)")
	case *a.OldString == *a.NewString:
		return armory.Failf(armory.KindInvalid, "old_string and new_string are the same; nothing would change")
	case len(*a.OldString) > EditLimit || len(*a.NewString) > WriteLimit:
		return armory.Failf(armory.KindInvalid, "old_string or new_string is too long (limit %d bytes)", WriteLimit)
	}
	tg, err := parseFile(op, inv.Agent, a.Path)
	if err != nil {
		return armory.FailErr(err)
	}
	dirfd, base, err := openToChange(op, tg, "edit", t.AllowProtected, false)
	if err != nil {
		return armory.FailErr(err)
	}
	defer unix.Close(dirfd)

	fd, err := unix.Openat(dirfd, base, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return armory.FailErr(fsError(op, tg, symlinkErr(dirfd, base, err)))
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return armory.FailErr(fsError(op, tg, err))
	}
	if err := checkWritable(op, tg, &st); err != nil {
		unix.Close(fd)
		return armory.FailErr(err)
	}
	if st.Size > EditLimit {
		unix.Close(fd)
		return armory.Failf(armory.KindInvalid, "%s is %d bytes; workspace.edit handles files up to %d bytes", tg, st.Size, EditLimit)
	}
	buf := make([]byte, st.Size)
	n, err := preadFull(fd, buf, 0)
	unix.Close(fd)
	if err != nil {
		return armory.FailErr(fsError(op, tg, err))
	}
	content := string(buf[:n])
	if int64(n) != st.Size {
		return armory.Failf(armory.KindConflict, "%s changed while it was being read; try again", tg)
	}
	if strings.IndexByte(content, 0) >= 0 {
		return armory.Failf(armory.KindInvalid, "%s looks binary (it contains NUL bytes); workspace.edit edits text files only", tg)
	}
	old, repl := *a.OldString, *a.NewString
	count := strings.Count(content, old)
	switch {
	case count == 0:
		return armory.Failf(armory.KindInvalid, "old_string was not found in %s; it must match the file exactly, including whitespace, indentation and line endings (read the file and copy the text)", tg)
	case count > 1 && !a.ReplaceAll:
		return armory.Failf(armory.KindInvalid, "old_string occurs %d times in %s; include more surrounding text to make it unique, or set replace_all to true to replace all %d", count, tg, count)
	}
	var out string
	if a.ReplaceAll {
		out = strings.ReplaceAll(content, old, repl)
	} else {
		out = strings.Replace(content, old, repl, 1)
	}
	if len(out) > WriteLimit {
		return armory.Failf(armory.KindInvalid, "the edited file would be %d bytes; the limit is %d", len(out), WriteLimit)
	}
	if _, err := writeAtomic(op, tg, dirfd, base, []byte(out), &st); err != nil {
		return armory.FailErr(err)
	}
	noun := "occurrence"
	if count > 1 {
		noun = "occurrences"
	}
	return armory.Result{
		Success: true,
		Text:    fmt.Sprintf("replaced %d %s in %s (%d bytes now)", count, noun, tg, len(out)),
		Value:   map[string]any{"path": tg.String(), "replacements": count, "bytes": len(out)},
	}
}
