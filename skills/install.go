package skills

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/netguard"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
	args "github.com/armory-dev/armory/toolargs"
	"github.com/armory-dev/armory/world"
)

// Installing a skill: a pack is staged in a hidden folder of the world's
// skills/ (skills/.incoming-<random>/), checked there as `armory world
// check` would check it (SKILL.md, its toolbox, its tools' names against
// the world's), then renamed into skills/<name>/ — one rename, so a
// process that loads the world never sees half a pack, and on any error
// nothing is left behind. The pack then joins this process's skills at
// once and the other processes' at their next event (a "skill" event
// with Ref "pack:<name>") or resync. Replicas share the world folder, as
// they share its config.

// Install sources.
const (
	SourceFolder  = "folder"
	SourceURL     = "url"
	SourceBuiltin = "builtin"
	// SourceMCPServer installs an MCP server's skill: a pack whose tools
	// are the server's (mcp.go).
	SourceMCPServer = "mcp_server"
)

// InstallRequest says what to install.
type InstallRequest struct {
	// Source is SourceFolder, SourceURL or SourceBuiltin.
	Source string `json:"source"`
	// Path is the folder to copy (SourceFolder): for an agent, relative to
	// its workspace; for a person, a path on the server.
	Path string `json:"path,omitempty"`
	// URL is the archive to fetch (SourceURL): zip or tar(.gz), through the
	// same network guard as tool.fetch.
	URL string `json:"url,omitempty"`
	// Name is the built-in skill to install (SourceBuiltin); for the other
	// sources, when set, the name the pack must have.
	Name string `json:"name,omitempty"`
	// Replace allows replacing a world skill of the same name.
	Replace bool `json:"replace,omitempty"`
	// Server is the MCP server of SourceMCPServer (Name names the skill
	// and the server); Description describes the skill.
	Server      *MCPServerDef `json:"server,omitempty"`
	Description string        `json:"description,omitempty"`
}

var installSchema = args.Schema([]string{"source"},
	`"source":{"type":"string","enum":["folder","url","builtin","mcp_server"],"description":"Where the skill comes from: a folder of your workspace, an archive URL (zip or tar.gz), one of Armory's built-in skills, or an MCP server whose tools become the skill's."},`+
		`"path":{"type":"string","description":"For source folder: the skill's folder in your workspace (it holds SKILL.md)."},`+
		`"url":{"type":"string","description":"For source url: the archive's http(s) URL."},`+
		`"name":{"type":"string","description":"For source builtin: the built-in skill's name. For mcp_server: the skill's (and server's) name. Otherwise, if given, the name the skill must have."},`+
		`"description":{"type":"string","maxLength":1024,"description":"For source mcp_server: what the server's tools are for."},`+
		`"server":{"type":"object","description":"For source mcp_server: {command: [program, args...], env: {...}} for a stdio server (run in the sandbox unless sandbox: false), or {url: ..., headers: {...}} for an HTTP one.","properties":{"command":{"type":"array","items":{"type":"string"}},"env":{"type":"object","additionalProperties":{"type":"string"}},"sandbox":{},"url":{"type":"string"},"headers":{"type":"object","additionalProperties":{"type":"string"}}},"additionalProperties":false},`+
		`"replace":{"type":"boolean","description":"Replace a skill of the same name (default false)."}`)

// Installed says what an install did.
type Installed struct {
	Skill    SkillInfo `json:"skill"`
	Replaced bool      `json:"replaced"`
	// Dir is the pack's folder, relative to the world folder.
	Dir string `json:"dir"`
}

