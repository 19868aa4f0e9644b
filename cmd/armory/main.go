// Command armory is the command line of Armory: it inspects a world, its
// agents' tools and their access policy, runs calls through the guarded
// pipeline, decides approvals, reads the audit trail and serves agents over
// MCP and REST (serve) or MCP on stdio (mcp).
//
// This package only wires: flags, building the pieces, printing. Every
// decision is made by the packages it calls.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/sandbox"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/skills"
	"github.com/armory-dev/armory/wasm"
	"github.com/armory-dev/armory/world"
)

func main() {
	// The Landlock sandbox re-executes this binary as its helper; in that
	// role it never returns from here.
	sandbox.MaybeRunHelper()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// app carries what every command shares.
type app struct {
	world  string
	db     string
	stdout io.Writer
	stderr io.Writer
	// closers release what a command holds for its whole run (its
	// engine); run calls them when the command ends, last opened first.
	closers []func()
	// eng is the command's one engine (see engine), opened on first use
	// without the parts in skip.
	eng  *engine.Engine
	skip engine.Part
	// runLease is the lease of run claims (pipeline.Options.RunLease).
	runLease time.Duration
	// log, when set (serve), receives the runtime's notes; otherwise
	// warnings go to stderr.
	log *slog.Logger
	// modules are provisioned after the built-in ones by every command
	// that provisions modules (engine.Options.Modules); only serve starts
	// them (engine.Engine.Start).
	modules []engine.Module
}

// logger returns the logger the runtime's background work reports to.
func (a *app) logger() *slog.Logger {
	if a.log != nil {
		return a.log
	}
	return slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// run executes the command line args and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	wm := wasm.New(wasm.Options{})
	sk := skills.New(skills.Options{Wasm: func() skills.WasmRuntime {
		if rt := wm.Runtime(); rt != nil {
			return rt
		}
		return nil // no runtime: a skill's WASM tools are unavailable, with the reason
	}})
	// wasm before skills: a skill's WASM tools are built on its runtime.
	a := &app{stdout: stdout, stderr: stderr, modules: []engine.Module{services.New(services.Options{}), wm, sk}}
	defer a.closeAll()
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	var ie *world.InvalidError
	switch {
	case errors.As(err, &ie):
		for _, d := range ie.Diagnostics {
			fmt.Fprintln(stderr, d.String())
		}
		return exitInvalid
	case errors.Is(err, errSilent):
		return exitInvalid
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec)
	}
	var ae *armory.Error
	if !errors.As(err, &ae) {
		// Anything cobra itself rejects (unknown command or flag, wrong
		// number of arguments) is a usage error.
		fmt.Fprintf(stderr, "armory: %v\nRun 'armory --help' for usage.\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "armory: %s\n", oneLine(armory.Message(err)))
	return exitCodeOf(armory.KindOf(err))
}

// checkDB refuses a --db (or ARMORY_DB) URL of a scheme the store does not
// speak, which would otherwise be taken for a SQLite file path ("mysql://x"
// made a folder "mysql:"). Only the scheme is named: the URL may hold a
// password.
func checkDB(db string) error {
	scheme, _, ok := strings.Cut(db, "://")
	if !ok || scheme == "postgres" || scheme == "postgresql" || scheme == "sqlite" {
		return nil
	}
	return usageErr("--db: a %s:// URL is not a store; give a postgres:// URL or a SQLite file path", oneLine(scheme))
}

// errSilent ends a command whose output already said what went wrong.
var errSilent = errors.New("silent failure")

func oneLine(s string) string { return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ") }

func usageErr(format string, args ...any) error {
	return armory.E("", armory.KindUsage, fmt.Sprintf(format, args...))
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "armory",
		Short:         "Armory: governed, audited tools for LLM agents",
		Long:          "Armory gives every agent of a world a registry of tools chosen by policy.\nSee README.md for a tour.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("ARMORY_WORLD")
	if def == "" {
		def = "."
	}
	root.PersistentFlags().StringVar(&a.world, "world", def, "world folder: $ARMORY_WORLD when set, else the current folder")
	root.PersistentFlags().StringVar(&a.db, "db", os.Getenv("ARMORY_DB"), "store: a postgres:// URL or a SQLite file (default $ARMORY_DB, else <world>/.armory/armory.db)")
	root.PersistentFlags().DurationVar(&a.runLease, "run-lease", pipeline.DefaultRunLease, "lease of the claim on running an approved call: a process that stops renewing it this long is taken to have died, and its call is resolved as interrupted (use one value on every replica)")
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageErr("%v", err) })
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return checkDB(a.db) }
	root.AddCommand(a.initCmd(), a.worldCmd(), a.toolCmd(), a.accessCmd(), a.screenCmd(), a.callCmd(), a.approvalsCmd(), a.sessionCmd(), a.auditCmd(), a.demoCmd(), a.serveCmd(), a.mcpCmd(), a.tokenCmd(), a.toolboxCmd(), a.timersCmd(), a.agentsCmd(), a.inboxCmd(), a.chatCmd(), a.tasksCmd(), a.knowledgeCmd(), a.stateCmd(), a.skillsCmd())
	return root
}

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// exactArgs is cobra.ExactArgs with a usage error that names the arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		switch {
		case len(args) == len(names):
		case len(names) == 0:
			return usageErr("%s takes no arguments (got %d)", c.CommandPath(), len(args))
		default:
			return usageErr("%s takes %s: %s (got %d)", c.CommandPath(), count(len(names), "argument"), strings.Join(names, " "), len(args))
		}
		return nil
	}
}
