package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
)

func (a *app) callCmd() *cobra.Command {
	var c pipeline.Call
	var args string
	var progress bool
	cmd := &cobra.Command{
		Use:   "call AGENT TOOL [--args JSON] | call --resume APPROVAL_ID",
		Short: "Run a tool call through the guarded pipeline and print its outcome as JSON",
		Long: "call runs one tool call through every stage of the pipeline (lookup, validation, caps,\n" +
			"screening, patterns, permission and approval, run, audit) and prints\n" +
			"{call_id, status, result, reasons, approval_id?}.\n" +
			"Exit 0 success, 1 tool error, 2 unknown agent/tool or bad arguments, 3 blocked or denied, 4 pending.",
		RunE: func(cmd *cobra.Command, pos []string) error {
			switch {
			case c.Resume != "" && (len(pos) == 0 || len(pos) == 2):
			case len(pos) == 2:
			default:
				return usageErr("call takes AGENT TOOL (or --resume APPROVAL_ID, optionally with AGENT TOOL)")
			}
			if c.Wait < 0 {
				return usageErr("--wait cannot be negative, got %s", c.Wait)
			}
			if len(pos) == 2 {
				c.Agent, c.Tool = pos[0], pos[1]
				// Sessions belong to an agent, as over MCP and REST: --session s
				// is AGENT:s, so two agents' calls never share caps.
				c.Session = server.ScopeSession(c.Agent, c.Session)
			}
			if args != "" {
				raw, err := parseArgs(args)
				if err != nil {
					return err
				}
				c.Args = raw
			}
			if progress {
				// One line a message: a tool's output chunk ends in its own
				// line break.
				c.Progress = func(msg string) { fmt.Fprintln(a.stderr, "…", strings.TrimRight(msg, "\r\n")) }
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			p, err := a.pipeline(ctx)
			if err != nil {
				return err
			}
			o := p.Execute(ctx, c)
			if err := a.printJSON(o); err != nil {
				return err
			}
			if code := outcomeExit(o); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&args, "args", "", "arguments as a JSON object")
	f.StringVar(&c.Session, "session", "", "session name, recorded as AGENT:NAME (default AGENT:default); caps count per session")
	f.StringVar(&c.Task, "task", "", "task id, recorded in the audit trail")
	f.DurationVar(&c.Wait, "wait", 0, "how long to wait for an approval before returning pending (e.g. 30s)")
	f.StringVar(&c.Resume, "resume", "", "resume the call an approval was created for")
	f.StringVar(&c.Justification, "justification", "", "why a call flagged by loop detection should go on (audited)")
	f.BoolVar(&progress, "progress", false, "print progress to stderr as the call runs")
	return cmd
}

// exitCode ends a command with a given exit code after its output was
// printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// parseArgs checks --args: one JSON object. Malformed JSON is bad input
// (exit 2), named in one line with the byte offset of the problem.
func parseArgs(s string) (json.RawMessage, error) {
	bad := func(format string, a ...any) error {
		return armory.E("call", armory.KindInvalid, "--args: "+fmt.Sprintf(format, a...))
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, bad("not valid JSON at byte %d: %s (want one JSON object such as {\"path\":\"a.txt\"})", se.Offset, se.Error())
		}
		return nil, bad("not valid JSON: %v", err)
	}
	if _, ok := v.(map[string]any); !ok {
		kind := "a value"
		switch v.(type) {
		case []any:
			kind = "an array"
		case string:
			kind = "a string"
		case float64:
			kind = "a number"
		case bool:
			kind = "a boolean"
		case nil:
			kind = "null"
		}
		return nil, bad("want a JSON object such as {\"path\":\"a.txt\"}, got %s", kind)
	}
	return json.RawMessage(s), nil
}
