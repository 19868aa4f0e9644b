package world

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	yaml "go.yaml.in/yaml/v3"
)

// maxYAMLSize bounds every YAML file a world holds.
const maxYAMLSize = 4 << 20

// parseYAML parses one YAML document into its root node. It returns nil and
// records an error (with the line yaml reports) when the file does not parse.
// It never panics.
func parseYAML(file string, data []byte, ds *Diagnostics) (root *yaml.Node) {
	if len(data) > maxYAMLSize {
		ds.Errorf(file, 0, "file is %d bytes; the limit is %d", len(data), maxYAMLSize)
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			ds.Errorf(file, 0, "YAML parser failed: %v", r)
			root = nil
		}
	}()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			ds.Errorf(file, 0, "file is empty")
			return nil
		}
		line, msg := yamlErrLine(err)
		ds.Errorf(file, line, "%s", msg)
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		ds.Errorf(file, 0, "file is empty")
		return nil
	}
	root = doc.Content[0]
	if root.Kind != yaml.MappingNode {
		ds.Errorf(file, root.Line, "top level must be a mapping (key: value), got %s", kindName(root))
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		ds.Errorf(file, extra.Line, "more than one YAML document; only one is allowed")
	}
	return root
}

// yamlErrLine pulls "line N:" out of a yaml error message.
func yamlErrLine(err error) (int, string) {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ":"); ok {
			if l, e := strconv.Atoi(n); e == nil {
				return l, strings.TrimSpace(tail)
			}
		}
	}
	return 0, msg
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("the value %q", truncate(n.Value, 40))
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

// node helpers: each records a diagnostic at the node's line when the node
// has the wrong shape, and returns ok=false.
type nodeReader struct {
	file string
	ds   *Diagnostics
}

type pair struct {
	key string
	k   *yaml.Node
	v   *yaml.Node
}

func (r nodeReader) mapping(n *yaml.Node, what string) ([]pair, bool) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true
	}
	if n.Kind != yaml.MappingNode {
		r.ds.Errorf(r.file, n.Line, "%s must be a mapping, got %s", what, kindName(n))
		return nil, false
	}
	seen := map[string]int{}
	var out []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			r.ds.Errorf(r.file, k.Line, "%s: keys must be plain names", what)
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			r.ds.Errorf(r.file, k.Line, "%s: key %q repeated (first at line %d)", what, k.Value, prev)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, pair{key: k.Value, k: k, v: v})
	}
	return out, true
}

func (r nodeReader) str(n *yaml.Node, what string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		r.ds.Errorf(r.file, n.Line, "%s must be a string, got %s", what, kindName(n))
		return "", false
	}
	return n.Value, true
}

func (r nodeReader) boolean(n *yaml.Node, what string) (bool, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!bool" {
		if b, err := strconv.ParseBool(strings.ToLower(n.Value)); err == nil {
			return b, true
		}
	}
	r.ds.Errorf(r.file, n.Line, "%s must be true or false, got %s", what, kindName(n))
	return false, false
}

func (r nodeReader) integer(n *yaml.Node, what string, min, max int64) (int64, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!int" {
		if v, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64); err == nil {
			if v < min || v > max {
				r.ds.Errorf(r.file, n.Line, "%s must be between %d and %d, got %d", what, min, max, v)
				return 0, false
			}
			return v, true
		}
	}
	r.ds.Errorf(r.file, n.Line, "%s must be a whole number, got %s", what, kindName(n))
	return 0, false
}

func (r nodeReader) duration(n *yaml.Node, what string, max time.Duration) (time.Duration, bool) {
	if n.Kind == yaml.ScalarNode {
		d, err := time.ParseDuration(n.Value)
		if err == nil && d > 0 && d <= max {
			return d, true
		}
		if err == nil {
			r.ds.Errorf(r.file, n.Line, "%s must be more than 0 and at most %s, got %s", what, max, d)
			return 0, false
		}
	}
	r.ds.Errorf(r.file, n.Line, "%s must be a duration such as 30s or 2m, got %s", what, kindName(n))
	return 0, false
}

// parsed reads a string value and parses it with parse (armory.ParseDanger
// and the like). A value that does not parse is reported at its line and
// sets *bad; ok is false then and when the value is not a string.
func parsed[T any](r nodeReader, n *yaml.Node, what string, parse func(string) (T, error), bad *bool) (v T, ok bool) {
	s, ok := r.str(n, what)
	if !ok {
		return v, false
	}
	v, err := parse(s)
	if err != nil {
		r.ds.Errorf(r.file, n.Line, "%s: %v", what, err)
		*bad = true
		return v, false
	}
	return v, true
}

// parsedList reads a list of strings (see strList) and parses each entry
// with parse; an entry that does not parse is reported at its line, sets
// *bad and is left out.
func parsedList[T any](r nodeReader, n *yaml.Node, what string, parse func(string) (T, error), bad *bool) []T {
	items, _ := r.strList(n, what)
	var out []T
	for _, it := range items {
		v, err := parse(it.Value)
		if err != nil {
			r.ds.Errorf(r.file, it.Line, "%s: %v", what, err)
			*bad = true
			continue
		}
		out = append(out, v)
	}
	return out
}

// strList accepts a list of strings, or a single string as a list of one.
func (r nodeReader) strList(n *yaml.Node, what string) ([]Item, bool) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true
	}
	if n.Kind == yaml.ScalarNode {
		return []Item{{Value: n.Value, Line: n.Line}}, true
	}
	if n.Kind != yaml.SequenceNode {
		r.ds.Errorf(r.file, n.Line, "%s must be a list, got %s", what, kindName(n))
		return nil, false
	}
	out := make([]Item, 0, len(n.Content))
	ok := true
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode || c.Tag == "!!null" {
			r.ds.Errorf(r.file, c.Line, "%s: each entry must be a name, got %s", what, kindName(c))
			ok = false
			continue
		}
		out = append(out, Item{Value: c.Value, Line: c.Line})
	}
	return out, ok
}

func (r nodeReader) unknownKey(p pair, what string, known []string) {
	r.ds.Errorf(r.file, p.k.Line, "%s: unknown key %q%s (known keys: %s)", what, p.key, didYouMean(p.key, known), strings.Join(known, ", "))
}

type yamlNode = yaml.Node

const yamlSequence = yaml.SequenceNode
