package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory/guard"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

func (a *app) sessionCmd() *cobra.Command {
	c := &cobra.Command{Use: "session", Short: "Show, extend and reset a session's safety caps"}
	show := &cobra.Command{
		Use:   "show SESSION",
		Short: "The session's counters, limits and start time as JSON",
		Args:  exactArgs("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			h, st, err := a.storeOnly(ctx)
			if err != nil {
				return err
			}
			counters, err := st.Counters(ctx, args[0])
			if err != nil {
				return store.Err("session show", err)
			}
			overrides, err := st.LimitOverrides(ctx, args[0])
			if err != nil {
				return store.Err("session show", err)
			}
			p, err := guard.New(h, guard.Options{Store: st})
			if err != nil {
				return err
			}
			limits := map[string]int64{}
			for _, n := range world.LimitNames {
				limits[n] = p.Limit(nil, n)
				if v, ok := overrides[n]; ok {
					limits[n] = v
				}
			}
			keys := make([]string, 0, len(counters))
			for k := range counters {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return a.printJSON(map[string]any{"session": args[0], "counters": counters, "limits": limits, "overrides": overrides})
		},
	}
	extend := &cobra.Command{
		Use:   "extend SESSION LIMIT N",
		Short: "Raise a cap of the session to N (session_runtime takes a duration such as 30m)",
		Args:  exactArgs("SESSION", "LIMIT", "N"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, raw := args[1], args[2]
			var n int64
			if name == world.LimitSessionRuntime {
				d, err := time.ParseDuration(raw)
				if err != nil || d <= 0 {
					return usageErr("session_runtime takes a duration such as 30m, got %q", raw)
				}
				n = int64(d / time.Second)
			} else {
				v, err := strconv.ParseInt(raw, 10, 64)
				if err != nil || v <= 0 {
					return usageErr("N must be a positive whole number, got %q", raw)
				}
				n = v
			}
			known := false
			for _, l := range world.LimitNames {
				known = known || l == name
			}
			if !known {
				return usageErr("unknown limit %q (known: %v)", name, world.LimitNames)
			}
			if max := guard.MaxLimit(name); max > 0 && n > max {
				return usageErr("%s can be raised to at most %d", name, max)
			}
			ctx := context.Background()
			_, st, err := a.storeOnly(ctx)
			if err != nil {
				return err
			}
			if err := st.SetLimitOverride(ctx, args[0], name, n); err != nil {
				return store.Err("session extend", err)
			}
			fmt.Fprintf(a.stdout, "session %s: %s is now %d\n", args[0], name, n)
			return nil
		},
	}
	reset := &cobra.Command{
		Use:   "reset SESSION",
		Short: "Zero the session's counters and restart its clock (limits raised with extend stay)",
		Args:  exactArgs("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			_, st, err := a.storeOnly(ctx)
			if err != nil {
				return err
			}
			if err := st.ResetSession(ctx, args[0]); err != nil {
				return store.Err("session reset", err)
			}
			fmt.Fprintf(a.stdout, "session %s reset\n", args[0])
			return nil
		},
	}
	c.AddCommand(show, extend, reset)
	return c
}
