package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/engine"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/services"
	"github.com/armory-dev/armory/store"
)

// The human's commands over the world services (inbox, chat, tasks,
// knowledge, state): each calls the services module's human API (never its
// tables); every change is audited as the human's, via cli. Reads
// acknowledge nothing and are not audited.

// pageFlags are the flags of a paginated list: --limit, --cursor, --json.
type pageFlags struct {
	limit  int
	cursor string
	asJSON bool
}

func (f *pageFlags) add(c *cobra.Command) *cobra.Command {
	c.Flags().IntVar(&f.limit, "limit", 0, fmt.Sprintf("the most items to show (default %d, at most %d)", store.DefaultPage, store.MaxPage))
	c.Flags().StringVar(&f.cursor, "cursor", "", "continue from a previous list's next cursor")
	c.Flags().BoolVar(&f.asJSON, "json", false, "print JSON: {items, next_cursor}")
	return c
}

// page returns the store page the flags ask for. Errors: KindUsage.
func (f *pageFlags) page() (store.Page, error) {
	if f.limit < 0 || f.limit > store.MaxPage {
		return store.Page{}, usageErr("--limit must be 1..%d, got %d", store.MaxPage, f.limit)
	}
	return store.Page{Limit: f.limit, Cursor: f.cursor}, nil
}

// printPage prints a page of rows: as {items, next_cursor} with --json
// (the body of the REST list), else as printList's table ("none" for no
// rows), and the next page's cursor on stderr when there is one.
func printPage[T any](a *app, f *pageFlags, rows []T, next, header string, line func(T) string) error {
	if f.asJSON {
		if rows == nil {
			rows = []T{}
		}
		return a.printJSON(server.ListPage[T]{Items: rows, NextCursor: next})
	}
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "none")
	} else if err := printList(a, false, rows, header, line); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(a.stderr, "more: --cursor %s\n", next)
	}
	return nil
}

// done reports a change's error: a KindUnavailable with done true means
// the change was made and only its audit entry (or a chat message's
// delivery) is missing: a warning, exit 0.
func (a *app) done(done bool, err error) error {
	if err == nil {
		return nil
	}
	if done && armory.KindOf(err) == armory.KindUnavailable {
		fmt.Fprintf(a.stderr, "armory: warning: %s\n", armory.Message(err))
		return nil
	}
	return err
}

// show prints v as JSON with --json, else text.
func (a *app) show(asJSON bool, v any, text func()) error {
	if asJSON {
		return a.printJSON(v)
	}
	text()
	return nil
}

// textArg is a command's text argument; "-" reads it from stdin.
func textArg(s string) (string, error) {
	if s != "-" {
		return s, nil
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, store.MaxBody+1))
	if err != nil {
		return "", armory.E("", armory.KindInvalid, "reading stdin", err)
	}
	return string(b), nil
}

// humanCmd is a command over the services module; skip as engineCmd's.
func (a *app) humanCmd(c *cobra.Command, skip engine.Part, run func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error) *cobra.Command {
	return a.engineCmd(c, skip, func(ctx context.Context, e *engine.Engine, args []string) error {
		m, err := a.agentsModule(e)
		if err != nil {
			return err
		}
		return run(ctx, m, e.Pipeline(), args)
	})
}

