package skills

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	args "github.com/armory-dev/armory/toolargs"
)

// The syscall.skill.* tools: always registered for every agent (the
// access policy makes the family always on). Each acts for the calling
// agent (the Invocation's, set by the pipeline), never for an agent named
// in its arguments.

// syscall is one of the module's tools.
type syscallTool struct {
	spec armory.Spec
	man  armory.Manifest
	run  func(ctx context.Context, ag *roster.Agent, raw json.RawMessage) armory.Result
	m    *Module
}

func (t *syscallTool) Spec() armory.Spec         { return t.spec }
func (t *syscallTool) Manifest() armory.Manifest { return t.man }

func (t *syscallTool) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	if inv.Agent == nil || inv.Agent.ID == "" {
		return armory.Failf(armory.KindInvalid, "%s acts for the calling agent, and this call names none", t.spec.Name)
	}
	h := t.m.rosterOf()
	if h == nil {
		return armory.Failf(armory.KindUnavailable, "the skills module is not ready")
	}
	ag, err := h.Agent(inv.Agent.ID)
	if err != nil {
		return armory.FailErr(err)
	}
	return t.run(ctx, ag, inv.Args)
}

var (
	readManifest  = armory.Manifest{Danger: armory.DangerSafe, Capabilities: []armory.Capability{armory.CapReadState}, Permission: armory.PermAuto, Category: armory.CatSystem}
	writeManifest = armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapWriteState}, Permission: armory.PermAuto, Category: armory.CatSystem}
	// Installing writes the world's files, may fetch from the network and
	// brings new tools to every agent that acquires the skill: it always
	// needs an approval (MinPermission).
	installManifest = armory.Manifest{Danger: armory.DangerDangerous,
		Capabilities: []armory.Capability{armory.CapNetwork, armory.CapWriteFS, armory.CapWriteState},
		Permission:   armory.PermConfirm, MinPermission: armory.PermConfirm, Category: armory.CatSystem}
)

const nameProp = `"name":{"type":"string","description":"The skill's name, as syscall.skill.list shows it."}`

// syscalls returns the module's tools.
func (m *Module) syscalls() []armory.Tool {
	tools := []*syscallTool{
		{spec: armory.Spec{Name: "syscall.skill.list",
			Description: "List the skills you can acquire: name and description, whether you have acquired it (its tools are yours) or activated it (you read its instructions), and its tools.",
			InputSchema: args.Schema(nil, "")}, man: readManifest, run: m.runList},
		{spec: armory.Spec{Name: "syscall.skill.activate",
			Description: "Read a skill's full instructions (its SKILL.md) and the list of its reference files. Activating loads knowledge only; syscall.skill.acquire gives you its tools.",
			InputSchema: args.Schema([]string{"name"}, nameProp)}, man: writeManifest, run: m.runActivate},
		{spec: armory.Spec{Name: "syscall.skill.read",
			Description: fmt.Sprintf("Read one file of a skill's references/ or assets/ (as syscall.skill.activate lists them), at most %d KiB per call; page on with offset.", MaxReadBytes>>10),
			InputSchema: args.Schema([]string{"name", "path"}, nameProp+`,"path":{"type":"string","description":"The file, e.g. references/api.md."},"offset":{"type":"integer","minimum":0,"description":"Byte offset to read from (next_offset of the previous read)."}`)},
			man: readManifest, run: m.runRead},
		{spec: armory.Spec{Name: "syscall.skill.acquire",
			Description: "Acquire a skill: its tools join your tools at once (those your access policy allows; the result says which are withheld and why).",
			InputSchema: args.Schema([]string{"name"}, nameProp)}, man: writeManifest, run: m.runAcquire},
		{spec: armory.Spec{Name: "syscall.skill.drop",
			Description: "Drop an acquired skill: its tools leave your tools at once.",
			InputSchema: args.Schema([]string{"name"}, nameProp)}, man: writeManifest, run: m.runDrop},
		{spec: armory.Spec{Name: "syscall.skill.install",
			Description: "Ask to install a new skill into the world, from a folder of your workspace, an archive URL (zip or tar.gz) or one of Armory's built-in skills. Always needs approval; once approved, any agent can acquire it.",
			InputSchema: installSchema}, man: installManifest, run: m.runInstall},
	}
	out := make([]armory.Tool, len(tools))
	for i, t := range tools {
		t.m = m
		out[i] = t
	}
	return out
}

