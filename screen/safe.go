package screen

import (
	"regexp"
	"slices"
	"strings"
)

// safeCheck reports whether a known command is read-only with these
// arguments. Commands whose check is anyArgs stay read-only whatever their
// arguments, so dynamic arguments and xargs-appended ones are fine for them.
type safeCheck func(args []word) bool

func anyArgs([]word) bool { return true }

// flagged makes a check that requires static arguments and rejects the
// listed options. A long option "--x" also rejects "--x=…"; a short option
// "-x" also rejects it inside a bundle (-ax) and with an attached value.
func flagged(short string, long ...string) safeCheck {
	return func(args []word) bool {
		for _, w := range args {
			if !w.static {
				return false
			}
			v := w.val
			if v == "--" {
				return true
			}
			if strings.HasPrefix(v, "--") {
				name, _, _ := strings.Cut(v, "=")
				for _, l := range long {
					if name == l {
						return false
					}
				}
				continue
			}
			if len(v) > 1 && v[0] == '-' && short != "" && strings.ContainsAny(v[1:], short) {
				return false
			}
		}
		return true
	}
}

func allStatic(args []word) bool {
	for _, w := range args {
		if !w.static {
			return false
		}
	}
	return true
}

func positionals(args []word) int {
	n := 0
	for _, w := range args {
		if !strings.HasPrefix(w.val, "-") || w.val == "-" {
			n++
		}
	}
	return n
}

var safeCommands map[string]safeCheck

// versionOnly lists tools for which "--version" alone is allowed.
var versionOnly = map[string]bool{
	"go": true, "cargo": true, "rustc": true, "node": true, "npm": true, "npx": true, "yarn": true,
	"pnpm": true, "bun": true, "deno": true, "python": true, "python3": true, "pip": true, "pip3": true,
	"java": true, "javac": true, "gcc": true, "g++": true, "cc": true, "clang": true, "make": true,
	"cmake": true, "docker": true, "kubectl": true, "terraform": true, "ruby": true, "perl": true,
	"php": true, "dotnet": true, "swift": true, "mvn": true, "gradle": true, "rustup": true,
	"psql": true, "mysql": true, "sqlite3": true, "bash": true, "zsh": true, "sh": true,
}

func init() {
	safeCommands = map[string]safeCheck{}
	for _, n := range []string{
		"cat", "head", "tail", "wc", "pwd", "echo", "printf", "true", "false", ":", "grep", "egrep",
		"fgrep", "nl", "which", "whoami", "id", "groups", "uname", "arch", "nproc", "uptime", "tty",
		"locale", "ls", "dir", "vdir", "du", "df", "stat", "diff", "cmp", "comm", "cut", "tr",
		"column", "paste", "basename", "dirname", "realpath", "readlink", "tac", "rev", "fold",
		"expand", "unexpand", "fmt", "od", "hexdump", "strings", "md5sum", "sha1sum", "sha224sum",
		"sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum", "sum", "base32", "base64", "seq",
		"test", "[", "type", "cd", "pushd", "popd", "dirs", "sleep", "jq", "ps", "free", "lsblk",
		"exit", "return", "set", "shopt", "unset", "wait", "jobs", "read", "getopts", "shift",
		"zcat", "look", "cal", "numfmt", "join", "shuf", "lscpu", "lsof", "pgrep", "getconf",
	} {
		safeCommands[n] = anyArgs
	}
	safeCommands["find"] = findSafe
	safeCommands["fd"] = flagged("xX", "--exec", "--exec-batch")
	safeCommands["fdfind"] = safeCommands["fd"]
	safeCommands["rg"] = flagged("z", "--pre", "--pre-glob", "--hostname-bin", "--search-zip")
	safeCommands["sort"] = flagged("o", "--output", "--compress-program")
	safeCommands["tree"] = flagged("o", "--output")
	safeCommands["file"] = flagged("C", "--compile")
	safeCommands["yq"] = flagged("i", "--inplace")
	safeCommands["uniq"] = func(args []word) bool { return allStatic(args) && positionals(args) <= 1 }
	safeCommands["xxd"] = func(args []word) bool { return allStatic(args) && positionals(args) <= 1 }
	safeCommands["date"] = func(args []word) bool {
		for _, w := range args {
			if !w.static || w.val == "-s" || strings.HasPrefix(w.val, "--set") ||
				strings.HasPrefix(w.val, "-s") || !strings.HasPrefix(w.val, "-") && !strings.HasPrefix(w.val, "+") {
				return false
			}
		}
		return true
	}
	safeCommands["hostname"] = func(args []word) bool {
		for _, w := range args {
			if !w.static || !strings.HasPrefix(w.val, "-") || w.val == "-F" || strings.HasPrefix(w.val, "--file") || w.val == "-b" {
				return false
			}
		}
		return true
	}
	safeCommands["sed"] = sedSafe
	safeCommands["command"] = func(args []word) bool {
		return len(args) > 0 && args[0].static && (args[0].val == "-v" || args[0].val == "-V")
	}
	safeCommands["go"] = func(args []word) bool {
		if len(args) == 0 || !allStatic(args) {
			return false
		}
		switch args[0].val {
		case "version", "doc", "help":
			return true
		case "env":
			return flagged("wu")(args[1:])
		}
		return false
	}
	for _, n := range []string{"docker", "podman"} {
		safeCommands[n] = func(args []word) bool {
			if len(args) == 0 || !allStatic(args) {
				return false
			}
			switch args[0].val {
			case "ps", "images", "version", "info":
				return true
			}
			return false
		}
	}
}

