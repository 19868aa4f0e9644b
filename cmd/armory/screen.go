package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory/screen"
)

func (a *app) screenCmd() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "screen COMMAND",
		Short: "Screen a shell command: block, confirm or allow, with the commands seen and the reasons",
		Long: "Screen parses COMMAND as a shell script and classifies every simple command in it.\n" +
			"Exit 0 whatever the verdict; the verdict is in the output.",
		Args: exactArgs("COMMAND"),
		RunE: func(c *cobra.Command, args []string) error {
			r := screen.Check(args[0])
			if asJSON {
				return a.printJSON(r)
			}
			fmt.Fprintf(a.stdout, "verdict: %s\n", r.Verdict)
			for _, cmd := range r.Commands {
				fmt.Fprintf(a.stdout, "command: %q\n", cmd)
			}
			for _, why := range r.Reasons {
				fmt.Fprintf(a.stdout, "reason:  %s\n", why)
			}
			if r.Verdict == screen.Block {
				fmt.Fprintln(a.stdout, r.Message(args[0]))
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print {verdict, commands, reasons} as JSON")
	return c
}