// SkillInfo is one skill as an agent (syscall.skill.list) or a human
// (armory skills list, REST) sees it.
type SkillInfo struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// Scope is "world" or "archetype <name>".
	Scope    string `json:"scope"`
	Acquired bool   `json:"acquired"`
	Active   bool   `json:"active"`
	// Tools are the skill's tools; for an agent that acquired the skill,
	// Withheld says which of them its policy keeps from it, and why.
	Tools       []string          `json:"tools"`
	Withheld    map[string]string `json:"withheld,omitempty"`
	Unavailable map[string]string `json:"unavailable,omitempty"`
	License     string            `json:"license,omitempty"`
	// MCPServer: the skill's tools are an MCP server's (mcp-server.yaml),
	// started when an agent first holds it; Tools lists them once started.
	MCPServer bool `json:"mcp_server,omitempty"`
}

func (p *pack) info() SkillInfo {
	si := SkillInfo{Name: p.skill.Name, Description: p.skill.Description, Scope: "world", Tools: p.toolNames(), License: p.skill.License, MCPServer: p.mcp != nil}
	if si.Tools == nil {
		si.Tools = []string{}
	}
	if p.skill.Archetype != "" {
		si.Scope = "archetype " + p.skill.Archetype
	}
	si.Unavailable = p.unavailableTools()
	return si
}

// Skills lists the skills agent ag sees, with its state as this process
// knows it (kept in step with the store).
func (m *Module) Skills(ctx context.Context, ag *roster.Agent) ([]SkillInfo, error) {
	if err := m.reconcile(ctx, ag); err != nil {
		return nil, err
	}
	acquired, active, withheld := m.view(ag.ID)
	var out []SkillInfo
	for _, p := range m.packsFor(ag) {
		si := p.info()
		si.Acquired, si.Active = acquired[si.Name], active[si.Name]
		if si.Acquired {
			for _, t := range si.Tools {
				if w, ok := withheld[t]; ok {
					if si.Withheld == nil {
						si.Withheld = map[string]string{}
					}
					si.Withheld[t] = w
				}
			}
		}
		out = append(out, si)
	}
	return out, nil
}

func (m *Module) runList(ctx context.Context, ag *roster.Agent, raw json.RawMessage) armory.Result {
	if err := args.Decode("syscall.skill.list", raw, &struct{}{}); err != nil {
		return armory.FailErr(err)
	}
	list, err := m.Skills(ctx, ag)
	if err != nil {
		return armory.FailErr(err)
	}
	if len(list) == 0 {
		return armory.Result{Success: true, Text: "No skills in this world yet.", Value: []SkillInfo{}}
	}
	return jsonResult(map[string]any{"skills": list})
}

// nameArg decodes {"name": …} (plus extra fields into more) and finds the
// skill agent ag sees.
func (m *Module) findSkill(ag *roster.Agent, name string) (*pack, error) {
	if p := m.skillFor(ag, name); p != nil {
		return p, nil
	}
	var names []string
	for _, p := range m.packsFor(ag) {
		names = append(names, p.skill.Name)
	}
	have := "none"
	if len(names) > 0 {
		have = strings.Join(names, ", ")
	}
	return nil, armory.E("skills", armory.KindNotFound, fmt.Sprintf("no skill %q (skills you can acquire: %s)", name, have))
}

