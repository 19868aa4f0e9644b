package world

import (
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// MCPServer is one upstream MCP server of world-config.yaml "mcp_servers:".
// Exactly one of Command (a stdio server that armory starts and supervises)
// and URL (a streamable HTTP server) is set.
type MCPServer struct {
	Name string // [a-z0-9][a-z0-9_-]*; its tools are mcp.<Name>.<tool>
	Line int    // line of the name in world-config.yaml

	// Command is the argv of a stdio server; Command[0] is looked up on PATH
	// when it has no slash, else taken relative to the world folder.
	Command []string
	// Env is added to the reduced environment of a stdio server.
	Env map[string]string
	// Sandbox, when not nil, runs the stdio server confined (the world's
	// sandbox backend), with its own state folder as its only writable
	// place besides Sandbox.Writable.
	Sandbox *MCPSandbox

	// URL is the endpoint of a streamable HTTP server (http or https).
	URL string
	// Headers are sent with every HTTP request to the server.
	Headers map[string]string
}

// Limits of mcp_servers.
const (
	maxMCPServers    = 64
	maxMCPArgs       = 256
	maxMCPValueBytes = 8 << 10
)

var mcpServerKeys = []string{"command", "env", "sandbox", "url", "headers"}

// MCPSandbox confines a stdio upstream server ("sandbox:" of a command
// server: true, or a mapping of these keys).
type MCPSandbox struct {
	// Network lets the server reach the network (npx fetching a package, a
	// server calling an API); without it the server has none.
	Network bool
	// Writable and ReadOnly are absolute paths the server may write, or only
	// read, beyond what it can read anyway (the whole file system but
	// /tmp, /run and other servers' state).
	Writable, ReadOnly []string
}

var mcpSandboxKeys = []string{"network", "writable", "read_only"}

// mcpSandbox reads "sandbox:": true (confined, no network), false (not
// confined), or a mapping with network, writable and read_only.
func (r nodeReader) mcpSandbox(n *yamlNode, what string, bad *bool) *MCPSandbox {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		on, ok := r.boolean(n, what)
		if !ok {
			*bad = true
			return nil
		}
		if on {
			return &MCPSandbox{}
		}
		return nil
	}
	fields, ok := r.mapping(n, what)
	if !ok {
		*bad = true
		return nil
	}
	sb := &MCPSandbox{}
	for _, f := range fields {
		switch f.key {
		case "network":
			v, ok := r.boolean(f.v, what+".network")
			*bad = *bad || !ok
			sb.Network = v
		case "writable", "read_only":
			items, ok := r.strList(f.v, what+"."+f.key)
			*bad = *bad || !ok
			for _, it := range items {
				if !filepath.IsAbs(it.Value) || filepath.Clean(it.Value) == "/" {
					r.ds.Errorf(r.file, it.Line, "%s.%s: %q must be an absolute path other than /", what, f.key, it.Value)
					*bad = true
					continue
				}
				if f.key == "writable" {
					sb.Writable = append(sb.Writable, filepath.Clean(it.Value))
				} else {
					sb.ReadOnly = append(sb.ReadOnly, filepath.Clean(it.Value))
				}
			}
		default:
			r.unknownKey(f, what, mcpSandboxKeys)
			*bad = true
		}
	}
	return sb
}

