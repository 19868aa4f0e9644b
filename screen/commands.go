package screen

import (
	"slices"
	"strconv"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// call screens a simple command of the parse tree.
func (a *analyzer) call(ce *syntax.CallExpr, c ctx) {
	for _, as := range ce.Assigns {
		a.assign(as)
	}
	for _, w := range ce.Args {
		a.inner(w)
	}
	if len(ce.Args) == 0 {
		return
	}
	a.exec(a.words(ce.Args), c)
}

// substOutput returns the single statement of a word that is only a
// command substitution ($(x), `x` or "$(x)").
func substOutput(w *syntax.Word) *syntax.Stmt {
	if len(w.Parts) != 1 {
		return nil
	}
	p := w.Parts[0]
	if dq, ok := p.(*syntax.DblQuoted); ok && len(dq.Parts) == 1 {
		p = dq.Parts[0]
	}
	if cs, ok := p.(*syntax.CmdSubst); ok && len(cs.Stmts) == 1 {
		return cs.Stmts[0]
	}
	return nil
}

func strs(ws []word) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.str()
	}
	return out
}

func joinParts(ws []word) (string, bool) {
	static := true
	parts := make([]string, len(ws))
	for i, w := range ws {
		parts[i] = w.part
		static = static && w.static
	}
	return strings.Join(parts, " "), static
}

// exec screens a resolved argv: it sees through wrappers, applies the
// catastrophic rules and finally the allow-list.
func (a *analyzer) exec(argv []word, c ctx) {
	if len(argv) == 0 {
		return
	}
	if !a.spend(1) {
		return
	}
	name := argv[0]
	if !name.static {
		a.cmds = append(a.cmds, strs(argv))
		a.flag(Confirm, "command name is not static: "+name.raw)
		alts := a.varAlternatives(name.part)
		if name.printed != "" {
			alts = append(alts, name.printed)
		}
		for _, alt := range alts {
			if alt != "" {
				a.exec(append([]word{lit(alt)}, argv[1:]...), c)
			}
		}
		return
	}
	prog := baseName(name.val)
	args := argv[1:]
	if c.async && slices.Contains(a.funcs, name.val) {
		a.cmds = append(a.cmds, strs(argv))
		a.flag(Block, "fork bomb: function "+name.val+" calls itself in a pipeline or in the background")
		return
	}
	if w, ok := wrappers[prog]; ok && !slices.Contains(a.funcs, name.val) {
		if a.wrapDepth == 0 {
			a.shadow(args, c)
		}
		a.wrapDepth++
		handled := w(a, prog, args, c)
		a.wrapDepth--
		if handled {
			return
		}
	}
	a.cmds = append(a.cmds, strs(argv))
	if prog == "cd" || prog == "pushd" {
		a.noteCd(args)
	}
	before := a.nfind
	handled := false
	if r, ok := rules[prog]; ok {
		handled = r(a, prog, args, c)
	} else if strings.HasPrefix(prog, "mkfs") || strings.HasPrefix(prog, "newfs") {
		a.flag(Block, prog+": creates a file system, destroying the device's data")
		handled = true
	}
	if handled || a.nfind != before {
		return
	}
	if slices.Contains(a.funcs, name.val) {
		return // a recursive call of a function whose body is being screened
	}
	a.allowList(prog, name.val, args, c)
}

// shadow screens, for Block findings only, every suffix of a wrapper's
// arguments that starts with a program that has a catastrophic rule. It
// keeps a catastrophic command blocked even when the wrapper's options are
// not parsed as the real wrapper would (sudo -0/rm -R /).
func (a *analyzer) shadow(args []word, c ctx) {
	n := 0
	for i, w := range args {
		if !w.static {
			continue
		}
		p := baseName(w.val)
		if _, ok := rules[p]; !ok && !strings.HasPrefix(p, "mkfs") && !strings.HasPrefix(p, "newfs") {
			continue
		}
		if n++; n > maxExpansions {
			a.flag(Block, "command requires more analysis than the screening limit")
			return
		}
		child := &analyzer{src: a.src, depth: a.depth, nest: a.nest, funcs: a.funcs, vars: a.vars,
			budget: a.budget, wrapDepth: 1, cwds: a.cwds}
		// The shadow looks at a bounded window; the precise analysis of
		// the wrapper sees every argument.
		child.exec(args[i:min(len(args), i+4*maxExpansions)], c)
		a.budget = child.budget
		for k, r := range child.reasons {
			if child.levels[k] == Block {
				a.flag(Block, r)
			}
		}
	}
}