// cell is s on one line, cut to n runes, for a table's cell.
func cell(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// ---- inbox ----

func (a *app) inboxCmd() *cobra.Command {
	var postJSON bool
	post := a.humanCmd(&cobra.Command{
		Use:   "post AGENT MESSAGE",
		Short: "Put a message from the human in an agent's inbox (MESSAGE - reads stdin)",
		Args:  exactArgs("AGENT", "MESSAGE"),
	}, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		body, err := textArg(args[1])
		if err != nil {
			return err
		}
		msg, err := m.PostMessage(ctx, p, args[0], body, pipeline.ViaCLI)
		if err := a.done(msg != nil, err); err != nil {
			return err
		}
		return a.show(postJSON, msg, func() { fmt.Fprintf(a.stdout, "message %s posted to %s\n", msg.ID, msg.To) })
	})
	post.Flags().BoolVar(&postJSON, "json", false, "print the message as JSON")

	var pf pageFlags
	var unacked bool
	var lookback int
	read := pf.add(a.humanCmd(&cobra.Command{
		Use:   "read AGENT",
		Short: "Read an agent's inbox (or human: the agents' replies to people), oldest first; acknowledges nothing",
		Args:  exactArgs("AGENT"),
	}, engine.Trail, func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, args []string) error {
		pg, err := pf.page()
		if err != nil {
			return err
		}
		if lookback < 0 {
			return usageErr("--lookback-minutes must be positive")
		}
		msgs, next, err := m.ReadInbox(ctx, services.InboxQuery{Agent: args[0], LookbackMinutes: lookback, Unacked: unacked, Page: pg})
		if err != nil {
			return err
		}
		return printPage(a, &pf, msgs, next, "ID\tFROM\tKIND\tWHEN\tREAD\tMESSAGE", func(msg *store.Message) string {
			read := "no"
			if !msg.AckedAt.IsZero() {
				read = "yes"
			}
			return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", msg.ID, msg.From, msg.Kind, msg.CreatedAt.Format(time.RFC3339), read, cell(msg.Body, 60))
		})
	}))
	read.Flags().BoolVar(&unacked, "unacked", false, "only the messages the agent has not read")
	read.Flags().IntVar(&lookback, "lookback-minutes", 0, "only the messages of the last minutes (default: all)")
	return group("inbox", "Post to and read the agents' inboxes (as the human)", post, read)
}

// ---- chat ----

func (a *app) chatCmd() *cobra.Command {
	var lf pageFlags
	var member string
	list := lf.add(a.humanCmd(&cobra.Command{
		Use:   "list",
		Short: "The world's chats (or one agent's, --member), oldest first",
		Args:  exactArgs(),
	}, engine.Trail, func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, _ []string) error {
		pg, err := lf.page()
		if err != nil {
			return err
		}
		chats, next, err := m.ListChats(ctx, member, pg)
		if err != nil {
			return err
		}
		return printPage(a, &lf, chats, next, "ID\tNAME\tCREATOR\tGATED", func(c *store.Chat) string {
			return fmt.Sprintf("%s\t%s\t%s\t%v", c.ID, c.Name, c.Creator, c.Gated)
		})
	}))
	list.Flags().StringVar(&member, "member", "", "only the chats this agent belongs to")

	var showJSON bool
	show := a.humanCmd(&cobra.Command{Use: "show CHAT", Short: "A chat with its members", Args: exactArgs("CHAT")}, engine.Trail,
		func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, args []string) error {
			c, err := m.GetChat(ctx, args[0])
			if err != nil {
				return err
			}
			return a.show(showJSON, c, func() {
				fmt.Fprintf(a.stdout, "chat %s %q\ncreator: %s\ngated: %v\nmembers: %s\ncreated: %s\n", c.ID, c.Name, c.Creator, c.Gated,
					strings.Join(c.Members, ", "), c.CreatedAt.Format(time.RFC3339))
			})
		})
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")

	var hf pageFlags
	history := hf.add(a.humanCmd(&cobra.Command{
		Use:   "history CHAT",
		Short: "A chat's latest messages, oldest first (--cursor goes back in time)",
		Args:  exactArgs("CHAT"),
	}, engine.Trail, func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, args []string) error {
		pg, err := hf.page()
		if err != nil {
			return err
		}
		msgs, next, err := m.ChatHistory(ctx, args[0], pg)
		if err != nil {
			return err
		}
		return printPage(a, &hf, msgs, next, "", func(cm *store.ChatMessage) string {
			return fmt.Sprintf("%s %s: %s", cm.CreatedAt.Format(time.RFC3339), cm.From, cm.Body)
		})
	}))

	var postJSON bool
	post := a.humanCmd(&cobra.Command{
		Use:   "post CHAT MESSAGE",
		Short: "Post to a chat as the human (MESSAGE - reads stdin)",
		Args:  exactArgs("CHAT", "MESSAGE"),
	}, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		body, err := textArg(args[1])
		if err != nil {
			return err
		}
		cm, err := m.PostChat(ctx, p, args[0], body, pipeline.ViaCLI)
		if err := a.done(cm != nil, err); err != nil {
			return err
		}
		return a.show(postJSON, cm, func() { fmt.Fprintf(a.stdout, "message %s posted to chat %s\n", cm.ID, cm.Chat) })
	})
	post.Flags().BoolVar(&postJSON, "json", false, "print the message as JSON")
	return group("chat", "List, read and post to the world's chats (as the human)", list, show, history, post)
}

