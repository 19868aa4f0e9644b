package screen

import (
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// analyzer holds the state of one Check call. It is not shared between
// goroutines.
type analyzer struct {
	verdict Verdict
	cmds    [][]string
	reasons []string
	levels  []Verdict // the verdict of each reason

	src       string   // source text of the script being walked
	depth     int      // nested script depth (sh -c, eval, ...)
	nest      int      // statement nesting depth within the current script
	funcs     []string // functions whose bodies are being walked
	vars      map[string][]string
	budget    int // work done so far, in units of maxBudget
	wrapDepth int // wrappers being seen through (shadowing runs only outside them)
	nfind     int // findings so far, counting duplicates
	// cwds are directories the script may cd into that make relative
	// removals catastrophic (cd / && rm -rf *). Used only to block.
	cwds []string
	// positional holds the arguments given after a literal sh -c script,
	// as $0, $1, …, $@; they become known values of the nested script.
	positional map[string][]string
	loops      int // enclosing while/until/for loops
}

// ctx is what a statement knows about its surroundings.
type ctx struct {
	stdin    *string // known text on standard input (pipe from echo, here-doc)
	stdinDyn bool    // stdin text contains expansions
	piped    bool    // stdin comes from a pipeline
	async    bool    // in a pipeline or in the background (fork bomb check)
	extra    bool    // unknown arguments will be appended (xargs)
}

func (a *analyzer) flag(v Verdict, reason string) {
	a.nfind++
	if v > a.verdict {
		a.verdict = v
	}
	for i, r := range a.reasons {
		if r == reason {
			a.levels[i] = max(a.levels[i], v)
			return
		}
	}
	a.reasons = append(a.reasons, reason)
	a.levels = append(a.levels, v)
}

// maxBudget bounds the work of one Check: roughly one unit per simple
// command analysed and per 64 bytes of (nested) script parsed. Exceeding it
// is Block.
const maxBudget = 1 << 16

// spend consumes work units; it reports false (after flagging Block) when
// the budget is exhausted.
func (a *analyzer) spend(units int) bool {
	a.budget += units
	if a.budget > maxBudget {
		a.flag(Block, "command requires more analysis than the screening limit")
		return false
	}
	return true
}

func (a *analyzer) report() Report {
	r := Report{Verdict: a.verdict, Commands: a.cmds, Reasons: a.reasons}
	if r.Commands == nil {
		r.Commands = [][]string{}
	}
	if r.Reasons == nil {
		r.Reasons = []string{}
	}
	return r
}

// script parses and screens src. nested scripts (sh -c '…') pass their
// context; dynamic reports that src was assembled from words with
// expansions kept as written, so a parse error there is Confirm, not Block.
func (a *analyzer) script(src string, dynamic bool, c *ctx) {
	if a.depth > MaxScriptDepth {
		a.flag(Block, "nested scripts deeper than the screening limit")
		return
	}
	if len(src) > MaxCommandBytes {
		a.flag(Block, "command longer than the screening limit")
		return
	}
	if bracketDepth(src) > MaxNesting {
		a.flag(Block, "command nested deeper than the screening limit")
		return
	}
	if !a.spend(1 + len(src)/64) {
		return
	}
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(src), "")
	parsers.Put(p)
	if err != nil {
		if dynamic {
			a.flag(Confirm, "cannot parse dynamic script: "+err.Error())
		} else {
			a.flag(Block, "parse error: "+err.Error())
		}
		return
	}
	saveSrc, saveNest, saveVars := a.src, a.nest, a.vars
	a.src, a.nest = src, 0
	a.depth++
	a.collectVars(f)
	if a.positional != nil {
		vars := make(map[string][]string, len(a.vars)+len(a.positional))
		for k, v := range a.vars {
			vars[k] = v
		}
		for k, v := range a.positional {
			vars[k] = v
		}
		a.vars, a.positional = vars, nil
	}
	var cc ctx
	if c != nil {
		cc = *c
	}
	a.stmts(f.Stmts, cc)
	a.depth--
	a.src, a.nest, a.vars = saveSrc, saveNest, saveVars
}

// text returns the source text of a node of the current script.
func (a *analyzer) text(n syntax.Node) string {
	start, end := n.Pos(), n.End()
	if !start.IsValid() || !end.IsValid() {
		return ""
	}
	s, e := int(start.Offset()), int(end.Offset())
	if s < 0 || e > len(a.src) || s > e {
		return ""
	}
	return a.src[s:e]
}

