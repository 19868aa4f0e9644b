// Package web holds the tools that reach the network: tool.fetch,
// web.search and tool.browser. Every connection passes the SSRF policy of
// netguard, opened per world by its network allow-list.
package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html/charset"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/netguard"
	args "github.com/armory-dev/armory/toolargs"
)

// Defaults of the web tools (tool.fetch, web.search, tool.browser).
const (
	// DefaultTimeout bounds one call when neither the world nor the
	// call says otherwise.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxTimeout is the largest timeout_secs a call may ask for.
	DefaultMaxTimeout = 120 * time.Second
	// FetchBodyLimit is how much content (text, or raw bytes before base64)
	// a web tool returns.
	FetchBodyLimit = 256 << 10
	// FetchDownloadLimit is how many bytes a web tool reads from the
	// network, counted both before and after gzip decompression.
	FetchDownloadLimit = 8 << 20
	// FetchMaxRedirects is how many redirects tool.fetch follows.
	FetchMaxRedirects = 5
	// UserAgent is sent with every request of tool.fetch and web.search.
	UserAgent = "Armory/0.1 (+https://github.com/armory-dev/armory; LLM agent tool runtime)"
)

// Options configure the web tools. The zero value is the safe default:
// nothing private is reachable, limits as the constants above. The
// constructors copy it.
type Options struct {
	// AllowHosts and AllowCIDRs open private or otherwise refused
	// destinations (see package netguard): host names ("intranet.example",
	// "*.corp.example") trusted whatever they resolve to, and address ranges.
	AllowHosts []string
	AllowCIDRs []netip.Prefix
	// Resolver resolves host names for the dial guard; nil means the
	// system resolver. Tests inject a fixed table.
	Resolver netguard.Resolver

	// Timeout is the default time limit of one call (zero: 30 s).
	// MaxTimeout caps a call's timeout_secs (zero: 120 s; never below
	// Timeout).
	Timeout    time.Duration
	MaxTimeout time.Duration
	// BodyLimit is how much content a call returns (zero: 256 KB).
	BodyLimit int
	// DownloadLimit is how many bytes are read, compressed and
	// decompressed alike (zero: 8 MB; never below BodyLimit).
	DownloadLimit int64
	// MaxRedirects is how many redirects are followed (zero: 5; negative:
	// none).
	MaxRedirects int
	// UserAgent replaces UserAgent.
	UserAgent string

	// SearchEndpoint is the DuckDuckGo HTML endpoint of web.search (zero:
	// https://html.duckduckgo.com/html/).
	SearchEndpoint string
	// GeminiEndpoint is the Gemini API base of tool.google_search (zero:
	// DefaultGeminiEndpoint); GeminiModel the model it asks (zero:
	// DefaultGeminiModel). The API key is $GEMINI_API_KEY, read per call
	// and sent only in the request's x-goog-api-key header.
	GeminiEndpoint string
	GeminiModel    string

	// ChromiumPath is the browser binary of tool.browser (zero: the first
	// of chromium, chromium-browser, google-chrome on PATH).
	ChromiumPath string
	// MaxBrowsers bounds how many browsers tool.browser runs at once
	// (zero: 2). Further calls wait, within their timeout.
	MaxBrowsers int
}

func (o Options) withDefaults() Options {
	o.AllowHosts = append([]string(nil), o.AllowHosts...)
	o.AllowCIDRs = append([]netip.Prefix(nil), o.AllowCIDRs...)
	t := o.timeouts().WithDefaults(DefaultTimeout, DefaultMaxTimeout)
	o.Timeout, o.MaxTimeout = t.Default, t.Max
	if o.BodyLimit <= 0 {
		o.BodyLimit = FetchBodyLimit
	}
	if o.DownloadLimit <= 0 {
		o.DownloadLimit = FetchDownloadLimit
	}
	if o.DownloadLimit < int64(o.BodyLimit) {
		o.DownloadLimit = int64(o.BodyLimit)
	}
	switch {
	case o.MaxRedirects == 0:
		o.MaxRedirects = FetchMaxRedirects
	case o.MaxRedirects < 0:
		o.MaxRedirects = 0
	}
	if o.UserAgent == "" {
		o.UserAgent = UserAgent
	}
	if o.SearchEndpoint == "" {
		o.SearchEndpoint = DefaultSearchEndpoint
	}
	if o.GeminiEndpoint == "" {
		o.GeminiEndpoint = DefaultGeminiEndpoint
	}
	if o.GeminiModel == "" {
		o.GeminiModel = DefaultGeminiModel
	}
	if o.MaxBrowsers <= 0 {
		o.MaxBrowsers = 2
	}
	return o
}

func (o Options) guard() *netguard.Guard {
	return netguard.New(netguard.Options{AllowHosts: o.AllowHosts, AllowCIDRs: o.AllowCIDRs, Resolver: o.Resolver})
}

