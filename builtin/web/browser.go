package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path"
	"strings"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/netguard"
	args "github.com/armory-dev/armory/toolargs"
)

// Limits of tool.browser.
const (
	// BrowserMaxWait is the longest extra wait after the load event.
	BrowserMaxWait = 10 * time.Second
	// BrowserScreenshotLimit is the largest screenshot saved.
	BrowserScreenshotLimit = 20 << 20
	// BrowserViewportWidth and BrowserViewportHeight size the window.
	BrowserViewportWidth  = 1280
	BrowserViewportHeight = 800
	// blockedHeader marks the guard proxy's refusals.
	blockedHeader = "X-Armory-Blocked"
)

// Browser is tool.browser: it loads a page in a fresh headless Chromium
// (through chromedp), returns the rendered text or saves a screenshot into
// the agent's workspace. Every request of the page goes through an
// in-process proxy that applies the netguard policy at dial time (see
// guardProxy); Chromium gets a fresh temporary profile that is removed
// after the call. It is safe for concurrent use; at most MaxBrowsers
// browsers run at once.
type Browser struct {
	opts  Options
	guard *netguard.Guard
	sem   chan struct{}
	// agents holds the guards of agents with a network allow-list.
	agents policyCache[*netguard.Guard]
}

var _ armory.Tool = (*Browser)(nil)

// NewBrowser returns tool.browser configured by o.
func NewBrowser(o Options) *Browser {
	o = o.withDefaults()
	return &Browser{opts: o, guard: o.guard(), sem: make(chan struct{}, o.MaxBrowsers)}
}

// BrowserValue is the structured result (Result.Value) of tool.browser.
type BrowserValue struct {
	URL        string   `json:"url"`
	Status     int      `json:"status"`
	Title      string   `json:"title"`
	Bytes      int      `json:"bytes"`
	Truncated  bool     `json:"truncated"`
	Screenshot string   `json:"screenshot,omitempty"`
	Blocked    []string `json:"blocked,omitempty"`
}

func (t *Browser) Spec() armory.Spec {
	return armory.Spec{
		Name: "tool.browser",
		Description: fmt.Sprintf("Load a public http(s) page in headless Chromium, running its JavaScript, and return the rendered text (cut at %d KB), "+
			"or with screenshot=true save a PNG under screenshots/ in your workspace. Requests to private or internal addresses are blocked. Default timeout %s.", t.opts.BodyLimit>>10, t.opts.Timeout),
		InputSchema: args.Schema([]string{"url"},
			`"url":{"type":"string","description":"Absolute http:// or https:// URL to open"},`+
				`"screenshot":{"type":"boolean","description":"Save a PNG screenshot into the workspace (screenshots/) instead of returning the text"},`+
				`"full_page":{"type":"boolean","description":"With screenshot: capture the whole page, not only the 1280x800 viewport"},`+
				fmt.Sprintf(`"wait_ms":{"type":"integer","minimum":0,"maximum":%d,"description":"Extra milliseconds to wait after the page loaded, for pages that render late (default 0)"},`, BrowserMaxWait.Milliseconds())+
				t.opts.timeouts().Prop("Time limit for the whole call in seconds, browser start included")),
		OutputSchema: []byte(`{"type":"object","properties":{"url":{"type":"string"},"status":{"type":"integer"},"title":{"type":"string"},"bytes":{"type":"integer"},"truncated":{"type":"boolean"},"screenshot":{"type":"string"},"blocked":{"type":"array","items":{"type":"string"}}},"required":["url","status","title","bytes","truncated"]}`),
	}
}

func (t *Browser) Manifest() armory.Manifest {
	return armory.Manifest{
		Danger:       armory.DangerCautious,
		Capabilities: []armory.Capability{armory.CapNetwork, armory.CapWriteFS},
		Permission:   armory.PermAuto,
		Category:     armory.CatWeb,
		Requires:     []armory.Requirement{{Kind: "binary", Name: "chromium"}},
	}
}

// chromiumPath finds the browser binary.
func (t *Browser) chromiumPath() (string, error) {
	if t.opts.ChromiumPath != "" {
		return exec.LookPath(t.opts.ChromiumPath)
	}
	var first error
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		p, err := exec.LookPath(n)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", first
}