func (a *analyzer) stmts(list []*syntax.Stmt, c ctx) {
	for i, s := range list {
		cc := c
		if i > 0 {
			cc.stdin, cc.piped = nil, false
		}
		a.stmt(s, cc)
	}
}

func (a *analyzer) stmt(s *syntax.Stmt, c ctx) {
	a.nest++
	defer func() { a.nest-- }()
	if a.nest > MaxNesting {
		a.flag(Block, "command nested deeper than the screening limit")
		return
	}
	if s.Background || s.Coprocess || s.Disown {
		c.async = true
		if a.loops > 0 {
			a.flag(Confirm, "starts background jobs in a loop")
		}
	}
	for _, r := range s.Redirs {
		a.redirect(r, &c)
	}
	if s.Cmd != nil {
		a.command(s.Cmd, c)
	}
}

// redirect screens one redirection and updates what the command sees on
// standard input.
func (a *analyzer) redirect(r *syntax.Redirect, c *ctx) {
	a.inner(r.Word)
	if r.Hdoc != nil {
		a.inner(r.Hdoc)
	}
	switch r.Op {
	case syntax.Hdoc, syntax.DashHdoc:
		txt, static := a.docText(r.Hdoc)
		c.stdin, c.stdinDyn, c.piped = &txt, !static, false
		return
	case syntax.WordHdoc:
		w := a.resolve(r.Word)
		txt := w.part + "\n"
		c.stdin, c.stdinDyn, c.piped = &txt, !w.static, false
		return
	case syntax.RdrIn, syntax.DplIn:
		if r.N == nil || r.N.Value == "0" {
			c.stdin, c.piped = nil, false
		}
		return
	}
	// Output redirections: >, >>, >|, <>, >&, &>, &>>.
	w := a.resolve(r.Word)
	if r.Op == syntax.DplOut && w.static && (w.val == "-" || isDigits(w.val)) {
		return // fd duplication such as 2>&1 or >&-
	}
	if dev := blockDevice(w); dev != "" {
		a.flag(Block, "redirection onto block device "+dev)
		return
	}
	if w.static && harmlessSink(w.val) {
		return
	}
	a.flag(Confirm, "output redirection to "+w.raw)
}

