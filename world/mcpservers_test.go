package world

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func loadMCP(t *testing.T, servers string) (*World, error) {
	t.Helper()
	dir := writeWorld(t, map[string]string{
		"world-config.yaml":     "name: demo\nagents:\n  - id: a\n" + servers,
		"archetype/a/config.md": "## Tool Access\n",
	})
	return Load(dir)
}

func TestMCPServersGood(t *testing.T) {
	w, err := loadMCP(t, `mcp_servers:
  fs:
    command: [node, srv.js, /tmp]
    env: {LOG_LEVEL: debug}
  remote:
    url: https://mcp.example.com/mcp
    headers: {Authorization: Bearer x, X-Trace: "1"}
  bare:
    command: some-server
`)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.MCPServers) != 3 {
		t.Fatalf("got %d servers: %+v", len(w.MCPServers), w.MCPServers)
	}
	fs := w.MCPServer("fs")
	if fs == nil || strings.Join(fs.Command, " ") != "node srv.js /tmp" || fs.Env["LOG_LEVEL"] != "debug" || fs.Line != 5 {
		t.Errorf("fs: %+v", fs)
	}
	r := w.MCPServer("remote")
	if r == nil || r.URL != "https://mcp.example.com/mcp" || r.Headers["Authorization"] != "Bearer x" || r.Headers["X-Trace"] != "1" {
		t.Errorf("remote: %+v", r)
	}
	if b := w.MCPServer("bare"); b == nil || len(b.Command) != 1 {
		t.Errorf("bare: %+v", b)
	}
	if w.MCPServer("nope") != nil {
		t.Error("unknown server found")
	}
}

func TestMCPServersSandbox(t *testing.T) {
	w, err := loadMCP(t, `mcp_servers:
  plain:
    command: [x]
  on:
    command: [x]
    sandbox: true
  off:
    command: [x]
    sandbox: false
  opts:
    command: [x]
    sandbox:
      network: true
      writable: [/srv/shared/]
      read_only: [/etc/ssl]
`)
	if err != nil {
		t.Fatal(err)
	}
	if w.MCPServer("plain").Sandbox != nil || w.MCPServer("off").Sandbox != nil {
		t.Error("sandbox without asking")
	}
	if sb := w.MCPServer("on").Sandbox; sb == nil || sb.Network || sb.Writable != nil {
		t.Errorf("sandbox: true -> %+v", sb)
	}
	sb := w.MCPServer("opts").Sandbox
	if sb == nil || !sb.Network || !slices.Equal(sb.Writable, []string{"/srv/shared"}) || !slices.Equal(sb.ReadOnly, []string{"/etc/ssl"}) {
		t.Errorf("sandbox mapping -> %+v", sb)
	}
}

