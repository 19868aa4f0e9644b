package services

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// confine turns p, a path the agent gave, into a slash-separated path
// relative to workspace that names an existing file or folder inside it.
// It refuses what leaves the workspace: "..", an absolute path elsewhere,
// a symbolic link (at any step) that resolves outside. The error is for
// the model.
func confine(workspace, p string) (string, error) {
	if workspace == "" {
		return "", errors.New("you have no workspace to watch in")
	}
	if strings.TrimSpace(p) == "" {
		return "", errors.New("path is empty; give a file or folder of your workspace, relative to it")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return "", errors.New("path contains a NUL byte")
	}
	rel := p
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(workspace, filepath.Clean(p))
		if err != nil || !local(r) {
			return "", fmt.Errorf("path %q is outside your workspace; give a path relative to it", p)
		}
		rel = r
	}
	rel = filepath.Clean(rel)
	if !local(rel) {
		return "", fmt.Errorf("path %q leaves your workspace; give a path inside it", p)
	}
	if _, _, err := resolveWatch(workspace, rel); err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// local reports whether rel, a cleaned relative path, stays below its
// base ("." is the base itself).
func local(rel string) bool {
	return rel == "." || filepath.IsLocal(rel)
}

// resolveWatch resolves rel below workspace to the real path to watch,
// following symbolic links only as long as they stay inside the
// workspace (os.Root refuses an escape at every step, and the resolved
// path is checked again), and reports whether it is a folder. The
// scheduler calls it again when it arms a watch, so a link planted after
// the watch was set cannot lead it outside.
func resolveWatch(workspace, rel string) (real string, dir bool, err error) {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", false, errors.New("your workspace does not exist yet; create a file in it first")
		}
		return "", false, fmt.Errorf("opening your workspace: %v", err)
	}
	defer root.Close()
	fi, err := root.Stat(filepath.FromSlash(rel))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", false, fmt.Errorf("%q does not exist in your workspace; create it first, or watch its folder", rel)
	case err != nil:
		// os.Root's error for a link out of the root, among others.
		return "", false, fmt.Errorf("%q cannot be watched: it leads outside your workspace or cannot be read (%v)", rel, errors.Unwrap(err))
	}
	wsReal, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", false, fmt.Errorf("resolving your workspace: %v", err)
	}
	real, err = filepath.EvalSymlinks(filepath.Join(wsReal, filepath.FromSlash(rel)))
	if err != nil {
		return "", false, fmt.Errorf("resolving %q: %v", rel, err)
	}
	if r, err := filepath.Rel(wsReal, real); err != nil || !local(r) {
		return "", false, fmt.Errorf("%q leads outside your workspace", rel)
	}
	return real, fi.IsDir(), nil
}
