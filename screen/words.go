package screen

import (
	"path"
	"regexp"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// word is a shell word resolved as far as static analysis allows.
type word struct {
	val    string // the value after quote removal; meaningful when static
	part   string // static parts resolved, expansions kept as written ($NAME normalised)
	raw    string // the word as written in the source
	static bool   // no expansion (parameter, command, arithmetic, tilde, extglob)
	tilde  bool   // starts with an unquoted tilde prefix
	// printed is what a word that is only a command substitution of a
	// literal echo/printf prints ($(echo rm) -> rm). It is used only to
	// find more catastrophic commands.
	printed string
}

// lit makes a static word from a string (used for synthesised arguments).
func lit(s string) word { return word{val: s, part: s, raw: s, static: true} }

// str is the word as it appears in a Report: the value if static, else as written.
func (w word) str() string {
	if w.static {
		return w.val
	}
	return w.raw
}

// resolve resolves a word without brace expansion.
func (a *analyzer) resolve(w *syntax.Word) word {
	if w == nil {
		return word{static: true}
	}
	if len(w.Parts) == 1 {
		if l, ok := w.Parts[0].(*syntax.Lit); ok && !strings.HasPrefix(l.Value, "~") &&
			strings.IndexByte(l.Value, '\\') < 0 {
			return word{val: l.Value, part: l.Value, raw: a.text(w), static: true}
		}
	}
	res := word{raw: a.text(w), static: true}
	var b strings.Builder
	for i, p := range w.Parts {
		a.wordPart(&b, p, false, i == 0, &res)
	}
	res.part = b.String()
	if res.static {
		res.val = res.part
	}
	return res
}

func (a *analyzer) wordPart(b *strings.Builder, p syntax.WordPart, quoted, first bool, res *word) {
	switch p := p.(type) {
	case *syntax.Lit:
		v := p.Value
		if !quoted && first && strings.HasPrefix(v, "~") {
			res.tilde, res.static = true, false
		}
		for i := 0; i < len(v); i++ {
			ch := v[i]
			if ch == '\\' && i+1 < len(v) {
				next := v[i+1]
				if !quoted || strings.IndexByte("$`\"\\\n", next) >= 0 {
					i++
					if next != '\n' {
						b.WriteByte(next)
					}
					continue
				}
			}
			b.WriteByte(ch)
		}
	case *syntax.SglQuoted:
		if !p.Dollar {
			b.WriteString(p.Value)
			return
		}
		// A fresh Config each call: expand mutates a shared zero Config
		// when given nil, which races between goroutines.
		s, err := expand.Literal(&expand.Config{}, &syntax.Word{Parts: []syntax.WordPart{p}})
		if err != nil {
			res.static = false
			b.WriteString(a.text(p))
			return
		}
		b.WriteString(s)
	case *syntax.DblQuoted:
		for _, q := range p.Parts {
			a.wordPart(b, q, true, false, res)
		}
	case *syntax.ParamExp:
		res.static = false
		if name, ok := simpleParam(p); ok {
			b.WriteString("$" + name)
			return
		}
		b.WriteString(a.text(p))
	default: // CmdSubst, ArithmExp, ProcSubst, ExtGlob, BraceExp
		res.static = false
		b.WriteString(a.text(p))
	}
}

// simpleParam reports the name of $NAME, ${NAME} or ${NAME:?msg}, whose
// value is the variable's value.
func simpleParam(p *syntax.ParamExp) (string, bool) {
	if p.Param == nil || p.Excl || p.Length || p.Width || p.IsSet || p.Index != nil ||
		p.Slice != nil || p.Repl != nil || p.Names != 0 || p.NestedParam != nil ||
		len(p.Modifiers) != 0 || p.Flags != nil {
		return "", false
	}
	if p.Exp != nil && p.Exp.Op != syntax.ErrorUnset && p.Exp.Op != syntax.ErrorUnsetOrNull {
		return "", false
	}
	return p.Param.Value, true
}

// docText returns a here-document body, with expansions kept as written.
func (a *analyzer) docText(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", true
	}
	static := true
	var b strings.Builder
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			b.WriteString(l.Value)
			continue
		}
		static = false
		b.WriteString(a.text(p))
	}
	return b.String(), static
}

