package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/example"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/world"
)

func (a *app) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init DIR",
		Short: "Write an example world into DIR (a new or empty folder)",
		Args:  exactArgs("DIR"),
		RunE: func(c *cobra.Command, args []string) error {
			if _, err := os.Stat(filepath.Join(args[0], world.ConfigFile)); err == nil {
				// Written before (by init or serve --example): point there.
				return armory.E("init", armory.KindInvalid, fmt.Sprintf("%s already holds a world (%s); use it with --world %s (or ARMORY_WORLD), or choose a new folder", args[0], world.ConfigFile, args[0]))
			}
			if err := example.Write(args[0]); err != nil {
				return armory.E("init", armory.KindInvalid, err.Error())
			}
			fmt.Fprintf(a.stdout, "wrote an example world to %s\nnext: armory --world %s world check\n", args[0], args[0])
			return nil
		},
	}
}

func (a *app) worldCmd() *cobra.Command {
	w := &cobra.Command{Use: "world", Short: "Inspect the world"}
	var strict bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Validate the world: exit 0 when valid (warnings on stderr), 2 with every error (--strict: warnings too)",
		Args:  exactArgs(),
		RunE: func(c *cobra.Command, args []string) error {
			h, err := a.openWorld()
			if err != nil {
				return err
			}
			for _, d := range h.Warnings {
				fmt.Fprintln(a.stderr, d.String())
			}
			if strict && len(h.Warnings) > 0 {
				fmt.Fprintf(a.stderr, "world %q has %s; --strict treats warnings as errors\n", h.World.Name, count(len(h.Warnings), "warning"))
				return errSilent
			}
			nSkills := len(h.World.Skills)
			for _, set := range h.World.ArchetypeSkills {
				nSkills += len(set)
			}
			fmt.Fprintf(a.stdout, "world %q is valid: %s, %s, %s, %s\n", h.World.Name, count(len(h.World.Agents), "agent"), count(h.Catalog.Len(), "tool"), count(nSkills, "skill"), count(len(h.Warnings), "warning"))
			return nil
		},
	}
	check.Flags().BoolVar(&strict, "strict", false, "treat warnings as errors (exit 2)")
	w.AddCommand(check)
	return w
}

func (a *app) demoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Tour the built-in example world: every agent's access and tools",
		Args:  exactArgs(),
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := os.MkdirTemp("", "armory-demo-")
			if err != nil {
				return armory.E("demo", armory.KindInternal, "cannot make a temporary folder", err)
			}
			defer os.RemoveAll(dir)
			wdir := filepath.Join(dir, "world")
			if err := example.Write(wdir); err != nil {
				return armory.E("demo", armory.KindInternal, err.Error())
			}
			// The same engine a world command opens (the modules' tools,
			// the world services among them), on the temporary copy.
			a.world = wdir
			h, err := a.openWorld()
			if err != nil {
				return err
			}
			return a.tour(h)
		},
	}
}

// tour prints what `armory demo` shows.
func (a *app) tour(h *roster.Roster) error {
	out := a.stdout
	fmt.Fprintf(out, "Armory demo: world %q (%s, %s)\n", h.World.Name, count(len(h.World.Agents), "agent"), count(h.Catalog.Len(), "tool"))
	fmt.Fprintf(out, "Write it out to explore it yourself: armory init ./demo-world\n\n")
	for _, d := range h.Warnings {
		fmt.Fprintf(out, "  %s\n", d.String())
	}
	for _, ag := range h.Agents() {
		s := h.AccessSummary(ag)
		fmt.Fprintf(out, "\n== agent %s (mode %s; groups %v; overrides %v)\n", ag.ID, s.Mode, s.Groups, s.Overrides)
		fmt.Fprint(out, h.Briefing(ag))
	}
	fmt.Fprintf(out, "\n== why can't scribe use devtools.word-count?\n")
	ex, err := h.Explain("scribe", "devtools.word-count")
	if err != nil {
		return err
	}
	for _, r := range ex.Reasons {
		fmt.Fprintf(out, "  - %s\n", r)
	}
	fmt.Fprintf(out, "\nTry: armory --world ./demo-world access explain reviewer workspace.list\n")
	return nil
}