// ---- tasks ----

func taskLine(t *store.Task) string {
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s", t.ID, t.Status, t.Assignee, t.Creator, cell(t.Title, 60))
}

const taskHeader = "ID\tSTATUS\tASSIGNEE\tCREATOR\tTITLE"

func (a *app) printTaskChange(asJSON bool, ch services.TaskChange) error {
	return a.show(asJSON, ch, func() {
		fmt.Fprintf(a.stdout, "task %s: %s, assigned to %s\n", ch.Task.ID, ch.Task.Status, ch.Task.Assignee)
		if ch.NoticeError != "" {
			fmt.Fprintf(a.stderr, "armory: warning: %s\n", ch.NoticeError)
		}
	})
}

func (a *app) tasksCmd() *cobra.Command {
	var lf pageFlags
	var f store.TaskFilter
	var status string
	list := lf.add(a.humanCmd(&cobra.Command{Use: "list", Short: "The world's tasks, oldest first", Args: exactArgs()}, engine.Trail,
		func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, _ []string) error {
			pg, err := lf.page()
			if err != nil {
				return err
			}
			f.Status, f.Page = store.TaskStatus(status), pg
			tasks, next, err := m.ListTasks(ctx, f)
			if err != nil {
				return err
			}
			return printPage(a, &lf, tasks, next, taskHeader, taskLine)
		}))
	list.Flags().StringVar(&f.Creator, "creator", "", "only tasks this agent (or human) created")
	list.Flags().StringVar(&f.Assignee, "assignee", "", "only tasks assigned to this agent")
	list.Flags().StringVar(&status, "status", "", "only tasks in this status (open, in_progress, done, rejected, cancelled)")

	var showJSON bool
	show := a.humanCmd(&cobra.Command{Use: "show ID", Short: "One task", Args: exactArgs("ID")}, engine.Trail,
		func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, args []string) error {
			t, err := m.GetTask(ctx, args[0])
			if err != nil {
				return err
			}
			return a.show(showJSON, t, func() {
				fmt.Fprintf(a.stdout, "task %s: %s\nstatus: %s\nassignee: %s\ncreator: %s\nversion: %d\nupdated: %s\n", t.ID, t.Title, t.Status,
					t.Assignee, t.Creator, t.Version, t.UpdatedAt.Format(time.RFC3339))
				if t.Reason != "" {
					fmt.Fprintf(a.stdout, "reason: %s\n", t.Reason)
				}
				if t.Description != "" {
					fmt.Fprintf(a.stdout, "\n%s\n", t.Description)
				}
			})
		})
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")

	var in services.TaskInput
	var createJSON bool
	create := a.humanCmd(&cobra.Command{
		Use:   "create TITLE --assignee AGENT",
		Short: "Create a task for an agent, as the human (the agent gets a notice)",
		Args:  exactArgs("TITLE"),
	}, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		in.Title = args[0]
		if in.Assignee == "" {
			return usageErr("--assignee is required: the agent the task is for")
		}
		ch, err := m.CreateTask(ctx, p, pipeline.ViaCLI, in)
		if err := a.done(ch.Task != nil, err); err != nil {
			return err
		}
		return a.printTaskChange(createJSON, ch)
	})
	create.Flags().StringVar(&in.Assignee, "assignee", "", "the agent the task is for (required)")
	create.Flags().StringVar(&in.Description, "description", "", "the task's description")
	create.Flags().BoolVar(&createJSON, "json", false, "print JSON")

	var u services.TaskUpdate
	var newStatus string
	var updateJSON bool
	update := a.humanCmd(&cobra.Command{
		Use:   "update ID [--status S] [--assignee AGENT] [--reason R] [--note N]",
		Short: "Change a task's status or assignee, as the human (reject needs --reason)",
		Args:  exactArgs("ID"),
	}, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		u.ID, u.Status = args[0], store.TaskStatus(newStatus)
		if u.Status == "" && u.Assignee == "" {
			return usageErr("give --status, --assignee or both: nothing to change")
		}
		ch, err := m.UpdateTask(ctx, p, pipeline.ViaCLI, u)
		if err := a.done(ch.Task != nil, err); err != nil {
			return err
		}
		return a.printTaskChange(updateJSON, ch)
	})
	update.Flags().StringVar(&newStatus, "status", "", "the new status (open, in_progress, done, rejected, cancelled)")
	update.Flags().StringVar(&u.Assignee, "assignee", "", "reassign the task to this agent")
	update.Flags().StringVar(&u.Reason, "reason", "", "why (required to reject)")
	update.Flags().StringVar(&u.Note, "note", "", "a note for the parties' notice")
	update.Flags().BoolVar(&updateJSON, "json", false, "print JSON")
	return group("tasks", "List, show, create and update the world's tasks (as the human)", list, show, create, update)
}

