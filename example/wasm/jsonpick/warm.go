// The set-up of the program's JSON coding (encoding/json's caches for the
// types it decodes and encodes), done before it reads its input: a WASM
// instance that Armory starts ahead of a call (docs/wasm.md, "Instances
// started ahead") has done it by the time its call's arguments arrive, so
// the call pays only for the work itself. Built for the host, the program
// does it too (the benchmark compares the same program).

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