// noteCd remembers a cd into /, ~ or a system directory.
func (a *analyzer) noteCd(args []word) {
	var dir word
	for _, w := range args {
		if w.static && strings.HasPrefix(w.val, "-") && w.val != "-" {
			continue // -P, -L, -e, -@
		}
		dir = w
		break
	}
	if dir.raw == "" && dir.part == "" { // cd with no operand goes home
		a.cwds = append(a.cwds, "$HOME")
		return
	}
	if a.targetKind(dir) == pathOrdinary || len(a.cwds) >= maxExpansions {
		return
	}
	p := dir.part
	if dir.tilde {
		p = varValue(dir)
	}
	a.cwds = append(a.cwds, p)
}

// ---- wrappers ----

// wrapperFn sees through a wrapper command. It returns false when the
// command is not used as a wrapper here (e.g. "command -v x", "sudo -l"),
// in which case it is screened as an ordinary command.
type wrapperFn func(a *analyzer, prog string, args []word, c ctx) bool

// optSpec names the options of a wrapper that take a separate argument.
type optSpec struct {
	short string   // letters
	long  []string // names such as "--user"
}

// skipOptions skips leading options. It returns the remaining words and
// the static option words seen. A dynamic word ends the options.
func skipOptions(args []word, spec optSpec) (rest []word, opts []string) {
	i := 0
	for i < len(args) {
		w := args[i]
		if !w.static {
			break
		}
		v := w.val
		if v == "--" {
			i++
			break
		}
		if strings.HasPrefix(v, "--") {
			opts = append(opts, v)
			if !strings.Contains(v, "=") && slices.Contains(spec.long, v) {
				i++
			}
			i++
			continue
		}
		if len(v) < 2 || v[0] != '-' {
			break
		}
		opts = append(opts, v)
		for j := 1; j < len(v); j++ {
			if strings.IndexByte(spec.short, v[j]) >= 0 {
				if j == len(v)-1 {
					i++ // the argument is the next word
				}
				break
			}
		}
		i++
	}
	if i > len(args) {
		i = len(args)
	}
	return args[i:], opts
}

func hasOpt(opts []string, shortLetters string, long ...string) bool {
	for _, o := range opts {
		if strings.HasPrefix(o, "--") {
			name, _, _ := strings.Cut(o, "=")
			if slices.Contains(long, name) {
				return true
			}
			continue
		}
		if shortLetters != "" && strings.ContainsAny(o[1:], shortLetters) {
			return true
		}
	}
	return false
}

// simpleWrapper builds a wrapper from its options and the number of
// positional arguments before the command. privileged wrappers make the
// command need confirmation. noCmd lists option letters/names after which
// no command follows (e.g. "ionice -p").
func simpleWrapper(spec optSpec, positional int, privileged string, noCmdShort string, noCmdLong ...string) wrapperFn {
	return func(a *analyzer, prog string, args []word, c ctx) bool {
		rest, opts := skipOptions(args, spec)
		if hasOpt(opts, noCmdShort, noCmdLong...) {
			return false
		}
		if len(rest) <= positional {
			return false
		}
		if privileged != "" {
			a.flag(Confirm, prog+": "+privileged)
		}
		a.exec(rest[positional:], c)
		return true
	}
}

var wrappers map[string]wrapperFn

var rules map[string]func(a *analyzer, prog string, args []word, c ctx) bool

