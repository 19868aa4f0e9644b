package web

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHTMLToText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "hello   world", "hello world"},
		{"paragraphs", "<p>one</p><p>two</p>", "one\n\ntwo"},
		{"div lines", "<div>a</div><div>b</div>", "a\nb"},
		{"br", "a<br>b<br/>c", "a\nb\nc"},
		{"inline", "some <b>bold</b> and <i>italic</i>.", "some bold and italic."},
		{"link text kept", `see <a href="https://example.com/x">the docs</a> now`, "see the docs now"},
		{"script dropped", "a<script>var x = '<p>no</p>';</script>b", "ab"},
		{"style dropped", "<style>p{color:red}</style><p>x</p>", "x"},
		{"noscript dropped", "<noscript><p>enable js</p></noscript><p>shown</p>", "shown"},
		{"noscript is raw text like in a browser", "<noscript><div><noscript>x</noscript>y</div></noscript>z", "y\nz"},
		{"template and svg dropped", "<template><p>t</p></template><svg><text>s</text></svg>ok", "ok"},
		{"title kept, head dropped", "<html><head><title>T</title><meta name=x content=y><link rel=x></head><body>B</body></html>", "T\nB"},
		{"headings", "<h1>Top</h1><p>x</p><h3>Sub</h3>", "# Top\n\nx\n\n### Sub"},
		{"list", "<ul><li>one</li><li>two <b>2</b></li></ul>", "- one\n- two 2"},
		{"pre keeps whitespace", "<p>x</p><pre>a  b\n  c</pre><p>y</p>", "x\n\na  b\n  c\n\ny"},
		{"entities", "a &amp; b &lt;c&gt; &eacute; &nbsp;d", "a & b <c> é d"},
		{"image alt", `<p>logo: <img src=x.png alt="The Logo"></p>`, "logo: [image: The Logo]"},
		{"table cells", "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>", "a b\nc d"},
		{"blank lines bounded", "<p></p><p></p><div></div><p>x</p><br><br><br><p>y</p>", "x\n\ny"},
		{"unclosed tags", "<p>one<p>two<div>three", "one\n\ntwo\nthree"},
		{"unclosed script eats rest", "ok<script>var a = 1; <p>never</p>", "ok"},
		{"comment dropped", "a<!-- <p>hidden</p> -->b", "ab"},
		{"form controls dropped", "<form><select><option>o1</option></select><textarea>t</textarea><button>Go</button>label</form>", "label"},
		{"empty", "", ""},
		{"invalid utf8", "a\xffb", "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := htmlToText(strings.NewReader(tt.in)); got != tt.want {
				t.Errorf("htmlToText(%q)\n got %q\nwant %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzHTMLToText(f *testing.F) {
	for _, s := range []string{testPage, "<p>a<br>b</p>", "<pre> x </pre>", "<script>x</script>", "<noscript><noscript>", "<li><h1>", "<img alt='a'>", "a\xff", "<title>t</title>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := htmlToText(strings.NewReader(in))
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 output for %q", in)
		}
		if strings.Contains(out, "\n\n\n") {
			t.Fatalf("more than one blank line in %q", out)
		}
		if out != strings.TrimSpace(out) {
			t.Fatalf("untrimmed output %q", out)
		}
		// Output grows at most by the markers added per tag.
		if len(out) > 3*len(in)+16 {
			t.Fatalf("output %d bytes for %d bytes of input", len(out), len(in))
		}
	})
}

func BenchmarkHTMLToText(b *testing.B) {
	page := "<html><head><title>x</title><style>p{}</style></head><body>" + strings.Repeat(`<div class="c"><h2>Heading</h2><p>Some <a href="/x">linked</a> text, <b>bold</b> &amp; more.</p><ul><li>one</li><li>two</li></ul><script>x()</script></div>`, 1000) + "</body></html>"
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		htmlToText(strings.NewReader(page))
	}
}