// parseMCPServers reads "mcp_servers:", a mapping of server name to
// {command: [argv...], env: {K: V}} or {url: ..., headers: {K: V}}.
func (w *World) parseMCPServers(r nodeReader, n *yamlNode) {
	pairs, _ := r.mapping(n, "mcp_servers")
	if len(pairs) > maxMCPServers {
		r.ds.Errorf(r.file, n.Line, "mcp_servers: %d servers; the limit is %d", len(pairs), maxMCPServers)
		return
	}
	for _, p := range pairs {
		what := "mcp_servers." + p.key
		if !nameRE.MatchString(p.key) {
			r.ds.Errorf(r.file, p.k.Line, "mcp_servers: %q is not a valid server name ([a-z0-9][a-z0-9_-]*)", p.key)
			continue
		}
		s := MCPServer{Name: p.key, Line: p.k.Line}
		fields, ok := r.mapping(p.v, what)
		if !ok {
			continue
		}
		bad := false
		for _, f := range fields {
			switch f.key {
			case "command":
				items, ok := r.strList(f.v, what+".command")
				bad = bad || !ok
				if len(items) > maxMCPArgs {
					r.ds.Errorf(r.file, f.v.Line, "%s.command: %d arguments; the limit is %d", what, len(items), maxMCPArgs)
					bad = true
					continue
				}
				for _, it := range items {
					if err := checkMCPValue(it.Value); err != nil {
						r.ds.Errorf(r.file, it.Line, "%s.command: %v", what, err)
						bad = true
					}
					s.Command = append(s.Command, it.Value)
				}
				if ok && len(items) == 0 {
					r.ds.Errorf(r.file, f.v.Line, "%s.command is empty; give the program and its arguments, e.g. [npx, -y, some-mcp-server]", what)
					bad = true
				} else if ok && items[0].Value == "" {
					r.ds.Errorf(r.file, items[0].Line, "%s.command: the program name is empty", what)
					bad = true
				}
			case "env":
				s.Env = r.stringMap(f.v, what+".env", func(k string) error {
					if k == "" || strings.ContainsAny(k, "=\x00") {
						return fmt.Errorf("%q is not a valid environment variable name", k)
					}
					return nil
				}, &bad)
				r.checkExpand(s.Env, f.v.Line, what+".env", &bad)
			case "sandbox":
				s.Sandbox = r.mcpSandbox(f.v, what+".sandbox", &bad)
			case "url":
				v, ok := r.str(f.v, what+".url")
				if !ok {
					bad = true
					continue
				}
				u, err := url.Parse(v)
				switch {
				case err != nil:
					r.ds.Errorf(r.file, f.v.Line, "%s.url: %v", what, err)
					bad = true
				case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
					r.ds.Errorf(r.file, f.v.Line, "%s.url must be an http:// or https:// URL with a host, got %q", what, v)
					bad = true
				case u.User != nil:
					r.ds.Errorf(r.file, f.v.Line, "%s.url must not carry credentials; send them in headers", what)
					bad = true
				}
				s.URL = v
			case "headers":
				s.Headers = r.stringMap(f.v, what+".headers", func(k string) error {
					if !validHeaderName(k) {
						return fmt.Errorf("%q is not a valid HTTP header name", k)
					}
					return nil
				}, &bad)
				r.checkExpand(s.Headers, f.v.Line, what+".headers", &bad)
			default:
				r.unknownKey(f, what, mcpServerKeys)
				bad = true
			}
		}
		switch {
		case len(s.Command) > 0 && s.URL != "":
			r.ds.Errorf(r.file, p.k.Line, "%s: give either command (a stdio server) or url (an HTTP server), not both", what)
			bad = true
		case len(s.Command) == 0 && s.URL == "" && !bad:
			r.ds.Errorf(r.file, p.k.Line, "%s: give command (a stdio server) or url (an HTTP server)", what)
			bad = true
		case len(s.Command) > 0 && s.Headers != nil:
			r.ds.Errorf(r.file, p.k.Line, "%s: headers apply to url servers only", what)
			bad = true
		case s.URL != "" && s.Env != nil:
			r.ds.Errorf(r.file, p.k.Line, "%s: env applies to command servers only", what)
			bad = true
		case s.URL != "" && s.Sandbox != nil:
			r.ds.Errorf(r.file, p.k.Line, "%s: sandbox applies to command servers only (an HTTP server runs elsewhere)", what)
			bad = true
		}
		if !bad {
			w.MCPServers = append(w.MCPServers, s)
		}
	}
}

// stringMap reads a mapping of names to strings; check validates each key.
func (r nodeReader) stringMap(n *yamlNode, what string, check func(string) error, bad *bool) map[string]string {
	pairs, ok := r.mapping(n, what)
	if !ok {
		*bad = true
		return nil
	}
	out := make(map[string]string, len(pairs))
	for _, p := range pairs {
		if err := check(p.key); err != nil {
			r.ds.Errorf(r.file, p.k.Line, "%s: %v", what, err)
			*bad = true
			continue
		}
		v, ok := r.str(p.v, what+"."+p.key)
		if !ok {
			*bad = true
			continue
		}
		if err := checkMCPValue(v); err != nil {
			r.ds.Errorf(r.file, p.v.Line, "%s.%s: %v", what, p.key, err)
			*bad = true
			continue
		}
		out[p.key] = v
	}
	return out
}

func checkMCPValue(v string) error {
	if len(v) > maxMCPValueBytes {
		return fmt.Errorf("value is %d bytes; the limit is %d", len(v), maxMCPValueBytes)
	}
	if strings.ContainsAny(v, "\x00\r\n") {
		return fmt.Errorf("value contains a NUL or line break")
	}
	return nil
}

