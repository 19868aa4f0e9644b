package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// tool.google_search (the ghost world's `google-searcher` tool): the query goes to a Gemini model with the
// Google Search grounding tool on; the model searches, reads and answers,
// and the answer comes back with its sources and the searches it ran.
const (
	// DefaultGeminiEndpoint is the Gemini API's base URL.
	DefaultGeminiEndpoint = "https://generativelanguage.googleapis.com/v1beta"
	// DefaultGeminiModel is the model tool.google_search asks.
	DefaultGeminiModel = "gemini-2.5-flash"
	// GeminiKeyEnv names the environment variable with the API key. The
	// tool is unavailable (roster requirement) while it is unset.
	GeminiKeyEnv = "GEMINI_API_KEY"
	// GoogleMaxQuery bounds the question, in bytes; GoogleMaxSources the
	// sources listed.
	GoogleMaxQuery   = 2000
	GoogleMaxSources = 20
)

// GoogleSearch is tool.google_search. Safe for concurrent use.
type GoogleSearch struct {
	opts     Options
	web      *webClient
	endpoint *url.URL
	agents   policyCache[*webClient]
}

var _ armory.Tool = (*GoogleSearch)(nil)

// NewGoogleSearch returns tool.google_search configured by o. It panics
// when o.GeminiEndpoint is set and is not an absolute http(s) URL, or
// o.GeminiModel is not a plain model name (programming errors).
func NewGoogleSearch(o Options) *GoogleSearch {
	o = o.withDefaults()
	ep, err := url.Parse(strings.TrimSuffix(o.GeminiEndpoint, "/"))
	if err != nil || (ep.Scheme != "http" && ep.Scheme != "https") || ep.Host == "" {
		panic(fmt.Sprintf("web.NewGoogleSearch: GeminiEndpoint %q is not an absolute http(s) URL", o.GeminiEndpoint))
	}
	if strings.ContainsAny(o.GeminiModel, "/?#:% ") {
		panic(fmt.Sprintf("web.NewGoogleSearch: GeminiModel %q is not a model name", o.GeminiModel))
	}
	ep = ep.JoinPath("models", o.GeminiModel+":generateContent")
	return &GoogleSearch{opts: o, web: newWebClient(o), endpoint: ep}
}

func (t *GoogleSearch) Spec() armory.Spec {
	return armory.Spec{
		Name: "tool.google_search",
		Description: "Search Google for current information: a Gemini model searches, reads the results and answers with citations " +
			"(the sources' titles and URLs, and the searches it ran). Ask a full question. Billed per search by the world's Gemini API key.",
		InputSchema: args.Schema([]string{"query"},
			fmt.Sprintf(`"query":{"type":"string","minLength":1,"maxLength":%d,"description":"The question to answer from the web"}`, GoogleMaxQuery)),
		OutputSchema: []byte(`{"type":"object","properties":{"answer":{"type":"string"},"sources":{"type":"array","items":{"type":"object","properties":{"title":{"type":"string"},"url":{"type":"string"}}}},"queries":{"type":"array","items":{"type":"string"}}},"required":["answer","sources","queries"]}`),
	}
}

func (t *GoogleSearch) Manifest() armory.Manifest {
	m := webManifest()
	m.Requires = []armory.Requirement{{Kind: armory.RequirementEnv, Name: GeminiKeyEnv}}
	return m
}

// GoogleValue is tool.google_search's structured result.
type GoogleValue struct {
	Answer  string         `json:"answer"`
	Sources []SearchResult `json:"sources"`
	Queries []string       `json:"queries"`
}

