package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/example"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/skills"
	"github.com/armory-dev/armory/store"
	"github.com/armory-dev/armory/world"
)

// serveCmd is `armory serve`: the world's agents over MCP and REST.
func (a *app) serveCmd() *cobra.Command {
	var opts server.Options
	var exampleWorld bool
	var warm int
	cmd := &cobra.Command{
		Use:   "serve [--addr 127.0.0.1:7411] [--example]",
		Short: "Serve the world's agents over MCP (/agents/ID/mcp) and a REST API (/api)",
		Long: "serve hosts the world: each agent's tools over MCP (streamable HTTP at /agents/ID/mcp),\n" +
			"a REST API under /api, Server-Sent Events at /api/events and Prometheus metrics at /metrics.\n" +
			"Every call goes through the guarded pipeline. Requests need a bearer token (armory token create);\n" +
			"on first start an admin token is created and printed once to stderr.\n" +
			"SIGINT or SIGTERM stops it, letting in-flight calls finish (up to --shutdown-timeout).",
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.MCPSessionsPerToken < 0 || opts.MCPSessions < 0 || opts.MCPSessionTimeout < 0 {
				return usageErr("--mcp-sessions-per-token, --mcp-sessions and --mcp-session-idle cannot be negative")
			}
			if exampleWorld {
				if err := a.useExampleWorld(cmd); err != nil {
					return err
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
			opts.Logger = log
			a.log = log
			srv, err := a.server(ctx, opts, warm)
			if err != nil {
				return err
			}
			// The one long-lived command: its modules' background work
			// (timers, watches, deliveries) runs here, until SIGINT/SIGTERM
			// or the engine closes; no other command starts it.
			if err := a.eng.Start(ctx); err != nil {
				return err
			}
			if secret, err := server.EnsureAdminToken(ctx, a.eng.Store()); err != nil {
				return err
			} else if secret != "" {
				fmt.Fprintf(a.stderr, "armory: created an admin token (shown only now; keep it safe):\n%s\n", secret)
			} else {
				// Shown only on the first start: say how to get another.
				fmt.Fprintf(a.stderr, "armory: an admin token exists (armory --world %s token list); make another with: armory --world %s token create --admin\n", a.world, a.world)
			}
			ln, err := net.Listen("tcp", opts.Addr)
			if err != nil {
				return armory.E("serve", armory.KindUnavailable, "cannot listen on "+opts.Addr, err)
			}
			if host, _, _ := net.SplitHostPort(opts.Addr); !isLoopback(host) {
				log.Warn("listening on a non-loopback address: put TLS in front of it", "addr", ln.Addr().String())
			}
			fmt.Fprintf(a.stderr, "armory: listening on http://%s (world %q, %s)\n", ln.Addr(), srv.Pipeline().Roster().World.Name, count(len(srv.Pipeline().Roster().Agents()), "agent"))
			a.printConnect(ln.Addr().String(), srv.Pipeline().Roster())
			return srv.Serve(ctx, ln)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Addr, "addr", "127.0.0.1:7411", "listen address (loopback by default)")
	f.BoolVar(&exampleWorld, "example", false, "serve the built-in example world, written to --world (default ./demo-world) when that folder has no world yet")
	f.StringSliceVar(&opts.AllowHosts, "allow-host", nil, "further Host header names to accept (e.g. a reverse proxy's name)")
	f.StringSliceVar(&opts.AllowOrigins, "allow-origin", nil, "further origins (scheme://host[:port]) allowed to call the API")
	f.DurationVar(&opts.ApprovalWait, "approval-wait", 60*time.Second, "how long an MCP tool call waits for an approval before returning pending")
	f.DurationVar(&opts.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long to let in-flight calls finish on SIGINT/SIGTERM")
	f.Int64Var(&opts.MaxBodyBytes, "max-body", 1<<20, "largest request body in bytes")
	f.DurationVar(&opts.TokenCacheTTL, "token-cache-ttl", 0, "trust a checked token this long without reading the store (0: never; a revoked token then stops at once)")
	f.IntVar(&warm, "warm-sandboxes", 2, warmSandboxesUsage)
	f.IntVar(&opts.MCPSessionsPerToken, "mcp-sessions-per-token", 0, fmt.Sprintf("most MCP sessions one token may have open (0: the world's mcp_sessions.max_per_token, else %d)", server.DefaultMCPSessionsPerToken))
	f.IntVar(&opts.MCPSessions, "mcp-sessions", 0, fmt.Sprintf("most MCP sessions open on this server in all (0: the world's mcp_sessions.max_total, else %d)", server.DefaultMCPSessions))
	f.DurationVar(&opts.MCPSessionTimeout, "mcp-session-idle", 0, fmt.Sprintf("close an MCP session after this long without a request (0: the world's mcp_sessions.idle_timeout, else %s)", server.DefaultMCPSessionTimeout))
	return cmd
}

func isLoopback(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// warmSandboxesUsage documents --warm-sandboxes (docs/sandbox.md, "Warm pool").
const warmSandboxesUsage = "bwrap sandboxes kept set up ahead of calls, per distinct sandbox policy (0: none; each call then sets up its own)"

// server builds the server over the command's engine (engine.Open with
// every part). warm > 0 turns on the sandbox warm pool for as long as the
// command runs.
func (a *app) server(ctx context.Context, opts server.Options, warm int) (*server.Server, error) {
	e, err := a.engine(ctx, 0)
	if err != nil {
		return nil, err
	}
	// A flag wins over the world's mcp_sessions; the server defaults the rest.
	ms := e.World().MCPSessions
	if opts.MCPSessionsPerToken == 0 {
		opts.MCPSessionsPerToken = ms.MaxPerToken
	}
	if opts.MCPSessions == 0 {
		opts.MCPSessions = ms.MaxTotal
	}
	if opts.MCPSessionTimeout == 0 {
		opts.MCPSessionTimeout = ms.IdleTimeout
	}
	srv, err := server.New(e, opts)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, srv.Close) // before the engine closes
	if warm > 0 {
		sandbox.EnablePool(sandbox.PoolOptions{PerPolicy: warm})
		a.closers = append(a.closers, sandbox.ClosePool)
	}
	return srv, nil
}

// mcpCmd is `armory mcp AGENT`: one agent's tools over MCP on stdio.
func (a *app) mcpCmd() *cobra.Command {
	var opts server.Options
	var warm int
	cmd := &cobra.Command{
		Use:   "mcp AGENT",
		Short: "Serve one agent's tools over MCP on stdin/stdout (for clients that spawn a process)",
		Args:  exactArgs("AGENT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			opts.Logger = slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
			// An unknown agent is named, with the world's agents, before
			// the server (and its warm sandboxes) is built.
			e, err := a.engine(ctx, 0)
			if err != nil {
				return err
			}
			if _, err := e.Roster().Agent(args[0]); err != nil {
				return err
			}
			srv, err := a.server(ctx, opts, warm)
			if err != nil {
				return err
			}
			ms, err := srv.MCPServer(args[0])
			if err != nil {
				return err
			}
			// The client's tools/list follows skills acquired or dropped by
			// other processes (a server, a CLI command) while it runs.
			if sk, ok := e.Module(skills.Name).(*skills.Module); ok {
				defer sk.Follow()()
			}
			if err := ms.Run(ctx, &mcp.StdioTransport{}); err != nil && ctx.Err() == nil {
				return armory.E("mcp", armory.KindUnavailable, "the MCP session ended", err)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&opts.ApprovalWait, "approval-wait", 60*time.Second, "how long a tool call waits for an approval before returning pending")
	cmd.Flags().IntVar(&warm, "warm-sandboxes", 2, warmSandboxesUsage)
	return cmd
}

// tokenCmd is `armory token create|list|revoke`.
func (a *app) tokenCmd() *cobra.Command {
	c := &cobra.Command{Use: "token", Short: "Create, list and revoke the server's bearer tokens"}
	var admin bool
	var name string
	create := a.storeCmd(&cobra.Command{
		Use:   "create AGENT | create --admin",
		Short: "Create a token for one agent (or an admin token) and print it once",
		Args: func(_ *cobra.Command, args []string) error {
			if admin == (len(args) == 1) || len(args) > 1 {
				return usageErr("token create takes AGENT, or --admin and no argument")
			}
			return nil
		},
	}, func(ctx context.Context, h *roster.Roster, st store.Store, args []string) error {
		agent := ""
		if !admin {
			agent = args[0]
		}
		if agent != "" {
			// A world agent, or one created at run time (kept in the store;
			// this command does not host it).
			if _, err := h.Agent(agent); err != nil {
				if ok, _ := services.Created(ctx, st, agent); !ok {
					return err
				}
			}
		}
		secret, t, err := server.CreateToken(ctx, st, agent, admin, name)
		if err != nil {
			return err
		}
		fmt.Fprintln(a.stdout, secret)
		scope := "admin"
		if !admin {
			scope = "agent " + agent
		}
		fmt.Fprintf(a.stderr, "token %s (%s) created; it is shown only now\n", t.ID, scope)
		return nil
	})
	create.Flags().BoolVar(&admin, "admin", false, "an admin token (reaches every agent and the admin API)")
	create.Flags().StringVar(&name, "name", "", "a note to tell tokens apart")
	var asJSON bool
	list := a.storeCmd(&cobra.Command{
		Use:   "list",
		Short: "List tokens (never their secrets)",
		Args:  exactArgs(),
	}, func(ctx context.Context, _ *roster.Roster, st store.Store, _ []string) error {
		ts, err := st.ListTokens(ctx)
		if err != nil {
			return store.Err("token list", err)
		}
		return printList(a, asJSON, ts, "ID\tSCOPE\tCREATED\tSTATE\tNAME", func(t *store.Token) string {
			scope, state := "agent:"+t.Agent, "active"
			if t.Admin {
				scope = "admin"
			}
			if !t.RevokedAt.IsZero() {
				state = "revoked " + t.RevokedAt.Format(time.RFC3339)
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", t.ID, scope, t.CreatedAt.Format(time.RFC3339), state, t.Name)
		})
	})
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	revoke := a.storeCmd(&cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a token; it stops working at once in every server on this store (after --token-cache-ttl, if a server sets one)",
		Args:  exactArgs("ID"),
	}, func(ctx context.Context, _ *roster.Roster, st store.Store, args []string) error {
		if err := st.RevokeToken(ctx, args[0]); err != nil {
			switch k := store.Kind(err); k {
			case armory.KindNotFound:
				return armory.E("token revoke", k, fmt.Sprintf("no token %q (armory token list shows every token's ID)", args[0]))
			case armory.KindConflict:
				return armory.E("token revoke", k, fmt.Sprintf("token %s is already revoked", args[0]))
			}
			return store.Err("token revoke", err)
		}
		fmt.Fprintf(a.stdout, "token %s revoked\n", args[0])
		return nil
	})
	c.AddCommand(create, list, revoke)
	return c
}

// useExampleWorld points --world at the example world, writing it first
// when the folder holds no world yet. Without an explicit --world (or
// ARMORY_WORLD) the folder is ./demo-world, never the current folder.
func (a *app) useExampleWorld(cmd *cobra.Command) error {
	dir := a.world
	if !cmd.Flags().Changed("world") && os.Getenv("ARMORY_WORLD") == "" {
		dir = "demo-world"
	}
	if _, err := os.Stat(filepath.Join(dir, world.ConfigFile)); err == nil {
		a.world = dir
		return nil
	}
	if err := example.Write(dir); err != nil {
		return armory.E("serve", armory.KindInvalid, "cannot write the example world: "+err.Error())
	}
	fmt.Fprintf(a.stderr, "armory: wrote the example world to %s\n", dir)
	a.world = dir
	return nil
}

// printConnect tells a person how to point an MCP client at an agent.
func (a *app) printConnect(addr string, h *roster.Roster) {
	ids := h.World.AgentIDs()
	if len(ids) == 0 {
		return
	}
	fmt.Fprintf(a.stderr, "armory: each agent's tools are at http://%s/agents/AGENT/mcp (agents: %s)\n", addr, strings.Join(ids, ", "))
	fmt.Fprintf(a.stderr, "armory: make a token for one agent with: armory --world %s token create %s\n", a.world, ids[0])
	fmt.Fprintf(a.stderr, "armory: and send it as the header  Authorization: Bearer <token>  (docs/mcp.md shows client configs)\n")
}