func init() {
	elevated := "runs the command with elevated privileges"
	wrappers = map[string]wrapperFn{
		"sudo": sudoWrapper,
		"doas": simpleWrapper(optSpec{short: "aCu"}, 0, elevated, "L"),
		"env":  envWrapper,
		"command": func(a *analyzer, prog string, args []word, c ctx) bool {
			rest, opts := skipOptions(args, optSpec{})
			if hasOpt(opts, "vV") || len(rest) == 0 {
				return false
			}
			a.exec(rest, c)
			return true
		},
		"builtin":   simpleWrapper(optSpec{}, 0, "", ""),
		"nice":      simpleWrapper(optSpec{short: "n", long: []string{"--adjustment"}}, 0, "", ""),
		"timeout":   simpleWrapper(optSpec{short: "sk", long: []string{"--signal", "--kill-after"}}, 1, "", ""),
		"nohup":     simpleWrapper(optSpec{}, 0, "", ""),
		"setsid":    simpleWrapper(optSpec{}, 0, "", ""),
		"unbuffer":  simpleWrapper(optSpec{}, 0, "", ""),
		"stdbuf":    simpleWrapper(optSpec{short: "ioe", long: []string{"--input", "--output", "--error"}}, 0, "", ""),
		"ionice":    simpleWrapper(optSpec{short: "cnpPu", long: []string{"--class", "--classdata", "--pid", "--pgid", "--uid"}}, 0, "", "pPu", "--pid", "--pgid", "--uid"),
		"chrt":      simpleWrapper(optSpec{short: "T" + "P" + "D"}, 1, "", "p", "--pid"),
		"taskset":   simpleWrapper(optSpec{}, 1, "", "p", "--pid"),
		"chroot":    simpleWrapper(optSpec{long: []string{"--userspec", "--groups"}}, 1, "runs the command in another root file system", ""),
		"nsenter":   simpleWrapper(optSpec{short: "tSG", long: []string{"--target", "--setuid", "--setgid"}}, 0, "runs the command in other namespaces", ""),
		"unshare":   simpleWrapper(optSpec{short: "SGRw", long: []string{"--setuid", "--setgid", "--root", "--wd", "--map-user", "--map-group", "--map-users", "--map-groups", "--propagation"}}, 0, "runs the command in new namespaces", ""),
		"strace":    simpleWrapper(optSpec{short: "abeEIoOpPsSUX", long: []string{"--output", "--attach", "--user", "--env"}}, 0, "", "p", "--attach"),
		"ltrace":    simpleWrapper(optSpec{short: "aAeFlnopsuwxDS", long: []string{"--output", "--library"}}, 0, "", "p"),
		"catchsegv": simpleWrapper(optSpec{}, 0, "", ""),
		"exec": func(a *analyzer, prog string, args []word, c ctx) bool {
			rest, _ := skipOptions(args, optSpec{short: "a"})
			if len(rest) == 0 {
				return false
			}
			a.exec(rest, c)
			return true
		},
		"time": func(a *analyzer, prog string, args []word, c ctx) bool {
			rest, opts := skipOptions(args, optSpec{short: "fo", long: []string{"--format", "--output"}})
			if len(rest) == 0 {
				return false
			}
			if hasOpt(opts, "o", "--output") {
				a.flag(Confirm, "time: writes its report to a file")
			}
			a.exec(rest, c)
			return true
		},
		// "sudo ! cmd" and "sudo coproc cmd" run programs of those names,
		// which do not exist; treating them as wrappers keeps a wrapped
		// catastrophic command blocked.
		"!":       simpleWrapper(optSpec{}, 0, "", ""),
		"coproc":  simpleWrapper(optSpec{}, 0, "", ""),
		"busybox": appletWrapper,
		"toybox":  appletWrapper,
		"xargs":   xargsWrapper,
		"su":      suWrapper,
		"runuser": suWrapper,
		"flock":   flockWrapper,
		"watch":   watchWrapper,
		"docker":  containerExecWrapper,
		"podman":  containerExecWrapper,
		"nerdctl": containerExecWrapper,
		"kubectl": kubectlExecWrapper,
		"oc":      kubectlExecWrapper,
	}
}

