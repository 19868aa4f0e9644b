package skills

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/world"
)

// BuiltinPacks are the skill packs Armory ships, which syscall.skill.install
// {source: builtin} copies into a world: a file system whose top-level
// folders are the packs.
type BuiltinPacks fs.FS

//go:embed all:builtin
var shipped embed.FS

// shippedPacks returns the packs shipped in this package.
func shippedPacks() BuiltinPacks {
	sub, err := fs.Sub(shipped, "builtin")
	if err != nil {
		panic(err) // fixed at build time
	}
	return sub
}

// BuiltinNames returns the names of the built-in packs, sorted.
func (m *Module) BuiltinNames() []string { return builtinNames(m.opts.Builtin) }

func builtinNames(b BuiltinPacks) []string {
	ents, _ := fs.ReadDir(b, ".")
	var out []string
	for _, e := range ents {
		if e.IsDir() && world.ValidSkillName(e.Name()) {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

// writeBuiltin writes built-in pack name into dest (which must not exist).
func writeBuiltin(b BuiltinPacks, name, dest string) error {
	const op = "syscall.skill.install"
	names := builtinNames(b)
	if name == "" || !world.ValidSkillName(name) {
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("source builtin needs the name of a built-in skill (%s)", strings.Join(names, ", ")))
	}
	if _, err := fs.Stat(b, name+"/"+world.SkillFile); err != nil {
		return armory.E(op, armory.KindNotFound, fmt.Sprintf("no built-in skill %q (built-in skills: %s)", name, strings.Join(names, ", ")))
	}
	sub, err := fs.Sub(b, name)
	if err != nil {
		return armory.E(op, armory.KindInternal, "built-in skill "+name, err)
	}
	if _, err := os.Lstat(dest); !errors.Is(err, fs.ErrNotExist) {
		return armory.E(op, armory.KindConflict, dest+" exists")
	}
	return fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dest, filepath.FromSlash(p))
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.HasPrefix(p, "scripts/") || strings.Contains(p, "/bin/") {
			mode = 0o755
		}
		return os.WriteFile(target, data, mode)
	})
}
