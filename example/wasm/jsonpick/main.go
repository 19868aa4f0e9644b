// Command jsonpick is an example WASM tool (built with GOOS=wasip1
// GOARCH=wasm by scripts/build-wasm). It reads one JSON object on stdin —
// {"json": <a document, or a string holding one>, "file": "path",
// "paths": ["a.b", "items.0.name", "items.*.id"]} — and answers with a JSON
// object on stdout mapping each path to what it picks from the document
// (given inline, or a file of the agent's workspace, seen at /workspace
// when the tool is granted it). A path is dot-separated: object keys,
// array indexes, or * for every element or member. A path that picks
// nothing is listed under "missing". A problem is a message on stderr and
// exit code 1. Built for the host, it takes the request as its first
// argument instead.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Limits.
const (
	maxFile  = 16 << 20 // bytes of a file read
	maxPaths = 64
)

type request struct {
	JSON  json.RawMessage `json:"json"`
	File  string          `json:"file"`
	Paths []string        `json:"paths"`
}

func main() {
	var req request
	var in io.Reader = os.Stdin
	if len(os.Args) > 1 {
		// Built for the host instead, as a toolbox binary tool: the
		// request is the first argument.
		in = strings.NewReader(os.Args[1])
	}
	dec := json.NewDecoder(io.LimitReader(in, 2<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fail("the arguments are not {json, file, paths}: %v", err)
	}
	if len(req.Paths) == 0 || len(req.Paths) > maxPaths {
		fail("give 1 to %d paths, such as \"items.0.name\"", maxPaths)
	}
	var raw []byte
	switch {
	case len(req.JSON) > 0 && req.File != "":
		fail("give json or file, not both")
	case len(req.JSON) > 0:
		raw = req.JSON
		// A document passed as a string of JSON is unwrapped.
		var s string
		if json.Unmarshal(raw, &s) == nil {
			raw = []byte(s)
		}
	case req.File != "":
		b, err := readFile(req.File)
		if err != nil {
			fail("%v", err)
		}
		raw = b
	default:
		fail("give json (the document) or file (a path of the workspace)")
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		fail("the document is not JSON: %v", err)
	}
	picked := map[string]any{}
	missing := []string{}
	for _, p := range req.Paths {
		v, ok := pick(doc, split(p))
		if !ok {
			missing = append(missing, p)
			continue
		}
		picked[p] = v
	}
	sort.Strings(missing)
	out, err := json.Marshal(map[string]any{"picked": picked, "missing": missing})
	if err != nil {
		fail("%v", err)
	}
	os.Stdout.Write(append(out, '\n'))
}

func split(p string) []string {
	p = strings.TrimPrefix(strings.TrimSpace(p), ".")
	if p == "" {
		return nil
	}
	return strings.Split(p, ".")
}

// pick follows path in v. A * step maps the rest of the path over every
// element (or member, in key order) and keeps what it finds.
func pick(v any, path []string) (any, bool) {
	if len(path) == 0 {
		return v, true
	}
	step, rest := path[0], path[1:]
	switch x := v.(type) {
	case map[string]any:
		if step == "*" {
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out := []any{}
			for _, k := range keys {
				if got, ok := pick(x[k], rest); ok {
					out = append(out, got)
				}
			}
			return out, true
		}
		e, ok := x[step]
		if !ok {
			return nil, false
		}
		return pick(e, rest)
	case []any:
		if step == "*" {
			out := []any{}
			for _, e := range x {
				if got, ok := pick(e, rest); ok {
					out = append(out, got)
				}
			}
			return out, true
		}
		i, err := strconv.Atoi(step)
		if err != nil || i < -len(x) || i >= len(x) {
			return nil, false
		}
		if i < 0 {
			i += len(x) // -1 is the last element
		}
		return pick(x[i], rest)
	}
	return nil, false
}

// readFile reads at most maxFile bytes of a file of the workspace.
func readFile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %v (is the folder granted to this tool?)", p, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", p, err)
	}
	if len(b) > maxFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, maxFile)
	}
	return b, nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "jsonpick: "+format+"\n", args...)
	os.Exit(1)
}