func init() {
	if rules == nil {
		rules = map[string]func(a *analyzer, prog string, args []word, c ctx) bool{}
	}
	for k, v := range map[string]func(a *analyzer, prog string, args []word, c ctx) bool{
		"rm":    rmRule,
		"dd":    ddRule,
		"shred": deviceOperandRule,
		"blkdiscard": func(a *analyzer, prog string, args []word, c ctx) bool {
			a.flag(Block, "blkdiscard: discards every block of a device")
			return true
		},
		"wipefs": func(a *analyzer, prog string, args []word, c ctx) bool {
			a.flag(Block, "wipefs: erases file system signatures")
			return true
		},
		"mke2fs":    mkfsRule,
		"mkswap":    deviceOperandRule,
		"tee":       deviceOperandRule,
		"cp":        copyRule,
		"ddrescue":  copyRule,
		"sgdisk":    partitionRule,
		"sfdisk":    partitionRule,
		"parted":    partitionRule,
		"badblocks": partitionRule,
		"nvme":      partitionRule,
		"hdparm":    partitionRule,
		"diskutil":  partitionRule,
		"chmod":     chRule,
		"chown":     chRule,
		"chgrp":     chRule,
		"find":      findRule,
		"git":       gitRule,
		"eval": func(a *analyzer, prog string, args []word, c ctx) bool {
			s, static := joinParts(args)
			a.flag(Confirm, "eval runs a string as a command")
			a.script(s, !static, nil)
			return true
		},
		"source": sourceRule,
		".":      sourceRule,
		"trap": func(a *analyzer, prog string, args []word, c ctx) bool {
			if len(args) == 0 || !args[0].static || strings.HasPrefix(args[0].val, "-") {
				return len(args) > 0 && args[0].static
			}
			a.script(args[0].val, false, nil)
			return true
		},
		"alias": func(a *analyzer, prog string, args []word, c ctx) bool {
			a.flag(Confirm, "alias defines a command")
			for _, w := range args {
				if _, v, ok := strings.Cut(w.part, "="); ok {
					a.script(v, !w.static, nil)
				}
			}
			return true
		},
		"ssh": sshRule,
		"dropdb": func(a *analyzer, prog string, args []word, c ctx) bool {
			a.flag(Block, "dropdb: drops a database")
			return true
		},
		"mysqladmin": func(a *analyzer, prog string, args []word, c ctx) bool {
			for _, w := range args {
				if strings.EqualFold(w.part, "drop") {
					a.flag(Block, "mysqladmin drop: drops a database")
					return true
				}
			}
			return false
		},
		"redis-cli": func(a *analyzer, prog string, args []word, c ctx) bool {
			txt := c.stdinText()
			for _, w := range args {
				txt += " " + w.part
			}
			if flushRE.MatchString(txt) {
				a.flag(Block, "redis-cli: FLUSHALL/FLUSHDB deletes every key")
				return true
			}
			return false
		},
		"mongo":   mongoRule,
		"mongosh": mongoRule,
	} {
		rules[k] = v
	}
	for _, s := range []string{"psql", "pgcli", "mysql", "mariadb", "mycli", "usql", "clickhouse-client",
		"clickhouse", "cockroach", "sqlcmd", "isql", "vsql", "snowsql", "ysqlsh", "gsql", "edb-psql"} {
		rules[s] = sqlRule
	}
	for _, sh := range []string{"sh", "bash", "dash", "zsh", "ksh", "mksh", "lksh", "ash", "yash", "posh", "rbash", "fish"} {
		rules[sh] = shellRule
	}
}

func (c ctx) stdinText() string {
	if c.stdin == nil {
		return ""
	}
	return *c.stdin
}

func sudoWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	rest, opts := skipOptions(args, optSpec{
		short: "CDgpRrtTUu",
		long: []string{"--close-from", "--chdir", "--group", "--host", "--prompt", "--chroot",
			"--role", "--type", "--command-timeout", "--other-user", "--user"},
	})
	// sudo accepts VAR=value before the command.
	for len(rest) > 0 && rest[0].static && isAssignment(rest[0].val) {
		name, _, _ := strings.Cut(rest[0].val, "=")
		if dangerousEnv(name) {
			a.flag(Confirm, "assignment to "+name+" changes how later commands run")
		}
		rest = rest[1:]
	}
	if hasOpt(opts, "elvkKV", "--edit", "--list", "--validate", "--reset-timestamp", "--remove-timestamp", "--version") || len(rest) == 0 {
		return false
	}
	a.flag(Confirm, prog+": runs the command with elevated privileges")
	a.exec(rest, c)
	return true
}

func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		ch := name[i]
		if !(ch == '_' || ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || i > 0 && ch >= '0' && ch <= '9') {
			return false
		}
	}
	return true
}

func envWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	i := 0
	split := ""
	hasSplit := false
	for i < len(args) {
		w := args[i]
		if !w.static {
			break
		}
		v := w.val
		switch {
		case v == "--":
			i++
			goto assigns
		case v == "-S" || v == "--split-string":
			if i+1 < len(args) {
				split, hasSplit = args[i+1].part, true
			}
			i += 2
			goto assigns
		case strings.HasPrefix(v, "--split-string="):
			split, hasSplit = strings.TrimPrefix(v, "--split-string="), true
			i++
			goto assigns
		case strings.HasPrefix(v, "-S"):
			split, hasSplit = v[2:], true
			i++
			goto assigns
		case v == "-u" || v == "-C" || v == "--unset" || v == "--chdir":
			i += 2
		case v == "-" || strings.HasPrefix(v, "-") && len(v) > 1:
			i++
		default:
			goto assigns
		}
	}
