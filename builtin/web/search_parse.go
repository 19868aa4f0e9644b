package web

import (
	"errors"
	"io"
	"net/url"
	"strings"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// SearchResult is one web.search hit.
type SearchResult struct {
	Title   string `json:"title"`
	URL     string `json:"url"`
	Snippet string `json:"snippet,omitempty"`
}

// Errors of parseDDG.
var (
	// errSearchPageUnknown: the page is neither a result list nor a
	// "no results" page (layout change, error page, truncated download).
	errSearchPageUnknown = errors.New("the search page has no results list; DuckDuckGo may have changed its layout or returned an error page")
	// errSearchChallenge: DuckDuckGo asked for a CAPTCHA (rate limiting).
	errSearchChallenge = errors.New("DuckDuckGo answered with a bot challenge instead of results (rate limited)")
)

// ddgBase resolves the protocol-relative and relative links of the page.
var ddgBase = &url.URL{Scheme: "https", Host: "html.duckduckgo.com", Path: "/html/"}

// parseDDG parses DuckDuckGo's HTML results page (html.duckduckgo.com/html/)
// into at most max results, in page order. A result is an <a
// class="result__a"> (the title) inside an element of class "result"; the
// snippet is the element of class "result__snippet" in the same result,
// the URL is the title's link with DDG's /l/?uddg= redirect unwrapped (the
// "result__url" text is the fallback). Ads (class "result--ad", or links to
// duckduckgo.com/y.js) and links that are not http(s) are skipped; results
// repeating an earlier URL are dropped. A page that says it has no results
// gives (nil, nil); a page without any result markup gives
// errSearchPageUnknown (errSearchChallenge for DDG's bot check).
func parseDDG(r io.Reader, max int) ([]SearchResult, error) {
	doc, err := html.Parse(r)
	if err != nil {
		return nil, errSearchPageUnknown
	}
	var (
		out        []SearchResult
		seen       = map[string]bool{}
		sawResults bool // a result container or results list exists
		noResults  bool
		challenge  bool
	)
	var walk func(n *html.Node, depth int)
	walk = func(n *html.Node, depth int) {
		if depth > 512 || (max > 0 && len(out) >= max) {
			return
		}
		if n.Type == html.ElementNode {
			switch {
			case hasClass(n, "no-results") || hasClass(n, "result--no-result"):
				noResults = true
				return
			case hasClass(n, "anomaly-modal") || hasClass(n, "anomaly-modal__modal") || (n.DataAtom == atom.Form && strings.Contains(attr(n, "action"), "anomaly")):
				challenge = true
			case hasClass(n, "result") || hasClass(n, "results") || attr(n, "id") == "links":
				sawResults = true
			}
			if hasClass(n, "result") && !hasClass(n, "results") {
				if res, ok := parseDDGResult(n); ok && !seen[res.URL] {
					seen[res.URL] = true
					out = append(out, res)
				}
				// No return: in broken markup later results can end up
				// nested in an unclosed result container.
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, depth+1)
		}
	}
	walk(doc, 0)
	switch {
	case len(out) > 0:
		return out, nil
	case noResults:
		return nil, nil
	case challenge:
		return nil, errSearchChallenge
	case sawResults:
		// Result markup without a usable link (all ads, or broken links).
		return nil, nil
	}
	return nil, errSearchPageUnknown
}

// parseDDGResult reads one result container.
func parseDDGResult(n *html.Node) (SearchResult, bool) {
	if hasClass(n, "result--ad") {
		return SearchResult{}, false
	}
	title := findClass(n, "result__a", 0)
	if title == nil {
		return SearchResult{}, false
	}
	res := SearchResult{Title: nodeText(title)}
	link, ok := unwrapDDG(attr(title, "href"))
	if !ok {
		if disp := findClass(n, "result__url", 0); disp != nil {
			if l, ok2 := unwrapDDG(attr(disp, "href")); ok2 {
				link, ok = l, true
			} else if l, ok2 := unwrapDDG("https://" + strings.TrimSpace(nodeText(disp))); ok2 && !strings.ContainsAny(nodeText(disp), " \t") {
				link, ok = l, true
			}
		}
	}
	if !ok || res.Title == "" {
		return SearchResult{}, false
	}
	res.URL = link
	if sn := findClass(n, "result__snippet", 0); sn != nil {
		res.Snippet = nodeText(sn)
	}
	return res, true
}

// unwrapDDG turns a result href into the target URL: DDG's redirect
// "//duckduckgo.com/l/?uddg=<escaped target>&rut=…" is unwrapped, relative
// links are resolved against the results page, ad links (y.js) and non
// http(s) targets are refused.
func unwrapDDG(href string) (string, bool) {
	href = strings.TrimSpace(href)
	if href == "" {
		return "", false
	}
	u, err := ddgBase.Parse(href)
	if err != nil {
		return "", false
	}
	host := strings.ToLower(u.Hostname())
	if host == "duckduckgo.com" || strings.HasSuffix(host, ".duckduckgo.com") {
		switch {
		case u.Path == "/l/" || u.Path == "/l":
			target := u.Query().Get("uddg")
			if target == "" {
				return "", false
			}
			u, err = url.Parse(target)
			if err != nil {
				return "", false
			}
		case u.Path == "/y.js":
			return "", false // an ad click
		}
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return "", false
	}
	if u.Host == "" {
		return "", false
	}
	return u.String(), true
}

// hasClass reports whether n's class attribute lists class.
func hasClass(n *html.Node, class string) bool {
	for _, a := range n.Attr {
		if a.Key == "class" && a.Namespace == "" {
			for _, c := range strings.Fields(a.Val) {
				if c == class {
					return true
				}
			}
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key && a.Namespace == "" {
			return a.Val
		}
	}
	return ""
}

// findClass returns the first element below n (depth first) with class.
func findClass(n *html.Node, class string, depth int) *html.Node {
	if depth > 256 {
		return nil
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && hasClass(c, class) {
			return c
		}
		if f := findClass(c, class, depth+1); f != nil {
			return f
		}
	}
	return nil
}

// nodeText is the text below n with whitespace collapsed.
func nodeText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node, int)
	walk = func(n *html.Node, depth int) {
		if depth > 256 || b.Len() > 4096 {
			return
		}
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		if n.Type == html.ElementNode && (n.DataAtom == atom.Script || n.DataAtom == atom.Style) {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, depth+1)
		}
	}
	walk(n, 0)
	s := strings.Join(strings.Fields(b.String()), " ")
	// Text is bounded: a title or snippet longer than this is junk.
	return cutUTF8(strings.ToValidUTF8(s, "\uFFFD"), 1024)
}
