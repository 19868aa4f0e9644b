package wasm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/world"
)

// Name is the module's name: the source its tools would show under, were
// they not toolbox tools (they show as "toolbox NAME", and an agent's
// "## Toolbox" grants them as it grants the toolbox's binary tools).
const Name = "wasm"

// CacheFolder is where, under the world folder, the module keeps compiled
// modules across restarts.
const CacheFolder = ".armory/wasm-cache"

// Module is the engine module of WASM tools: Provision builds the Runtime
// (its compilation cache in <world>/.armory/wasm-cache) and contributes
// every WASM tool of the world's toolboxes; Close closes the runtime.
type Module struct {
	opts Options
	rt   *Runtime
}

var _ engine.Module = (*Module)(nil)

// New returns the module. Options apply to its runtime; an empty CacheDir
// is the world's CacheFolder.
func New(o Options) *Module { return &Module{opts: o} }

// Name implements engine.Module.
func (*Module) Name() string { return Name }

// Runtime is the module's runtime once Provision ran (nil before): the
// skills module makes its packs' WASM tools with Runtime().Tool.
func (m *Module) Runtime() *Runtime { return m.rt }

// Provision implements engine.Module. A tool whose module file does not
// exist yet is unavailable, with the reason saying how to build it; a
// module that cannot be used (malformed, importing more than WASI, …) is
// unavailable too, and a warning at the tool's wasm: line says why. The
// world stays usable either way.
func (m *Module) Provision(ctx context.Context, env engine.Env) (engine.Contribution, error) {
	var c engine.Contribution
	o := m.opts
	if o.CacheDir == "" {
		o.CacheDir = filepath.Join(env.World.Dir, filepath.FromSlash(CacheFolder))
	}
	if o.Logger == nil {
		o.Logger = env.Logger
	}
	rt, err := NewRuntime(ctx, o)
	if err != nil && m.opts.CacheDir == "" {
		// A world folder we may not write (a read-only checkout): compile
		// in memory, and say so.
		c.Warnings.Warnf(CacheFolder, 0, "WASM modules are compiled at every start: %s", armory.Message(err))
		o.CacheDir = ""
		rt, err = NewRuntime(ctx, o)
	}
	if err != nil {
		return c, err
	}
	m.rt = rt
	names := make([]string, 0, len(env.World.Toolboxes))
	for n := range env.World.Toolboxes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, def := range env.World.Toolboxes[n].Tools {
			if def.Wasm == nil {
				continue
			}
			t, err := rt.Tool(def)
			if err == nil {
				c.Tools = append(c.Tools, t)
				continue
			}
			if c.Unavailable == nil {
				c.Unavailable = map[string]string{}
			}
			if errors.Is(err, fs.ErrNotExist) {
				c.Unavailable[def.FullName()] = missingReason(env.World, def)
				continue
			}
			msg := armory.Message(err)
			c.Unavailable[def.FullName()] = msg
			c.Warnings.Warnf(def.File, def.Wasm.Line, "tool %s is unavailable: %s", def.FullName(), strings.TrimPrefix(msg, fmt.Sprintf("%s:%d: ", def.File, def.Wasm.Line)))
		}
	}
	return c, nil
}

// missingReason says that a tool's module is not built, and how to build
// it.
func missingReason(w *world.World, def *world.ToolboxTool) string {
	p := def.Wasm.ModulePath
	if r, err := filepath.Rel(w.Dir, p); err == nil {
		p = filepath.ToSlash(r)
	}
	return "its WebAssembly module " + p + " is not built: build it to that path (for a Go program: GOOS=wasip1 GOARCH=wasm go build -o " + def.Wasm.ModulePath + " ./SOURCE; in Armory's source tree, ./scripts/build-wasm builds the example world's modules)"
}

// Close implements engine.Module: it closes the runtime, stopping calls
// still running.
func (m *Module) Close() error {
	if m.rt == nil {
		return nil
	}
	return m.rt.Close(context.Background())
}
