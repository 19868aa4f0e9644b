package world

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode/utf8"
)

// Skill packs, in the open Agent Skills format: a folder whose SKILL.md
// starts with YAML front matter (name, description; optionally license,
// compatibility, metadata, allowed-tools) followed by the instructions in
// Markdown, with optional scripts/, references/ and assets/ folders. A
// skill written for another agent runtime that reads that format loads
// here unchanged. Armory adds one optional file: a toolbox manifest
// (toolbox.yaml or toolbox.json, the fields of a world toolbox) whose
// toolbox name is the skill's, so its tools are named <skill>.<tool>; its
// tools may be binaries or WebAssembly modules.
//
// A world's skills live in skills/<name>/; an archetype's own in
// archetype/<arch>/skills/<name>/, seen only by that archetype's agents
// and taking the place of a world skill of the same name for them.

// SkillFile is the name of a skill pack's instructions file.
const SkillFile = "SKILL.md"

// Bounds of a skill pack.
const (
	MaxSkillName        = 64
	MaxSkillDescription = 1024
	MaxSkillCompat      = 500
	maxSkillFile        = 1 << 20 // SKILL.md, bytes
	// MaxSkillFiles bounds the files listed under references/ and assets/.
	MaxSkillFiles = 1000
	// MaxSkills bounds the skill packs of one scope (the world, an
	// archetype).
	MaxSkills = 1000
)

// skillNameRE is the Agent Skills name rule: lower-case letters, digits
// and single hyphens, not at either end.
var skillNameRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// ValidSkillName reports whether name is a valid skill name: 1 to 64 of
// a-z, 0-9 and single hyphens, not starting or ending with one.
func ValidSkillName(name string) bool {
	return len(name) <= MaxSkillName && skillNameRE.MatchString(name)
}

// Skill is one skill pack.
type Skill struct {
	Name          string
	Description   string
	License       string
	Compatibility string
	Metadata      map[string]string
	// AllowedTools is the front matter's allowed-tools, split on spaces:
	// advice of the pack's author, shown to humans. It grants nothing.
	AllowedTools []string
	// Archetype is "" for a world skill, else the archetype whose agents
	// alone see it.
	Archetype string
	Dir       string // absolute
	File      string // SKILL.md, relative to the world folder
	// Body is the instructions (SKILL.md after its front matter); BodyLine
	// the line it starts at.
	Body     string
	BodyLine int
	// Toolbox is the pack's toolbox manifest (name = the skill's), or nil.
	Toolbox *Toolbox
	// Files are the files under references/ and assets/, relative to Dir
	// with forward slashes, sorted (syscall.skill.read serves them).
	Files []string
	// MCPServer is the pack's MCP server (mcp-server.yaml), or nil: its
	// tools, named mcp.<skill>.<tool> as any upstream server's, are the
	// skill's tools.
	MCPServer *MCPServer

	nameLine int // the line of the front matter's name
}

// Tools returns the full names of the skill's tools, sorted.
func (s *Skill) Tools() []string {
	if s.Toolbox == nil {
		return nil
	}
	out := make([]string, 0, len(s.Toolbox.Tools))
	for _, t := range s.Toolbox.Tools {
		out = append(out, t.FullName())
	}
	sort.Strings(out)
	return out
}

var skillKeys = []string{"name", "description", "license", "compatibility", "metadata", "allowed-tools"}

// SkillsFor returns the skills an agent of archetype arch sees: the
// archetype's own and the world's it does not replace, sorted by name.
func (w *World) SkillsFor(arch string) []*Skill {
	seen := map[string]*Skill{}
	for n, s := range w.Skills {
		seen[n] = s
	}
	for n, s := range w.ArchetypeSkills[arch] {
		seen[n] = s
	}
	out := make([]*Skill, 0, len(seen))
	for _, s := range seen {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SkillFor returns the skill called name that an agent of archetype arch
// sees (the archetype's own first), or nil.
func (w *World) SkillFor(arch, name string) *Skill {
	if s := w.ArchetypeSkills[arch][name]; s != nil {
		return s
	}
	return w.Skills[name]
}

// loadSkills reads skills/*/ and archetype/*/skills/*/.
func (w *World) loadSkills(ds *Diagnostics) {
	w.Skills = loadSkillDir(w.Dir, "skills", "", ds)
	archs, _ := os.ReadDir(filepath.Join(w.Dir, "archetype"))
	for _, a := range archs {
		if !a.IsDir() {
			continue
		}
		rel := filepath.ToSlash(filepath.Join("archetype", a.Name(), "skills"))
		if m := loadSkillDir(w.Dir, rel, a.Name(), ds); len(m) > 0 {
			if w.ArchetypeSkills == nil {
				w.ArchetypeSkills = map[string]map[string]*Skill{}
			}
			w.ArchetypeSkills[a.Name()] = m
		}
	}
}

// loadSkillDir loads every pack under worldDir/rel.
func loadSkillDir(worldDir, rel, arch string, ds *Diagnostics) map[string]*Skill {
	ents, err := os.ReadDir(filepath.Join(worldDir, rel))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		ds.Errorf(rel, 0, "%v", err)
		return nil
	}
	out := map[string]*Skill{}
	n := 0
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue // a stray file, or an install's temporary folder
		}
		if n++; n > MaxSkills {
			ds.Errorf(rel, 0, "more than %d skill packs; the rest are not loaded", MaxSkills)
			break
		}
		if s := LoadSkill(worldDir, rel+"/"+e.Name(), ds); s != nil {
			s.Archetype = arch
			out[s.Name] = s
		}
	}
	return out
}