// AcquireResult says what acquiring a skill gave the agent.
type AcquireResult struct {
	Skill string `json:"skill"`
	// Changed is false when the agent held the skill already.
	Changed bool `json:"changed"`
	// Tools are the skill's tools the agent now has.
	Tools []string `json:"tools"`
	// Withheld are the skill's tools its policy keeps from it, with why.
	Withheld    map[string]string `json:"withheld,omitempty"`
	Unavailable map[string]string `json:"unavailable,omitempty"`
}

// acquire records that ag holds skill name and registers its tools.
func (m *Module) acquire(ctx context.Context, ag *roster.Agent, name string) (AcquireResult, error) {
	const op = "syscall.skill.acquire"
	p, err := m.findSkill(ag, name)
	if err != nil {
		return AcquireResult{}, err
	}
	ss, err := m.states(ctx)
	if err != nil {
		return AcquireResult{}, err
	}
	_, changed, err := ss.SetSkillAcquired(ctx, ag.ID, name, true)
	if err != nil {
		return AcquireResult{}, holdErr(op, ag.ID, err)
	}
	if err := m.reconcile(ctx, ag); err != nil {
		return AcquireResult{}, err
	}
	if changed {
		m.publish("agent:" + ag.ID)
	}
	_, _, withheld := m.view(ag.ID)
	res := AcquireResult{Skill: name, Changed: changed, Tools: []string{}}
	for _, t := range p.toolNames() {
		if w, ok := withheld[t]; ok {
			if res.Withheld == nil {
				res.Withheld = map[string]string{}
			}
			res.Withheld[t] = w
		} else if ag.Registry.RunTime(t) {
			res.Tools = append(res.Tools, t)
		}
	}
	res.Unavailable = p.unavailableTools()
	return res, nil
}

// holdErr is the error of a store change that would give agent one more
// hold: the bound (store.ErrConflict) said plainly, with what to do.
func holdErr(op, agent string, err error) error {
	if errors.Is(err, store.ErrConflict) {
		return armory.E(op, armory.KindConflict, fmt.Sprintf("agent %s holds %d skills (acquired or activated), the most an agent may hold; drop one first (syscall.skill.drop)", agent, store.MaxSkillHolds))
	}
	return store.Err(op, err)
}

// drop ends ag's hold on skill name — acquired (its tools are
// unregistered) or only activated (a hold too: it counts toward
// store.MaxSkillHolds) — and reports whether ag had acquired it.
// Dropping a skill the agent does not hold is KindNotFound, naming those
// it holds.
func (m *Module) drop(ctx context.Context, ag *roster.Agent, name string) (acquired bool, err error) {
	const op = "syscall.skill.drop"
	ss, err := m.states(ctx)
	if err != nil {
		return false, err
	}
	states, _, err := ss.ListSkillStates(ctx, ag.ID, store.Page{Limit: store.MaxSkillHolds})
	if err != nil {
		return false, store.Err(op, err)
	}
	var held []string
	found := false
	for _, st := range states {
		if st.Skill == name {
			found, acquired = true, st.Acquired
			continue
		}
		held = append(held, st.Skill)
	}
	notHeld := func() error {
		have := "none"
		if len(held) > 0 {
			have = strings.Join(held, ", ")
		}
		return armory.E(op, armory.KindNotFound, fmt.Sprintf("you do not hold skill %q; nothing to drop (skills you hold: %s)", name, have))
	}
	if !found {
		return false, notHeld()
	}
	_, changed, err := ss.SetSkillAcquired(ctx, ag.ID, name, false)
	if err != nil {
		return false, store.Err(op, err)
	}
	if err := m.reconcile(ctx, ag); err != nil {
		return false, err
	}
	if !changed { // dropped meanwhile, by another call
		return false, notHeld()
	}
	m.publish("agent:" + ag.ID)
	return acquired, nil
}