// Execute opens the page. Failures: KindInvalid (bad arguments), KindBlocked
// (the page itself is refused by the network policy), KindNotFound
// (unknown host), KindTimeout, KindUnavailable (no chromium, no workspace
// for a screenshot, the page failed to load), KindInternal (the screenshot
// could not be saved). Subresources refused by the policy do not fail the
// call; they are listed in the result.
func (t *Browser) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "tool.browser"
	var a struct {
		URL         string  `json:"url"`
		Screenshot  bool    `json:"screenshot"`
		FullPage    bool    `json:"full_page"`
		WaitMS      int     `json:"wait_ms"`
		TimeoutSecs float64 `json:"timeout_secs"`
	}
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	u, timeout, err := t.opts.page(op, a.URL, a.TimeoutSecs)
	if err != nil {
		return armory.FailErr(err)
	}
	switch {
	case a.WaitMS < 0 || time.Duration(a.WaitMS)*time.Millisecond > BrowserMaxWait:
		return armory.Failf(armory.KindInvalid, "wait_ms must be between 0 and %d", BrowserMaxWait.Milliseconds())
	case a.FullPage && !a.Screenshot:
		return armory.Failf(armory.KindInvalid, "full_page only applies with screenshot=true")
	}
	if a.Screenshot && (inv.Agent == nil || inv.Agent.Workspace == "") {
		return armory.Failf(armory.KindUnavailable, "this agent has no workspace to save a screenshot in; call again without screenshot to get the page text")
	}
	bin, err := t.chromiumPath()
	if err != nil {
		return armory.Failf(armory.KindUnavailable, "tool.browser needs Chromium, which is not installed on this host (apt-get install chromium); use tool.fetch instead")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	timedOut := func() armory.Result {
		return armory.Failf(armory.KindTimeout, "the page %s did not finish within %s; try again with a larger timeout_secs (at most %d) or use tool.fetch", u.Redacted(), timeout, int(t.opts.MaxTimeout/time.Second))
	}

	// Early check of the page's own host: a friendlier error than a
	// proxy refusal, and no browser start for a refused URL. The proxy
	// checks again when it dials.
	guard, ok, err := t.agents.get(inv, t.opts.guardFor)
	if err != nil {
		return armory.FailErr(err)
	}
	if !ok {
		guard = t.guard
	}
	if err := guard.CheckURL(u); err != nil {
		return armory.FailErr(webError(op, u, err, timeout))
	}
	if _, err := guard.Resolve(ctx, u.Hostname()); err != nil {
		return armory.FailErr(webError(op, u, err, timeout))
	}

	select {
	case t.sem <- struct{}{}:
		defer func() { <-t.sem }()
	case <-ctx.Done():
		return timedOut()
	}

	proxy, err := startGuardProxy(guard)
	if err != nil {
		return armory.FailErr(armory.E(op, armory.KindInternal, "cannot start the network guard proxy", err))
	}
	defer proxy.Close()
	profile, err := os.MkdirTemp("", "armory-chromium-")
	if err != nil {
		return armory.FailErr(armory.E(op, armory.KindInternal, "cannot create a browser profile folder", err))
	}
	defer os.RemoveAll(profile)

	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, t.allocatorOptions(bin, profile, proxy.URL())...)
	defer cancelAlloc() // kills the browser and waits for it, before the profile is removed
	bctx, cancelB := chromedp.NewContext(allocCtx)
	defer cancelB()

	resp, err := chromedp.Run(bctx, chromedp.NavigateResponse(u.String()))
	if err != nil {
		var le *chromedp.LoadError
		switch {
		case ctx.Err() != nil:
			return timedOut()
		case errors.As(err, &le) && isProxyRefusal(le.ErrorText) && len(proxy.Blocked()) > 0:
			return armory.Failf(armory.KindBlocked, "refused to open %s: the network policy blocked %s. %s", u.Redacted(), strings.Join(proxy.Blocked(), ", "), NetPolicyHint)
		case errors.As(err, &le):
			return armory.Failf(armory.KindUnavailable, "cannot open %s: %s", u.Redacted(), le.ErrorText)
		}
		return armory.FailErr(armory.E(op, armory.KindUnavailable, fmt.Sprintf("cannot open %s in the browser", u.Redacted()), err))
	}
	if resp != nil && resp.Status == 403 && headerSet(resp.Headers, blockedHeader) {
		// The page itself (after a redirect) was refused by the proxy.
		return armory.Failf(armory.KindBlocked, "refused to open %s: it redirected to %s, which the network policy blocks", u.Redacted(), resp.URL)
	}
	if a.WaitMS > 0 {
		select {
		case <-time.After(time.Duration(a.WaitMS) * time.Millisecond):
		case <-ctx.Done():
			return timedOut()
		}
	}
	val := BrowserValue{}
	if resp != nil {
		val.Status = int(resp.Status)
	}
	if val.URL, err = chromedp.Run(bctx, chromedp.Location()); err != nil {
		return t.runError(ctx, op, u, err, timedOut)
	}
	if val.Title, err = chromedp.Run(bctx, chromedp.Title()); err != nil {
		return t.runError(ctx, op, u, err, timedOut)
	}
	val.Title = cutUTF8(val.Title, 1024)

	if a.Screenshot {
		var shot chromedp.Action[[]byte] = chromedp.CaptureScreenshot()
		if a.FullPage {
			shot = chromedp.FullScreenshot(100)
		}
		png, err := chromedp.Run(bctx, shot)
		if err != nil {
			return t.runError(ctx, op, u, err, timedOut)
		}
		if len(png) > BrowserScreenshotLimit {
			return armory.Failf(armory.KindBlocked, "the screenshot is %d bytes, over the %d-byte limit; take it without full_page", len(png), BrowserScreenshotLimit)
		}
		art, err := saveScreenshot(op, inv.Agent, val.URL, png)
		if err != nil {
			return armory.FailErr(err)
		}
		val.Screenshot = art.Path
		val.Blocked = proxy.Blocked()
		text := fmt.Sprintf("saved a screenshot of %s (%q, HTTP %d) to %s (%d bytes)", val.URL, val.Title, val.Status, art.Path, art.Size)
		text += blockedNote(val.Blocked)
		return armory.Result{Success: true, Text: text, Value: val, Artifacts: []armory.Artifact{art}}
	}

	type pageText struct {
		Text   string `json:"text"`
		Length int    `json:"length"` // UTF-16 code units, as JavaScript counts
		Cut    bool   `json:"cut"`
	}
	// innerText is the rendered text (CSS-hidden content excluded). It is
	// cut in the page so a huge page does not cross the protocol whole.
	pt, err := chromedp.Run(bctx, chromedp.Evaluate[pageText](fmt.Sprintf(
		`(() => { const e = document.body || document.documentElement; const t = e ? e.innerText : ""; return {text: t.slice(0, %d), length: t.length, cut: t.length > %d}; })()`, t.opts.BodyLimit, t.opts.BodyLimit)))
	if err != nil {
		return t.runError(ctx, op, u, err, timedOut)
	}
	text := strings.TrimSpace(cutUTF8(strings.ToValidUTF8(pt.Text, "\uFFFD"), t.opts.BodyLimit))
	val.Bytes = len(text)
	val.Truncated = pt.Cut || len(text) < len(strings.TrimSpace(pt.Text))
	val.Blocked = proxy.Blocked()
	var sb strings.Builder
	if val.Title != "" {
		fmt.Fprintf(&sb, "%s\n", val.Title)
	}
	fmt.Fprintf(&sb, "HTTP %d · %s\n\n%s", val.Status, val.URL, text)
	if val.Truncated {
		fmt.Fprintf(&sb, "\n\n[truncated: showed the first %d bytes of the page text; the page has %d characters of text]", len(text), pt.Length)
	}
	sb.WriteString(blockedNote(val.Blocked))
	res := armory.Result{Success: true, Text: sb.String(), Value: val}
	if val.Status >= 400 {
		res.Success, res.Kind = false, httpStatusKind(val.Status)
		res.Text = fmt.Sprintf("the server answered HTTP %d for %s\n\n%s", val.Status, val.URL, text)
	}
	return res
}