// LoadSkill reads the skill pack in worldDir/rel (rel with forward
// slashes, as diagnostics name it). Problems go to ds with file and line;
// it returns nil when the pack cannot be used. It never panics.
func LoadSkill(worldDir, rel string, ds *Diagnostics) *Skill {
	dir := filepath.Join(worldDir, filepath.FromSlash(rel))
	folder := filepath.Base(dir)
	file := rel + "/" + SkillFile
	data, err := ReadLimited(filepath.Join(dir, SkillFile), maxSkillFile)
	if errors.Is(err, fs.ErrNotExist) {
		ds.Errorf(rel, 0, "skill folder %q has no %s", folder, SkillFile)
		return nil
	}
	if err != nil {
		ds.Errorf(file, 0, "%v", err)
		return nil
	}
	s := ParseSkill(file, data, ds)
	if s == nil {
		return nil
	}
	s.Dir, s.File = dir, file
	if s.Name != folder {
		ds.Errorf(file, s.nameLine, "skill name %q does not match its folder %s/ (the Agent Skills format asks for the same name)", s.Name, folder)
		return nil
	}
	before := len(ds.Errors())
	s.Toolbox = loadSkillToolbox(s, rel, ds)
	if data, err := ReadLimited(filepath.Join(dir, SkillMCPFile), maxYAMLSize); err == nil {
		s.MCPServer = ParseSkillMCPServer(rel+"/"+SkillMCPFile, dir, s.Name, data, ds)
	} else if !errors.Is(err, fs.ErrNotExist) {
		ds.Errorf(rel+"/"+SkillMCPFile, 0, "%v", err)
	}
	s.Files = listSkillFiles(dir, file, ds)
	if len(ds.Errors()) > before {
		return nil
	}
	return s
}

// loadSkillToolbox reads the pack's toolbox.yaml or toolbox.json, if any.
func loadSkillToolbox(s *Skill, rel string, ds *Diagnostics) *Toolbox {
	fileName, err := toolboxFile(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		ds.Errorf(rel, 0, "%v", err)
		return nil
	}
	tf := rel + "/" + fileName
	data, err := ReadLimited(filepath.Join(s.Dir, fileName), maxYAMLSize)
	if err != nil {
		ds.Errorf(tf, 0, "%v", err)
		return nil
	}
	if fileName == ToolboxJSONFile {
		var ok bool
		if data, ok = jsonAsYAML(tf, data, ds); !ok {
			return nil
		}
	}
	tb := ParseToolbox(tf, s.Dir, data, ds)
	if tb == nil {
		return nil
	}
	if tb.Name != s.Name {
		ds.Errorf(tf, 1, "toolbox name %q must be the skill's name %q (a skill's tools are named %s.<tool>)", tb.Name, s.Name, s.Name)
		return nil
	}
	return tb
}

// listSkillFiles lists the regular files under references/ and assets/.
// A symbolic link is refused: a pack's files are served to agents, and a
// link could name any file of the server.
func listSkillFiles(dir, file string, ds *Diagnostics) []string {
	var out []string
	for _, sub := range []string{"references", "assets"} {
		root := filepath.Join(dir, sub)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) && p == root {
					return filepath.SkipDir
				}
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			rel = filepath.ToSlash(rel)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				ds.Errorf(filepath.ToSlash(filepath.Join(filepath.Dir(file), rel)), 0, "a skill pack may not hold symbolic links")
				return nil
			case d.IsDir():
				return nil
			case !d.Type().IsRegular():
				ds.Errorf(filepath.ToSlash(filepath.Join(filepath.Dir(file), rel)), 0, "not a regular file")
				return nil
			}
			if len(out) >= MaxSkillFiles {
				return fmt.Errorf("more than %d files under references/ and assets/", MaxSkillFiles)
			}
			out = append(out, rel)
			return nil
		})
		if err != nil {
			ds.Errorf(filepath.Dir(file), 0, "%v", err)
		}
	}
	sort.Strings(out)
	return out
}

