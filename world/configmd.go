package world

import (
	"bufio"
	"bytes"
	"slices"
	"strings"
)

// Item is one "- value" line of a config.md section.
type Item struct {
	Value string
	Line  int
}

// KV is one "key: value" line of a config.md section.
type KV struct {
	Key   string
	Value string
	Line  int
}

// Section is a "## Heading" of config.md with its list items and key/value
// lines, in file order. Prose lines are ignored.
type Section struct {
	Name  string // heading text as written
	Line  int
	Items []Item
	KVs   []KV
}

// Get returns the value of key (case-insensitive) and whether it is set.
func (s *Section) Get(key string) (string, bool) {
	for _, kv := range s.KVs {
		if strings.EqualFold(kv.Key, key) {
			return kv.Value, true
		}
	}
	return "", false
}

// ToolboxRef is a "## Toolbox" declaration: a toolbox file and the tools of it
// the agent uses (short names, as written in toolbox.yaml).
type ToolboxRef struct {
	Source string // as written, relative to the world folder
	Line   int
	Tools  []Item
}

// Switch is one line of "## Toolkits": a toolkit or tool name and a boolean.
type Switch struct {
	Name string
	On   bool
	Line int
}

// AgentConfig is the machine-readable part of an archetype: config.md. It is
// never sent to a model.
type AgentConfig struct {
	File string // path relative to the world folder

	// HasToolAccess is true when config.md has a "## Tool Access" section.
	HasToolAccess bool
	Groups        []Item // privilege_groups
	Overrides     []Item // list items of "## Tool Access"

	Toolboxes []ToolboxRef

	Toolkits []Switch // "## Toolkits"

	// HasTools is true when config.md has a "## Tools" section (the legacy
	// allow-list).
	HasTools bool
	Tools    []Item

	// Sections holds every other section (provider, model, limits, skills,
	// permissions …) for later use, keyed by lower-case heading.
	Sections map[string]*Section

	// Skills are the skill packs its agents hold from the start ("##
	// Skills", checked against the world's skills when the world loads).
	Skills []Item

	// Policy is read from "## Permissions", "## Capabilities" and "## Limits".
	Policy AgentPolicy
}

// KnownSections are the "## " sections of config.md (matched without
// regard to case): those
// Armory reads and those kept for the agent framework (provider, model,
// skills). Any other section is warned about, with the nearest name.
var KnownSections = []string{"Tool Access", "Toolbox", "Toolboxes", "Toolkits", "Tools", "Permissions", "Capabilities", "Limits", "Roots", "Sandbox", "Network", "Provider", "Model", "Skills"}

// Limits of config.md parsing.
const (
	maxConfigMDSize = 1 << 20 // bytes
	maxLineLen      = 64 << 10
)