// findSafe rejects find's actions that run commands, delete or write files.
func findSafe(args []word) bool {
	return allStatic(args) && !slices.ContainsFunc(args, func(w word) bool {
		switch w.val {
		case "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls", "-fprint", "-fprint0", "-fprintf":
			return true
		}
		return false
	})
}

var sedLinePrint = regexp.MustCompile(`^\s*(\d+|\$)?\s*(,\s*(\d+|\$))?\s*[pd=]\s*$`)

// sedSafe allows sed without in-place editing or script files, whose
// scripts only print/delete lines or substitute without the w/e flags.
func sedSafe(args []word) bool {
	var scripts []string
	explicit := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !w.static {
			return false
		}
		v := w.val
		switch {
		case v == "-e" || v == "--expression":
			if i+1 >= len(args) || !args[i+1].static {
				return false
			}
			scripts = append(scripts, args[i+1].val)
			explicit = true
			i++
		case strings.HasPrefix(v, "--expression="):
			scripts = append(scripts, strings.TrimPrefix(v, "--expression="))
			explicit = true
		case strings.HasPrefix(v, "--"):
			switch v {
			case "--quiet", "--silent", "--regexp-extended", "--posix", "--sandbox", "--debug",
				"--null-data", "--zero-terminated", "--unbuffered", "--separate":
			default:
				return false
			}
		case len(v) > 1 && v[0] == '-':
			if strings.Trim(v[1:], "nEruzs") != "" {
				return false // -i, -f, -e bundled, ...
			}
		default:
			if !explicit && len(scripts) == 0 {
				scripts = append(scripts, v)
			}
		}
	}
	if len(scripts) == 0 {
		return false
	}
	for _, s := range scripts {
		for _, part := range strings.Split(s, ";") {
			if !sedCommandSafe(part) {
				return false
			}
		}
	}
	return true
}

func sedCommandSafe(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || sedLinePrint.MatchString(s) {
		return true
	}
	// A single s command: s<d>re<d>repl<d>flags with flags in gpiIm0-9.
	if len(s) < 4 || s[0] != 's' {
		return false
	}
	d := s[1]
	if d == '\\' || d == '\n' {
		return false
	}
	fields, i := 0, 2
	for ; i < len(s) && fields < 2; i++ {
		switch s[i] {
		case '\\':
			i++
		case d:
			fields++
		}
	}
	if fields < 2 {
		return false
	}
	return strings.Trim(s[i:], "gpiIm0123456789") == ""
}

var trustedDirs = []string{"/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/opt/homebrew/bin/"}

