package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory/roster"
)

func (a *app) accessCmd() *cobra.Command {
	var showJSON bool
	show := a.agentCmd("show AGENT", "The agent's access mode, groups, overrides, granted privileged tools and every tool it sees",
		func(h *roster.Roster, ag *roster.Agent) error {
			s := h.AccessSummary(ag)
			if showJSON {
				return a.printJSON(s)
			}
			fmt.Fprintf(a.stdout, "agent:              %s\nmode:               %s\ngroups:             %s\noverrides:          %s\ngranted privileged: %s\n",
				s.Agent, s.Mode, list(s.Groups), list(s.Overrides), list(s.GrantedPrivileged))
			if s.Mode == "legacy" {
				fmt.Fprintf(a.stdout, "legacy tools:       %s\n", list(s.LegacyTools))
			}
			fmt.Fprintf(a.stdout, "tools:              %s\n", list(s.Tools))
			if len(s.PipelineTools) > 0 {
				fmt.Fprintf(a.stdout, "added by pipeline:  %s\n", list(s.PipelineTools))
			}
			return nil
		})
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")
	var explainJSON bool
	explain := &cobra.Command{
		Use:   "explain AGENT TOOL",
		Short: "Why the agent can or cannot see the tool (exit 0 either way)",
		Args:  exactArgs("AGENT", "TOOL"),
		RunE: func(c *cobra.Command, args []string) error {
			h, err := a.open()
			if err != nil {
				return err
			}
			ex, err := h.Explain(args[0], args[1])
			if err != nil {
				return err
			}
			if explainJSON {
				return a.printJSON(ex)
			}
			verdict := "not visible"
			if ex.Visible {
				verdict = "visible"
			}
			fmt.Fprintf(a.stdout, "%s → %s: %s\n", ex.Agent, ex.Tool, verdict)
			for _, r := range ex.Reasons {
				fmt.Fprintf(a.stdout, "  - %s\n", r)
			}
			return nil
		},
	}
	explain.Flags().BoolVar(&explainJSON, "json", false, "print JSON")
	return group("access", "Show and explain access policy", show, explain)
}

func list(xs []string) string {
	if len(xs) == 0 {
		return "(none)"
	}
	return strings.Join(xs, ", ")
}
