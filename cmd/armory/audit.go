package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/audit"
	"github.com/armory-dev/armory/audit/trail"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store"
)

func (a *app) auditCmd() *cobra.Command {
	var f store.AuditFilter
	var status, since string
	var asJSON bool
	c := a.storeCmd(&cobra.Command{
		Use:   "audit [--agent A] [--tool T] [--status S] [--since TIME] [--limit N] [--json]",
		Short: "Show audit records, newest first",
		Args:  exactArgs(),
		// The flags are checked before the store is opened: a usage error
		// does not depend on the world or the store.
		PreRunE: func(*cobra.Command, []string) error {
			f.Status = audit.Status(status)
			if status != "" && !f.Status.Valid() {
				return usageErr("--status must be running, pending, success, error, blocked, denied, timeout or interrupted, got %q", status)
			}
			if f.Limit < 1 || f.Limit > store.MaxLimit {
				// As GET /api/audit: not read as the default or cut silently.
				return usageErr("--limit must be a whole number 1..%d, got %d", store.MaxLimit, f.Limit)
			}
			if since != "" {
				t, err := server.ParseSince(since)
				if err != nil {
					return usageErr("--since: %v", err)
				}
				f.Since = t
			}
			return nil
		},
	}, func(ctx context.Context, _ *roster.Roster, st store.Store, _ []string) error {
		recs, err := st.ListAudit(ctx, f)
		if err != nil {
			return store.Err("audit", err)
		}
		if len(recs) == 0 && !asJSON {
			fmt.Fprintln(a.stdout, "no audit records") // as approvals list says none
		}
		return printList(a, asJSON, recs, "", func(r *audit.Record) string {
			l := fmt.Sprintf("%6d %s %-6s %-8s %s %s → %s", r.Seq, r.Time.Format(time.RFC3339), r.Phase, r.Status, r.Agent, r.Tool, oneLine(r.Result))
			switch {
			case r.ApprovalID != "" && r.DecidedBy != "":
				l += fmt.Sprintf(" [approval %s by %s]", r.ApprovalID, r.DecidedBy)
			case r.ApprovalID != "":
				l += fmt.Sprintf(" [approval %s]", r.ApprovalID) // not decided when recorded
			}
			if r.Justification != "" {
				l += " [justified: " + oneLine(r.Justification) + "]"
			}
			return l
		})
	})
	fl := c.Flags()
	fl.StringVar(&f.Agent, "agent", "", "only this agent")
	fl.StringVar(&f.Tool, "tool", "", "only this tool")
	fl.StringVar(&status, "status", "", "only this status (running, pending, success, error, blocked, denied, timeout or interrupted)")
	fl.StringVar(&since, "since", "", "only records at or after TIME (RFC 3339, or a duration ago such as 1h)")
	fl.IntVar(&f.Limit, "limit", store.DefaultLimit, fmt.Sprintf("at most N records (1..%d)", store.MaxLimit))
	fl.BoolVar(&asJSON, "json", false, "print JSON")
	c.AddCommand(a.storeCmd(&cobra.Command{
		Use:   "verify",
		Short: "Verify the audit chain in the store, and the JSONL trail as a copy of it; exit 1 naming the first broken record",
		Args:  exactArgs(),
	}, func(ctx context.Context, h *roster.Roster, st store.Store, _ []string) error {
		if err := st.VerifyAudit(ctx); err != nil {
			return brokenChain("store", err)
		}
		head, _ := st.AuditHead(ctx)
		fmt.Fprintf(a.stdout, "store: chain verified (%s)\n", count(head.Seq, "record"))
		dir := filepath.Join(h.World.Dir, ".armory", "audit")
		if _, err := os.Stat(dir); err != nil {
			fmt.Fprintf(a.stdout, "jsonl: no trail at %s\n", dir)
			return nil
		}
		// The JSONL trail is a copy of the store's: its own chain, and
		// every record the store's record with the same seq.
		rep, err := trail.Check(ctx, st, dir)
		if err != nil {
			return brokenChain("jsonl "+dir, err)
		}
		if rep.Files == 0 {
			fmt.Fprintf(a.stdout, "jsonl: chain verified, no records yet (%s)\n", dir)
		} else {
			fmt.Fprintf(a.stdout, "jsonl: chain verified, a copy of the store's records 1..%d (%s)\n", rep.Files, dir)
		}
		if rep.Behind > 0 {
			fmt.Fprintf(a.stdout, "jsonl: %s behind the store (the server writing the trail copies them; any command using the world catches it up)\n", count(rep.Behind, "record"))
		}
		return nil
	}))
	return c
}

func brokenChain(where string, err error) error {
	var ce *audit.ChainError
	if errors.As(err, &ce) {
		return armory.E("audit verify", armory.KindOther, where+": "+err.Error())
	}
	return armory.E("audit verify", armory.KindUnavailable, where, err)
}
