package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/skills"
)

// skillsCmd lists, shows, installs and removes the world's skill packs and
// makes agents acquire and drop them, through the skills module's methods;
// every change is audited as the human's (via cli).
func (a *app) skillsCmd() *cobra.Command {
	cmd := func(c *cobra.Command, skip engine.Part, run func(ctx context.Context, m *skills.Module, p *pipeline.Pipeline, args []string) error) *cobra.Command {
		return a.engineCmd(c, skip, func(ctx context.Context, e *engine.Engine, args []string) error {
			m, ok := e.Module(skills.Name).(*skills.Module)
			if !ok {
				return armory.E("skills", armory.KindUnavailable, "the skills module is not loaded")
			}
			return run(ctx, m, e.Pipeline(), args)
		})
	}
	var listJSON bool
	var listAgent string
	list := cmd(&cobra.Command{
		Use:   "list",
		Short: "The world's skills (and each archetype's) with the agents holding them; --agent: one agent's view",
		Args:  exactArgs(),
	}, engine.Trail|engine.Pipeline, func(ctx context.Context, m *skills.Module, _ *pipeline.Pipeline, _ []string) error {
		if listAgent != "" {
			infos, err := m.AgentSkills(ctx, listAgent)
			if err != nil {
				return err
			}
			if len(infos) == 0 && !listJSON {
				fmt.Fprintf(a.stdout, "no skills for %s in this world\n", listAgent)
				return nil
			}
			return printList(a, listJSON, infos, "SKILL\tACQUIRED\tACTIVE\tTOOLS\tDESCRIPTION", func(s skills.SkillInfo) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", s.Name, yesNo(s.Acquired), yesNo(s.Active), toolsCell(s), cell(s.Description, 60))
			})
		}
		all, err := m.List(ctx)
		if err != nil {
			return err
		}
		if len(all) == 0 && !listJSON {
			fmt.Fprintf(a.stdout, "no skills in this world (install one: armory skills install --builtin %s)\n", strings.Join(m.BuiltinNames(), "|"))
			return nil
		}
		return printList(a, listJSON, all, "SKILL\tSCOPE\tTOOLS\tHOLDERS\tDESCRIPTION", func(s skills.SkillSummary) string {
			h := strings.Join(s.Holders, ",")
			if h == "" {
				h = "-"
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", s.Name, s.Scope, toolsCell(s.SkillInfo), h, cell(s.Description, 60))
		})
	})
	list.Flags().BoolVar(&listJSON, "json", false, "print JSON")
	list.Flags().StringVar(&listAgent, "agent", "", "one agent's view: the skills it sees, acquired and active")

	var showJSON bool
	var showArch string
	show := cmd(&cobra.Command{
		Use:   "show SKILL",
		Short: "One skill: its front matter, tools, files, holders and instructions",
		Args:  exactArgs("SKILL"),
	}, engine.Trail|engine.Pipeline, func(ctx context.Context, m *skills.Module, _ *pipeline.Pipeline, args []string) error {
		d, err := m.Show(ctx, args[0], showArch)
		if err != nil {
			return err
		}
		return a.show(showJSON, d, func() {
			fmt.Fprintf(a.stdout, "%s (%s, %s)\n%s\n", d.Name, d.Scope, d.File, d.Description)
			if d.License != "" {
				fmt.Fprintf(a.stdout, "license: %s\n", d.License)
			}
			fmt.Fprintf(a.stdout, "tools: %s\n", orNone(d.Tools))
			for t, why := range d.Unavailable {
				fmt.Fprintf(a.stdout, "  unavailable %s: %s\n", t, why)
			}
			fmt.Fprintf(a.stdout, "files: %s\nholders: %s\n\n%s\n", orNone(d.Files), orNone(d.Holders), strings.TrimSpace(d.Instructions))
		})
	})
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")
	show.Flags().StringVar(&showArch, "archetype", "", "an archetype's own skill (archetype/ARCH/skills/SKILL)")

	var req skills.InstallRequest
	var instJSON, noSandbox bool
	var mcpName, mcpCommand, mcpURL string
	install := cmd(&cobra.Command{
		Use:   "install (--folder DIR | --url URL | --builtin NAME | --mcp NAME (--command 'PROG ARGS' | --server-url URL)) [--replace]",
		Short: "Install a skill into the world's skills/ (audited as yours; agents then acquire it)",
		Args:  exactArgs(),
	}, 0, func(ctx context.Context, m *skills.Module, p *pipeline.Pipeline, _ []string) error {
		res, err := m.Install(ctx, p, req, pipeline.ViaCLI)
		if err := a.done(res.Dir != "", err); err != nil {
			return err
		}
		return a.show(instJSON, res, func() {
			verb := "installed"
			if res.Replaced {
				verb = "replaced"
			}
			fmt.Fprintf(a.stdout, "%s skill %s in %s (tools: %s)\nan agent acquires it with syscall.skill.acquire, or: armory skills acquire AGENT %s\n", verb, res.Skill.Name, res.Dir, orNone(res.Skill.Tools), res.Skill.Name)
		})
	})
	// Exactly one source, checked before anything is opened.
	install.PreRunE = func(*cobra.Command, []string) error {
		n := 0
		for src, v := range map[string]string{skills.SourceFolder: req.Path, skills.SourceURL: req.URL, skills.SourceBuiltin: req.Name, skills.SourceMCPServer: mcpName} {
			if v != "" {
				n++
				req.Source = src
			}
		}
		if n != 1 {
			return armory.E("skills install", armory.KindUsage, "give one of --folder DIR, --url URL, --builtin NAME or --mcp NAME (built-in skills: "+strings.Join(a.builtinSkills(), ", ")+")")
		}
		if req.Source == skills.SourceMCPServer {
			if (mcpCommand == "") == (mcpURL == "") {
				return armory.E("skills install", armory.KindUsage, "--mcp NAME needs one of --command 'PROGRAM ARGS…' or --server-url URL")
			}
			req.Name = mcpName
			req.Server = &skills.MCPServerDef{Command: strings.Fields(mcpCommand), URL: mcpURL}
			if noSandbox {
				req.Server.Sandbox = false
			}
		} else if mcpCommand != "" || mcpURL != "" || noSandbox {
			return armory.E("skills install", armory.KindUsage, "--command, --server-url and --no-sandbox go with --mcp NAME")
		}
		return nil
	}
	install.Flags().StringVar(&req.Path, "folder", "", "a skill folder on this machine (it holds SKILL.md)")
	install.Flags().StringVar(&req.URL, "url", "", "an archive (zip, tar, tar.gz) to fetch; the network guard of tool.fetch applies")
	install.Flags().StringVar(&req.Name, "builtin", "", "one of Armory's built-in skills")
	install.Flags().BoolVar(&req.Replace, "replace", false, "replace a skill of the same name")
	install.Flags().StringVar(&mcpName, "mcp", "", "an MCP server's skill of this name: its tools (mcp.NAME.*) become the skill's")
	install.Flags().StringVar(&mcpCommand, "command", "", "with --mcp: the stdio server's program and arguments (run in the sandbox)")
	install.Flags().StringVar(&mcpURL, "server-url", "", "with --mcp: the streamable HTTP server's URL")
	install.Flags().BoolVar(&noSandbox, "no-sandbox", false, "with --mcp --command: run the server unconfined")
	install.Flags().StringVar(&req.Description, "description", "", "with --mcp: what the server's tools are for")
	install.Flags().BoolVar(&instJSON, "json", false, "print JSON")

	var rmJSON bool
	remove := cmd(&cobra.Command{
		Use:   "remove SKILL",
		Short: "Remove a world skill: its folder, and its tools from every agent that held it (audited as yours)",
		Args:  exactArgs("SKILL"),
	}, 0, func(ctx context.Context, m *skills.Module, p *pipeline.Pipeline, args []string) error {
		agents, err := m.Remove(ctx, p, args[0], pipeline.ViaCLI)
		if err := a.done(agents != nil, err); err != nil {
			return err
		}
		return a.show(rmJSON, map[string]any{"skill": args[0], "held_by": agents}, func() {
			fmt.Fprintf(a.stdout, "removed skill %s (it was held by: %s)\n", args[0], orNone(agents))
		})
	})
	remove.Flags().BoolVar(&rmJSON, "json", false, "print JSON")

	var acqJSON bool
	acquire := cmd(&cobra.Command{
		Use:   "acquire AGENT SKILL",
		Short: "Make an agent acquire a skill: its tools join the agent's (audited as yours)",
		Args:  exactArgs("AGENT", "SKILL"),
	}, 0, func(ctx context.Context, m *skills.Module, p *pipeline.Pipeline, args []string) error {
		res, err := m.Acquire(ctx, p, args[0], args[1], pipeline.ViaCLI)
		if err := a.done(res.Skill != "", err); err != nil {
			return err
		}
		return a.show(acqJSON, res, func() {
			state := "acquired"
			if !res.Changed {
				state = "held already"
			}
			fmt.Fprintf(a.stdout, "%s: skill %s %s; tools: %s\n", args[0], res.Skill, state, orNone(res.Tools))
			for t, why := range res.Withheld {
				fmt.Fprintf(a.stdout, "  withheld %s: %s\n", t, why)
			}
			for t, why := range res.Unavailable {
				fmt.Fprintf(a.stdout, "  unavailable %s: %s\n", t, why)
			}
		})
	})
	acquire.Flags().BoolVar(&acqJSON, "json", false, "print JSON")

	drop := cmd(&cobra.Command{
		Use:   "drop AGENT SKILL",
		Short: "Make an agent drop a skill: its tools leave the agent's (audited as yours)",
		Args:  exactArgs("AGENT", "SKILL"),
	}, 0, func(ctx context.Context, m *skills.Module, p *pipeline.Pipeline, args []string) error {
		// As over REST: a drop the store refused and one made but not
		// audited look alike (KindUnavailable), so neither says "dropped".
		if err := m.Drop(ctx, p, args[0], args[1], pipeline.ViaCLI); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "%s: skill %s dropped\n", args[0], args[1])
		return nil
	})
	return group("skills", "The world's skill packs (SKILL.md folders with their tools): list, show, install, remove, acquire, drop", list, show, install, remove, acquire, drop)
}

// builtinSkills names the built-in skill packs (of the command's skills
// module, which is not provisioned yet).
func (a *app) builtinSkills() []string {
	for _, m := range a.modules {
		if sm, ok := m.(*skills.Module); ok {
			return sm.BuiltinNames()
		}
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(xs []string) string {
	if len(xs) == 0 {
		return "none"
	}
	return strings.Join(xs, ", ")
}

func toolsCell(s skills.SkillInfo) string {
	if len(s.Tools) == 0 {
		return "-"
	}
	return cell(strings.Join(s.Tools, ","), 50)
}
