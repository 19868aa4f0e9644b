package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory/registry"
)

func (a *app) toolCmd() *cobra.Command {
	t := &cobra.Command{Use: "tool", Short: "Show an agent's tools"}
	var long bool
	listCmd := &cobra.Command{
		Use:   "list AGENT",
		Short: "JSON array of {name, description}, sorted by name (--long: danger, capabilities, permission, source)",
		Args:  exactArgs("AGENT"),
		RunE: func(c *cobra.Command, args []string) error {
			h, ag, err := a.openAgent(args[0])
			if err != nil {
				return err
			}
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
		},
	}
	listCmd.Flags().BoolVar(&long, "long", false, "also each tool's danger, capabilities, category, permission level for this agent and source")
	t.AddCommand(listCmd)
	t.AddCommand(&cobra.Command{
		Use:   "brief AGENT",
		Short: "One \"- name: description\" line per tool",
		Args:  exactArgs("AGENT"),
		RunE: func(c *cobra.Command, args []string) error {
			_, ag, err := a.openAgent(args[0])
			if err != nil {
				return err
			}
			fmt.Fprint(a.stdout, registry.Brief(ag.Registry.Specs()))
			return nil
		},
	})
	t.AddCommand(&cobra.Command{
		Use:   "prompt AGENT",
		Short: "The <tools> block of the agent's prompt, with the policy text of its toolkits",
		Args:  exactArgs("AGENT"),
		RunE: func(c *cobra.Command, args []string) error {
			h, ag, err := a.openAgent(args[0])
			if err != nil {
				return err
			}
			fmt.Fprint(a.stdout, h.Briefing(ag))
			return nil
		},
	})
	var format string
	specs := &cobra.Command{
		Use:   "specs AGENT",
		Short: "Tool specs as JSON for --format openai, anthropic or mcp",
		Args:  exactArgs("AGENT"),
		RunE: func(c *cobra.Command, args []string) error {
			if format != "openai" && format != "anthropic" && format != "mcp" {
				return usageErr("--format must be openai, anthropic or mcp, got %q", format)
			}
			_, ag, err := a.openAgent(args[0])
			if err != nil {
				return err
			}
			var b []byte
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
		},
	}
	specs.Flags().StringVar(&format, "format", "openai", "openai, anthropic or mcp")
	t.AddCommand(specs)
	return t
}
