package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
)

// group is a command group: use and short, and its subcommands.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short}
	c.AddCommand(subs...)
	return c
}

// agentCmd is a command about one agent (its one argument, AGENT in use):
// run gets the world, loaded with its tools, and the agent.
func (a *app) agentCmd(use, short string, run func(h *roster.Roster, ag *roster.Agent) error) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs("AGENT"),
		RunE: func(_ *cobra.Command, args []string) error {
			h, ag, err := a.openAgent(args[0])
			if err != nil {
				return err
			}
			return run(h, ag)
		},
	}
}

// storeCmd sets c to run over the world's store (engine.StoreOnly: no
// upstream servers, no pipeline): run gets the world and the store.
func (a *app) storeCmd(c *cobra.Command, run func(ctx context.Context, h *roster.Roster, st store.Store, args []string) error) *cobra.Command {
	return a.engineCmd(c, engine.StoreOnly, func(ctx context.Context, e *engine.Engine, args []string) error {
		return run(ctx, e.Roster(), e.Store(), args)
	})
}

// pipelineCmd sets c to run with a pipeline over the world's store that
// runs no tool (no upstream servers); trail says whether what it audits is
// copied to the JSONL trail (a decision is; a read needs no follower).
func (a *app) pipelineCmd(c *cobra.Command, trail bool, run func(ctx context.Context, p *pipeline.Pipeline, args []string) error) *cobra.Command {
	skip := engine.Modules | engine.Trail
	if trail {
		skip = engine.Modules
	}
	return a.engineCmd(c, skip, func(ctx context.Context, e *engine.Engine, args []string) error {
		return run(ctx, e.Pipeline(), args)
	})
}

// engineCmd sets c to open the command's engine without the parts in skip
// and then run.
func (a *app) engineCmd(c *cobra.Command, skip engine.Part, run func(ctx context.Context, e *engine.Engine, args []string) error) *cobra.Command {
	c.RunE = func(_ *cobra.Command, args []string) error {
		ctx := context.Background()
		e, err := a.engine(ctx, skip)
		if err != nil {
			return err
		}
		return run(ctx, e, args)
	}
	return c
}

// count is n and noun, the noun in the plural unless n is 1 ("1 warning",
// "0 warnings", "2 agents").
func count[N ~int | ~int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// printList prints rows as a JSON array (empty, not null, for none) or,
// as text, one line a row: under header in aligned columns (line's fields
// separated by tabs), or as they are when header is "".
func printList[T any](a *app, asJSON bool, rows []T, header string, line func(T) string) error {
	if asJSON {
		if rows == nil {
			rows = []T{}
		}
		return a.printJSON(rows)
	}
	if header == "" {
		for _, r := range rows {
			fmt.Fprintln(a.stdout, line(r))
		}
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	for _, r := range rows {
		fmt.Fprintln(tw, line(r))
	}
	return tw.Flush()
}