func (m *Module) runAcquire(ctx context.Context, ag *roster.Agent, raw json.RawMessage) armory.Result {
	var a struct {
		Name string `json:"name"`
	}
	if err := args.Decode("syscall.skill.acquire", raw, &a); err != nil {
		return armory.FailErr(err)
	}
	res, err := m.acquire(ctx, ag, a.Name)
	if err != nil {
		return armory.FailErr(err)
	}
	r := jsonResult(res)
	switch {
	case !res.Changed:
		r.Text = fmt.Sprintf("You hold skill %s already.\n%s", a.Name, r.Text)
	case len(res.Tools) > 0:
		r.Text = fmt.Sprintf("Acquired skill %s: %s are yours now.\n%s", a.Name, strings.Join(res.Tools, ", "), r.Text)
	default:
		r.Text = fmt.Sprintf("Acquired skill %s.\n%s", a.Name, r.Text)
	}
	return r
}

func (m *Module) runDrop(ctx context.Context, ag *roster.Agent, raw json.RawMessage) armory.Result {
	var a struct {
		Name string `json:"name"`
	}
	if err := args.Decode("syscall.skill.drop", raw, &a); err != nil {
		return armory.FailErr(err)
	}
	acquired, err := m.drop(ctx, ag, a.Name)
	if err != nil {
		return armory.FailErr(err)
	}
	text := fmt.Sprintf("Dropped skill %s; its tools are gone.", a.Name)
	if !acquired {
		text = fmt.Sprintf("Dropped skill %s (you had activated it, not acquired it: it gave you no tools).", a.Name)
	}
	return armory.Result{Success: true, Text: text, Value: map[string]any{"skill": a.Name, "dropped": true, "acquired": acquired}}
}

