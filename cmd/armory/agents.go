package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
)

// agentsCmd is `armory agents list|stop|start`: the human's view and
// control of the agents' status, through the services module's methods
// (stop and start audited as the human's, via cli). What an agent does
// with syscall.agent.* goes through the pipeline like any call.
func (a *app) agentsCmd() *cobra.Command {
	var asJSON bool
	list := a.engineCmd(&cobra.Command{
		Use:   "list",
		Short: "Every agent (the world's and those created at run time) with its archetype, status and uptime",
		Args:  exactArgs(),
	}, engine.Trail, func(ctx context.Context, e *engine.Engine, _ []string) error {
		m, err := a.agentsModule(e)
		if err != nil {
			return err
		}
		list, err := m.ListAgents(ctx)
		if err != nil {
			return err
		}
		return printList(a, asJSON, list, "AGENT\tARCHETYPE\tSTATUS\tORIGIN\tUPTIME\tTOOLS", func(i services.AgentInfo) string {
			up := "-"
			if i.Status == "running" {
				up = fmt.Sprintf("%ds", i.UptimeSeconds)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%d", i.ID, i.Archetype, i.Status, i.Origin, up, i.Tools)
		})
	})
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return group("agents", "List, stop and start the world's agents (as the human)", list, a.agentStatusCmd(true), a.agentStatusCmd(false))
}

func (a *app) agentStatusCmd(stop bool) *cobra.Command {
	var asJSON bool
	use, short := "start AGENT", "Start a stopped agent: its calls are allowed again"
	if stop {
		use, short = "stop AGENT", "Stop an agent: its calls are refused on every surface until it is started"
	}
	c := a.engineCmd(&cobra.Command{Use: use, Short: short, Args: exactArgs("AGENT")}, 0, func(ctx context.Context, e *engine.Engine, args []string) error {
		m, err := a.agentsModule(e)
		if err != nil {
			return err
		}
		f := m.StartAgent
		if stop {
			f = m.StopAgent
		}
		info, err := f(ctx, e.Pipeline(), args[0], pipeline.ViaCLI)
		if err := a.done(info.ID != "", err); err != nil {
			return err
		}
		return a.show(asJSON, info, func() { fmt.Fprintf(a.stdout, "agent %s: %s\n", info.ID, info.Status) })
	})
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}

// agentsModule returns the engine's services module.
func (a *app) agentsModule(e *engine.Engine) (*services.Module, error) {
	m, ok := e.Module(services.Name).(*services.Module)
	if !ok {
		return nil, armory.E("agents", armory.KindUnavailable, "the services module is not loaded")
	}
	return m, nil
}