// harmlessSink reports whether writing to path cannot change a file.
func harmlessSink(p string) bool {
	switch p {
	case "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty":
		return true
	}
	if rest, ok := strings.CutPrefix(p, "/dev/fd/"); ok && isDigits(rest) {
		return true
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func (a *analyzer) command(cmd syntax.Command, c ctx) {
	switch cmd := cmd.(type) {
	case *syntax.CallExpr:
		a.call(cmd, c)
	case *syntax.BinaryCmd:
		if cmd.Op == syntax.Pipe || cmd.Op == syntax.PipeAll {
			left := c
			left.async = true
			a.stmt(cmd.X, left)
			right := ctx{async: true, piped: true}
			if txt, static, ok := a.outputText(cmd.X); ok {
				right.stdin, right.stdinDyn = &txt, !static
			}
			a.stmt(cmd.Y, right)
			return
		}
		a.stmt(cmd.X, c)
		c.stdin, c.piped = nil, false
		a.stmt(cmd.Y, c)
	case *syntax.Subshell:
		a.stmts(cmd.Stmts, c)
	case *syntax.Block:
		a.stmts(cmd.Stmts, c)
	case *syntax.IfClause:
		for ic := cmd; ic != nil; ic = ic.Else {
			a.stmts(ic.Cond, ctx{async: c.async})
			a.stmts(ic.Then, ctx{async: c.async})
		}
	case *syntax.WhileClause:
		a.loops++
		a.stmts(cmd.Cond, ctx{async: c.async})
		a.stmts(cmd.Do, ctx{async: c.async})
		a.loops--
	case *syntax.ForClause:
		switch l := cmd.Loop.(type) {
		case *syntax.WordIter:
			for _, w := range l.Items {
				a.inner(w)
			}
		case *syntax.CStyleLoop:
			a.arith(l.Init, l.Cond, l.Post)
		}
		a.loops++
		a.stmts(cmd.Do, ctx{async: c.async})
		a.loops--
	case *syntax.CaseClause:
		a.inner(cmd.Word)
		for _, it := range cmd.Items {
			for _, p := range it.Patterns {
				a.inner(p)
			}
			a.stmts(it.Stmts, ctx{async: c.async})
		}
	case *syntax.FuncDecl:
		name := ""
		if cmd.Name != nil {
			name = cmd.Name.Value
		}
		a.funcs = append(a.funcs, name)
		for _, n := range cmd.Names {
			a.funcs = append(a.funcs, n.Value)
		}
		n := len(cmd.Names) + 1
		if cmd.Body != nil {
			a.stmt(cmd.Body, ctx{})
		}
		a.funcs = a.funcs[:len(a.funcs)-n]
	case *syntax.ArithmCmd:
		a.arith(cmd.X)
	case *syntax.TestClause:
		a.test(cmd.X)
	case *syntax.DeclClause:
		argv := []string{cmd.Variant.Value}
		for _, as := range cmd.Args {
			a.assign(as)
			argv = append(argv, a.text(as))
		}
		a.cmds = append(a.cmds, argv)
	case *syntax.LetClause:
		argv := []string{"let"}
		for _, e := range cmd.Exprs {
			argv = append(argv, a.text(e))
		}
		a.cmds = append(a.cmds, argv)
		a.arith(cmd.Exprs...)
	case *syntax.TimeClause:
		if cmd.Stmt != nil {
			a.stmt(cmd.Stmt, c)
		}
	case *syntax.CoprocClause:
		if cmd.Name != nil {
			a.inner(cmd.Name)
		}
		a.stmt(cmd.Stmt, ctx{async: true})
	case *syntax.TestDecl:
		a.inner(cmd.Description)
		a.stmt(cmd.Body, ctx{})
	default:
		a.flag(Confirm, "unsupported shell construct")
	}
}

// inner screens every command substitution, process substitution and
// arithmetic expression nested anywhere inside n (a word, an assignment, a
// test expression, ...), without treating n itself as a command.
func (a *analyzer) inner(n syntax.Node) {
	if n == nil {
		return
	}
	if w, ok := n.(*syntax.Word); ok && plainWord(w) {
		return // nothing nested: skip the walk
	}
	syntax.Walk(n, func(node syntax.Node) bool {
		switch node := node.(type) {
		case *syntax.CmdSubst:
			a.stmts(node.Stmts, ctx{})
			return false
		case *syntax.ProcSubst:
			a.stmts(node.Stmts, ctx{})
			return false
		case *syntax.Stmt:
			a.stmt(node, ctx{})
			return false
		case *syntax.ArithmExp:
			a.arith(node.X)
			return false
		case *syntax.ParamExp:
			if node.Index != nil {
				a.arith(node.Index)
			}
			if node.Slice != nil {
				a.arith(node.Slice.Offset, node.Slice.Length)
			}
		}
		return true
	})
}

// arith screens arithmetic expressions. Bash evaluates the value of a
// variable used in arithmetic as an expression again, and an array
// subscript in that value can run a command substitution, so arithmetic on
// variables is not known safe.
func (a *analyzer) arith(exprs ...syntax.ArithmExpr) {
	for _, e := range exprs {
		if e == nil {
			continue
		}
		dynamic := false
		syntax.Walk(e, func(node syntax.Node) bool {
			switch node := node.(type) {
			case *syntax.CmdSubst:
				a.stmts(node.Stmts, ctx{})
				dynamic = true
				return false
			case *syntax.ProcSubst:
				a.stmts(node.Stmts, ctx{})
				dynamic = true
				return false
			case *syntax.ParamExp:
				dynamic = true
			case *syntax.Lit:
				if !isDigits(node.Value) {
					dynamic = true
				}
			}
			return true
		})
		if dynamic {
			a.flag(Confirm, "arithmetic on variables: "+a.text(e))
		}
	}
}

// test screens a [[ … ]] expression. Arithmetic comparisons evaluate their
// operands as arithmetic expressions.
func (a *analyzer) test(e syntax.TestExpr) {
	switch e := e.(type) {
	case *syntax.BinaryTest:
		switch e.Op {
		case syntax.TsEql, syntax.TsNeq, syntax.TsLss, syntax.TsGtr, syntax.TsLeq, syntax.TsGeq:
			for _, x := range []syntax.TestExpr{e.X, e.Y} {
				if w, ok := x.(*syntax.Word); ok {
					if lit := w.Lit(); !isDigits(strings.TrimPrefix(lit, "-")) {
						a.flag(Confirm, "arithmetic comparison on variables: "+a.text(w))
					}
				}
			}
		}
		a.test(e.X)
		a.test(e.Y)
	case *syntax.UnaryTest:
		a.test(e.X)
	case *syntax.ParenTest:
		a.test(e.X)
	case *syntax.Word:
		a.inner(e)
	}
}

// assign screens a variable assignment (standalone, as a command prefix or
// in declare/export/local).
func (a *analyzer) assign(as *syntax.Assign) {
	if as.Value != nil {
		a.inner(as.Value)
	}
	if as.Array != nil {
		a.inner(as.Array)
	}
	if as.Index != nil {
		a.arith(as.Index)
	}
	if as.Name != nil && dangerousEnv(as.Name.Value) {
		a.flag(Confirm, "assignment to "+as.Name.Value+" changes how later commands run")
	}
	if as.Name == nil && as.Naked && as.Value != nil {
		// declare "$x": the word may expand to any assignment.
		if w := a.resolve(as.Value); !w.static {
			a.flag(Confirm, "dynamic declaration: "+w.raw)
		} else if name, _, ok := strings.Cut(w.val, "="); ok && dangerousEnv(name) {
			a.flag(Confirm, "assignment to "+name+" changes how later commands run")
		}
	}
}

// dangerousEnv lists variables that change which program runs or make a
// later program run code.
func dangerousEnv(name string) bool {
	switch name {
	case "PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "BASH_ENV", "ENV", "IFS",
		"PS4", "PROMPT_COMMAND", "SHELLOPTS", "BASHOPTS", "GLOBIGNORE", "BASH_FUNC",
		"PAGER", "GIT_PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "EDITOR", "VISUAL",
		"GIT_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_ASKPASS",
		"SSH_ASKPASS", "GIT_EXEC_PATH", "GIT_DIR", "GIT_CONFIG", "GIT_CONFIG_GLOBAL",
		"GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT",
		"NODE_OPTIONS", "PYTHONPATH", "PYTHONSTARTUP", "PERL5OPT", "PERL5LIB", "RUBYOPT",
		"BROWSER", "HOME", "TMPDIR", "RIPGREP_CONFIG_PATH", "GREP_OPTIONS":
		return true
	}
	return strings.HasPrefix(name, "DYLD_") || strings.HasPrefix(name, "GIT_CONFIG_") ||
		strings.HasPrefix(name, "BASH_FUNC_")
}

// collectVars records every static value assigned to a variable anywhere in
// the script. The values are used only to find more catastrophic commands
// (X=/; rm -rf $X), never to allow one.
func (a *analyzer) collectVars(f *syntax.File) {
	var vars map[string][]string
	add := func(name, val string) {
		if vars == nil {
			vars = make(map[string][]string)
			for k, v := range a.vars { // inherit the enclosing script's
				vars[k] = v
			}
		}
		if len(vars[name]) < maxExpansions {
			vars[name] = append(vars[name], val)
		}
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Comment:
			// Bash starts a comment only at the start of a word. The
			// parser sometimes takes '#' glued to a quote or expansion
			// for a comment ('x'#|sh), hiding what bash runs: fail closed.
			if off := int(n.Hash.Offset()); off > 0 && off <= len(a.src) &&
				strings.IndexByte(" \t\n;&|()<>`", a.src[off-1]) < 0 {
				a.flag(Block, "parse error: '#' inside a word is not a comment in bash")
			}
		case *syntax.Assign:
			if n.Name != nil && n.Value != nil && n.Index == nil {
				add(n.Name.Value, varValue(a.resolve(n.Value)))
			}
		case *syntax.CallExpr:
			// NAME=value given to sudo, env, export via a wrapper, ...
			for _, arg := range n.Args[min(1, len(n.Args)):] {
				if l, ok := arg.Parts[0].(*syntax.Lit); !ok || strings.IndexByte(l.Value, '=') < 0 {
					continue
				}
				if w := a.resolve(arg); isAssignment(w.part) {
					name, val, _ := strings.Cut(w.part, "=")
					if val == "~" || strings.HasPrefix(val, "~/") {
						val = "$HOME" + val[1:]
					}
					add(name, val)
				}
			}
		case *syntax.ForClause:
			if it, ok := n.Loop.(*syntax.WordIter); ok && it.Name != nil {
				for _, item := range it.Items {
					add(it.Name.Value, varValue(a.resolve(item)))
				}
			}
		}
		return true
	})
	if vars != nil {
		a.vars = vars
	}
}