// install stages, checks and installs a pack. workspace confines a
// folder source (an agent's workspace); "" lets it be any folder (a
// person's install). net is the network policy an archive is fetched
// under: the agent's allow-list, or the world's (nil: the default policy,
// public addresses only).
func (m *Module) install(ctx context.Context, req InstallRequest, workspace string, net *armory.NetPolicy) (Installed, error) {
	const op = "syscall.skill.install"
	m.mu.Lock()
	env, h := m.env, m.roster
	m.mu.Unlock()
	if h == nil || env.World == nil {
		return Installed{}, armory.E(op, armory.KindUnavailable, "the skills module is not ready")
	}
	worldDir := env.World.Dir
	root := filepath.Join(worldDir, "skills")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return Installed{}, armory.E(op, armory.KindUnavailable, "cannot create the world's skills/ folder", err)
	}
	stageRel := ".incoming-" + randomID()
	stage := filepath.Join(root, stageRel)
	defer os.RemoveAll(stage)
	// The stage holds the pack as fetched, then under its own name, and
	// the replaced pack: names no skill can have ("_" is not allowed), so
	// none collides with the pack's.
	staged := filepath.Join(stage, "_new")
	if err := os.Mkdir(stage, 0o700); err != nil {
		return Installed{}, armory.E(op, armory.KindUnavailable, "cannot stage the skill", err)
	}
	switch req.Source {
	case SourceFolder:
		src, err := installFolder(req.Path, workspace)
		if err != nil {
			return Installed{}, err
		}
		if err := copySkillDir(src, staged, m.opts.fetch); err != nil {
			return Installed{}, armory.E(op, armory.KindOf(err), "copying the skill folder", err)
		}
	case SourceURL:
		if req.URL == "" {
			return Installed{}, armory.E(op, armory.KindInvalid, "source url needs a url")
		}
		fo := m.opts.fetch
		if net != nil && fo.Guard == nil {
			rules, err := netguard.ParseRules(net.Allow)
			if err != nil {
				return Installed{}, armory.E(op, armory.KindInvalid, "the network allow-list at "+net.From+" is invalid", err)
			}
			fo.Guard = netguard.New(netguard.Options{AllowOnly: true, Allow: rules})
		}
		if err := fetchArchive(ctx, req.URL, staged, fo); err != nil {
			return Installed{}, armory.E(op, armory.KindOf(err), "fetching the skill archive", err)
		}
	case SourceBuiltin:
		if err := writeBuiltin(m.opts.Builtin, req.Name, staged); err != nil {
			return Installed{}, err
		}
	case SourceMCPServer:
		if err := writeMCPPack(req.Name, req.Description, req.Server, staged); err != nil {
			return Installed{}, err
		}
	case "":
		return Installed{}, armory.E(op, armory.KindInvalid, "source is required: folder, url, builtin or mcp_server")
	default:
		return Installed{}, armory.E(op, armory.KindInvalid, fmt.Sprintf("unknown source %q: want folder, url, builtin or mcp_server", req.Source))
	}
	// The pack's name, from its SKILL.md.
	var ds world.Diagnostics
	data, err := os.ReadFile(filepath.Join(staged, world.SkillFile))
	if err != nil {
		return Installed{}, armory.E(op, armory.KindInvalid, "the skill has no "+world.SkillFile+" at its root")
	}
	parsed := world.ParseSkill(world.SkillFile, data, &ds)
	if parsed == nil {
		return Installed{}, armory.E(op, armory.KindInvalid, "the skill's "+world.SkillFile+" is not valid: "+diagText(ds.Errors()))
	}
	name := parsed.Name
	if req.Name != "" && req.Name != name {
		return Installed{}, armory.E(op, armory.KindInvalid, fmt.Sprintf("the skill is named %q, not %q", name, req.Name))
	}
	if err := os.Rename(staged, filepath.Join(stage, name)); err != nil {
		return Installed{}, armory.E(op, armory.KindUnavailable, "staging the skill", err)
	}
	// Check it as world check would, under its own name.
	ds = nil
	s := world.LoadSkill(worldDir, "skills/"+stageRel+"/"+name, &ds)
	if s == nil || len(ds.Errors()) > 0 {
		// Named as the pack's own files (memo/toolbox.yaml:6), not the
		// staging folder's, which is gone by the time anyone reads this.
		errs := ds.Errors()
		for i := range errs {
			errs[i].File = strings.TrimPrefix(errs[i].File, "skills/"+stageRel+"/")
		}
		return Installed{}, armory.E(op, armory.KindInvalid, "the skill is not valid: "+diagText(errs))
	}
	for _, t := range s.Tools() {
		if h.Taken(t) {
			return Installed{}, armory.E(op, armory.KindConflict, fmt.Sprintf("the skill's tool %s has the name of a tool of the world; a skill's tool cannot take it", t))
		}
	}
	if s.MCPServer != nil && env.World.MCPServer(name) != nil {
		return Installed{}, armory.E(op, armory.KindConflict, fmt.Sprintf("the world's mcp_servers has a server %q already: the skill's server tools would be named like its (mcp.%s.*)", name, name))
	}
	target := filepath.Join(root, name)
	replaced := false
	if _, err := os.Lstat(target); err == nil {
		if !req.Replace {
			return Installed{}, armory.E(op, armory.KindConflict, fmt.Sprintf("the world has a skill %q already; ask again with replace (replace: true, --replace) to replace it", name))
		}
		old := filepath.Join(stage, "_old")
		if err := os.Rename(target, old); err != nil {
			return Installed{}, armory.E(op, armory.KindUnavailable, "moving the old skill aside", err)
		}
		replaced = true
		if err := os.Rename(filepath.Join(stage, name), target); err != nil {
			_ = os.Rename(old, target) // put the old one back
			return Installed{}, armory.E(op, armory.KindUnavailable, "installing the skill", err)
		}
	} else if err := os.Rename(filepath.Join(stage, name), target); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			// Another install of that name won the race.
			return Installed{}, armory.E(op, armory.KindConflict, fmt.Sprintf("the world has a skill %q already (installed meanwhile); ask again with replace to replace it", name))
		}
		return Installed{}, armory.E(op, armory.KindUnavailable, "installing the skill", err)
	}
	p := m.reloadPack(name)
	if p == nil {
		return Installed{}, armory.E(op, armory.KindInternal, "the skill was installed but does not load; see `armory world check`")
	}
	if err := m.reconcileAll(ctx); err != nil {
		m.log.Warn("skills: reconcile after an install failed", "skill", name, "err", err)
	}
	m.publish("pack:" + name)
	return Installed{Skill: p.info(), Replaced: replaced, Dir: "skills/" + name}, nil
}