// ParseConfigMD parses config.md content. file names it in diagnostics.
// Problems are appended to ds; the returned config holds whatever parsed.
// It never panics, whatever the input.
func ParseConfigMD(file string, data []byte, ds *Diagnostics) *AgentConfig {
	cfg := &AgentConfig{File: file, Sections: map[string]*Section{}}
	if len(data) > maxConfigMDSize {
		ds.Errorf(file, 0, "file is %d bytes; the limit is %d", len(data), maxConfigMDSize)
		return cfg
	}
	var sections []*Section
	var cur *Section
	inFence := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxLineLen)
	line := 0
	for sc.Scan() {
		line++
		raw := sc.Text()
		t := strings.TrimSpace(raw)
		if strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			inFence = !inFence
			continue
		}
		if inFence || t == "" || strings.HasPrefix(t, "<!--") {
			continue
		}
		if strings.HasPrefix(t, "#") {
			level := len(t) - len(strings.TrimLeft(t, "#"))
			name := strings.TrimSpace(t[level:])
			if level == 1 {
				cur = nil // document title: no section
				continue
			}
			cur = &Section{Name: name, Line: line}
			sections = append(sections, cur)
			continue
		}
		if cur == nil {
			continue // prose before the first section
		}
		if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || t == "-" || t == "*" {
			v := cleanValue(t[1:])
			if v == "" {
				ds.Errorf(file, line, "empty list item in section %q", cur.Name)
				continue
			}
			cur.Items = append(cur.Items, Item{Value: v, Line: line})
			continue
		}
		if k, v, ok := strings.Cut(t, ":"); ok && isKey(strings.TrimSpace(k)) {
			cur.KVs = append(cur.KVs, KV{Key: strings.TrimSpace(k), Value: cleanValue(v), Line: line})
			continue
		}
		// Prose inside a section is allowed (and ignored) except in the
		// sections that decide access, where a stray line is likely a typo.
		if isAccessSection(cur.Name) {
			ds.Errorf(file, line, "section %q: expected \"- name\" or \"key: value\", got %q", cur.Name, truncate(t, 80))
		}
	}
	if err := sc.Err(); err != nil {
		ds.Errorf(file, line+1, "line too long (limit %d bytes)", maxLineLen)
	}
	if inFence {
		ds.Warnf(file, line, "unclosed ``` code fence: the rest of the file was ignored")
	}

	seen := map[string]int{}
	for _, s := range sections {
		key := strings.ToLower(s.Name)
		switch key {
		case "tool access":
			if prev, dup := seen[key]; dup {
				ds.Errorf(file, s.Line, "second \"## Tool Access\" section (first at line %d)", prev)
				continue
			}
			cfg.HasToolAccess = true
			for _, kv := range s.KVs {
				switch strings.ToLower(kv.Key) {
				case "privilege_groups", "groups":
					for _, g := range splitList(kv.Value) {
						cfg.Groups = append(cfg.Groups, Item{Value: g, Line: kv.Line})
					}
				default:
					ds.Errorf(file, kv.Line, "section \"Tool Access\": unknown key %q%s (known: privilege_groups)", kv.Key, didYouMean(kv.Key, []string{"privilege_groups"}))
				}
			}
			cfg.Overrides = append(cfg.Overrides, s.Items...)
		case "toolbox", "toolboxes":
			var ref *ToolboxRef
			// Items and keys interleave: a source: line starts a new ref.
			items, kvs := s.Items, s.KVs
			for len(items) > 0 || len(kvs) > 0 {
				if len(kvs) > 0 && (len(items) == 0 || kvs[0].Line < items[0].Line) {
					kv := kvs[0]
					kvs = kvs[1:]
					if !strings.EqualFold(kv.Key, "source") {
						ds.Errorf(file, kv.Line, "section \"Toolbox\": unknown key %q (known: source)", kv.Key)
						continue
					}
					if kv.Value == "" {
						ds.Errorf(file, kv.Line, "section \"Toolbox\": source is empty")
					}
					cfg.Toolboxes = append(cfg.Toolboxes, ToolboxRef{Source: kv.Value, Line: kv.Line})
					ref = &cfg.Toolboxes[len(cfg.Toolboxes)-1]
					continue
				}
				it := items[0]
				items = items[1:]
				if ref == nil {
					ds.Errorf(file, it.Line, "section \"Toolbox\": tool %q listed before any \"source:\" line", it.Value)
					continue
				}
				ref.Tools = append(ref.Tools, it)
			}
		case "toolkits":
			for _, kv := range s.KVs {
				on, ok := parseBool(kv.Value)
				if !ok {
					ds.Errorf(file, kv.Line, "section \"Toolkits\": %s: want true or false, got %q", kv.Key, kv.Value)
					continue
				}
				cfg.Toolkits = append(cfg.Toolkits, Switch{Name: kv.Key, On: on, Line: kv.Line})
			}
			for _, it := range s.Items {
				ds.Errorf(file, it.Line, "section \"Toolkits\": want \"name: true|false\", got \"- %s\"", it.Value)
			}
		case "tools":
			cfg.HasTools = true
			cfg.Tools = append(cfg.Tools, s.Items...)
			for _, kv := range s.KVs {
				ds.Errorf(file, kv.Line, "section \"Tools\": want \"- tool.name\", got %q", kv.Key+": "+kv.Value)
			}
		default:
			if !slices.ContainsFunc(KnownSections, func(k string) bool { return strings.EqualFold(k, key) }) {
				ds.Warnf(file, s.Line, "unknown section %q%s; it is ignored (known sections: %s)", s.Name, didYouMean(key, KnownSections), strings.Join(KnownSections, ", "))
			}
			if prev, dup := cfg.Sections[key]; dup {
				prev.Items = append(prev.Items, s.Items...)
				prev.KVs = append(prev.KVs, s.KVs...)
				continue
			}
			cfg.Sections[key] = s
		}
		seen[key] = s.Line
	}
	cfg.Policy = parseAgentPolicy(cfg, ds)
	return cfg
}

func isAccessSection(name string) bool {
	switch strings.ToLower(name) {
	case "tool access", "toolbox", "toolboxes", "toolkits", "tools":
		return true
	}
	return false
}

// isKey accepts identifiers and tool names as keys: no spaces, not empty.
func isKey(k string) bool {
	if k == "" || len(k) > 128 {
		return false
	}
	return !strings.ContainsAny(k, " \t")
}

// cleanValue trims a value, drops a trailing " # comment" and surrounding
// backticks (people write `tool.name` in markdown).
func cleanValue(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	if len(s) >= 2 && s[0] == '`' && s[len(s)-1] == '`' {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	return s
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = cleanValue(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	return false, false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