// varValue is the value recorded for a variable: the partly resolved word,
// with a leading unquoted tilde spelled $HOME.
func varValue(w word) string {
	if w.tilde && (w.part == "~" || strings.HasPrefix(w.part, "~/")) {
		return "$HOME" + w.part[1:]
	}
	return w.part
}

// outputText returns what a pipeline's left side writes, when it is known
// statically: echo/printf with literal arguments, or cat of a here-doc.
func (a *analyzer) outputText(s *syntax.Stmt) (text string, static, ok bool) {
	switch cmd := s.Cmd.(type) {
	case *syntax.BinaryCmd:
		if cmd.Op == syntax.Pipe || cmd.Op == syntax.PipeAll {
			return a.outputText(cmd.Y)
		}
		return "", false, false
	case *syntax.CallExpr:
		if len(cmd.Args) == 0 {
			return "", false, false
		}
		argv := unwrapSimple(a.words(cmd.Args))
		if len(argv) == 0 || !argv[0].static {
			return "", false, false
		}
		static = true
		var parts []string
		for _, r := range argv[1:] {
			static = static && r.static
			parts = append(parts, r.part)
		}
		switch baseName(argv[0].val) {
		case "echo":
			for len(parts) > 0 && (parts[0] == "-n" || parts[0] == "-e" || parts[0] == "-E" || parts[0] == "-ne" || parts[0] == "-en") {
				parts = parts[1:]
			}
			return strings.Join(parts, " ") + "\n", static, true
		case "printf":
			if static && len(parts) > 0 && boundedFormat(parts[0]) {
				// printf reuses its format until every argument is used.
				var b strings.Builder
				args := parts[1:]
				for {
					out, n, err := expand.Format(&expand.Config{}, parts[0], args)
					if err != nil {
						return strings.Join(parts, " "), true, true
					}
					b.WriteString(out)
					if n <= 0 || n >= len(args) {
						break
					}
					args = args[n:]
				}
				return b.String(), true, true
			}
			return strings.Join(parts, " "), static, true
		case "cat":
			if len(parts) == 0 {
				for _, r := range s.Redirs {
					switch r.Op {
					case syntax.Hdoc, syntax.DashHdoc:
						t, st := a.docText(r.Hdoc)
						return t, st, true
					case syntax.WordHdoc:
						w := a.resolve(r.Word)
						return w.part + "\n", w.static, true
					}
				}
			}
		}
	}
	return "", false, false
}