assigns:
	if i > len(args) {
		i = len(args)
	}
	rest := args[i:]
	for len(rest) > 0 && rest[0].static && isAssignment(rest[0].val) {
		name, _, _ := strings.Cut(rest[0].val, "=")
		if dangerousEnv(name) {
			a.flag(Confirm, "assignment to "+name+" changes how later commands run")
		}
		rest = rest[1:]
	}
	if hasSplit {
		more, _ := joinParts(rest)
		a.flag(Confirm, "env -S splits a string into a command")
		a.script(split+" "+more, true, &c)
		return true
	}
	if len(rest) == 0 {
		return false
	}
	a.exec(rest, c)
	return true
}

func appletWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	if len(args) == 0 || !args[0].static || strings.HasPrefix(args[0].val, "-") {
		return false
	}
	a.exec(args, c)
	return true
}

func xargsWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	rest, opts := skipOptions(args, optSpec{
		short: "adEILnPs",
		long: []string{"--arg-file", "--delimiter", "--eof", "--max-lines", "--max-args",
			"--max-procs", "--max-chars", "--process-slot-var"},
	})
	if len(rest) == 0 {
		rest = []word{lit("echo")}
	}
	repl := ""
	for _, o := range opts {
		switch {
		case o == "-I":
			// the replacement string is the next word; find it in args.
			for j := range args {
				if args[j].static && args[j].val == "-I" && j+1 < len(args) {
					repl = args[j+1].val
				}
			}
		case strings.HasPrefix(o, "-I"):
			repl = o[2:]
		case o == "-i" || o == "--replace":
			repl = "{}"
		case strings.HasPrefix(o, "--replace="):
			repl = strings.TrimPrefix(o, "--replace=")
		case strings.HasPrefix(o, "-i"):
			repl = o[2:]
		}
	}
	var items []string
	known := c.stdin != nil && !c.stdinDyn && !hasOpt(opts, "a", "--arg-file")
	if known {
		switch {
		case hasOpt(opts, "0", "--null"):
			items = strings.Split(*c.stdin, "\x00")
		case repl != "" || hasOpt(opts, "Ld", "--delimiter", "--max-lines"):
			// -I and -L take whole lines; -d splits on a delimiter
			// (approximated by lines, plus the fields of each line).
			for _, line := range strings.Split(*c.stdin, "\n") {
				if line = strings.TrimLeft(line, " \t"); line != "" {
					items = append(items, line)
				}
			}
			if repl == "" {
				items = append(items, strings.Fields(*c.stdin)...)
			}
		default:
			items = strings.Fields(*c.stdin)
		}
		if len(items) > maxExpansions {
			items, known = items[:maxExpansions], false
		}
	}
	inner := ctx{async: c.async}
	if !known {
		inner.extra = true
		a.exec(rest, inner)
		return true
	}
	if repl == "" {
		argv := slices.Clone(rest)
		for _, it := range items {
			argv = append(argv, lit(it))
		}
		a.exec(argv, inner)
		return true
	}
	for _, it := range items {
		argv := make([]word, len(rest))
		for j, w := range rest {
			argv[j] = w
			if w.static && strings.Contains(w.val, repl) {
				argv[j] = lit(strings.ReplaceAll(w.val, repl, it))
			}
		}
		a.exec(argv, inner)
	}
	if len(items) == 0 {
		a.exec(rest, inner)
	}
	return true
}

// suWrapper handles su and runuser: -c runs a script, runuser -u user runs
// a command.
func suWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	a.flag(Confirm, prog+": runs commands as another user")
	for i, w := range args {
		if !w.static {
			continue
		}
		v := w.val
		if v == "-c" || v == "--command" || v == "--session-command" {
			if i+1 < len(args) {
				s := args[i+1]
				a.script(s.part, !s.static, nil)
			}
			return true
		}
		if s, ok := strings.CutPrefix(v, "--command="); ok {
			a.script(s, false, nil)
			return true
		}
		if v == "--" && prog == "runuser" && i+1 < len(args) {
			a.exec(args[i+1:], c)
			return true
		}
	}
	a.flag(Confirm, prog+": interactive shell")
	return true
}

func flockWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	for i, w := range args {
		if w.static && (w.val == "-c" || w.val == "--command") && i+1 < len(args) {
			a.script(args[i+1].part, !args[i+1].static, nil)
			return true
		}
	}
	rest, _ := skipOptions(args, optSpec{short: "wE", long: []string{"--timeout", "--wait", "--conflict-exit-code"}})
	if len(rest) < 2 {
		return false
	}
	a.exec(rest[1:], c)
	return true
}

func watchWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	rest, opts := skipOptions(args, optSpec{short: "nq", long: []string{"--interval", "--equexit"}})
	if len(rest) == 0 {
		return false
	}
	if hasOpt(opts, "x", "--exec") {
		a.exec(rest, ctx{})
		return true
	}
	s, static := joinParts(rest)
	a.script(s, !static, nil)
	return true
}

// containerExecWrapper sees through docker/podman exec, docker compose exec.
func containerExecWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	i := 0
	for i < len(args) && args[i].static && (args[i].val == "compose" || args[i].val == "container") {
		i++
	}
	if i >= len(args) || !args[i].static || args[i].val != "exec" {
		return false
	}
	rest, _ := skipOptions(args[i+1:], optSpec{
		short: "euw",
		long:  []string{"--env", "--env-file", "--user", "--workdir", "--detach-keys", "--index"},
	})
	if len(rest) < 2 {
		return false
	}
	a.flag(Confirm, prog+" exec: runs a command inside a container")
	a.exec(rest[1:], c)
	return true
}

func kubectlExecWrapper(a *analyzer, prog string, args []word, c ctx) bool {
	if len(args) == 0 || !args[0].static || args[0].val != "exec" {
		return false
	}
	for i, w := range args {
		if w.static && w.val == "--" && i+1 < len(args) {
			a.flag(Confirm, prog+" exec: runs a command inside a pod")
			a.exec(args[i+1:], c)
			return true
		}
	}
	return false
}

// ---- rules ----

func shellRule(a *analyzer, prog string, args []word, c ctx) bool {
	cmode := false
	i := 0
	for i < len(args) {
		w := args[i]
		if !w.static {
			break
		}
		v := w.val
		if v == "--" || v == "-" {
			i++
			break
		}
		if strings.HasPrefix(v, "--") {
			switch v {
			case "--rcfile", "--init-file", "--init-command":
				i++
			case "--command":
				cmode = true
			}
			i++
			continue
		}
		if len(v) > 1 && (v[0] == '-' || v[0] == '+') {
			for _, ch := range v[1:] {
				switch ch {
				case 'c':
					cmode = true
				case 'o', 'O':
					i++
				}
			}
			i++
			continue
		}
		break
	}
	if i > len(args) {
		i = len(args)
	}
	rest := args[i:]
	if cmode {
		if len(rest) == 0 {
			a.flag(Confirm, prog+" -c without a script")
			return true
		}
		s := rest[0]
		if !s.static {
			a.flag(Confirm, prog+" -c with a script that is not static: "+s.raw)
		}
		if len(rest) > 1 {
			pos := map[string][]string{}
			for k, w := range rest[1:] {
				name := strconv.Itoa(k)
				pos[name] = []string{varValue(w)}
				if k > 0 && len(pos["@"]) < maxExpansions {
					pos["@"] = append(pos["@"], varValue(w))
					pos["*"] = pos["@"]
				}
			}
			a.positional = pos
		}
		a.script(s.part, !s.static, nil)
		a.positional = nil
		return true
	}
	if len(rest) > 0 {
		a.flag(Confirm, prog+": runs the script file "+rest[0].str())
		return true
	}
	if c.stdin != nil {
		if c.piped {
			a.flag(Confirm, "pipes a script into "+prog)
		}
		if c.stdinDyn {
			a.flag(Confirm, prog+": script on standard input contains expansions")
		}
		a.script(*c.stdin, c.stdinDyn, nil)
		return true
	}
	if c.piped {
		a.flag(Confirm, "pipes output into "+prog+", which runs it as a script")
	} else {
		a.flag(Confirm, prog+": reads commands from standard input")
	}
	return true
}