func TestMCPServersErrors(t *testing.T) {
	long := strings.Repeat("x", maxMCPValueBytes+1)
	for _, tc := range []struct {
		name, yaml string
		want       string // file:line: message substring
	}{
		{"bad name", "mcp_servers:\n  Bad.Name:\n    command: [x]\n", `world-config.yaml:5: mcp_servers: "Bad.Name" is not a valid server name`},
		{"not a mapping", "mcp_servers: [a]\n", "world-config.yaml:4: mcp_servers must be a mapping"},
		{"server not a mapping", "mcp_servers:\n  fs: x\n", "world-config.yaml:5: mcp_servers.fs must be a mapping"},
		{"unknown key", "mcp_servers:\n  fs:\n    command: [x]\n    cwd: /\n", `world-config.yaml:7: mcp_servers.fs: unknown key "cwd"`},
		{"neither", "mcp_servers:\n  fs:\n    env: {A: b}\n", "world-config.yaml:5: mcp_servers.fs: give command"},
		{"both", "mcp_servers:\n  fs:\n    command: [x]\n    url: http://h/mcp\n", "world-config.yaml:5: mcp_servers.fs: give either command"},
		{"empty command", "mcp_servers:\n  fs:\n    command: []\n", "world-config.yaml:6: mcp_servers.fs.command is empty"},
		{"empty program", "mcp_servers:\n  fs:\n    command: ['', a]\n", "world-config.yaml:6: mcp_servers.fs.command: the program name is empty"},
		{"bad url scheme", "mcp_servers:\n  r:\n    url: file:///etc/passwd\n", "world-config.yaml:6: mcp_servers.r.url must be an http"},
		{"url credentials", "mcp_servers:\n  r:\n    url: https://u:p@h/mcp\n", "world-config.yaml:6: mcp_servers.r.url must not carry credentials"},
		{"bad header", "mcp_servers:\n  r:\n    url: https://h/mcp\n    headers: {\"a b\": x}\n", `world-config.yaml:7: mcp_servers.r.headers: "a b" is not a valid HTTP header name`},
		{"header newline", "mcp_servers:\n  r:\n    url: https://h/mcp\n    headers: {A: \"x\\r\\nHost: evil\"}\n", "world-config.yaml:7: mcp_servers.r.headers.A: value contains a NUL or line break"},
		{"bad env name", "mcp_servers:\n  fs:\n    command: [x]\n    env: {\"A=B\": x}\n", `world-config.yaml:7: mcp_servers.fs.env: "A=B" is not a valid environment variable name`},
		{"env not string", "mcp_servers:\n  fs:\n    command: [x]\n    env: {A: [1]}\n", "world-config.yaml:7: mcp_servers.fs.env.A must be a string"},
		{"headers on command", "mcp_servers:\n  fs:\n    command: [x]\n    headers: {A: b}\n", "world-config.yaml:5: mcp_servers.fs: headers apply to url servers only"},
		{"env on url", "mcp_servers:\n  r:\n    url: https://h/mcp\n    env: {A: b}\n", "world-config.yaml:5: mcp_servers.r: env applies to command servers only"},
		{"long arg", "mcp_servers:\n  fs:\n    command: [x, " + long + "]\n", "world-config.yaml:6: mcp_servers.fs.command: value is"},
		{"duplicate", "mcp_servers:\n  fs:\n    command: [x]\n  fs:\n    command: [y]\n", `world-config.yaml:7: mcp_servers: key "fs" repeated`},
		{"sandbox on url", "mcp_servers:\n  r:\n    url: https://h/mcp\n    sandbox: true\n", "world-config.yaml:5: mcp_servers.r: sandbox applies to command servers only"},
		{"sandbox relative path", "mcp_servers:\n  fs:\n    command: [x]\n    sandbox: {writable: [data]}\n", `world-config.yaml:7: mcp_servers.fs.sandbox.writable: "data" must be an absolute path`},
		{"sandbox root", "mcp_servers:\n  fs:\n    command: [x]\n    sandbox: {read_only: [/]}\n", `mcp_servers.fs.sandbox.read_only: "/" must be an absolute path other than /`},
		{"sandbox unknown key", "mcp_servers:\n  fs:\n    command: [x]\n    sandbox: {net: true}\n", `world-config.yaml:7: mcp_servers.fs.sandbox: unknown key "net"`},
		{"sandbox not bool", "mcp_servers:\n  fs:\n    command: [x]\n    sandbox: {network: yes please}\n", "mcp_servers.fs.sandbox.network must be"},
		{"unclosed ${", "mcp_servers:\n  fs:\n    command: [x]\n    env: {T: \"${TOKEN\"}\n", "world-config.yaml:7: mcp_servers.fs.env.T: unclosed ${"},
		{"bad ${name}", "mcp_servers:\n  r:\n    url: https://h/mcp\n    headers: {Authorization: \"Bearer ${1X}\"}\n", "world-config.yaml:7: mcp_servers.r.headers.Authorization: ${1X}: not a variable name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadMCP(t, tc.yaml)
			var ie *InvalidError
			if !errors.As(err, &ie) {
				t.Fatalf("want an InvalidError, got %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestMCPServersLimit(t *testing.T) {
	var b strings.Builder
	b.WriteString("mcp_servers:\n")
	for i := 0; i <= maxMCPServers; i++ {
		fmt.Fprintf(&b, "  s%d: {command: [x]}\n", i)
	}
	_, err := loadMCP(t, b.String())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the limit is %d", maxMCPServers)) {
		t.Fatalf("got %v", err)
	}
	b.Reset()
	b.WriteString("mcp_servers:\n  fs:\n    command: [x")
	for i := 0; i < maxMCPArgs; i++ {
		b.WriteString(", a")
	}
	b.WriteString("]\n")
	if _, err := loadMCP(t, b.String()); err == nil || !strings.Contains(err.Error(), "arguments; the limit is") {
		t.Fatalf("args limit: %v", err)
	}
}

// FuzzParseMCPServers: mcp_servers parsing never panics; every server kept
// has a valid name and exactly one of command and url.
func FuzzParseMCPServers(f *testing.F) {
	f.Add([]byte("mcp_servers:\n  fs:\n    command: [node, x]\n    env: {A: b}\n"))
	f.Add([]byte("mcp_servers:\n  r:\n    url: https://h/mcp\n    headers: {A: b}\n"))
	f.Add([]byte("mcp_servers: {a: {command: x, url: y}, b: null}\n"))
	f.Add([]byte("mcp_servers:\n  fs:\n    command: [x]\n    sandbox: {network: true, writable: [/srv], read_only: [/etc]}\n"))
	f.Add([]byte("mcp_servers:\n  fs:\n    command: [x]\n    sandbox: true\n    env: {T: \"${X}\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var ds Diagnostics
		w := &World{}
		root := parseYAML(ConfigFile, data, &ds)
		if root == nil {
			return
		}
		r := nodeReader{file: ConfigFile, ds: &ds}
		pairs, _ := r.mapping(root, "x")
		for _, p := range pairs {
			if p.key == "mcp_servers" {
				w.parseMCPServers(r, p.v)
			}
		}
		for _, s := range w.MCPServers {
			if !nameRE.MatchString(s.Name) || (len(s.Command) > 0) == (s.URL != "") {
				t.Fatalf("bad server kept: %+v", s)
			}
			if s.Sandbox != nil {
				if s.URL != "" {
					t.Fatalf("sandbox kept on a url server: %+v", s)
				}
				for _, p := range append(append([]string{}, s.Sandbox.Writable...), s.Sandbox.ReadOnly...) {
					if !filepath.IsAbs(p) || p == "/" {
						t.Fatalf("sandbox path %q kept", p)
					}
				}
			}
			for _, m := range []map[string]string{s.Env, s.Headers} {
				for _, v := range m {
					if _, err := ExpandEnv(v, nil); err != nil {
						t.Fatalf("malformed ${} kept: %q", v)
					}
				}
			}
		}
	})
}

func TestExpandEnv(t *testing.T) {
	env := map[string]string{"TOKEN": "s3cr3t", "EMPTY": "", "A_1": "a"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	for _, tc := range []struct {
		in, want, err string
	}{
		{"plain", "plain", ""},
		{"Bearer ${TOKEN}", "Bearer s3cr3t", ""},
		{"${TOKEN}${A_1}-${EMPTY}.", "s3cr3ta-.", ""},
		{"$HOME and $ alone", "$HOME and $ alone", ""},
		{"$${TOKEN}", "${TOKEN}", ""},
		{"$$${TOKEN}", "$${TOKEN}", ""}, // "$" then the literal "$${"
		{"${MISSING}", "", "${MISSING} is not set"},
		{"${TOKEN", "", "unclosed ${"},
		{"${}", "", "${}: not a variable name"},
		{"${A-B}", "", "${A-B}: not a variable name"},
		{"${9}", "", "${9}: not a variable name"},
	} {
		got, err := ExpandEnv(tc.in, lookup)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ExpandEnv(%q): error %v, want %q", tc.in, err, tc.err)
			}
			if err != nil && strings.Contains(err.Error(), "s3cr3t") {
				t.Errorf("ExpandEnv(%q): error reveals a value: %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ExpandEnv(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func FuzzExpandEnv(f *testing.F) {
	for _, s := range []string{"Bearer ${TOKEN}", "$${X}", "${", "${}", "a$b", "${A}${B}", "$$${A}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lookup := func(k string) (string, bool) { return "<" + k + ">", k != "UNSET" }
		out, err := ExpandEnv(s, lookup)
		if _, cerr := ExpandEnv(s, nil); (cerr == nil) != (err == nil || strings.Contains(err.Error(), "is not set")) {
			t.Fatalf("syntax check and expansion disagree on %q: %v vs %v", s, cerr, err)
		}
		if !strings.Contains(s, "${") && (err != nil || out != s) {
			t.Fatalf("%q without ${ changed: %q %v", s, out, err)
		}
		if err == nil && strings.Contains(out, "${") && !strings.Contains(s, "$${") && !strings.Contains(s, "<") {
			t.Fatalf("%q: a reference survived: %q", s, out)
		}
	})
}
