package web

import (
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// htmlToText renders an HTML document as readable plain text with the
// golang.org/x/net/html tokenizer: script, style, noscript, template, svg,
// iframe, object and head content (except the title) are dropped; link text is
// kept (without the target); images show their alt text; block elements
// start new lines, list items get "- ", headings get "#" marks, <pre>
// keeps its whitespace; runs of whitespace elsewhere collapse to one space
// and at most one blank line separates blocks. The output is valid UTF-8.
// It never fails: malformed markup is rendered as the tokenizer reads it.
func htmlToText(r io.Reader) string {
	z := html.NewTokenizer(r)
	var w textWriter
	skip := 0      // depth inside dropped elements
	pre := 0       // depth inside <pre>
	inHead := true // before <body> or the first visible element
	inTitle := false
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return w.String()
		case html.TextToken:
			if skip > 0 {
				continue
			}
			text := string(z.Text())
			switch {
			case inTitle:
				w.text(text)
			case inHead && strings.TrimSpace(text) == "":
			case pre > 0:
				inHead = false
				w.raw(text)
			default:
				inHead = false
				w.text(text)
			}
		case html.StartTagToken, html.SelfClosingTagToken, html.EndTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			end := tt == html.EndTagToken
			if dropped[a] {
				if tt == html.StartTagToken {
					skip++
				} else if end && skip > 0 {
					skip--
				}
				continue
			}
			if skip > 0 {
				continue
			}
			switch a {
			case atom.Title:
				inTitle = !end && tt == html.StartTagToken
				w.block(1)
				continue
			case atom.Head:
				inHead = !end
				continue
			case atom.Body:
				inHead = false
				continue
			case atom.Meta, atom.Link, atom.Base:
				continue
			}
			inHead = false
			switch {
			case a == atom.Br:
				w.lineBreak()
			case a == atom.Pre:
				if end {
					if pre > 0 {
						pre--
					}
				} else if tt == html.StartTagToken {
					pre++
				}
				w.block(2)
			case a == atom.Li:
				w.block(1)
				if !end {
					w.prefix("- ")
				}
			case headingLevel[a] > 0:
				w.block(2)
				if !end {
					w.prefix(strings.Repeat("#", headingLevel[a]) + " ")
				}
			case a == atom.Td || a == atom.Th:
				if !end {
					w.space = true
				}
			case a == atom.Img:
				for hasAttr {
					var k, v []byte
					k, v, hasAttr = z.TagAttr()
					if string(k) == "alt" && strings.TrimSpace(string(v)) != "" {
						w.text(" [image: " + strings.TrimSpace(string(v)) + "] ")
					}
				}
			case paragraphs[a]:
				w.block(2)
			case blocks[a]:
				w.block(1)
			}
		}
	}
}

var dropped = map[atom.Atom]bool{
	atom.Script: true, atom.Style: true, atom.Noscript: true, atom.Template: true,
	atom.Svg: true, atom.Math: true, atom.Iframe: true, atom.Object: true, atom.Canvas: true,
	atom.Select: true, atom.Textarea: true, atom.Button: true,
}

var headingLevel = map[atom.Atom]int{atom.H1: 1, atom.H2: 2, atom.H3: 3, atom.H4: 4, atom.H5: 5, atom.H6: 6}

var paragraphs = map[atom.Atom]bool{
	atom.P: true, atom.Blockquote: true, atom.Table: true, atom.Ul: true, atom.Ol: true, atom.Dl: true,
	atom.Section: true, atom.Article: true, atom.Header: true, atom.Footer: true, atom.Main: true,
	atom.Aside: true, atom.Nav: true, atom.Figure: true, atom.Form: true, atom.Hr: true, atom.Details: true,
}

var blocks = map[atom.Atom]bool{
	atom.Div: true, atom.Tr: true, atom.Dt: true, atom.Dd: true, atom.Figcaption: true, atom.Address: true,
	atom.Summary: true, atom.Caption: true, atom.Fieldset: true, atom.Legend: true, atom.Label: false,
	atom.Tbody: true, atom.Thead: true, atom.Tfoot: true,
}

// textWriter accumulates text with collapsed whitespace and bounded blank
// lines.
type textWriter struct {
	b       strings.Builder
	nl      int  // newlines owed before the next text (0..2)
	space   bool // a space is owed before the next text
	started bool // something has been written
	atLine  bool // the last byte written is a newline
}

func (w *textWriter) block(n int) {
	if n > w.nl {
		w.nl = n
	}
}

func (w *textWriter) lineBreak() {
	if !w.started {
		return
	}
	if w.nl > 0 {
		// A <br> inside a pending block break adds nothing.
		return
	}
	w.b.WriteByte('\n')
	w.atLine = true
	w.space = false
}

func (w *textWriter) flush() {
	if w.started && w.nl > 0 {
		n := w.nl
		if w.atLine {
			n--
		}
		for range n {
			w.b.WriteByte('\n')
		}
		w.atLine = true
	} else if w.started && w.space && !w.atLine {
		w.b.WriteByte(' ')
	}
	w.nl, w.space = 0, false
}

func (w *textWriter) prefix(s string) {
	w.flush()
	w.b.WriteString(s)
	w.started, w.atLine = true, false
}

func (w *textWriter) text(s string) {
	if s == "" {
		return
	}
	// Fields by hand (ASCII whitespace plus NBSP): no allocation per word.
	i := 0
	for i < len(s) {
		j := i
		for j < len(s) && isSpaceAt(s, j) {
			j += spaceLen(s, j)
		}
		if j > i {
			w.space = true
		}
		if j >= len(s) {
			break
		}
		k := j
		for k < len(s) && !isSpaceAt(s, k) {
			k++
		}
		w.flush()
		w.b.WriteString(s[j:k])
		w.started, w.atLine = true, false
		i = k
	}
}

// isSpaceAt reports whether s[i:] starts with ASCII whitespace or a
// no-break space (U+00A0, 0xC2 0xA0).
func isSpaceAt(s string, i int) bool {
	return isSpace(s[i]) || (s[i] == 0xC2 && i+1 < len(s) && s[i+1] == 0xA0)
}

func spaceLen(s string, i int) int {
	if s[i] == 0xC2 {
		return 2
	}
	return 1
}

func (w *textWriter) raw(s string) {
	if s == "" {
		return
	}
	w.flush()
	w.b.WriteString(s)
	w.started = true
	w.atLine = s[len(s)-1] == '\n'
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

func (w *textWriter) String() string {
	s := strings.TrimSpace(w.b.String())
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}