func sourceRule(a *analyzer, prog string, args []word, c ctx) bool {
	target := ""
	if len(args) > 0 {
		target = " " + args[0].str()
	}
	a.flag(Confirm, prog+": runs the commands in a file"+target)
	return true
}

func sshRule(a *analyzer, prog string, args []word, c ctx) bool {
	rest, _ := skipOptions(args, optSpec{short: "BbcDEeFIiJLlmOoPpQRSWw"})
	if len(rest) == 0 {
		return false
	}
	if len(rest) == 1 {
		a.flag(Confirm, "ssh: opens a remote session")
		return true
	}
	a.flag(Confirm, "ssh: runs a command on "+rest[0].str())
	s, static := joinParts(rest[1:])
	a.script(s, !static, nil)
	return true
}

// rmRule blocks recursive removal of /, ~, $HOME and system directories.
func rmRule(a *analyzer, prog string, args []word, c ctx) bool {
	recursive, force, noPreserve, endOpts := false, false, false, false
	var targets []word
	for _, w := range args {
		if !w.static {
			targets = append(targets, w)
			continue
		}
		v := w.val
		switch {
		case endOpts:
			targets = append(targets, w)
		case v == "--":
			endOpts = true
		case strings.HasPrefix(v, "--"):
			switch v {
			case "--recursive":
				recursive = true
			case "--force":
				force = true
			case "--no-preserve-root":
				noPreserve = true
			}
		case len(v) > 1 && v[0] == '-':
			for _, ch := range v[1:] {
				switch ch {
				case 'r', 'R':
					recursive = true
				case 'f':
					force = true
				}
			}
		default:
			targets = append(targets, w)
		}
	}
	if !recursive {
		return false
	}
	what := "recursive removal of "
	if force {
		what = "recursive forced removal of "
	}
	for _, t := range targets {
		if a.targetKind(t).catastrophicRemoval() {
			a.flag(Block, prog+": "+what+t.raw)
		}
	}
	if noPreserve {
		a.flag(Block, prog+": "+what+"with --no-preserve-root")
	}
	return false
}

func ddRule(a *analyzer, prog string, args []word, c ctx) bool {
	for _, w := range args {
		if rest, ok := strings.CutPrefix(w.part, "of="); ok {
			ow := word{val: rest, part: rest, raw: w.raw, static: w.static}
			if dev := blockDevice(ow); dev != "" {
				a.flag(Block, "dd: writes onto block device "+dev)
			}
		}
	}
	return false
}

// deviceOperandRule blocks shred/tee/mkswap on a block device.
func deviceOperandRule(a *analyzer, prog string, args []word, c ctx) bool {
	for _, w := range args {
		if dev := blockDevice(w); dev != "" {
			a.flag(Block, prog+": writes onto block device "+dev)
		}
	}
	return false
}

func mkfsRule(a *analyzer, prog string, args []word, c ctx) bool {
	a.flag(Block, prog+": creates a file system, destroying the device's data")
	return true
}

// copyRule blocks cp/ddrescue whose destination is a block device.
func copyRule(a *analyzer, prog string, args []word, c ctx) bool {
	var pos []word
	for i := 0; i < len(args); i++ {
		w := args[i]
		if w.static && (w.val == "-t" || w.val == "--target-directory") && i+1 < len(args) {
			pos = append(pos, args[i+1])
			break
		}
		if w.static && strings.HasPrefix(w.val, "-") {
			continue
		}
		pos = append(pos, w)
	}
	if len(pos) == 0 {
		return false
	}
	dst := pos[len(pos)-1]
	if prog == "ddrescue" && len(pos) >= 2 {
		dst = pos[1]
	}
	if dev := blockDevice(dst); dev != "" {
		a.flag(Block, prog+": writes onto block device "+dev)
	}
	return false
}