func (o Options) timeouts() args.Timeouts {
	return args.Timeouts{Default: o.Timeout, Max: o.MaxTimeout}
}

// webClient is the guarded HTTP client shared by tool.fetch and web.search.
// It keeps no cookies (no Jar), ignores proxy settings of the environment,
// and checks every dialled address (redirects included) with the guard.
type webClient struct {
	opts   Options
	guard  *netguard.Guard
	client *http.Client
}

func newWebClient(o Options) *webClient { return newWebClientWith(o, o.guard()) }

func newWebClientWith(o Options, g *netguard.Guard) *webClient {
	return &webClient{opts: o, guard: g, client: &http.Client{
		Transport:     g.Transport(),
		CheckRedirect: netguard.CheckRedirect(o.MaxRedirects),
		Jar:           nil,
	}}
}

// webResponse is a response read within the limits.
type webResponse struct {
	URL         string // after redirects
	Status      int
	StatusText  string
	ContentType string // media type with parameters, as sent or sniffed
	Body        []byte // decoded, at most DownloadLimit bytes
	Cut         bool   // the body was longer than DownloadLimit (compressed or decoded)
}

// get performs a GET of u within ctx and reads the body within the limits.
// Errors are *armory.Error values a model can act on.
func (c *webClient) get(ctx context.Context, op string, u *url.URL, accept string) (*webResponse, error) {
	return c.do(ctx, op, http.MethodGet, u, accept, nil, nil)
}

// do performs a request of method to u with body (nil for none) and the
// extra headers, within ctx, through the dial guard, and reads the body
// within the limits. Errors are *armory.Error values a model can act on.
func (c *webClient) do(ctx context.Context, op, method string, u *url.URL, accept string, reqBody []byte, header http.Header) (*webResponse, error) {
	if err := c.guard.CheckURL(u); err != nil {
		return nil, webError(op, u, err, 0)
	}
	var rb io.Reader
	if reqBody != nil {
		rb = bytes.NewReader(reqBody)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rb)
	if err != nil {
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("cannot request %s", u.Redacted()), err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("Accept", accept)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, webError(op, u, err, 0)
	}
	defer resp.Body.Close()
	out := &webResponse{URL: resp.Request.URL.String(), Status: resp.StatusCode, StatusText: http.StatusText(resp.StatusCode)}
	limit := c.opts.DownloadLimit
	compressed := &countingReader{r: io.LimitReader(resp.Body, limit+1)}
	var body io.Reader = compressed
	encoding := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding")))
	if encoding == "gzip" || encoding == "x-gzip" {
		zr, err := gzip.NewReader(compressed)
		switch {
		case err == io.EOF:
			body = bytes.NewReader(nil) // an empty body
		case err != nil:
			return nil, webError(op, u, fmt.Errorf("the server sent a broken gzip body: %w", err), 0)
		default:
			zr.Multistream(false)
			body = zr
		}
	}
	data, err := io.ReadAll(io.LimitReader(body, limit+1))
	cutCompressed := compressed.n > limit
	if err != nil && !(cutCompressed && errors.Is(err, io.ErrUnexpectedEOF)) {
		if ctx.Err() != nil {
			return nil, webError(op, u, ctx.Err(), 0)
		}
		return nil, webError(op, u, fmt.Errorf("reading the body: %w", err), 0)
	}
	if int64(len(data)) > limit {
		data = data[:limit]
		out.Cut = true
	}
	out.Cut = out.Cut || cutCompressed
	out.Body = data
	out.ContentType = resp.Header.Get("Content-Type")
	if out.ContentType == "" {
		out.ContentType = http.DetectContentType(data)
	}
	return out, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// NetPolicyHint ends a refusal of the web tools: what is closed and how a
// world opens it.
const NetPolicyHint = "Private, loopback, link-local and cloud-metadata addresses are blocked unless the world's network allow-list opens them " +
	"(an address or range entry in world-config.yaml \"network: allow:\" or the agent's config.md \"## Network\"); with an allow-list, only the destinations it names are reachable"

// webError turns a transport error into an *armory.Error a model can act on.
func webError(op string, u *url.URL, err error, timeout time.Duration) error {
	target := u.Redacted()
	var tm *netguard.TooManyRedirectsError
	var dns *net.DNSError
	if b, ok := netguard.IsBlocked(err); ok {
		return armory.E(op, armory.KindBlocked, fmt.Sprintf("refused to fetch %s: %s. %s; fetch an allowed http(s) URL instead", target, b.Error(), NetPolicyHint))
	}
	switch {
	case errors.As(err, &tm):
		return armory.E(op, armory.KindBlocked, fmt.Sprintf("refused to fetch %s: %s; fetch the final URL directly", target, tm.Error()))
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		msg := fmt.Sprintf("no complete response from %s in time", target)
		if timeout > 0 {
			msg = fmt.Sprintf("no complete response from %s within %s", target, timeout)
		}
		return armory.E(op, armory.KindTimeout, msg+"; try again later or with a larger timeout_secs")
	case errors.Is(err, context.Canceled):
		return armory.E(op, armory.KindTimeout, fmt.Sprintf("fetching %s was cancelled", target))
	case errors.As(err, &dns):
		if dns.IsNotFound {
			return armory.E(op, armory.KindNotFound, fmt.Sprintf("host %s not found; check the spelling of the URL", dns.Name))
		}
		return armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot resolve the host of %s: %v", target, dns.Err))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot fetch %s: %v", target, err))
}