// words resolves the arguments of a simple command, performing brace
// expansion. A brace expansion larger than maxExpansions is kept as one
// dynamic word.
func (a *analyzer) words(ws []*syntax.Word) []word {
	out := make([]word, 0, len(ws))
	for _, w := range ws {
		raw := a.text(w)
		if hasBraceLit(w) && tooManyBraces(w) {
			out = append(out, word{raw: raw, part: raw})
			continue
		}
		if !hasBraceLit(w) || !syntax.SplitBraces(w) {
			r := a.resolve(w)
			if !r.static {
				if st := substOutput(w); st != nil && literalCall(st) {
					if out, _, ok := a.outputText(st); ok {
						if n := strings.TrimRight(out, "\n"); !strings.ContainsAny(n, " \t\n") {
							r.printed = n
						}
					}
				}
			}
			out = append(out, r)
			continue
		}
		var exp []word
		over := false
		for ew, err := range expand.BracesSeq(&expand.Config{}, w) {
			if err != nil || len(exp) >= maxExpansions {
				over = true
				break
			}
			r := a.resolve(ew)
			r.raw = raw
			exp = append(exp, r)
		}
		if over {
			out = append(out, word{raw: raw, part: raw})
			continue
		}
		out = append(out, exp...)
	}
	return out
}

// hasBraceLit reports whether a word may contain a brace expansion. A word
// with more than maxBraceGroups braces is not expanded (it stays one
// dynamic word): expanding it could take exponential time.
func hasBraceLit(w *syntax.Word) bool {
	n := 0
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			n += strings.Count(l.Value, "{")
		}
	}
	return n > 0
}

const maxBraceGroups = 8

func tooManyBraces(w *syntax.Word) bool {
	n := 0
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			n += strings.Count(l.Value, "{")
		}
	}
	return n > maxBraceGroups
}

// literalCall reports whether a statement is a simple command of literal
// words only (no nested expansions), so its output is cheap to compute.
func literalCall(s *syntax.Stmt) bool {
	ce, ok := s.Cmd.(*syntax.CallExpr)
	if !ok || len(ce.Args) == 0 {
		return false
	}
	for _, w := range ce.Args {
		for _, p := range w.Parts {
			switch p := p.(type) {
			case *syntax.Lit, *syntax.SglQuoted:
			case *syntax.DblQuoted:
				for _, q := range p.Parts {
					if _, ok := q.(*syntax.Lit); !ok {
						return false
					}
				}
			default:
				return false
			}
		}
	}
	return true
}

// baseName returns the program name of a command word: /usr/bin/rm -> rm.
func baseName(s string) string {
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		return s[i+1:]
	}
	return s
}

var blockDevRE = regexp.MustCompile(`^/dev/(` +
	`(s|h|v|xv)d[a-z]+[0-9]*|nvme[0-9]+(n[0-9]+(p[0-9]+)?)?|mmcblk[0-9]+(p[0-9]+)?|` +
	`md[0-9]+(p[0-9]+)?|md/.+|dm-[0-9]+|mapper/.+|disk/.+|r?disk[0-9]+(s[0-9]+)?|` +
	`nbd[0-9]+(p[0-9]+)?|zd[0-9]+|bcache[0-9]+|block/.+|ubd[a-z]+[0-9]*|` +
	`mem|kmem|port|root)$`)

// blockDevicePrefixes catch devices whose name is only partly static
// (of=/dev/sd$X).
var blockDevicePrefixes = []string{"/dev/sd", "/dev/hd", "/dev/vd", "/dev/xvd", "/dev/nvme",
	"/dev/mmcblk", "/dev/disk", "/dev/rdisk", "/dev/mapper/", "/dev/md", "/dev/dm-"}

// blockDevice returns the device a word names if it is a disk or memory
// device, else "".
func blockDevice(w word) string {
	if w.static {
		return blockDevicePath(w.val)
	}
	p := w.part
	if strings.HasPrefix(p, "//") {
		p = path.Clean(p)
	}
	for _, pre := range blockDevicePrefixes {
		if strings.HasPrefix(p, pre) {
			return w.raw
		}
	}
	return ""
}

func blockDevicePath(p string) string {
	if !strings.Contains(p, "/dev") {
		return ""
	}
	c := path.Clean(p)
	if blockDevRE.MatchString(c) {
		return p
	}
	return ""
}

// pathKind classifies a removal or change target.
type pathKind int

const (
	pathOrdinary pathKind = iota
	pathHome              // ~, $HOME, or everything in it
	pathSystem            // a top-level system directory such as /usr or /etc
	pathRoot              // / or everything in it
)