// ---- knowledge ----

// expectFlag is an optional --expect-version.
type expectFlag struct{ v int64 }

func (e *expectFlag) add(c *cobra.Command, usage string) {
	c.Flags().Int64Var(&e.v, "expect-version", 0, usage)
}

// get returns the flag's value, or nil when it was not given.
func (e *expectFlag) get(c *cobra.Command) *int64 {
	if !c.Flags().Changed("expect-version") {
		return nil
	}
	v := e.v
	return &v
}

func (a *app) knowledgeCmd() *cobra.Command {
	var lf pageFlags
	var prefix string
	list := lf.add(a.humanCmd(&cobra.Command{Use: "list", Short: "The knowledge entries (without bodies), by key", Args: exactArgs()}, engine.Trail,
		func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, _ []string) error {
			pg, err := lf.page()
			if err != nil {
				return err
			}
			items, next, err := m.ListKnowledge(ctx, prefix, pg)
			if err != nil {
				return err
			}
			return printPage(a, &lf, items, next, "KEY\tVERSION\tBYTES\tAUTHOR\tTITLE", func(k services.KnowledgeSummary) string {
				return fmt.Sprintf("%s\t%d\t%d\t%s\t%s", k.Key, k.Version, k.Bytes, k.Author, cell(k.Title, 60))
			})
		}))
	list.Flags().StringVar(&prefix, "prefix", "", "only keys starting with this")

	var showJSON bool
	show := a.humanCmd(&cobra.Command{Use: "show KEY", Short: "One knowledge entry", Args: exactArgs("KEY")}, engine.Trail,
		func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, args []string) error {
			k, err := m.GetKnowledge(ctx, args[0])
			if err != nil {
				return err
			}
			return a.show(showJSON, k, func() {
				fmt.Fprintf(a.stdout, "%s (version %d, by %s, %s)\n", k.Key, k.Version, k.Author, k.UpdatedAt.Format(time.RFC3339))
				if k.Title != "" {
					fmt.Fprintf(a.stdout, "title: %s\n", k.Title)
				}
				write := strings.Join(k.Write, ", ")
				if write == "" {
					write = "(people only)"
				}
				fmt.Fprintf(a.stdout, "read: %s\nwrite: %s\n\n%s\n", strings.Join(k.Read, ", "), write, k.Body)
			})
		})
	show.Flags().BoolVar(&showJSON, "json", false, "print JSON")

	var w services.KnowledgeWrite
	var putExpect expectFlag
	var putJSON bool
	put := &cobra.Command{
		Use:   "put KEY BODY",
		Short: "Write a knowledge entry as the human (BODY - reads stdin)",
		Args:  exactArgs("KEY", "BODY"),
	}
	put = a.humanCmd(put, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		body, err := textArg(args[1])
		if err != nil {
			return err
		}
		w.Key, w.Body, w.ExpectVersion = args[0], body, putExpect.get(put)
		e, err := m.PutKnowledge(ctx, p, pipeline.ViaCLI, w)
		if err := a.done(e != nil, err); err != nil {
			return err
		}
		return a.show(putJSON, e, func() { fmt.Fprintf(a.stdout, "knowledge %q at version %d\n", e.Key, e.Version) })
	})
	put.Flags().StringVar(&w.Title, "title", "", "the entry's title")
	put.Flags().StringSliceVar(&w.Read, "read", nil, "who may read it (agent:ID, group:NAME, *; comma-separated); default: kept, or * for a new entry")
	put.Flags().StringSliceVar(&w.Write, "write", nil, "who may write it (as --read); default: kept, or only people for a new entry")
	putExpect.add(put, "write only if the entry is at this version (0: only a new entry)")
	put.Flags().BoolVar(&putJSON, "json", false, "print JSON")

	var delExpect expectFlag
	var delJSON bool
	del := &cobra.Command{Use: "delete KEY", Short: "Delete a knowledge entry as the human", Args: exactArgs("KEY")}
	del = a.humanCmd(del, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		if err := m.DeleteKnowledge(ctx, p, pipeline.ViaCLI, args[0], delExpect.get(del)); err != nil {
			return err
		}
		return a.show(delJSON, map[string]string{"deleted": args[0]}, func() { fmt.Fprintf(a.stdout, "knowledge %q deleted\n", args[0]) })
	})
	delExpect.add(del, "delete only if the entry is at this version")
	del.Flags().BoolVar(&delJSON, "json", false, "print JSON")
	return group("knowledge", "List, show, write and delete the world's knowledge entries (as the human)", list, show, put, del)
}