// installFolder resolves the folder of a folder install: inside workspace
// when one confines it.
func installFolder(path, workspace string) (string, error) {
	const op = "syscall.skill.install"
	if path == "" {
		return "", armory.E(op, armory.KindInvalid, "source folder needs a path")
	}
	if workspace == "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", armory.E(op, armory.KindInvalid, "bad path "+path, err)
		}
		return abs, nil
	}
	rel := filepath.Clean(strings.TrimPrefix(path, "@me/"))
	if filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", armory.E(op, armory.KindInvalid, fmt.Sprintf("path %q must be a folder inside your workspace", path))
	}
	full := filepath.Join(workspace, rel)
	// No link on the way may lead out of the workspace.
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return "", armory.E(op, armory.KindNotFound, fmt.Sprintf("no folder %q in your workspace", path))
	}
	ws, err := filepath.EvalSymlinks(workspace)
	if err != nil {
		return "", armory.E(op, armory.KindUnavailable, "your workspace cannot be read", err)
	}
	if real != ws && !strings.HasPrefix(real, ws+string(filepath.Separator)) {
		return "", armory.E(op, armory.KindInvalid, fmt.Sprintf("path %q leads out of your workspace", path))
	}
	return real, nil
}

// remove deletes world skill name: its folder, every agent's hold on it,
// its tools from every registry.
func (m *Module) remove(ctx context.Context, name string) ([]string, error) {
	const op = "skills.remove"
	m.mu.Lock()
	env := m.env
	p := m.packs[""][name]
	m.mu.Unlock()
	if p == nil {
		return nil, armory.E(op, armory.KindNotFound, fmt.Sprintf("the world has no skill %q (an archetype's own skills are removed by editing its folder)", name))
	}
	// The folder is moved aside first (undone if the store refuses), so
	// neither a half-removed pack nor holds on a pack that is gone remain;
	// a folder that vanished already (removed by hand) is no obstacle.
	root := filepath.Join(env.World.Dir, "skills")
	gone := filepath.Join(root, ".removed-"+randomID())
	moved := true
	if err := os.Rename(filepath.Join(root, name), gone); errors.Is(err, fs.ErrNotExist) {
		moved = false
	} else if err != nil {
		return nil, armory.E(op, armory.KindUnavailable, "removing the skill's folder", err)
	}
	ss, err := m.states(ctx)
	var agents []string
	if err == nil {
		agents, err = ss.ForgetSkill(ctx, name)
		err = store.Err(op, err)
	}
	if err != nil {
		if moved {
			if rerr := os.Rename(gone, filepath.Join(root, name)); rerr != nil {
				m.log.Warn("skills: a refused removal could not put the skill back", "skill", name, "err", rerr)
			}
		}
		return nil, err
	}
	if moved {
		defer os.RemoveAll(gone)
	}
	m.mu.Lock()
	delete(m.packs[""], name)
	m.mu.Unlock()
	if err := m.reconcileAll(ctx); err != nil {
		m.log.Warn("skills: reconcile after a removal failed", "skill", name, "err", err)
	}
	m.publish("pack:" + name)
	return agents, nil
}