// parseWebURL checks a URL argument: absolute http(s) with a host.
// page checks the url and timeout_secs arguments of a tool that loads one
// page (tool.fetch, tool.browser) and returns the URL and the call's time
// limit.
func (o Options) page(op, rawURL string, timeoutSecs float64) (*url.URL, time.Duration, error) {
	timeout, err := o.timeouts().Call(op, timeoutSecs)
	if err != nil {
		return nil, 0, err
	}
	u, err := parseWebURL(op, rawURL)
	return u, timeout, err
}

func parseWebURL(op, raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, armory.E(op, armory.KindInvalid, "url is empty; give an absolute http:// or https:// URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("url %q does not parse: %v", raw, errors.Unwrap(err)))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("url %q has no scheme; use https://%s", raw, raw))
	default:
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("url scheme %q is not supported; only http and https", u.Scheme))
	}
	if u.Host == "" {
		return nil, armory.E(op, armory.KindInvalid, fmt.Sprintf("url %q has no host", raw))
	}
	u.Fragment = ""
	return u, nil
}

// Fetch is tool.fetch: an HTTP GET with SSRF protection and bounded output.
// It is safe for concurrent use.
type Fetch struct {
	opts Options
	web  *webClient
	// agents holds the clients of agents with a network allow-list.
	agents policyCache[*webClient]
}

var _ armory.Tool = (*Fetch)(nil)

// NewFetch returns tool.fetch configured by o (zero fields take defaults).
func NewFetch(o Options) *Fetch {
	o = o.withDefaults()
	return &Fetch{opts: o, web: newWebClient(o)}
}

// FetchValue is the structured result (Result.Value) of tool.fetch.
type FetchValue struct {
	URL         string `json:"url"`
	Status      int    `json:"status"`
	ContentType string `json:"content_type"`
	Bytes       int    `json:"bytes"`
	Truncated   bool   `json:"truncated"`
}

func (t *Fetch) Spec() armory.Spec {
	return armory.Spec{
		Name: "tool.fetch",
		Description: fmt.Sprintf("HTTP GET a public http(s) URL. HTML is returned as readable text (raw=true for the HTML); other text as is; binary content as base64 with its content type. "+
			"Output is cut at %d KB, at most %d redirects are followed, default timeout %s. Private and internal addresses are refused.", t.opts.BodyLimit>>10, t.opts.MaxRedirects, t.opts.Timeout),
		InputSchema: args.Schema([]string{"url"},
			`"url":{"type":"string","description":"Absolute http:// or https:// URL to fetch"},`+
				`"raw":{"type":"boolean","description":"Return HTML source instead of readable text (default false)"},`+
				t.opts.timeouts().Prop("Time limit for the whole request in seconds")),
		OutputSchema: fetchOutputSchema,
	}
}

var fetchOutputSchema = []byte(`{"type":"object","properties":{"url":{"type":"string","description":"Final URL after redirects"},"status":{"type":"integer"},"content_type":{"type":"string"},"bytes":{"type":"integer","description":"Body bytes received (after decompression)"},"truncated":{"type":"boolean"}},"required":["url","status","content_type","bytes","truncated"]}`)

func (t *Fetch) Manifest() armory.Manifest { return webManifest() }

// webManifest is the manifest of the web tools that only read from the
// network (tool.fetch, web.search).
func webManifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapNetwork}, Permission: armory.PermAuto, Category: armory.CatWeb}
}