// geminiResponse is the part of a generateContent response the tool reads.
type geminiResponse struct {
	Candidates []struct {
		Content struct {
			Parts []struct {
				Text string `json:"text"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason      string `json:"finishReason"`
		GroundingMetadata struct {
			WebSearchQueries []string `json:"webSearchQueries"`
			GroundingChunks  []struct {
				Web struct {
					URI   string `json:"uri"`
					Title string `json:"title"`
				} `json:"web"`
			} `json:"groundingChunks"`
		} `json:"groundingMetadata"`
	} `json:"candidates"`
	PromptFeedback struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	Error struct {
		Message string `json:"message"`
		Status  string `json:"status"`
	} `json:"error"`
}

// Execute asks the model. Failures: KindInvalid (bad arguments),
// KindUnavailable (no API key, the API unreachable or failing, an answer
// that cannot be read), KindPermission (the key is refused), KindBlocked
// (the endpoint refused by the network policy, or the answer withheld by
// the model's safety filter), KindTimeout.
func (t *GoogleSearch) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "tool.google_search"
	var a struct {
		Query string `json:"query"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	a.Query = strings.TrimSpace(a.Query)
	switch {
	case a.Query == "":
		return armory.Failf(armory.KindInvalid, "query is empty; ask a question")
	case len(a.Query) > GoogleMaxQuery:
		return armory.Failf(armory.KindInvalid, "query is %d bytes; the limit is %d", len(a.Query), GoogleMaxQuery)
	case !utf8.ValidString(a.Query):
		return armory.Failf(armory.KindInvalid, "query is not valid UTF-8")
	}
	key := os.Getenv(GeminiKeyEnv)
	if key == "" {
		return armory.Failf(armory.KindUnavailable, "tool.google_search has no Gemini API key on this server (%s is not set); use web.search instead", GeminiKeyEnv)
	}
	body, _ := json.Marshal(map[string]any{
		"contents": []any{map[string]any{"role": "user", "parts": []any{map[string]string{"text": a.Query}}}},
		"tools":    []any{map[string]any{"google_search": map[string]any{}}},
	})
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	web, err := clientFor(&t.agents, t.opts, t.web, inv)
	if err != nil {
		return armory.FailErr(err)
	}
	h := http.Header{"Content-Type": {"application/json"}, "X-Goog-Api-Key": {key}}
	resp, err := web.do(ctx, op, http.MethodPost, t.endpoint, "application/json", body, h)
	if err != nil {
		if armory.KindOf(err) == armory.KindTimeout {
			err = webError(op, t.endpoint, context.DeadlineExceeded, t.opts.Timeout)
		}
		return armory.FailErr(err)
	}
	var g geminiResponse
	jerr := json.Unmarshal(resp.Body, &g)
	switch {
	case resp.Status == http.StatusUnauthorized || resp.Status == http.StatusForbidden:
		return armory.Failf(armory.KindPermission, "the Gemini API refused the server's key (HTTP %d %s); an administrator must check %s", resp.Status, g.Error.Status, GeminiKeyEnv)
	case resp.Status == http.StatusTooManyRequests:
		return armory.Failf(armory.KindUnavailable, "the Gemini API is rate limiting (HTTP 429); try again later or use web.search")
	case resp.Status != http.StatusOK:
		return armory.Failf(armory.KindUnavailable, "the Gemini API answered HTTP %d %s: %.300s; try again later or use web.search", resp.Status, resp.StatusText, g.Error.Message)
	case jerr != nil || resp.Cut:
		return armory.Failf(armory.KindUnavailable, "the Gemini API's answer could not be read; try again later or use web.search")
	case g.PromptFeedback.BlockReason != "":
		return armory.Failf(armory.KindBlocked, "the model refused the question (%s); rephrase it", g.PromptFeedback.BlockReason)
	case len(g.Candidates) == 0:
		return armory.Failf(armory.KindUnavailable, "the model gave no answer; try again or rephrase")
	}
	c := g.Candidates[0]
	var ans strings.Builder
	for _, p := range c.Content.Parts {
		ans.WriteString(p.Text)
	}
	v := GoogleValue{Answer: strings.TrimSpace(ans.String()), Sources: []SearchResult{}, Queries: c.GroundingMetadata.WebSearchQueries}
	if v.Queries == nil {
		v.Queries = []string{}
	}
	if v.Answer == "" {
		return armory.Failf(armory.KindUnavailable, "the model gave an empty answer (finish reason %q); try again or rephrase", c.FinishReason)
	}
	for _, ch := range c.GroundingMetadata.GroundingChunks {
		if ch.Web.URI != "" && len(v.Sources) < GoogleMaxSources {
			v.Sources = append(v.Sources, SearchResult{Title: ch.Web.Title, URL: ch.Web.URI})
		}
	}
	var sb strings.Builder
	sb.WriteString(v.Answer)
	if len(v.Sources) > 0 {
		sb.WriteString("\n\nSources:")
		for i, s := range v.Sources {
			fmt.Fprintf(&sb, "\n%d. %s\n   %s", i+1, s.Title, s.URL)
		}
	}
	if len(v.Queries) > 0 {
		fmt.Fprintf(&sb, "\n\nSearched: %s", strings.Join(v.Queries, "; "))
	}
	return armory.Result{Success: true, Text: sb.String(), Value: v}
}
