package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory/registry"
	"github.com/armory-dev/armory/roster"
)

func (a *app) toolCmd() *cobra.Command {
	var long bool
	listCmd := a.agentCmd("list AGENT", "JSON array of {name, description}, sorted by name (--long: danger, capabilities, permission, source)",
		func(h *roster.Roster, ag *roster.Agent) error {
			if long {
				return a.printJSON(h.Tools(ag))
			}
			type entry struct {
				Name        string `json:"name"`
				Description string `json:"description"`
			}
			out := []entry{}
			for _, s := range ag.Registry.Specs() {
				out = append(out, entry{s.Name, s.Description})
			}
			return a.printJSON(out)
		})
	listCmd.Flags().BoolVar(&long, "long", false, "also each tool's danger, capabilities, category, permission level for this agent and source")
	brief := a.agentCmd("brief AGENT", "One \"- name: description\" line per tool", func(_ *roster.Roster, ag *roster.Agent) error {
		fmt.Fprint(a.stdout, registry.Brief(ag.Registry.Specs()))
		return nil
	})
	prompt := a.agentCmd("prompt AGENT", "The <tools> block of the agent's prompt, with the policy text of its toolkits", func(h *roster.Roster, ag *roster.Agent) error {
		fmt.Fprint(a.stdout, h.Briefing(ag))
		return nil
	})
	var format string
	specs := a.agentCmd("specs AGENT", "Tool specs as JSON for --format openai, anthropic or mcp", func(_ *roster.Roster, ag *roster.Agent) error {
		var b []byte
		var err error
		switch format {
		case "openai":
			b, _, err = registry.OpenAI(ag.Registry.Specs())
		case "anthropic":
			b, _, err = registry.Anthropic(ag.Registry.Specs())
		default:
			b, err = registry.MCP(ag.Registry.Tools())
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, string(b))
		return nil
	})
	specs.Flags().StringVar(&format, "format", "openai", "openai, anthropic or mcp")
	// Checked before the world is loaded (and its upstream servers started).
	specs.PreRunE = func(*cobra.Command, []string) error {
		if format != "openai" && format != "anthropic" && format != "mcp" {
			return usageErr("--format must be openai, anthropic or mcp, got %q", format)
		}
		return nil
	}
	return group("tool", "Show an agent's tools", listCmd, brief, prompt, specs)
}