func (m *Module) runActivate(ctx context.Context, ag *roster.Agent, raw json.RawMessage) armory.Result {
	const op = "syscall.skill.activate"
	var a struct {
		Name string `json:"name"`
	}
	if err := args.Decode(op, raw, &a); err != nil {
		return armory.FailErr(err)
	}
	p, err := m.findSkill(ag, a.Name)
	if err != nil {
		return armory.FailErr(err)
	}
	ss, err := m.states(ctx)
	if err != nil {
		return armory.FailErr(err)
	}
	_, changed, err := ss.SetSkillActive(ctx, ag.ID, a.Name, true)
	if err != nil {
		return armory.FailErr(holdErr(op, ag.ID, err))
	}
	if changed {
		m.publish("agent:" + ag.ID)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Skill %s\n\n%s\n", p.skill.Name, strings.TrimSpace(p.skill.Body))
	if len(p.skill.Files) > 0 {
		fmt.Fprintf(&b, "\nFiles (read one with syscall.skill.read {\"name\": %q, \"path\": …}):\n", p.skill.Name)
		for _, f := range p.skill.Files {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	if tools := p.toolNames(); len(tools) > 0 {
		acquired, _, _ := m.view(ag.ID)
		if acquired[p.skill.Name] {
			fmt.Fprintf(&b, "\nTools (yours, acquired): %s\n", strings.Join(tools, ", "))
		} else {
			fmt.Fprintf(&b, "\nTools (syscall.skill.acquire {\"name\": %q} makes them yours): %s\n", p.skill.Name, strings.Join(tools, ", "))
		}
	}
	return armory.Result{Success: true, Text: b.String(), Value: map[string]any{"skill": p.skill.Name, "instructions": p.skill.Body, "files": nonNil(p.skill.Files), "tools": nonNil(p.toolNames())}}
}

// ReadResult is one read of a skill's file.
type ReadResult struct {
	Skill      string `json:"skill"`
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	Offset     int64  `json:"offset"`
	NextOffset int64  `json:"next_offset,omitempty"`
	Truncated  bool   `json:"truncated"`
	// Content is the bytes read as text; a file that is not UTF-8 text
	// comes as ContentBase64 instead.
	Content       string `json:"content,omitempty"`
	ContentBase64 string `json:"content_base64,omitempty"`
}

// readFile reads path of skill p: one of the files listed when the pack
// loaded (references/ or assets/), opened without following a link, at
// most MaxReadBytes from offset.
func readFile(p *pack, path string, offset int64) (ReadResult, error) {
	const op = "syscall.skill.read"
	clean := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(path)), "./")
	if !slices.Contains(p.skill.Files, clean) {
		list := "it has none"
		if len(p.skill.Files) > 0 {
			list = "its files: " + strings.Join(p.skill.Files, ", ")
		}
		return ReadResult{}, armory.E(op, armory.KindNotFound, fmt.Sprintf("skill %s has no file %q (%s)", p.skill.Name, path, list))
	}
	if offset < 0 {
		return ReadResult{}, armory.E(op, armory.KindInvalid, "offset must be 0 or more")
	}
	f, err := os.OpenFile(filepath.Join(p.skill.Dir, filepath.FromSlash(clean)), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return ReadResult{}, armory.E(op, armory.KindUnavailable, fmt.Sprintf("skill %s: %s cannot be read", p.skill.Name, clean), err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return ReadResult{}, armory.E(op, armory.KindUnavailable, fmt.Sprintf("skill %s: %s is not a regular file", p.skill.Name, clean))
	}
	res := ReadResult{Skill: p.skill.Name, Path: clean, Size: fi.Size(), Offset: offset}
	if offset > fi.Size() {
		return ReadResult{}, armory.E(op, armory.KindInvalid, fmt.Sprintf("offset %d is past the end of %s (%d bytes)", offset, clean, fi.Size()))
	}
	buf := make([]byte, MaxReadBytes)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return ReadResult{}, armory.E(op, armory.KindUnavailable, "reading "+clean, err)
	}
	buf = buf[:n]
	if end := offset + int64(n); end < fi.Size() {
		res.Truncated, res.NextOffset = true, end
		// Do not cut a UTF-8 character in two.
		if utf8.Valid(buf[:max(0, n-utf8.UTFMax)]) {
			for k := 0; k < utf8.UTFMax && n > 0 && !utf8.Valid(buf[:n]); k++ {
				n--
			}
			buf = buf[:n]
			res.NextOffset = offset + int64(n)
		}
	}
	if utf8.Valid(buf) {
		res.Content = string(buf)
	} else {
		res.ContentBase64 = base64.StdEncoding.EncodeToString(buf)
	}
	return res, nil
}

func (m *Module) runRead(_ context.Context, ag *roster.Agent, raw json.RawMessage) armory.Result {
	var a struct {
		Name   string `json:"name"`
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
	}
	if err := args.Decode("syscall.skill.read", raw, &a); err != nil {
		return armory.FailErr(err)
	}
	p, err := m.findSkill(ag, a.Name)
	if err != nil {
		return armory.FailErr(err)
	}
	res, err := readFile(p, a.Path, a.Offset)
	if err != nil {
		return armory.FailErr(err)
	}
	r := armory.Result{Success: true, Value: res}
	if res.Content != "" || res.ContentBase64 == "" {
		r.Text = res.Content
	} else {
		r.Text = fmt.Sprintf("(%s is binary: %d bytes, base64 in content_base64)\n%s", res.Path, res.Size, res.ContentBase64)
	}
	if res.Truncated {
		r.Text += fmt.Sprintf("\n[… %d of %d bytes shown; read on with offset %d]", res.NextOffset-res.Offset, res.Size, res.NextOffset)
	}
	return r
}

// jsonResult is a successful result whose text is v as indented JSON and
// whose Value is v.
func jsonResult(v any) armory.Result {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return armory.Failf(armory.KindInternal, "rendering the result: %v", err)
	}
	return armory.Result{Success: true, Text: string(b), Value: v}
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	sort.Strings(xs)
	return xs
}
