package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

func (a *app) sessionCmd() *cobra.Command {
	show := a.pipelineCmd(&cobra.Command{
		Use:   "show SESSION",
		Short: "The session's state, start, last activity, counters and enforced limits as JSON (AGENT:default: the current unnamed session)",
		Args:  exactArgs("SESSION"),
	}, false, func(ctx context.Context, p *pipeline.Pipeline, args []string) error {
		out, err := sessionShow(ctx, p, args[0])
		var ae *armory.Error
		if errors.As(err, &ae) {
			return err
		}
		if err != nil {
			return store.Err("session show", err)
		}
		return a.printJSON(out)
	})
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
			if err := pipeline.CheckLimitOverride(name, n); err != nil {
				return usageErr("%s", armory.Message(err))
			}
			ctx := context.Background()
			id, p, err := a.sessionArg(ctx, args[0])
			if err != nil {
				return err
			}
			if err := p.ExtendSession(ctx, id, name, n, pipeline.ViaCLI); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "session %s: %s is now %d\n", id, name, n)
			return nil
		},
	}
	reset := &cobra.Command{
		Use:   "reset SESSION",
		Short: "Zero the session's counters and restart its clock (limits raised with extend stay)",
		Args:  exactArgs("SESSION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := context.Background()
			id, p, err := a.sessionArg(ctx, args[0])
			if err != nil {
				return err
			}
			if err := p.ResetSession(ctx, id, pipeline.ViaCLI); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "session %s reset\n", id)
			return nil
		},
	}
	return group("session", "Show, extend and reset a session's safety caps", show, extend, reset)
}

// sessionArg opens the pipeline and resolves the session a human named
// (AGENT:default is the agent's current unnamed session).
func (a *app) sessionArg(ctx context.Context, arg string) (string, *pipeline.Pipeline, error) {
	p, err := a.reader(ctx)
	if err != nil {
		return "", nil, err
	}
	st := a.eng.Store()
	ag := sessionAgent(ctx, p.Roster(), st, arg)
	if err := knownSession(ctx, p.Roster(), st, ag, arg); err != nil {
		return "", nil, err
	}
	id, err := resolveSessionArg(ctx, p, ag, arg)
	if err != nil {
		return "", nil, store.Err("session", err)
	}
	return id, p, nil
}
