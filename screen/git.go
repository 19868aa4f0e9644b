package screen

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// gitCall is a git command line split into global options and subcommand.
type gitCall struct {
	globals [][]word          // each global option with its argument
	aliases map[string]string // -c alias.NAME=VALUE, NAME lower-cased
	aliasAt map[string]int    // index in globals of each alias definition
	config  bool              // -c or --config-env given
	risky   string            // a global option that can make git run code
	sub     word
	hasSub  bool
	rest    []word
}

var gitGlobalsWithArg = map[string]bool{
	"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true,
	"--config-env": true, "--super-prefix": true, "--attr-source": true,
}

func parseGit(args []word) gitCall {
	g := gitCall{}
	i := 0
	for i < len(args) {
		w := args[i]
		if !w.static || !strings.HasPrefix(w.val, "-") {
			break
		}
		opt := []word{w}
		if gitGlobalsWithArg[w.val] && i+1 < len(args) {
			val := args[i+1]
			opt = append(opt, val)
			switch w.val {
			case "-c":
				g.config = true
				key, v, _ := strings.Cut(val.part, "=")
				if name, ok := strings.CutPrefix(strings.ToLower(key), "alias."); ok {
					if g.aliases == nil {
						g.aliases, g.aliasAt = map[string]string{}, map[string]int{}
					}
					g.aliases[name] = v
					g.aliasAt[name] = len(g.globals)
				}
			case "--config-env":
				g.config = true
			}
			i += 2
		} else {
			switch {
			case strings.HasPrefix(w.val, "--exec-path="):
				g.risky = w.val
			case strings.HasPrefix(w.val, "--config-env="):
				g.config = true
			}
			i++
		}
		g.globals = append(g.globals, opt)
	}
	if i < len(args) {
		g.sub, g.hasSub, g.rest = args[i], true, args[i+1:]
	}
	return g
}

func gitRule(a *analyzer, prog string, args []word, c ctx) bool {
	g := parseGit(args)
	if g.config {
		a.flag(Confirm, "git -c: configuration given on the command line can run commands")
	}
	if !g.hasSub {
		return false
	}
	if !g.sub.static {
		a.flag(Confirm, "git: subcommand is not static: "+g.sub.raw)
		return true
	}
	if val, ok := g.aliases[strings.ToLower(g.sub.val)]; ok {
		if sh, ok := strings.CutPrefix(val, "!"); ok {
			a.flag(Confirm, "git alias "+g.sub.val+" runs a shell command")
			more, static := joinParts(g.rest)
			a.script(sh+" "+more, !static, nil)
			return true
		}
		ws, ok := a.splitWords(val)
		if !ok {
			a.flag(Confirm, "git alias "+g.sub.val+" cannot be parsed")
			return true
		}
		argv := []word{lit("git")}
		skip := g.aliasAt[strings.ToLower(g.sub.val)]
		for k, opt := range g.globals {
			if k != skip {
				argv = append(argv, opt...)
			}
		}
		argv = append(argv, ws...)
		argv = append(argv, g.rest...)
		a.exec(argv, c)
		return true
	}
	if g.sub.val == "push" {
		a.gitPush(g.rest)
	}
	return false
}

// splitWords parses s as the words of one simple command.
func (a *analyzer) splitWords(s string) ([]word, bool) {
	if len(s) > MaxCommandBytes {
		return nil, false
	}
	p := parsers.Get().(*syntax.Parser)
	f, err := p.Parse(strings.NewReader(s), "")
	parsers.Put(p)
	if err != nil || len(f.Stmts) != 1 {
		return nil, false
	}
	ce, ok := f.Stmts[0].Cmd.(*syntax.CallExpr)
	if !ok || len(f.Stmts[0].Redirs) > 0 || len(ce.Assigns) > 0 {
		return nil, false
	}
	save := a.src
	a.src = s
	defer func() { a.src = save }()
	for _, w := range ce.Args {
		a.inner(w)
	}
	return a.words(ce.Args), true
}

func isProtectedBranch(ref string) bool {
	ref = strings.TrimPrefix(ref, "refs/heads/")
	ref = strings.TrimPrefix(ref, "heads/")
	return ref == "main" || ref == "master"
}

// gitPush blocks forced or mirror pushes and remote deletion of main/master.
func (a *analyzer) gitPush(args []word) {
	force, mirror, del, all := false, false, false, false
	var pos []word
	endOpts := false
	for i := 0; i < len(args); i++ {
		w := args[i]
		if !w.static || endOpts {
			pos = append(pos, w)
			continue
		}
		v := w.val
		switch {
		case v == "--":
			endOpts = true
		case strings.HasPrefix(v, "--"):
			name, _, hasVal := strings.Cut(v, "=")
			switch name {
			case "--force", "--force-with-lease":
				force = true
			case "--mirror":
				mirror = true
			case "--delete":
				del = true
			case "--all", "--branches":
				all = true
			case "--repo", "--push-option", "--receive-pack", "--exec":
				if !hasVal {
					i++
				}
			}
		case len(v) > 1 && v[0] == '-':
		letters:
			for j := 1; j < len(v); j++ {
				switch v[j] {
				case 'f':
					force = true
				case 'd':
					del = true
				case 'o':
					if j == len(v)-1 {
						i++
					}
					break letters
				}
			}
		default:
			pos = append(pos, w)
		}
	}
	if mirror {
		a.flag(Block, "git push --mirror: overwrites and deletes every remote branch, including main")
	}
	if all && force {
		a.flag(Block, "git push --all --force: force-pushes every branch, including main")
	}
	if len(pos) <= 1 {
		if force {
			a.flag(Confirm, "git push --force of the current branch")
		}
		return
	}
	for _, r := range pos[1:] {
		cands := append([]string{r.part}, a.varAlternatives(r.part)...)
		for _, s := range cands {
			plus := strings.HasPrefix(s, "+")
			s = strings.TrimPrefix(s, "+")
			src, dst, colon := strings.Cut(s, ":")
			if !colon {
				dst = src
			}
			forced := force || plus
			switch {
			case colon && src == "" && (isProtectedBranch(dst) || strings.Contains(dst, "*")):
				a.flag(Block, "git push: deletes remote branch "+dst)
			case del && isProtectedBranch(dst):
				a.flag(Block, "git push --delete: deletes remote branch "+dst)
			case forced && isProtectedBranch(dst):
				a.flag(Block, "git push: force push to "+strings.TrimPrefix(dst, "refs/heads/"))
			case forced && strings.Contains(dst, "*"):
				a.flag(Block, "git push: force push of "+dst+", which includes main")
			case forced && (dst == "HEAD" || dst == "@"):
				a.flag(Confirm, "git push: force push of HEAD")
			}
		}
	}
}