var systemDirs = map[string]bool{
	"bin": true, "boot": true, "dev": true, "etc": true, "home": true, "lib": true,
	"lib32": true, "lib64": true, "libx32": true, "proc": true, "root": true, "sbin": true,
	"srv": true, "sys": true, "usr": true, "var": true, "snap": true,
	"usr/bin": true, "usr/sbin": true, "usr/lib": true, "usr/lib64": true, "usr/local": true,
	"usr/share": true, "usr/include": true, "var/lib": true,
	"System": true, "Users": true, "Library": true, "Applications": true, "private": true,
}

// classifyPath classifies s, the partly resolved text of a word (tilde says
// whether it begins with an unquoted tilde).
func classifyPath(s string, tilde bool) pathKind {
	home := false
	switch {
	case tilde && (strings.HasPrefix(s, "~+") || strings.HasPrefix(s, "~-")):
		return pathOrdinary // $PWD, $OLDPWD
	case tilde && strings.HasPrefix(s, "~"):
		home = true
		if i := strings.IndexByte(s, '/'); i >= 0 {
			s = s[i:]
		} else {
			s = ""
		}
	case s == "$HOME" || strings.HasPrefix(s, "$HOME/"):
		home = true
		s = s[len("$HOME"):]
	case strings.HasPrefix(s, "/"):
	default:
		return pathOrdinary
	}
	var stack []string
	escaped := false
	for _, comp := range strings.Split(s, "/") {
		switch comp {
		case "", ".":
		case "..":
			if len(stack) == 0 {
				escaped = true
			} else {
				stack = stack[:len(stack)-1]
			}
		default:
			stack = append(stack, comp)
		}
	}
	for len(stack) > 0 && matchAllGlob(stack[len(stack)-1]) {
		stack = stack[:len(stack)-1]
	}
	if home {
		if len(stack) == 0 {
			if escaped {
				return pathSystem // /home or above
			}
			return pathHome
		}
		return pathOrdinary
	}
	if len(stack) == 0 {
		return pathRoot
	}
	if systemDirs[strings.Join(stack, "/")] {
		return pathSystem
	}
	return pathOrdinary
}

// matchAllGlob reports whether a path component is a glob that matches
// (nearly) every name: *, .*, ?*, .??*, [a-z]*, [!.]*, ...
func matchAllGlob(c string) bool {
	if !strings.ContainsAny(c, "*?[") {
		return false
	}
	inBracket := false
	for i := 0; i < len(c); i++ {
		ch := c[i]
		switch {
		case ch == '[':
			inBracket = true
		case ch == ']':
			inBracket = false
		case inBracket, ch == '*', ch == '?', ch == '.':
		default:
			return false
		}
	}
	return true
}

// targetKind classifies a word used as a path, also trying every static
// value assigned to a variable it starts with.
func (a *analyzer) targetKind(w word) pathKind {
	k := classifyPath(w.part, w.tilde)
	if k == pathOrdinary && !w.tilde && !strings.HasPrefix(w.part, "/") && !strings.HasPrefix(w.part, "$") {
		for _, dir := range a.cwds {
			if k2 := classifyPath(dir+"/"+w.part, false); k2 > k {
				k = k2
			}
		}
	}
	if k != pathOrdinary || w.static {
		return k
	}
	for _, alt := range a.varAlternatives(w.part) {
		if k2 := classifyPath(alt, false); k2 > k {
			k = k2
		}
	}
	return k
}

// varAlternatives substitutes known static values for a leading $NAME.
func (a *analyzer) varAlternatives(s string) []string {
	if len(a.vars) == 0 || !strings.HasPrefix(s, "$") {
		return nil
	}
	end := 1
	if len(s) > 1 && (s[1] == '@' || s[1] == '*') {
		end = 2
	} else {
		for end < len(s) && (s[end] == '_' || s[end] >= 'a' && s[end] <= 'z' ||
			s[end] >= 'A' && s[end] <= 'Z' || s[end] >= '0' && s[end] <= '9') {
			end++
		}
	}
	vals := a.vars[s[1:end]]
	out := make([]string, 0, len(vals))
	for _, v := range vals {
		out = append(out, v+s[end:])
	}
	return out
}

func (k pathKind) catastrophicRemoval() bool { return k != pathOrdinary }
