package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// timersCmd lists and deletes the agents' timers, crons and watches
// through the services module's methods (never its tables); a deletion is
// audited as the human's.
func (a *app) timersCmd() *cobra.Command {
	var agent string
	var asJSON bool
	list := a.humanCmd(&cobra.Command{
		Use:   "list",
		Short: "The agents' timers, crons and watches, oldest first",
		Args:  exactArgs(),
	}, engine.Trail, func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, _ []string) error {
		var out []services.TimerView
		cur := ""
		for {
			page, next, err := m.ListTimers(ctx, agent, store.Page{Limit: store.MaxPage, Cursor: cur})
			if err != nil {
				return err
			}
			out = append(out, page...)
			if next == "" {
				break
			}
			cur = next
		}
		if len(out) == 0 && !asJSON {
			fmt.Fprintln(a.stdout, "no timers")
			return nil
		}
		return printList(a, asJSON, out, "ID\tAGENT\tNAME\tKIND\tSPEC\tNEXT\tFIRES", func(t services.TimerView) string {
			next := "-"
			if !t.NextFire.IsZero() {
				next = t.NextFire.Format(time.RFC3339)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%d", t.ID, t.Owner, t.Name, t.Kind, t.Spec, next, t.Fires)
		})
	})
	list.Flags().StringVar(&agent, "agent", "", "only this agent's timers")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	var delJSON bool
	del := a.humanCmd(&cobra.Command{
		Use:   "delete ID",
		Short: "Delete a timer, cron or watch (audited as yours)",
		Args:  exactArgs("ID"),
	}, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		v, err := m.DeleteTimer(ctx, p, args[0])
		if err := a.done(v.ID != "", err); err != nil {
			return err
		}
		return a.show(delJSON, v, func() { fmt.Fprintf(a.stdout, "deleted %s %q of %s\n", v.Kind, v.Name, v.Owner) })
	})
	del.Flags().BoolVar(&delJSON, "json", false, "print the deleted timer as JSON")
	return group("timers", "List and delete the agents' timers, crons and watches (util.timer, util.cron, util.watch)", list, del)
}
