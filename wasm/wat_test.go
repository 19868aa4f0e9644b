package wasm

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// A few helpers to write WebAssembly binaries by hand, for modules no
// compiler would make.

func leb(v uint32) []byte { return appendU32(nil, v) }

// sleb encodes a signed LEB128.
func sleb(v int32) []byte {
	var out []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(out, c)
		}
		out = append(out, c|0x80)
	}
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func vec(items ...[]byte) []byte { return cat(leb(uint32(len(items))), cat(items...)) }

func name(s string) []byte { return cat(leb(uint32(len(s))), []byte(s)) }

func section(id byte, payload ...[]byte) []byte {
	p := cat(payload...)
	return cat([]byte{id}, leb(uint32(len(p))), p)
}

func module(sections ...[]byte) []byte {
	return cat([]byte("\x00asm\x01\x00\x00\x00"), cat(sections...))
}

// Sections of a module whose functions all take and return nothing.
var (
	voidType = section(1, vec([]byte{0x60, 0x00, 0x00}))
)

func funcs(n int) []byte {
	items := make([][]byte, n)
	for i := range items {
		items[i] = leb(0)
	}
	return section(3, vec(items...))
}

func exportStart(idx uint32) []byte {
	return section(7, vec(cat(name("_start"), []byte{0x00}, leb(idx))))
}

// code is the code section of functions with no locals and these bodies
// (each without its final end).
func code(bodies ...[]byte) []byte {
	items := make([][]byte, len(bodies))
	for i, b := range bodies {
		fn := cat([]byte{0x00}, b, []byte{0x0b})
		items[i] = cat(leb(uint32(len(fn))), fn)
	}
	return section(10, vec(items...))
}

// command is a module of one function, exported as _start, with body, and
// the extra sections (put in their order).
func command(body []byte, extra ...[]byte) []byte {
	secs := append([][]byte{voidType, funcs(1), exportStart(0), code(body)}, extra...)
	sort.SliceStable(secs, func(i, j int) bool { return secs[i][0] < secs[j][0] })
	return module(secs...)
}

// wasmFile writes bin to a .wasm file in a new folder.
func wasmFile(t testing.TB, bin []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.wasm")
	if err := os.WriteFile(p, bin, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bodies.
var (
	loopForever = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b}   // loop br 0 end
	callSelf    = []byte{0x10, 0x00}                     // call 0
	nothing     = []byte{}                               // returns
	growHuge    = cat([]byte{0x41}, sleb(65535), []byte{ // i32.const 65535
		0x40, 0x00, // memory.grow 0
		0x41, 0x7f, // i32.const -1
		0x46,       // i32.eq
		0x04, 0x40, // if
		0x00, // unreachable
		0x0b, // end
	})
	oneMemory = section(5, vec([]byte{0x00, 0x01})) // min 1 page, no maximum
)

// echoModule is a WASI command with no language runtime: it copies up to
// 1 KiB of stdin to stdout (one fd_read, one fd_write) — what a call costs
// without the start-up of a language's runtime inside the module.
func echoModule() []byte {
	i32 := func(v int32) []byte { return cat([]byte{0x41}, sleb(v)) }
	store := []byte{0x36, 0x02, 0x00} // i32.store align=4
	load := []byte{0x28, 0x02, 0x00}  // i32.load align=4
	body := cat(
		i32(0), i32(16), store, // iovec.buf = 16
		i32(4), i32(1024), store, // iovec.len = 1024
		i32(0), i32(0), i32(1), i32(8), []byte{0x10, 0x00, 0x1a}, // fd_read(0, iov, 1, &n); drop
		i32(4), i32(8), load, store, // iovec.len = n
		i32(1), i32(0), i32(1), i32(12), []byte{0x10, 0x01, 0x1a}, // fd_write(1, iov, 1, &n); drop
	)
	fn := cat([]byte{0x00}, body, []byte{0x0b})
	return module(
		section(1, vec([]byte{0x60, 0x04, 0x7f, 0x7f, 0x7f, 0x7f, 0x01, 0x7f}, []byte{0x60, 0x00, 0x00})),
		section(2, vec(cat(name(WASI), name("fd_read"), []byte{0x00, 0x00}), cat(name(WASI), name("fd_write"), []byte{0x00, 0x00}))),
		section(3, vec(leb(1))),
		oneMemory,
		section(7, vec(cat(name("_start"), []byte{0x00}, leb(2)), cat(name("memory"), []byte{0x02}, leb(0)))),
		section(10, vec(cat(leb(uint32(len(fn))), fn))),
	)
}

func TestEchoModule(t *testing.T) {
	r := newRuntime(t, Options{})
	tool := mustTool(t, r, def(wasmFile(t, echoModule())))
	if got := ok(t, call(t, tool, "", op{"op": "echo"})); got != `{"op":"echo"}` {
		t.Fatalf("echo = %q", got)
	}
}
