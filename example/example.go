// Package example holds Armory's built-in example world, embedded in the
// binary: `armory init DIR` writes it and `armory demo` tours it.
package example

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:embed all:world
var files embed.FS

// FS returns the example world's files (rooted at the world folder).
func FS() fs.FS {
	sub, err := fs.Sub(files, "world")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return sub
}

// Write writes the example world into dir, which must not exist or be
// empty. Files under a bin/ folder are made executable. On failure nothing
// that Write created is left behind.
func Write(dir string) (err error) {
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return fmt.Errorf("%s is not empty; choose a new folder", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	created := false
	if _, statErr := os.Stat(dir); errors.Is(statErr, fs.ErrNotExist) {
		created = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			if created {
				os.RemoveAll(dir)
			} else {
				clearDir(dir)
			}
		}
	}()
	return fs.WalkDir(FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(p))
		if d.IsDir() && d.Name() == ".armory" {
			// A world's runtime state (its store, trail): never part of the
			// example, even when a run from the source tree left one in it.
			return fs.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := fs.ReadFile(FS(), p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.Contains("/"+p, "/bin/") {
			mode = 0o755
		}
		return os.WriteFile(dst, b, mode)
	})
}

func clearDir(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