// unwrapSimple strips common wrappers and their options from an argv, for
// finding what a pipeline's left side prints. It is an approximation used
// only to find more catastrophic commands.
func unwrapSimple(argv []word) []word {
	for len(argv) > 0 && argv[0].static {
		switch baseName(argv[0].val) {
		case "sudo", "doas", "env", "command", "builtin", "nice", "nohup", "time", "stdbuf",
			"ionice", "setsid", "exec", "!":
		case "timeout":
			argv = argv[1:]
			for len(argv) > 0 && strings.HasPrefix(argv[0].val, "-") {
				argv = argv[1:]
			}
		default:
			return argv
		}
		argv = argv[1:]
		for len(argv) > 0 && argv[0].static && (strings.HasPrefix(argv[0].val, "-") || isAssignment(argv[0].val)) {
			argv = argv[1:]
		}
	}
	return argv
}

// boundedFormat reports whether a printf format has no '*' and no width or
// precision above three digits, so formatting it cannot allocate much.
func boundedFormat(f string) bool {
	run := 0
	for i := 0; i < len(f); i++ {
		switch ch := f[i]; {
		case ch == '*':
			return false
		case ch >= '0' && ch <= '9':
			run++
			if run > 3 {
				return false
			}
		default:
			run = 0
		}
	}
	return true
}

// plainWord reports whether a word has only literal and single-quoted parts.
func plainWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		default:
			return false
		}
	}
	return true
}