func (t *Browser) runError(ctx context.Context, op string, u fmt.Stringer, err error, timedOut func() armory.Result) armory.Result {
	if ctx.Err() != nil {
		return timedOut()
	}
	return armory.FailErr(armory.E(op, armory.KindUnavailable, fmt.Sprintf("the browser failed on %s", u), err))
}

// allocatorOptions are Chromium's flags: headless, no sandbox (the
// process runs inside Armory's own confinement), nothing that talks to
// Google in the background, QUIC off, every request through the guard
// proxy (loopback included: "<-loopback>" removes Chromium's implicit
// bypass), Chromium's own DNS disabled (every name is resolved by the
// proxy), WebRTC limited to proxied UDP (that is, none).
func (t *Browser) allocatorOptions(bin, profile, proxyURL string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.WindowSize(BrowserViewportWidth, BrowserViewportHeight),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-client-side-phishing-detection", true),
		chromedp.Flag("disable-domain-reliability", true),
		chromedp.Flag("disable-features", "Translate,MediaRouter,OptimizationHints,AutofillServerCommunication,InterestFeedContentSuggestions,CertificateTransparencyComponentUpdater"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.Flag("use-mock-keychain", true),
		chromedp.Flag("dns-prefetch-disable", true),
		chromedp.Flag("proxy-server", proxyURL),
		chromedp.Flag("proxy-bypass-list", "<-loopback>"),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		chromedp.Flag("force-webrtc-ip-handling-policy", "disable_non_proxied_udp"),
		chromedp.Flag("user-agent", t.opts.UserAgent+" Chromium"),
	}
}

