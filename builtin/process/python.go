package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// PythonDir is the workspace folder where tool.python writes its snippets
// (each under a random name, removed after the run).
const PythonDir = ".armory"

// Python is tool.python: it runs Python 3 source in the process sandbox
// (the same confinement and limits as tool.cli). The code is written to
// .armory/py-RANDOM.py in the workspace through an os.Root, created
// exclusively (O_EXCL) and never through a symbolic link, run as
// `python3 FILE ARGS...` (sys.argv[1:] = args) with the working directory
// as cwd (also on sys.path, so workspace modules import), and removed when
// the run ends, whether it exited, timed out or was killed. Safe for
// concurrent use.
type Python struct {
	opts Options
}

var _ armory.Tool = (*Python)(nil)

// NewPython returns tool.python configured by o (zero fields take defaults).
func NewPython(o Options) *Python { return &Python{opts: o.withDefaults()} }

func (t *Python) Spec() armory.Spec {
	return armory.Spec{
		Name: "tool.python",
		Description: fmt.Sprintf("Run Python 3 source code in your workspace inside a sandbox (same rules as tool.cli: read-only system, writable workspace, no network unless granted). "+
			"Prefer it to tool.cli with python3 -c for multi-line code. Code at most %d KB; stdout and stderr each cut at %d KB; default time limit %s, at most %s. "+
			"Put large programs in workspace files instead.", PythonMaxCode>>10, t.opts.MaxOutput>>10, t.opts.Timeout, t.opts.MaxTimeout),
		InputSchema: args.Schema([]string{"code"},
			fmt.Sprintf(`"code":{"type":"string","maxLength":%d,"description":"Python 3 source to run as a script"},`, PythonMaxCode)+
				`"args":{"type":"array","items":{"type":"string"},"description":"Command-line arguments: sys.argv[1:]"},`+
				cwdProp+","+t.opts.timeouts().Prop("Time limit in seconds")),
		OutputSchema: processOutputSchema,
	}
}

func (t *Python) Manifest() armory.Manifest {
	return processManifest(armory.Requirement{Kind: "binary", Name: t.opts.Python})
}

// Execute runs the code. Failures: as tool.cli, plus KindInvalid for empty
// or oversized code or args, KindPermission when .armory in the workspace
// is not a plain folder (for example a symbolic link), KindUnavailable when
// python3 is missing.
func (t *Python) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "tool.python"
	var a struct {
		Code        string   `json:"code"`
		Args        []string `json:"args"`
		Cwd         string   `json:"cwd"`
		TimeoutSecs float64  `json:"timeout_secs"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	argBytes := 0
	for _, s := range a.Args {
		argBytes += len(s) + 1
		if strings.IndexByte(s, 0) >= 0 {
			return armory.Failf(armory.KindInvalid, "args contain a NUL byte")
		}
	}
	switch {
	case strings.TrimSpace(a.Code) == "":
		return armory.Failf(armory.KindInvalid, "code is required")
	case len(a.Code) > PythonMaxCode:
		return armory.Failf(armory.KindInvalid, "code is %d bytes; the limit is %d: write the program to a workspace file and run it with tool.cli", len(a.Code), PythonMaxCode)
	case argBytes > PythonMaxArgs:
		return armory.Failf(armory.KindInvalid, "args are %d bytes in all; the limit is %d", argBytes, PythonMaxArgs)
	}
	p, err := processPolicy(op, inv, a.Cwd, t.opts, a.TimeoutSecs)
	if err != nil {
		return armory.FailErr(err)
	}
	// The sandbox binds the workspace at its real path.
	realWS, err := filepath.EvalSymlinks(p.Workspace)
	if err != nil {
		return armory.Failf(armory.KindUnavailable, "cannot resolve the workspace: %v", err)
	}
	script, remove, err := writeSnippet(op, realWS, []byte(a.Code))
	if err != nil {
		return armory.FailErr(err)
	}
	defer remove()
	dir := p.Dir
	if dir == "" {
		dir = realWS
	}
	p.Env = map[string]string{
		"PYTHONPATH":              dir, // imports from the working directory
		"PYTHONUNBUFFERED":        "1", // live progress
		"PYTHONDONTWRITEBYTECODE": "1",
	}
	argv := append([]string{t.opts.Python, script}, a.Args...)
	return runProcess(ctx, op, inv, p, argv)
}

// writeSnippet writes code to a new file .armory/py-RANDOM.py below ws and
// returns its absolute path and a function that removes it. Every step goes
// through os.Root handles: a symbolic link at .armory (or anywhere) is never
// followed out of the workspace, .armory must be a real folder, and the
// file is created with O_EXCL (an existing file or link is never reused).
func writeSnippet(op, ws string, code []byte) (path string, remove func(), err error) {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return "", nil, armory.E(op, armory.KindUnavailable, "cannot open the workspace", err)
	}
	defer root.Close()
	if err := root.Mkdir(PythonDir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", nil, armory.E(op, armory.KindUnavailable, "cannot create "+PythonDir+" in the workspace", err)
	}
	fi, err := root.Lstat(PythonDir)
	if err != nil {
		return "", nil, armory.E(op, armory.KindUnavailable, "cannot inspect "+PythonDir+" in the workspace", err)
	}
	if !fi.IsDir() {
		return "", nil, armory.E(op, armory.KindPermission, fmt.Sprintf("%s in your workspace is a %s, not a folder; tool.python writes its snippets there: remove it", PythonDir, fileKindName(fi.Mode())))
	}
	// OpenRoot refuses a link that leads out of ws; a link swapped in
	// after the Lstat can only lead to another folder inside ws.
	dirRoot, err := root.OpenRoot(PythonDir)
	if err != nil {
		return "", nil, armory.E(op, armory.KindPermission, "cannot open "+PythonDir+" in the workspace", err)
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	name := "py-" + hex.EncodeToString(rnd[:]) + ".py"
	f, err := dirRoot.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		dirRoot.Close()
		return "", nil, armory.E(op, armory.KindUnavailable, "cannot create the snippet file", err)
	}
	remove = func() {
		_ = dirRoot.Remove(name)
		dirRoot.Close()
	}
	_, werr := f.Write(code)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		remove()
		return "", nil, armory.E(op, armory.KindUnavailable, "cannot write the snippet file", werr)
	}
	return filepath.Join(ws, PythonDir, name), remove, nil
}

func fileKindName(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symbolic link"
	case m.IsRegular():
		return "file"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
