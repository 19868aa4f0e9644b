package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/store"
)

// pinsCmd sets c to run over the world's store after the world's upstream
// MCP servers were asked for their tools: a definition that changed since
// the last load is pending (CHANGED) by the time the pins are read, as the
// next serve would find it.
func (a *app) pinsCmd(c *cobra.Command, run func(ctx context.Context, st store.Store, args []string) error) *cobra.Command {
	return a.engineCmd(c, engine.Trail|engine.Pipeline, func(ctx context.Context, e *engine.Engine, args []string) error {
		return run(ctx, e.Store(), args)
	})
}

// toolboxCmd is `armory toolbox pins list|accept`.
func (a *app) toolboxCmd() *cobra.Command {
	pins := &cobra.Command{
		Use:   "pins",
		Short: "List and accept the pinned definitions of upstream MCP tools",
		Long: "Armory records the SHA-256 of every upstream MCP tool's definition (name, description, schemas)\n" +
			"the first time it sees it. A changed definition is withheld from every agent until a human\n" +
			"accepts it here; restart armory serve (or run the next command) to offer it again.",
	}
	var asJSON bool
	list := a.pinsCmd(&cobra.Command{
		Use:   "list [SERVER]",
		Short: "List pins; CHANGED marks a definition withheld until accepted",
		Args:  cobra.MaximumNArgs(1),
	}, func(ctx context.Context, st store.Store, args []string) error {
		server := ""
		if len(args) == 1 {
			server = args[0]
		}
		ps, err := st.ListPins(ctx, server)
		if err != nil {
			return store.Err("toolbox pins list", err)
		}
		return printList(a, asJSON, ps, "SERVER\tTOOL\tSTATE\tPINNED\tSINCE\tPENDING", func(p *store.ToolPin) string {
			state, pending := "pinned", ""
			if p.PendingHash != "" {
				state, pending = "CHANGED", p.PendingHash[:16]+" seen "+p.PendingAt.Format(time.RFC3339)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", p.Server, p.Tool, state, p.Hash[:16], p.PinnedAt.Format(time.RFC3339), pending)
		})
	})
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON, with the pinned and the pending definitions")
	var hash string
	accept := a.pinsCmd(&cobra.Command{
		Use:   "accept SERVER [TOOL]",
		Short: "Accept the changed definition of TOOL (or of every changed tool of SERVER)",
		Args:  cobra.RangeArgs(1, 2),
	}, func(ctx context.Context, st store.Store, args []string) error {
		server := args[0]
		var todo []*store.ToolPin
		if len(args) == 2 {
			todo = []*store.ToolPin{{Server: server, Tool: args[1], PendingHash: hash}}
		} else {
			if hash != "" {
				return usageErr("--hash needs a TOOL")
			}
			ps, err := st.ListPins(ctx, server)
			if err != nil {
				return store.Err("toolbox pins accept", err)
			}
			for _, p := range ps {
				if p.PendingHash != "" {
					todo = append(todo, p) // accept exactly what was listed
				}
			}
			if len(todo) == 0 {
				return armory.E("toolbox pins accept", armory.KindConflict, fmt.Sprintf("no changed definition of a tool of server %q is pending (armory toolbox pins list %s)", server, server))
			}
		}
		for _, p := range todo {
			got, err := st.AcceptPin(ctx, p.Server, p.Tool, p.PendingHash)
			if store.Kind(err) == armory.KindNotFound {
				return armory.E("toolbox pins accept", armory.KindNotFound, fmt.Sprintf("no pinned tool %q of server %q (armory toolbox pins list shows the pinned tools)", p.Tool, p.Server))
			}
			if err != nil {
				return store.Err("toolbox pins accept", err)
			}
			fmt.Fprintf(a.stdout, "accepted %s/%s (sha256 %s)\n", got.Server, got.Tool, got.Hash)
		}
		fmt.Fprintln(a.stderr, "restart armory serve (or run the next command) to offer the accepted tools")
		return nil
	})
	accept.Flags().StringVar(&hash, "hash", "", "accept only if the pending definition has this SHA-256 (from pins list --json)")
	pins.AddCommand(list, accept)
	return group("toolbox", "Manage toolboxes: the pinned definitions of upstream MCP tools", pins)
}