func headerSet(h network.Headers, name string) bool {
	for k := range h {
		if strings.EqualFold(k, name) {
			return true
		}
	}
	return false
}

func blockedNote(blocked []string) string {
	if len(blocked) == 0 {
		return ""
	}
	return fmt.Sprintf("\n\n[the network policy blocked %d request(s) of this page: %s]", len(blocked), strings.Join(blocked, ", "))
}

// saveScreenshot writes png under screenshots/ in the agent's workspace,
// confined with os.Root: a "screenshots" symlink leading out of the
// workspace is refused, and an existing file is never overwritten.
func saveScreenshot(op string, env *armory.AgentEnv, pageURL string, png []byte) (armory.Artifact, error) {
	if env == nil || env.Workspace == "" {
		return armory.Artifact{}, armory.E(op, armory.KindUnavailable, "this agent has no workspace")
	}
	if err := os.MkdirAll(env.Workspace, 0o750); err != nil {
		return armory.Artifact{}, armory.E(op, armory.KindInternal, "cannot create the workspace", err)
	}
	root, err := os.OpenRoot(env.Workspace)
	if err != nil {
		return armory.Artifact{}, armory.E(op, armory.KindInternal, "cannot open the workspace", err)
	}
	defer root.Close()
	saveErr := func(what string, err error) error {
		if strings.Contains(err.Error(), "escapes from parent") {
			return armory.E(op, armory.KindPermission, what+" leads out of the workspace; remove that link and call again")
		}
		return armory.E(op, armory.KindInternal, "cannot save the screenshot: "+what, err)
	}
	if err := root.MkdirAll("screenshots", 0o750); err != nil {
		return armory.Artifact{}, saveErr("screenshots/", err)
	}
	base := time.Now().UTC().Format("20060102-150405.000") + "-" + screenshotSlug(pageURL)
	for i := 0; ; i++ {
		name := path.Join("screenshots", base+".png")
		if i > 0 {
			name = path.Join("screenshots", fmt.Sprintf("%s-%d.png", base, i))
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if errors.Is(err, os.ErrExist) && i < 100 {
			continue
		}
		if err != nil {
			return armory.Artifact{}, saveErr(name, err)
		}
		_, werr := f.Write(png)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = root.Remove(name)
			return armory.Artifact{}, saveErr(name, werr)
		}
		return armory.Artifact{Path: name, MIMEType: "image/png", Size: int64(len(png))}, nil
	}
}

// screenshotSlug makes a file-name-safe part from the page's host.
func screenshotSlug(pageURL string) string {
	h := pageURL
	if i := strings.Index(h, "://"); i >= 0 {
		h = h[i+3:]
	}
	if i := strings.IndexAny(h, "/?#"); i >= 0 {
		h = h[:i]
	}
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	var b strings.Builder
	for _, r := range h {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "page"
	}
	return b.String()
}
