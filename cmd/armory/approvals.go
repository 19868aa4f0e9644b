package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/store"
)

func (a *app) approvalsCmd() *cobra.Command {
	var status, agent string
	var asJSON, diffOnly bool
	list := a.storeCmd(&cobra.Command{
		Use:   "list",
		Short: "Approval requests, oldest first (default: open ones: pending and escalated)",
		Args:  exactArgs(),
		// Checked before the store is opened.
		PreRunE: func(*cobra.Command, []string) error {
			if status != "" && !store.ApprovalStatus(status).Valid() {
				return usageErr("--status must be pending, escalated, approved, denied or expired")
			}
			return nil
		},
	}, func(ctx context.Context, _ *roster.Roster, st store.Store, _ []string) error {
		var out []*store.Approval
		statuses := []store.ApprovalStatus{store.StatusPending, store.StatusEscalated}
		if status != "" {
			statuses = []store.ApprovalStatus{store.ApprovalStatus(status)}
		}
		for _, s := range statuses {
			as, err := st.ListApprovals(ctx, store.ApprovalFilter{Status: s, Agent: agent, Limit: store.MaxLimit})
			if err != nil {
				return armory.E("approvals", armory.KindUnavailable, "cannot list approvals", err)
			}
			out = append(out, as...)
		}
		if len(out) == 0 && !asJSON {
			fmt.Fprintln(a.stdout, "no approval requests")
		}
		return printList(a, asJSON, out, "", func(ap *store.Approval) string {
			return fmt.Sprintf("%s  %-9s %-10s %s → %s %s  (%s; route %s)", ap.ID, ap.Status, ap.Level, ap.Agent, ap.Tool, string(ap.Args), ap.CreatedAt.Format("2006-01-02 15:04:05"), ap.Route)
		})
	})
	list.Flags().StringVar(&status, "status", "", "only this status")
	list.Flags().StringVar(&agent, "agent", "", "only this agent's requests")
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	show := a.pipelineCmd(&cobra.Command{
		Use:   "show ID",
		Short: "One approval request as JSON (a file change with its unified diff against the file now)",
		Args:  exactArgs("ID"),
	}, false, func(ctx context.Context, p *pipeline.Pipeline, args []string) error {
		ap, err := p.Store().GetApproval(ctx, args[0])
		if store.Kind(err) == armory.KindNotFound {
			// As approve and deny say it, without the store's layers.
			return armory.E("approvals show", armory.KindNotFound, "no approval "+args[0])
		}
		if err != nil {
			return store.Err("approvals show", err)
		}
		// With the unified diff of a file change against the file now.
		v := pipeline.ApprovalView{Approval: ap, Diff: p.Preview(ctx, ap)}
		if diffOnly {
			fmt.Fprint(a.stdout, v.Diff)
			return nil
		}
		return a.printJSON(v)
	})
	show.Flags().BoolVar(&diffOnly, "diff", false, "print only the diff of a file change, as plain text")
	return group("approvals", "List, show and decide approval requests (as the human)",
		list, show, a.decideCmd("approve", store.StatusApproved), a.decideCmd("deny", store.StatusDenied))
}

func (a *app) decideCmd(verb string, status store.ApprovalStatus) *cobra.Command {
	var reason string
	cmd := a.pipelineCmd(&cobra.Command{
		Use:   verb + " ID [--reason TEXT]",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " an approval request (decided_by: human)",
		Args:  exactArgs("ID"),
	}, true, func(ctx context.Context, p *pipeline.Pipeline, args []string) error {
		// The one decision path (pipeline.Pipeline.Decide): it checks,
		// records and audits the decision, which the trail copies.
		if _, err := p.Decide(ctx, pipeline.ApprovalDecision{ID: args[0], Status: status, Reason: reason, Via: pipeline.ViaCLI}); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "approval %s: %s\n", args[0], status)
		return nil
	})
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the decision)")
	return cmd
}
