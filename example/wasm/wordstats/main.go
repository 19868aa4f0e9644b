// Command wordstats is an example WASM tool (built with GOOS=wasip1
// GOARCH=wasm by scripts/build-wasm). It reads one JSON object on stdin —
// {"text": "...", "file": "path", "top": 10} — counts the lines, words and
// characters of the text or of the file (a path of the agent's workspace,
// seen at /workspace when the tool is granted it), and answers with a JSON
// object on stdout: {"lines", "words", "chars", "top": [{"word", "count"}]}.
// A problem is a message on stderr and exit code 1. Built for the host, it
// takes the request as its first argument instead.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits.
const (
	maxFile    = 16 << 20 // bytes of a file read
	defaultTop = 10
	maxTop     = 100
)

type request struct {
	Text *string `json:"text"`
	File string  `json:"file"`
	Top  *int    `json:"top"`
}

type count struct {
	Word  string `json:"word"`
	Count int    `json:"count"`
}

type answer struct {
	Source string  `json:"source"`
	Lines  int     `json:"lines"`
	Words  int     `json:"words"`
	Chars  int     `json:"chars"`
	Bytes  int     `json:"bytes"`
	Top    []count `json:"top"`
}

func main() {
	var req request
	var in io.Reader = os.Stdin
	if len(os.Args) > 1 {
		// Built for the host instead, as a toolbox binary tool: the
		// request is the first argument.
		in = strings.NewReader(os.Args[1])
	}
	dec := json.NewDecoder(io.LimitReader(in, 2<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail("the arguments are not {text, file, top}: %v", err)
	}
	top := defaultTop
	if req.Top != nil {
		top = *req.Top
	}
	if top < 0 || top > maxTop {
		fail("top must be between 0 and %d, got %d", maxTop, top)
	}
	var text, source string
	switch {
	case req.Text != nil && req.File != "":
		fail("give text or file, not both")
	case req.Text != nil:
		text, source = *req.Text, "text"
	case req.File != "":
		b, err := readFile(req.File)
		if err != nil {
			fail("%v", err)
		}
		text, source = string(b), req.File
	default:
		fail("give text (the words themselves) or file (a path of the workspace)")
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	a := stats(text, top)
	a.Source = source
	out, _ := json.Marshal(a)
	os.Stdout.Write(append(out, '\n'))
}

// readFile reads at most maxFile bytes of a file of the workspace.
func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %v (is the folder granted to this tool?)", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", p, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxFile)
	}
	return b, nil
}

// stats counts lines (a last line without a newline counts), words (runs
// of letters and digits, case folded) and characters, and the top most
// frequent words (ties in alphabetical order).
func stats(text string, top int) answer {
	a := answer{Bytes: len(text), Chars: utf8.RuneCountInString(text), Top: []count{}}
	a.Lines = strings.Count(text, "\n")
	if text != "" && !strings.HasSuffix(text, "\n") {
		a.Lines++
	}
	freq := map[string]int{}
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '\'' })
	for _, w := range words {
		w = strings.ToLower(strings.Trim(w, "'"))
		if w == "" {
			continue
		}
		a.Words++
		freq[w]++
	}
	for w, n := range freq {
		a.Top = append(a.Top, count{w, n})
	}
	sort.Slice(a.Top, func(i, j int) bool {
		if a.Top[i].Count != a.Top[j].Count {
			return a.Top[i].Count > a.Top[j].Count
		}
		return a.Top[i].Word < a.Top[j].Word
	})
	if len(a.Top) > top {
		a.Top = a.Top[:top]
	}
	return a
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "wordstats: "+format+"\n", args...)
	os.Exit(1)
}