// partitionRule blocks destructive partitioning and erase tools.
func partitionRule(a *analyzer, prog string, args []word, c ctx) bool {
	has := func(names ...string) bool {
		for _, w := range args {
			for _, n := range names {
				if w.part == n || strings.HasPrefix(w.part, n+"=") {
					return true
				}
			}
		}
		return false
	}
	device := false
	for _, w := range args {
		if blockDevice(w) != "" {
			device = true
		}
	}
	reason := ""
	switch prog {
	case "sgdisk":
		if has("-Z", "--zap-all", "-z", "--zap", "-o", "--clear") {
			reason = "destroys the partition table"
		}
	case "sfdisk":
		if device && !has("-l", "--list", "-d", "--dump", "-J", "--json", "-s", "--show-size", "-V", "--verify") {
			reason = "rewrites the partition table"
		}
	case "parted":
		if has("mklabel", "mktable", "rm", "mkpart", "resizepart") {
			reason = "changes the partition table"
		}
	case "badblocks":
		if has("-w") {
			reason = "destructive write test"
		}
	case "nvme":
		if has("format", "sanitize") {
			reason = "erases the device"
		}
	case "hdparm":
		for _, w := range args {
			if strings.HasPrefix(w.part, "--security-erase") || w.part == "--trim-sector-ranges" {
				reason = "erases the device"
			}
		}
	case "diskutil":
		for _, w := range args {
			switch strings.ToLower(w.part) {
			case "erasedisk", "erasevolume", "zerodisk", "randomdisk", "secureerase", "partitiondisk", "reformat":
				reason = "erases a disk"
			}
		}
	}
	if reason != "" {
		a.flag(Block, prog+": "+reason)
		return true
	}
	return false
}

// chRule blocks recursive chmod/chown/chgrp of / or a system directory.
func chRule(a *analyzer, prog string, args []word, c ctx) bool {
	recursive := false
	var targets []word
	for _, w := range args {
		if w.static && (w.val == "--recursive" || len(w.val) > 1 && w.val[0] == '-' && w.val[1] != '-' && strings.ContainsRune(w.val, 'R')) {
			recursive = true
			continue
		}
		targets = append(targets, w)
	}
	if !recursive {
		return false
	}
	for _, t := range targets {
		if k := a.targetKind(t); k == pathRoot || k == pathSystem {
			a.flag(Block, prog+": recursive change of "+t.raw)
		}
	}
	return false
}

// findRule screens the commands of -exec/-ok and blocks find -delete (or
// -exec rm) over /, ~ or a system directory without a name filter.
func findRule(a *analyzer, prog string, args []word, c ctx) bool {
	var starts []word
	i := 0
	for i < len(args) && !(args[i].static && (strings.HasPrefix(args[i].val, "-") || args[i].val == "(" || args[i].val == "!")) {
		starts = append(starts, args[i])
		i++
	}
	filtered, deletes := false, false
	for ; i < len(args); i++ {
		w := args[i]
		if !w.static {
			continue
		}
		switch w.val {
		case "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex",
			"-newer", "-mtime", "-mmin", "-atime", "-amin", "-ctime", "-cmin", "-size", "-user",
			"-group", "-uid", "-gid", "-perm", "-links", "-inum", "-samefile", "-lname", "-ilname", "-empty":
			filtered = true
		case "-delete":
			deletes = true
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && !(args[j].static && (args[j].val == ";" || args[j].val == "+")) {
				j++
			}
			inner := args[i+1 : j]
			if len(inner) > 0 && inner[0].static && baseName(inner[0].val) == "rm" {
				deletes = true
			}
			a.exec(inner, ctx{})
			i = j
		}
	}
	if deletes && !filtered {
		for _, s := range starts {
			if a.targetKind(s).catastrophicRemoval() {
				a.flag(Block, "find: deletes everything under "+s.raw)
			}
		}
	}
	return false
}

func mongoRule(a *analyzer, prog string, args []word, c ctx) bool {
	txt := c.stdinText()
	for _, w := range args {
		txt += " " + w.part
	}
	if mongoDropRE.MatchString(txt) {
		a.flag(Block, prog+": dropDatabase drops a database")
	}
	return false
}

// sqlRule blocks DROP DATABASE (and DROP SCHEMA … CASCADE) sent to a SQL
// client in its arguments, on standard input or in a here-doc.
func sqlRule(a *analyzer, prog string, args []word, c ctx) bool {
	var b strings.Builder
	for _, w := range args {
		b.WriteString(w.part)
		b.WriteString("\n")
	}
	b.WriteString(c.stdinText())
	mysqlFamily := prog == "mysql" || prog == "mariadb" || prog == "mycli"
	if r := sqlCatastrophe(b.String(), mysqlFamily); r != "" {
		a.flag(Block, prog+": "+r)
	}
	return false
}
