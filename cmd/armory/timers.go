package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// timersCmd lists and deletes the agents' timers, crons and watches
// through the services module's methods (never its tables); a deletion is
// audited as the human's.
func (a *app) timersCmd() *cobra.Command {
	var agent string
	var asJSON bool
	list := a.engineCmd(&cobra.Command{
		Use:   "list",
		Short: "The agents' timers, crons and watches, oldest first",
		Args:  exactArgs(),
	}, engine.Trail, func(ctx context.Context, e *engine.Engine, _ []string) error {
		m, err := a.servicesModule()
		if err != nil {
			return err
		}
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
	del := a.engineCmd(&cobra.Command{
		Use:   "delete ID",
		Short: "Delete a timer, cron or watch (audited as yours)",
		Args:  exactArgs("ID"),
	}, 0, func(ctx context.Context, e *engine.Engine, args []string) error {
		m, err := a.servicesModule()
		if err != nil {
			return err
		}
		v, err := m.DeleteTimer(ctx, e.Pipeline(), args[0])
		if err != nil && v.ID == "" {
			return err
		}
		if delJSON {
			if perr := a.printJSON(v); perr != nil {
				return perr
			}
		} else {
			fmt.Fprintf(a.stdout, "deleted %s %q of %s\n", v.Kind, v.Name, v.Owner)
		}
		return err // the deletion stands; an error here says its audit entry is missing
	})
	del.Flags().BoolVar(&delJSON, "json", false, "print the deleted timer as JSON")
	return group("timers", "List and delete the agents' timers, crons and watches (util.timer, util.cron, util.watch)", list, del)
}

// servicesModule is the services module among the app's modules.
func (a *app) servicesModule() (*services.Module, error) {
	for _, m := range a.modules {
		if s, ok := m.(*services.Module); ok {
			return s, nil
		}
	}
	return nil, armory.E("timers", armory.KindUnavailable, "the services module is not part of this build")
}