// allowList flags Confirm unless the command is a known-safe read-only one.
func (a *analyzer) allowList(prog, name string, args []word, c ctx) {
	if strings.Contains(name, "/") {
		trusted := false
		for _, d := range trustedDirs {
			if strings.HasPrefix(name, d) && !strings.Contains(name[len(d):], "/") {
				trusted = true
			}
		}
		if !trusted {
			a.flag(Confirm, name+": program outside the system directories")
			return
		}
	}
	if len(args) == 1 && args[0].static && args[0].val == "--version" && versionOnly[prog] {
		return
	}
	switch prog {
	case "printf", "read", "getopts", "mapfile", "readarray":
		// printf -v PATH …, read PATH: assign variables.
		for _, w := range args {
			if dangerousEnv(w.part) {
				a.flag(Confirm, prog+": assigns "+w.part+", which changes how later commands run")
				return
			}
		}
	}
	check, ok := safeCommands[prog]
	if !ok {
		if prog == "git" {
			if a.gitSafe(args) {
				return
			}
			a.flag(Confirm, "git: not a known read-only git command")
			return
		}
		a.flag(Confirm, prog+": not a known read-only command")
		return
	}
	if c.extra && !isAnyArgs(prog) {
		a.flag(Confirm, prog+": xargs appends arguments that are not known")
		return
	}
	if !check(args) {
		a.flag(Confirm, prog+": arguments not known to be read-only")
	}
}

func isAnyArgs(prog string) bool {
	switch prog {
	case "find", "fd", "fdfind", "rg", "sort", "tree", "file", "yq", "uniq", "xxd", "date",
		"hostname", "sed", "command", "go", "docker", "podman":
		return false
	}
	return true
}

// gitSafe allows read-only git subcommands.
func (a *analyzer) gitSafe(args []word) bool {
	g := parseGit(args)
	if g.config || g.risky != "" || !g.hasSub || !g.sub.static || !allStatic(g.rest) {
		return false
	}
	for _, opt := range g.globals {
		if strings.HasPrefix(opt[0].val, "--exec-path") || opt[0].val == "--list-cmds" {
			return false
		}
	}
	rest := g.rest
	noOutput := flagged("O", "--output", "--ext-diff", "--open-files-in-pager")
	switch g.sub.val {
	case "status", "rev-parse", "ls-files", "ls-tree", "cat-file", "rev-list", "merge-base",
		"name-rev", "show-ref", "for-each-ref", "count-objects", "describe", "shortlog",
		"blame", "annotate", "version", "check-ignore", "var", "whatchanged", "cherry":
		return noOutput(rest)
	case "log", "show", "diff", "grep", "range-diff":
		return noOutput(rest)
	case "branch":
		return gitListOnly(rest, []string{"--list", "-l"}, "dDmMcCfuet",
			"--delete", "--move", "--copy", "--force", "--set-upstream-to", "--unset-upstream",
			"--edit-description", "--track", "--no-track", "--create-reflog", "--recurse-submodules")
	case "tag":
		return gitListOnly(rest, []string{"--list", "-l", "-v", "--verify"}, "dasfmFue",
			"--delete", "--annotate", "--sign", "--force", "--message", "--file", "--local-user",
			"--edit", "--create-reflog")
	case "remote":
		if len(rest) == 0 {
			return true
		}
		switch rest[0].val {
		case "-v", "--verbose", "show", "get-url":
			return true
		}
		return false
	case "config":
		for _, w := range rest {
			switch {
			case w.val == "--get", w.val == "--get-all", w.val == "--get-regexp", w.val == "--list",
				w.val == "-l", w.val == "get", w.val == "list":
				return true
			}
		}
		return false
	case "stash", "worktree", "reflog", "submodule", "notes", "bisect":
		if len(rest) == 0 {
			return g.sub.val == "reflog" || g.sub.val == "submodule"
		}
		switch rest[0].val {
		case "list", "show", "status", "log":
			return noOutput(rest[1:])
		}
		return false
	}
	return false
}

// gitListOnly allows git branch/tag in listing mode: no forbidden option,
// and positional arguments only as patterns with a list option.
func gitListOnly(args []word, listOpts []string, short string, long ...string) bool {
	if !flagged(short, long...)(args) {
		return false
	}
	list := false
	pos := 0
	for _, w := range args {
		for _, l := range listOpts {
			if w.val == l {
				list = true
			}
		}
		if !strings.HasPrefix(w.val, "-") {
			pos++
		}
	}
	// Options such as --contains X or --sort=… take values; allow those
	// only in list mode or when no positional remains.
	return pos == 0 || list || hasValueOpt(args)
}

func hasValueOpt(args []word) bool {
	for _, w := range args {
		switch w.val {
		case "--contains", "--no-contains", "--merged", "--no-merged", "--points-at":
			return true
		}
	}
	return false
}
