// BenchmarkWarmCallVsSandboxedBinary adds this file to the example
// jsonpick program (go build -overlay): the program then does the set-up
// of its JSON coding (encoding/json's caches for the types it decodes and
// encodes) before it reads its input, so an instance started ahead has
// done it before its call.

package main

import (
	"bytes"
	"encoding/json"
	"strings"
)

func init() {
	var req request
	dec := json.NewDecoder(strings.NewReader(`{"json":{"a":[1,"x"]},"paths":["a.0"]}`))
	dec.DisallowUnknownFields()
	dec.Decode(&req)
	var doc any
	d := json.NewDecoder(bytes.NewReader(req.JSON))
	d.UseNumber()
	d.Decode(&doc)
	json.Marshal(map[string]any{"picked": map[string]any{"a.0": doc}, "missing": []string{"b"}})
}
