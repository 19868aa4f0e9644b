package web

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// Limits and defaults of web.search.
const (
	// DefaultSearchEndpoint is DuckDuckGo's HTML results page.
	DefaultSearchEndpoint = "https://html.duckduckgo.com/html/"
	// SearchDefaultResults is how many results web.search returns unless
	// asked; SearchMaxResults is the most it returns.
	SearchDefaultResults = 10
	SearchMaxResults     = 25
	// SearchMaxQuery is the longest query accepted, in bytes.
	SearchMaxQuery = 500
	// searchPageLimit bounds the results page read.
	searchPageLimit = 2 << 20
)

// Search is web.search: a DuckDuckGo search through its HTML endpoint,
// with the same SSRF-guarded client as tool.fetch. It is safe for
// concurrent use.
type Search struct {
	opts     Options
	web      *webClient
	endpoint *url.URL
	// agents holds the clients of agents with a network allow-list.
	agents  policyCache[*webClient]
	webOpts Options // opts with the search page limit
}

var _ armory.Tool = (*Search)(nil)

// NewSearch returns web.search configured by o. It panics when
// o.SearchEndpoint is set and is not an absolute http(s) URL (a programming
// error in the caller).
func NewSearch(o Options) *Search {
	o = o.withDefaults()
	ep, err := url.Parse(o.SearchEndpoint)
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		panic(fmt.Sprintf("builtin.NewSearch: SearchEndpoint %q is not an absolute http(s) URL", o.SearchEndpoint))
	}
	wo := o
	if wo.DownloadLimit > searchPageLimit {
		wo.DownloadLimit = searchPageLimit
	}
	return &Search{opts: o, web: newWebClient(wo), endpoint: ep, webOpts: wo}
}

// SearchValue is the structured result (Result.Value) of web.search.
type SearchValue struct {
	Query   string         `json:"query"`
	Results []SearchResult `json:"results"`
}

func (t *Search) Spec() armory.Spec {
	return armory.Spec{
		Name:        "web.search",
		Description: fmt.Sprintf("Search the web with DuckDuckGo. Returns up to %d results (default %d), each with title, URL and snippet. Use tool.fetch to read a result.", SearchMaxResults, SearchDefaultResults),
		InputSchema: args.Schema([]string{"query"},
			fmt.Sprintf(`"query":{"type":"string","minLength":1,"maxLength":%d,"description":"Search terms, as typed into a search box"},`, SearchMaxQuery)+
				fmt.Sprintf(`"max_results":{"type":"integer","minimum":1,"maximum":%d,"description":"How many results to return (default %d, at most %d)"},`, SearchMaxResults, SearchDefaultResults, SearchMaxResults)+
				`"region":{"type":"string","description":"Optional DuckDuckGo region code, e.g. us-en, de-de, fr-fr (default: no region)"}`),
		OutputSchema: []byte(`{"type":"object","properties":{"query":{"type":"string"},"results":{"type":"array","items":{"type":"object","properties":{"title":{"type":"string"},"url":{"type":"string"},"snippet":{"type":"string"}},"required":["title","url"]}}},"required":["query","results"]}`),
	}
}

func (t *Search) Manifest() armory.Manifest { return webManifest() }

// Execute runs the search. Failures: KindInvalid (bad arguments), KindBlocked
// (the endpoint is refused by the network policy), KindTimeout,
// KindUnavailable (DuckDuckGo unreachable, rate limiting, an HTTP error or a
// page that cannot be read). No results is a success with an empty list.
func (t *Search) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "web.search"
	var a struct {
		Query      string `json:"query"`
		MaxResults int    `json:"max_results"`
		Region     string `json:"region"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	a.Query = strings.TrimSpace(a.Query)
	switch {
	case a.Query == "":
		return armory.Failf(armory.KindInvalid, "query is empty; give search terms")
	case len(a.Query) > SearchMaxQuery:
		return armory.Failf(armory.KindInvalid, "query is %d bytes; the limit is %d", len(a.Query), SearchMaxQuery)
	case !utf8.ValidString(a.Query):
		return armory.Failf(armory.KindInvalid, "query is not valid UTF-8")
	case a.MaxResults < 0 || a.MaxResults > SearchMaxResults:
		return armory.Failf(armory.KindInvalid, "max_results must be between 1 and %d", SearchMaxResults)
	case len(a.Region) > 16 || strings.ContainsAny(a.Region, " &=?#/"):
		return armory.Failf(armory.KindInvalid, "region %q is not a region code like us-en", a.Region)
	}
	if a.MaxResults == 0 {
		a.MaxResults = SearchDefaultResults
	}
	u := *t.endpoint
	q := u.Query()
	q.Set("q", a.Query)
	if a.Region != "" {
		q.Set("kl", a.Region)
	}
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	web, err := clientFor(&t.agents, t.webOpts, t.web, inv)
	if err != nil {
		return armory.FailErr(err)
	}
	resp, err := web.get(ctx, op, &u, "text/html")
	if err != nil {
		if armory.KindOf(err) == armory.KindTimeout {
			err = webError(op, &u, context.DeadlineExceeded, t.opts.Timeout)
		}
		return armory.FailErr(err)
	}
	if resp.Status != 200 {
		return armory.Failf(armory.KindUnavailable, "the search engine answered HTTP %d %s (it may be rate limiting); try again later or fetch a known URL with tool.fetch", resp.Status, resp.StatusText)
	}
	results, err := parseDDG(bytes.NewReader(resp.Body), a.MaxResults)
	if err != nil {
		msg := err.Error()
		if errors.Is(err, errSearchPageUnknown) && resp.Cut {
			msg += " (the page was larger than the download limit)"
		}
		return armory.Failf(armory.KindUnavailable, "web.search failed: %s; try again later", msg)
	}
	if results == nil {
		results = []SearchResult{}
	}
	var sb strings.Builder
	if len(results) == 0 {
		fmt.Fprintf(&sb, "No results for %q. Try fewer or different words.", a.Query)
	} else {
		fmt.Fprintf(&sb, "%d results for %q:\n", len(results), a.Query)
		for i, r := range results {
			fmt.Fprintf(&sb, "\n%d. %s\n   %s\n", i+1, r.Title, r.URL)
			if r.Snippet != "" {
				fmt.Fprintf(&sb, "   %s\n", r.Snippet)
			}
		}
	}
	return armory.Result{Success: true, Text: strings.TrimRight(sb.String(), "\n"), Value: SearchValue{Query: a.Query, Results: results}}
}