// reloadPack reads world skill name from disk again (after an install or
// a removal, here or in another process) and returns it, or nil when it
// is gone or does not load.
func (m *Module) reloadPack(name string) *pack {
	m.mu.Lock()
	env := m.env
	m.mu.Unlock()
	if env.World == nil || !world.ValidSkillName(name) {
		return nil
	}
	var p *pack
	if _, err := os.Stat(filepath.Join(env.World.Dir, "skills", name, world.SkillFile)); err == nil {
		var ds world.Diagnostics
		if s := world.LoadSkill(env.World.Dir, "skills/"+name, &ds); s != nil && len(ds.Errors()) == 0 {
			p = m.buildPack(s)
		} else {
			m.log.Warn("skills: a skill pack does not load", "skill", name, "problems", diagText(ds.Errors()))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p == nil {
		delete(m.packs[""], name)
		return nil
	}
	if m.packs[""] == nil {
		m.packs[""] = map[string]*pack{}
	}
	m.packs[""][name] = p
	return p
}

// rescanPacks picks up world skills installed or removed by another
// process whose event this one missed.
func (m *Module) rescanPacks() {
	m.mu.Lock()
	env := m.env
	have := map[string]bool{}
	for n := range m.packs[""] {
		have[n] = true
	}
	m.mu.Unlock()
	if env.World == nil {
		return
	}
	ents, err := os.ReadDir(filepath.Join(env.World.Dir, "skills"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
	onDisk := map[string]bool{}
	for i, e := range ents {
		if i >= world.MaxSkills {
			break
		}
		if e.IsDir() && world.ValidSkillName(e.Name()) {
			onDisk[e.Name()] = true
			if !have[e.Name()] {
				m.reloadPack(e.Name())
			}
		}
	}
	for n := range have {
		if !onDisk[n] {
			m.reloadPack(n)
		}
	}
}

func (m *Module) runInstall(ctx context.Context, ag *roster.Agent, raw json.RawMessage) armory.Result {
	var req InstallRequest
	if err := args.Decode("syscall.skill.install", raw, &req); err != nil {
		return armory.FailErr(err)
	}
	ws := ""
	if ag.Env != nil {
		ws = ag.Env.Workspace
	}
	if req.Source == SourceFolder && ws == "" {
		return armory.Failf(armory.KindInvalid, "you have no workspace to install a folder from")
	}
	var net *armory.NetPolicy
	if ag.Env != nil {
		net = ag.Env.Net
	}
	res, err := m.install(ctx, req, ws, net)
	if err != nil {
		return armory.FailErr(err)
	}
	r := jsonResult(res)
	r.Text = fmt.Sprintf("Installed skill %s (%s); syscall.skill.acquire {\"name\": %q} gives you its tools.\n%s", res.Skill.Name, res.Dir, res.Skill.Name, r.Text)
	return r
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// diagText joins diagnostics for an error message.
func diagText(ds world.Diagnostics) string {
	if len(ds) == 0 {
		return "no details"
	}
	parts := make([]string, 0, len(ds))
	for i, d := range ds {
		if i == 10 {
			parts = append(parts, fmt.Sprintf("and %d more", len(ds)-10))
			break
		}
		parts = append(parts, d.String())
	}
	return strings.Join(parts, "; ")
}
