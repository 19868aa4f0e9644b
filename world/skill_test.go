package world

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const skillMD = `---
name: notes
description: Keep notes in the workspace.
license: MIT
compatibility: any runtime
metadata:
  author: someone
allowed-tools: Read Write
---
# Notes

Write notes.
`

func skillWorld(files map[string]string) map[string]string {
	m := map[string]string{
		"world-config.yaml":                  "name: s\nagents:\n  - id: a\n    archetype: dev\n",
		"archetype/dev/config.md":            "# dev\n\n## Skills\n- notes\n",
		"skills/notes/SKILL.md":              skillMD,
		"skills/notes/references/how.md":     "# how\n",
		"skills/notes/assets/logo.txt":       "logo",
		"skills/notes/scripts/run.sh":        "#!/bin/sh\n",
		"skills/notes/toolbox.yaml":          "name: notes\ntools:\n  - name: count\n    description: count\n    binary: wc\n",
		"archetype/dev/skills/only/SKILL.md": "---\nname: only\ndescription: only dev sees it\n---\nbody\n",
	}
	for k, v := range files {
		if v == "" {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	return m
}

// A world's skill packs load in the Agent Skills format: front matter,
// instructions, reference and asset files, and Armory's toolbox with tools
// named <skill>.<tool>; an archetype's own skills too; config.md "##
// Skills" names those its agents hold from the start.
func TestLoadSkills(t *testing.T) {
	w, err := Load(writeWorld(t, skillWorld(nil)))
	if err != nil {
		t.Fatal(err)
	}
	s := w.Skills["notes"]
	if s == nil {
		t.Fatalf("no skill notes: %v", w.Skills)
	}
	if s.Description != "Keep notes in the workspace." || s.License != "MIT" || s.Compatibility != "any runtime" || s.Metadata["author"] != "someone" {
		t.Errorf("front matter: %+v", s)
	}
	if strings.Join(s.AllowedTools, ",") != "Read,Write" {
		t.Errorf("allowed-tools = %v", s.AllowedTools)
	}
	if !strings.HasPrefix(s.Body, "# Notes") || s.BodyLine != 10 {
		t.Errorf("body at line %d: %q", s.BodyLine, s.Body)
	}
	if strings.Join(s.Files, ",") != "assets/logo.txt,references/how.md" {
		t.Errorf("files = %v (scripts/ is not served)", s.Files)
	}
	if strings.Join(s.Tools(), ",") != "notes.count" {
		t.Errorf("tools = %v", s.Tools())
	}
	if got := w.SkillFor("dev", "only"); got == nil || got.Archetype != "dev" {
		t.Errorf("archetype skill: %+v", got)
	}
	if w.SkillFor("other", "only") != nil {
		t.Error("another archetype sees dev's own skill")
	}
	if c := w.Agent("a").Config; len(c.Skills) != 1 || c.Skills[0].Value != "notes" {
		t.Errorf("config.md skills = %+v", c.Skills)
	}
}

// Every mistake in a skill pack is an error at its file and line.
func TestSkillErrors(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no SKILL.md", map[string]string{"skills/notes/SKILL.md": "", "skills/notes/x.md": "x"}, `skills/notes: skill folder "notes" has no SKILL.md`},
		{"no front matter", map[string]string{"skills/notes/SKILL.md": "# notes\n"}, "skills/notes/SKILL.md:1: SKILL.md must start with YAML front matter"},
		{"unclosed", map[string]string{"skills/notes/SKILL.md": "---\nname: notes\n"}, "skills/notes/SKILL.md:1: front matter is not closed"},
		{"bad yaml", map[string]string{"skills/notes/SKILL.md": "---\nname: notes\ndescription: [x\n---\n"}, "skills/notes/SKILL.md:"},
		{"name mismatch", map[string]string{"skills/notes/SKILL.md": "---\nname: other\ndescription: d\n---\n"}, `skills/notes/SKILL.md:2: skill name "other" does not match its folder notes/`},
		{"bad name", map[string]string{"skills/Bad--x/SKILL.md": "---\nname: Bad--x\ndescription: d\n---\n"}, `skills/Bad--x/SKILL.md:2: front matter: name "Bad--x" is not valid`},
		{"no description", map[string]string{"skills/notes/SKILL.md": "---\nname: notes\n---\n"}, "skills/notes/SKILL.md:2: front matter: description is required"},
		{"long description", map[string]string{"skills/notes/SKILL.md": "---\nname: notes\ndescription: " + strings.Repeat("x", 1025) + "\n---\n"}, "skills/notes/SKILL.md:3: front matter: description is 1025 characters"},
		{"toolbox name", map[string]string{"skills/notes/toolbox.yaml": "name: other\ntools:\n  - name: c\n    description: c\n    binary: wc\n"}, `skills/notes/toolbox.yaml:1: toolbox name "other" must be the skill's name "notes"`},
		{"toolbox error", map[string]string{"skills/notes/toolbox.yaml": "name: notes\ntools:\n  - name: c\n    description: c\n    binary: wc\n    danger: deadly\n"}, "skills/notes/toolbox.yaml:6:"},
		{"unknown config skill", map[string]string{"archetype/dev/config.md": "# dev\n\n## Skills\n- note\n"}, `archetype/dev/config.md:4: skills: no skill "note" (did you mean "notes"?)`},
		{"config skill of another archetype", map[string]string{"world-config.yaml": "name: s\nagents:\n  - id: a\n    archetype: dev\n  - id: b\n    archetype: ops\n", "archetype/ops/config.md": "# ops\n\n## Skills\n- only\n"}, `archetype/ops/config.md:4: skills: no skill "only"`},
		{"config skills kv", map[string]string{"archetype/dev/config.md": "# dev\n\n## Skills\nnotes: yes\n"}, `archetype/dev/config.md:4: section "Skills": want "- skill-name"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(writeWorld(t, skillWorld(c.files)))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant an error containing %q", err, c.want)
			}
		})
	}
}

// Unknown front matter keys (another runtime's) are warnings: a skill
// written for another agent runtime loads unchanged.
func TestSkillUnknownKeyWarns(t *testing.T) {
	w, err := Load(writeWorld(t, skillWorld(map[string]string{"skills/notes/SKILL.md": "---\nname: notes\ndescription: d\nmodel: fast\ndisable-model-invocation: true\n---\nx\n"})))
	if err != nil {
		t.Fatal(err)
	}
	if !hasDiag(w.Diagnostics, `skills/notes/SKILL.md:4: warning: front matter: unknown key "model"`) {
		t.Errorf("warnings: %v", w.Diagnostics)
	}
}

// A symbolic link in references/ is refused: a pack's files are served to
// agents, and a link could name any file of the server.
func TestSkillSymlinkRefused(t *testing.T) {
	dir := writeWorld(t, skillWorld(nil))
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "skills/notes/references/passwd")); err != nil {
		t.Fatal(err)
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "skills/notes/references/passwd: a skill pack may not hold symbolic links") {
		t.Errorf("got %v", err)
	}
}

func FuzzParseSkill(f *testing.F) {
	f.Add([]byte(skillMD))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("---\nname: a\ndescription: b\n---"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds Diagnostics
		s := ParseSkill("SKILL.md", data, &ds)
		if s != nil && (!ValidSkillName(s.Name) || s.Description == "") {
			t.Fatalf("accepted an invalid skill: %+v", s)
		}
		if s == nil && len(ds.Errors()) == 0 {
			t.Fatal("refused without an error")
		}
	})
}

// The front matter's bounds count characters, as the Agent Skills format
// states them, not bytes: a description of 1,024 non-ASCII characters is
// valid, one more is not; so for compatibility's 500.
func TestSkillBoundsCountCharacters(t *testing.T) {
	for _, tc := range []struct {
		name, front, want string
	}{
		{"description at the bound", "description: " + strings.Repeat("é", MaxSkillDescription), ""},
		{"description past it", "description: " + strings.Repeat("é", MaxSkillDescription+1), "description is 1025 characters; the limit is 1024"},
		{"compatibility at the bound", "description: d\ncompatibility: " + strings.Repeat("ü", MaxSkillCompat), ""},
		{"compatibility past it", "description: d\ncompatibility: " + strings.Repeat("ü", MaxSkillCompat+1), "compatibility is 501 characters; the limit is 500"},
	} {
		var ds Diagnostics
		s := ParseSkill("SKILL.md", []byte("---\nname: notes\n"+tc.front+"\n---\nbody\n"), &ds)
		switch {
		case tc.want == "" && (s == nil || len(ds.Errors()) > 0):
			t.Errorf("%s: refused: %v", tc.name, ds)
		case tc.want != "" && !hasDiag(ds.Errors(), tc.want):
			t.Errorf("%s: %v, want %q", tc.name, ds, tc.want)
		}
	}
}

// BodyLine is the line the instructions start at, blank lines after the
// front matter skipped; a name that does not match its folder is
// reported at the name's own line.
func TestSkillLines(t *testing.T) {
	var ds Diagnostics
	s := ParseSkill("SKILL.md", []byte("---\nname: notes\ndescription: d\n---\n\n\n# Notes\n"), &ds)
	if s == nil || s.BodyLine != 7 || !strings.HasPrefix(s.Body, "# Notes") {
		t.Fatalf("skill %+v, %v", s, ds)
	}
	_, err := Load(writeWorld(t, skillWorld(map[string]string{"skills/notes/SKILL.md": "---\ndescription: d\nlicense: MIT\nname: other\n---\nx\n"})))
	if err == nil || !strings.Contains(err.Error(), `skills/notes/SKILL.md:4: skill name "other" does not match its folder notes/`) {
		t.Fatalf("got %v", err)
	}
}

// The bounds of a pack: SKILL.md's size, the files listed under
// references/ and assets/, the packs of one scope. Each past its bound is
// an error naming it.
func TestSkillBounds(t *testing.T) {
	t.Run("SKILL.md size", func(t *testing.T) {
		big := "---\nname: notes\ndescription: d\n---\n" + strings.Repeat("x", maxSkillFile)
		_, err := Load(writeWorld(t, skillWorld(map[string]string{"skills/notes/SKILL.md": big})))
		if err == nil || !strings.Contains(err.Error(), "skills/notes/SKILL.md: SKILL.md is larger than the limit of 1048576 bytes") {
			t.Errorf("got %v", err)
		}
	})
	t.Run("files", func(t *testing.T) {
		dir := writeWorld(t, skillWorld(nil))
		for i := 0; i <= MaxSkillFiles; i++ {
			if err := os.WriteFile(filepath.Join(dir, "skills/notes/references", fmt.Sprintf("f%04d.md", i)), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d files under references/ and assets/", MaxSkillFiles)) {
			t.Errorf("got %v", err)
		}
	})
	t.Run("packs", func(t *testing.T) {
		dir := writeWorld(t, skillWorld(map[string]string{"archetype/dev/config.md": "# dev\n"}))
		for i := 0; i <= MaxSkills; i++ {
			if err := os.MkdirAll(filepath.Join(dir, "skills", fmt.Sprintf("s%04d", i)), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d skill packs; the rest are not loaded", MaxSkills)) {
			t.Errorf("got %v", err)
		}
	})
}
