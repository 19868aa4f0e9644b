package world

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/armory-dev/armory"
)

// NewAgent returns agent id of archetype arch as world-config.yaml would
// define it, for an agent created at run time (syscall.agent.create): its
// config is the archetype's config.md, parsed and checked against the
// world's privilege groups and toolboxes as Load checks a world agent's
// (the same parsed config when a world agent has that archetype). The
// world is not changed: w.Agents stays the file's list.
//
// Errors (*armory.Error): KindInvalid for an id or archetype name that is
// not valid, or an archetype whose files have errors (the message lists
// them, file:line); KindNotFound for an archetype with no folder (the
// message lists the archetypes there are). Safe for concurrent use: it
// reads the archetype's files and w without changing them.
func (w *World) NewAgent(id, arch string) (*Agent, error) {
	const op = "world.NewAgent"
	switch {
	case !armory.ValidAgentID(id):
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("agent id %q is not valid ([a-z0-9][a-z0-9_-]*, at most 64 characters)", id))
	case !nameRE.MatchString(arch) || len(arch) > 64:
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("archetype %q is not a valid folder name ([a-z0-9][a-z0-9_-]*, at most 64 characters)", arch))
	}
	a := &Agent{ID: id, Archetype: arch}
	for _, wa := range w.Agents {
		if wa.Archetype == arch && wa.Config != nil {
			a.Config, a.Prose = wa.Config, wa.Prose
			return a, nil
		}
	}
	dir := filepath.Join(w.Dir, "archetype", arch)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, armory.E(op, armory.KindNotFound, fmt.Sprintf("unknown archetype %q (archetypes here: %s)", arch, listDirs(filepath.Join(w.Dir, "archetype"))))
	}
	var ds Diagnostics
	rel := filepath.ToSlash(filepath.Join("archetype", arch, "config.md"))
	data, err := ReadLimited(filepath.Join(dir, "config.md"), maxConfigMDSize)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = nil // only the always-on tools, as for a world agent
	case err != nil:
		return nil, armory.E(op, armory.KindInvalid, rel, err)
	}
	cfg := ParseConfigMD(rel, data, &ds)
	groups := map[string]bool{}
	var names []string
	for _, g := range w.Groups {
		groups[g.Name] = true
		names = append(names, g.Name)
	}
	sort.Strings(names)
	w.checkAgentConfig(cfg, groups, names, &ds)
	if errs := ds.Errors(); len(errs) > 0 {
		lines := make([]string, len(errs))
		for i, d := range errs {
			lines[i] = d.String()
		}
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("archetype %q has errors: %s", arch, strings.Join(lines, "; ")))
	}
	a.Config = cfg
	if b, err := ReadLimited(filepath.Join(dir, "agent.md"), maxProseSize); err == nil {
		a.Prose = string(b)
	}
	return a, nil
}
