// Package builtin assembles Armory's built-in tools from their families:
// workspace (the agent's files), web (fetch, search, browser) and process
// (commands and Python in the sandbox). Every tool is stateless and safe
// for concurrent use: what it needs about the calling agent arrives in the
// armory.Invocation.
package builtin

import (
	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/builtin/process"
	"github.com/armory-dev/armory/builtin/web"
	"github.com/armory-dev/armory/builtin/workspace"
)

// All returns a new instance of every built-in tool, with default options
// (see AllWith).
func All() []armory.Tool { return AllWith(web.Options{}, process.Options{}) }

// AllWith returns every built-in tool; web tools use w (SSRF allowances,
// limits, the search endpoint), process tools proc (timeouts, limits).
func AllWith(w web.Options, proc process.Options) []armory.Tool {
	return []armory.Tool{
		&workspace.Read{}, &workspace.Write{}, &workspace.List{}, &workspace.Edit{}, &workspace.Search{}, &workspace.Delete{},
		web.NewFetch(w), web.NewSearch(w), web.NewBrowser(w), web.NewGoogleSearch(w),
		process.NewCLI(proc), process.NewPython(proc),
	}
}