// validHeaderName reports whether k is an RFC 9110 token.
func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// MCPServer returns the upstream server named name, or nil.
func (w *World) MCPServer(name string) *MCPServer {
	for i := range w.MCPServers {
		if w.MCPServers[i].Name == name {
			return &w.MCPServers[i]
		}
	}
	return nil
}

// ExpandEnv replaces each ${NAME} in s (NAME: a letter or _, then letters,
// digits or _) with lookup(NAME); "$${" stands for a literal "${", and any
// other "$" is kept. mcp_servers env and headers values are expanded this
// way when a server starts, so that secrets stay out of world-config.yaml.
// Errors: a "${" without a valid name and closing "}", or a name lookup
// does not know (the error names the variable, never a value).
func ExpandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // "$${": a literal "${"
			b.WriteString(s[:i-1])
			b.WriteString("${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("unclosed ${ (write $${ for a literal ${)")
		}
		name := s[i+2 : i+2+end]
		if !validEnvName(name) {
			return "", fmt.Errorf("${%s}: not a variable name (letters, digits and _, not starting with a digit)", clipName(name))
		}
		if lookup == nil {
			b.WriteString("x") // syntax check only
		} else {
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("${%s} is not set in armory's environment", name)
			}
			b.WriteString(v)
		}
		s = s[i+3+end:]
	}
}

func validEnvName(n string) bool {
	if n == "" || len(n) > 256 {
		return false
	}
	for i, c := range n {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

func clipName(n string) string {
	if len(n) > 40 {
		return n[:40] + "…"
	}
	return n
}

// checkExpand reports the values of m whose ${NAME} references are
// malformed (they are expanded when the server starts).
func (r nodeReader) checkExpand(m map[string]string, line int, what string, bad *bool) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if _, err := ExpandEnv(m[k], nil); err != nil {
			r.ds.Errorf(r.file, line, "%s.%s: %v", what, k, err)
			*bad = true
		}
	}
}

// SkillMCPFile is the file of a skill pack that makes it an MCP server's
// skill: one server definition with the keys of a world-config.yaml
// mcp_servers entry.
const SkillMCPFile = "mcp-server.yaml"

// ParseSkillMCPServer parses a skill pack's mcp-server.yaml: the server
// named name (the skill's), with the keys of an mcp_servers entry. A
// relative program path (with a slash) is taken relative to the pack
// folder dir. Unlike the world's servers, a skill's server takes no value
// from the server's environment (no ${VAR}: a pack an agent proposed must
// not carry the server's secrets to a program of its choosing), and a
// command server without a sandbox key runs confined (sandbox: true). It
// returns nil when the definition cannot be used; problems go to ds.
func ParseSkillMCPServer(file, dir, name string, data []byte, ds *Diagnostics) *MCPServer {
	r := nodeReader{file: file, ds: ds}
	root := parseYAML(file, data, ds)
	if root == nil {
		return nil
	}
	hasSandbox := false
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "sandbox" {
			hasSandbox = true
		}
	}
	key := &yamlNode{Kind: yaml.ScalarNode, Value: name, Line: root.Line}
	w := &World{}
	before := len(ds.Errors())
	w.parseMCPServers(r, &yamlNode{Kind: yaml.MappingNode, Line: root.Line, Content: []*yamlNode{key, root}})
	if len(ds.Errors()) > before || len(w.MCPServers) != 1 {
		return nil
	}
	s := w.MCPServers[0]
	for k, v := range s.Env {
		if strings.Contains(v, "${") {
			ds.Errorf(file, root.Line, "env.%s: a skill's server takes no value from the server's environment (%q); give the value itself, or declare the server in world-config.yaml mcp_servers", k, v)
			return nil
		}
	}
	for k, v := range s.Headers {
		if strings.Contains(v, "${") {
			ds.Errorf(file, root.Line, "headers.%s: a skill's server takes no value from the server's environment (%q); give the value itself, or declare the server in world-config.yaml mcp_servers", k, v)
			return nil
		}
	}
	if len(s.Command) > 0 {
		if c := s.Command[0]; strings.Contains(c, "/") && !filepath.IsAbs(c) {
			s.Command[0] = filepath.Join(dir, c)
		}
		if !hasSandbox {
			s.Sandbox = &MCPSandbox{}
		}
	}
	return &s
}