// ParseSkill parses SKILL.md content: front matter between "---" lines,
// then the instructions. file names it in diagnostics. It returns nil
// when the front matter cannot be used. Unknown front matter keys are
// warnings (other runtimes add their own). It never panics.
func ParseSkill(file string, data []byte, ds *Diagnostics) *Skill {
	if !utf8.Valid(data) {
		ds.Errorf(file, 0, "not valid UTF-8")
		return nil
	}
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	first, rest, _ := strings.Cut(text, "\n")
	if strings.TrimSpace(first) != "---" {
		ds.Errorf(file, 1, "%s must start with YAML front matter: a line \"---\", then name: and description:, then \"---\"", SkillFile)
		return nil
	}
	end := -1
	lines := strings.Split(rest, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		ds.Errorf(file, 1, "front matter is not closed: no line \"---\" after it")
		return nil
	}
	front := strings.Join(lines[:end], "\n")
	// The instructions start after the closing line (end+2) and the blank
	// lines that follow it.
	after := strings.Join(lines[end+1:], "\n")
	body := strings.TrimLeft(after, "\n")
	s := &Skill{BodyLine: end + 3 + len(after) - len(body), Body: body}
	// Line numbers: the front matter starts on line 2.
	fds := Diagnostics{}
	root := parseYAML(file, []byte(front), &fds)
	for _, d := range fds {
		if d.Line > 0 {
			d.Line++
		}
		*ds = append(*ds, d)
	}
	if root == nil {
		return nil
	}
	shift(root, 1)
	r := nodeReader{file: file, ds: ds}
	pairs, _ := r.mapping(root, "front matter")
	nameLine, descLine := 0, 0
	for _, p := range pairs {
		switch p.key {
		case "name":
			s.Name, _ = r.str(p.v, "name")
			nameLine = p.v.Line
			s.nameLine = nameLine
		case "description":
			s.Description, _ = r.str(p.v, "description")
			descLine = p.v.Line
		case "license":
			s.License, _ = r.str(p.v, "license")
		case "compatibility":
			s.Compatibility, _ = r.str(p.v, "compatibility")
			if n := utf8.RuneCountInString(s.Compatibility); n > MaxSkillCompat {
				ds.Errorf(file, p.v.Line, "compatibility is %d characters; the limit is %d", n, MaxSkillCompat)
			}
		case "metadata":
			mp, _ := r.mapping(p.v, "metadata")
			for _, kv := range mp {
				v, ok := r.str(kv.v, "metadata."+kv.key)
				if ok {
					if s.Metadata == nil {
						s.Metadata = map[string]string{}
					}
					s.Metadata[kv.key] = v
				}
			}
		case "allowed-tools":
			if v, ok := r.str(p.v, "allowed-tools"); ok {
				s.AllowedTools = strings.Fields(v)
			}
		default:
			ds.Warnf(file, p.k.Line, "front matter: unknown key %q%s; it is ignored (known keys: %s)", p.key, didYouMean(p.key, skillKeys), strings.Join(skillKeys, ", "))
		}
	}
	bad := false
	switch {
	case s.Name == "":
		ds.Errorf(file, max(nameLine, 2), "front matter: name is required")
		bad = true
	case !ValidSkillName(s.Name):
		ds.Errorf(file, nameLine, "front matter: name %q is not valid: 1 to %d of a-z, 0-9 and single hyphens, not at either end", s.Name, MaxSkillName)
		bad = true
	}
	switch {
	case strings.TrimSpace(s.Description) == "":
		ds.Errorf(file, max(descLine, 2), "front matter: description is required (say what the skill does and when to use it)")
		bad = true
	case utf8.RuneCountInString(s.Description) > MaxSkillDescription:
		ds.Errorf(file, descLine, "front matter: description is %d characters; the limit is %d", utf8.RuneCountInString(s.Description), MaxSkillDescription)
		bad = true
	}
	if bad {
		return nil
	}
	return s
}

// shift adds d to the line of n and every node under it.
func shift(n *yamlNode, d int) {
	n.Line += d
	for _, c := range n.Content {
		shift(c, d)
	}
}

// checkAgentSkills reads each config.md's "## Skills" (the skills its
// agents hold from the start) and checks that each names a skill the
// agent's archetype sees.
func (w *World) checkAgentSkills(ds *Diagnostics) {
	done := map[*AgentConfig]bool{}
	for _, a := range w.Agents {
		c := a.Config
		if c == nil || done[c] {
			continue
		}
		done[c] = true
		sec := c.Sections["skills"]
		if sec == nil {
			continue
		}
		var known []string
		for _, s := range w.SkillsFor(a.Archetype) {
			known = append(known, s.Name)
		}
		for _, kv := range sec.KVs {
			ds.Errorf(c.File, kv.Line, "section \"Skills\": want \"- skill-name\", got %q", kv.Key+": "+kv.Value)
		}
		for _, it := range sec.Items {
			if w.SkillFor(a.Archetype, it.Value) == nil {
				have := "none"
				if len(known) > 0 {
					have = strings.Join(known, ", ")
				}
				ds.Errorf(c.File, it.Line, "skills: no skill %q%s (skills the archetype %s sees, from skills/ and archetype/%s/skills/: %s)", it.Value, didYouMean(it.Value, known), a.Archetype, a.Archetype, have)
				continue
			}
			c.Skills = append(c.Skills, it)
		}
	}
}