// ---- state ----

func (a *app) stateCmd() *cobra.Command {
	var getJSON bool
	get := a.humanCmd(&cobra.Command{Use: "get KEY", Short: "A state key's value and version", Args: exactArgs("KEY")}, engine.Trail,
		func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, args []string) error {
			e, err := m.ReadState(ctx, args[0])
			if err != nil {
				return err
			}
			return a.show(getJSON, e, func() { fmt.Fprintf(a.stdout, "%s (version %d): %s\n", e.Key, e.Version, e.Value) })
		})
	get.Flags().BoolVar(&getJSON, "json", false, "print JSON")

	var lf pageFlags
	var prefix string
	list := lf.add(a.humanCmd(&cobra.Command{Use: "list", Short: "The state keys with their versions and values, by key", Args: exactArgs()}, engine.Trail,
		func(ctx context.Context, m *services.Module, _ *pipeline.Pipeline, _ []string) error {
			pg, err := lf.page()
			if err != nil {
				return err
			}
			items, next, err := m.ListState(ctx, prefix, pg)
			if err != nil {
				return err
			}
			return printPage(a, &lf, items, next, "KEY\tVERSION\tVALUE", func(e *store.StateEntry) string {
				return fmt.Sprintf("%s\t%d\t%s", e.Key, e.Version, cell(e.Value, 60))
			})
		}))
	list.Flags().StringVar(&prefix, "prefix", "", "only keys starting with this")

	var setExpect expectFlag
	var setJSON bool
	set := &cobra.Command{
		Use:   "set KEY VALUE [--expect-version N]",
		Short: "Write a state key as the human (VALUE - reads stdin); --expect-version makes it a compare-and-set",
		Args:  exactArgs("KEY", "VALUE"),
	}
	set = a.humanCmd(set, 0, func(ctx context.Context, m *services.Module, p *pipeline.Pipeline, args []string) error {
		v, err := textArg(args[1])
		if err != nil {
			return err
		}
		out, err := m.WriteState(ctx, p, pipeline.ViaCLI, services.StateWrite{Key: args[0], Value: v, ExpectVersion: setExpect.get(set)})
		if err := a.done(out.Version > 0, err); err != nil {
			return err
		}
		return a.show(setJSON, out, func() { fmt.Fprintf(a.stdout, "%s at version %d\n", out.Key, out.Version) })
	})
	setExpect.add(set, "write only if the key is at this version (0: only a new key); a stale one fails (exit 2) saying the current version")
	set.Flags().BoolVar(&setJSON, "json", false, "print JSON")
	return group("state", "Read and write the world's shared state (as the human)", get, list, set)
}