// Execute fetches the URL. Failures: KindInvalid (bad arguments), KindBlocked
// (refused address or scheme, too many redirects), KindTimeout,
// KindNotFound (unknown host or HTTP 404), KindUnavailable (connection
// failures, HTTP 5xx), KindPermission (HTTP 401/403), KindInvalid (other
// HTTP 4xx). An HTTP error still carries the body and Value.
func (t *Fetch) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "tool.fetch"
	var a struct {
		URL         string  `json:"url"`
		Raw         bool    `json:"raw"`
		TimeoutSecs float64 `json:"timeout_secs"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	u, timeout, err := t.opts.page(op, a.URL, a.TimeoutSecs)
	if err != nil {
		return armory.FailErr(err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	web, err := clientFor(&t.agents, t.opts, t.web, inv)
	if err != nil {
		return armory.FailErr(err)
	}
	resp, err := web.get(ctx, op, u, "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.9,*/*;q=0.8")
	if err != nil {
		if armory.KindOf(err) == armory.KindTimeout {
			err = webError(op, u, context.DeadlineExceeded, timeout)
		}
		return armory.FailErr(err)
	}
	return renderFetch(resp, a.Raw, t.opts.BodyLimit)
}

// renderFetch turns a response into the tool result.
func renderFetch(resp *webResponse, raw bool, bodyLimit int) armory.Result {
	mediaType, params, _ := mime.ParseMediaType(resp.ContentType)
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	val := FetchValue{URL: resp.URL, Status: resp.Status, ContentType: resp.ContentType, Bytes: len(resp.Body)}
	var content string
	var shown, total int // bytes of content shown and available
	switch {
	case isHTML(mediaType) || (isTextual(mediaType) && utf8OrCharset(params)):
		text := decodeCharset(resp.Body, resp.ContentType)
		if isHTML(mediaType) && !raw {
			text = htmlToText(strings.NewReader(text))
		}
		total = len(text)
		content = cutUTF8(text, bodyLimit)
		shown = len(content)
	default:
		total = len(resp.Body)
		b := resp.Body
		if len(b) > bodyLimit {
			b = b[:bodyLimit]
		}
		shown = len(b)
		content = fmt.Sprintf("binary content (%s, %d bytes shown), base64:\n%s", mediaType, shown, base64.StdEncoding.EncodeToString(b))
	}
	val.Truncated = shown < total || resp.Cut
	var sb strings.Builder
	fmt.Fprintf(&sb, "HTTP %d %s · %s · %s\n\n", resp.Status, resp.StatusText, mediaType, resp.URL)
	sb.WriteString(content)
	if val.Truncated {
		sb.WriteString("\n\n")
		sb.WriteString(truncationMarker(shown, total, resp.Cut))
	}
	res := armory.Result{Success: true, Text: sb.String(), Value: val}
	if resp.Status >= 400 {
		res.Success = false
		res.Kind = httpStatusKind(resp.Status)
		res.Text = fmt.Sprintf("the server answered HTTP %d %s for %s\n\n%s", resp.Status, resp.StatusText, resp.URL, content)
	}
	return res
}

// truncationMarker says how much was cut.
func truncationMarker(shown, total int, downloadCut bool) string {
	if downloadCut {
		return fmt.Sprintf("[truncated: showed the first %d bytes; more than %d bytes were cut, the download stopped at its size limit]", shown, total-shown)
	}
	return fmt.Sprintf("[truncated: showed the first %d of %d bytes; %d bytes cut]", shown, total, total-shown)
}

func httpStatusKind(status int) armory.Kind {
	switch {
	case status == http.StatusNotFound || status == http.StatusGone:
		return armory.KindNotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return armory.KindPermission
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return armory.KindTimeout
	case status == http.StatusTooManyRequests || status >= 500:
		return armory.KindUnavailable
	}
	return armory.KindInvalid
}

func isHTML(mt string) bool { return mt == "text/html" || mt == "application/xhtml+xml" }

func isTextual(mt string) bool {
	if strings.HasPrefix(mt, "text/") || strings.HasSuffix(mt, "+json") || strings.HasSuffix(mt, "+xml") {
		return true
	}
	switch mt {
	case "application/json", "application/xml", "application/javascript", "application/ecmascript",
		"application/x-javascript", "application/yaml", "application/x-yaml", "application/toml",
		"application/x-ndjson", "application/x-www-form-urlencoded", "application/sql", "application/graphql":
		return true
	}
	return false
}

// utf8OrCharset: a textual type is rendered as text when it names a charset
// we can decode (or none, assuming UTF-8).
func utf8OrCharset(params map[string]string) bool {
	cs := params["charset"]
	if cs == "" {
		return true
	}
	e, _ := charset.Lookup(cs)
	return e != nil
}

// decodeCharset converts body to UTF-8 from the charset in contentType (or
// an HTML meta tag, or a BOM), replacing invalid bytes.
func decodeCharset(body []byte, contentType string) string {
	if utf8.Valid(body) && !strings.Contains(strings.ToLower(contentType), "charset") {
		return string(body)
	}
	r, err := charset.NewReader(bytes.NewReader(body), contentType)
	if err != nil {
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return strings.ToValidUTF8(string(body), "\uFFFD")
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// cutUTF8 returns s cut to at most n bytes at a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
