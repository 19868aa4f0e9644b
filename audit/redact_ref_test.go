package audit

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

type tokenFrame struct {
	obj     bool // object (else array)
	n       int  // members/elements written
	wantKey bool // object: next token is a key
}

// redactJSONTokens is the token-by-token re-encoder redactJSON replaced,
// kept as the reference the scanner is held to (FuzzRedactJSON). It re-emits a valid JSON document token by token, so that order is
// kept and memory stays proportional to the nesting depth, not to a parse
// tree.
func redactJSONTokens(in []byte) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.UseNumber()
	out := make([]byte, 0, len(in)+16)
	var stack []tokenFrame
	afterValue := func() {
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.obj && top.wantKey {
				if tok == json.Delim('}') {
					out = append(out, '}')
					stack = stack[:len(stack)-1]
					afterValue()
					continue
				}
				key, _ := tok.(string)
				if top.n > 0 {
					out = append(out, ',')
				}
				top.n++
				out = append(out, quote(Cut(key, MaxArgString))...)
				out = append(out, ':')
				top.wantKey = false
				if IsSecretKey(key) {
					if err := skipTokenValue(dec); err != nil {
						return nil, err
					}
					out = append(out, quote(Redacted)...)
					top.wantKey = true
				}
				continue
			}
			if !top.obj {
				if tok == json.Delim(']') {
					out = append(out, ']')
					stack = stack[:len(stack)-1]
					afterValue()
					continue
				}
				if top.n > 0 {
					out = append(out, ',')
				}
				top.n++
			}
		}
		switch v := tok.(type) {
		case json.Delim:
			out = append(out, byte(v))
			stack = append(stack, tokenFrame{obj: v == '{', wantKey: v == '{'})
			continue
		case string:
			out = append(out, quote(Cut(RedactText(v), MaxArgString))...)
		case json.Number:
			out = append(out, v...)
		case bool:
			out = strconv.AppendBool(out, v)
		case nil:
			out = append(out, "null"...)
		}
		afterValue()
	}
	return out, nil
}

// skipValue consumes one complete value from dec.
func skipTokenValue(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// FuzzRedactJSON: the one-pass redactor writes, for every valid JSON
// document, exactly what the token-by-token re-encoder wrote.
func FuzzRedactJSON(f *testing.F) {
	for _, s := range redactSeeds {
		if len(s) < 512 { // long seeds make the fuzzer minimize for minutes
			f.Add(s)
		}
	}
	f.Fuzz(func(t *testing.T, in string) {
		checkRedactSame(t, in)
	})
}

var redactSeeds = []string{
	`{"path":"w.txt"}`, `{"password":"hunter2","n":1}`, `{"a":{"token":{"x":[1,2,"sk-ant-REDACTME0123456789abcdefghij"]}}}`,
	` [ 1 , -2.5e3 , true , false , null , "x" ] `, `"Bearer abcdefghijklmnop"`, `{"k\u0065y":"v\"al\\ue"}`,
	`{"<&>":"\u2028\u2029<&>"}`, "{\"a\":\"\u2028\"}", `{"api_key":[{"a":"}"},"]"]}`, `{"a":"\ud800"}`, `{"a":"\udc00\ud800x"}`,
	`{"é":"ü","x":"\u00e9"}`, `{"a":"` + strings.Repeat("x", MaxArgString+10) + `"}`, `{"` + strings.Repeat("k", MaxArgString+1) + `":1}`,
	`{"url":"https://user:pass@example.com/x","auth":"Authorization: Basic abc"}`, `{}`, `[]`, `{"a":[]}`, `0`, `"\t"`,
	`{"a":"line\nbreak\u0000nul"}`, `{"cookie":null,"Password":true,"x-api-key":12}`,
}

func checkRedactSame(t *testing.T, in string) {
	t.Helper()
	if !json.Valid([]byte(in)) {
		return
	}
	want, werr := redactJSONTokens([]byte(in))
	got, gerr := redactJSON([]byte(in))
	if (werr == nil) != (gerr == nil) || string(got) != string(want) {
		t.Fatalf("redactJSON(%q) = %q, %v; the token re-encoder wrote %q, %v", in, got, gerr, want, werr)
	}
}

func TestRedactJSONSameAsTokens(t *testing.T) {
	for _, s := range redactSeeds {
		checkRedactSame(t, s)
	}
}

// Random documents built from the pieces redaction cares about (secret and
// plain keys, escapes, HTML characters, U+2028, invalid surrogates, shaped
// secrets, numbers, nesting, white space): the one-pass redactor writes
// what the token re-encoder wrote.
func TestRedactJSONRandomSameAsTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []string{"path", "password", "Api-Key", "token", "max_tokens", "author", "k\\u0065y", "<&>", "é", "\\ud800", "a\\\"b", ""}
	strs := []string{"x", "a b", "\\n\\t", "<&>", "\u2028", "\\u2028", "\\ud800", "\\udc00\\ud800", "é", "\\u00e9", "sk-ant-REDACTME0123456789abcdefghij",
		"Bearer abcdefghijklmnop", "https://u:p@h/x", "password=hunter2", "\\\\", "\\/", "ghp_" + strings.Repeat("a", 36)}
	ws := []string{"", " ", "\n", "\t "}
	var gen func(depth int) string
	// container writes up to three members between open and close.
	container := func(open, close, w string, member func() string) string {
		var b strings.Builder
		b.WriteString(open + w)
		for i := range rng.IntN(4) {
			if i > 0 {
				b.WriteString("," + w)
			}
			b.WriteString(member() + w)
		}
		b.WriteString(close)
		return b.String()
	}
	gen = func(depth int) string {
		w := ws[rng.IntN(len(ws))]
		switch k := rng.IntN(8); {
		case depth > 0 && k == 0:
			return container("{", "}", w, func() string {
				return `"` + keys[rng.IntN(len(keys))] + `"` + w + ":" + w + gen(depth-1)
			})
		case depth > 0 && k == 1:
			return container("[", "]", w, func() string { return gen(depth - 1) })
		case k == 2:
			return []string{"0", "-1.5e+3", "12345678901234567890", "true", "false", "null"}[rng.IntN(6)]
		default:
			return `"` + strs[rng.IntN(len(strs))] + strs[rng.IntN(len(strs))] + `"`
		}
	}
	valid := 0
	for range 20000 {
		doc := gen(4)
		if json.Valid([]byte(doc)) {
			valid++
		}
		checkRedactSame(t, doc)
	}
	if valid < 19000 {
		t.Fatalf("only %d of 20,000 generated documents are valid JSON", valid)
	}
}

// BenchmarkRedact: typical tool arguments (a path; a small file write).
func BenchmarkRedact(b *testing.B) {
	for _, tc := range []struct{ name, args string }{
		{"path", `{"path":"w.txt"}`},
		{"write", `{"path":"src/main.go","content":"package main\n\nfunc main() {}\n","mode":"overwrite"}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Redact(json.RawMessage(tc.args))
			}
		})
	}
}
