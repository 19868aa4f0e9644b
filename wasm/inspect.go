package wasm

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// WASI is the one import module a tool's module may use.
const WASI = "wasi_snapshot_preview1"

// Tables live in the host's memory, outside a module's memory cap (8 bytes
// an entry), and wazero lets a table declared without a maximum grow to
// 2³² entries (32 GiB). A module has at most MaxTables tables, each of at
// most MaxTableEntries entries: a table declared without a maximum, or
// with a larger one, is given MaxTableEntries as its maximum (Go's linker
// declares none), so table.grow fails (-1) past it.
const (
	MaxTables       = 4
	MaxTableEntries = 1 << 20
)

// shape is what inspect reads of a module before wazero compiles it.
type shape struct {
	start bool // exports a function _start
}

// inspect reads the sections of a WebAssembly binary that decide whether
// Armory runs it: only function imports from WASI preview 1, no start
// section (code that would run while an instance is made, outside a
// call), at most MaxTables tables of at most MaxTableEntries entries, at
// most one memory, not shared, not 64-bit, whose initial size fits memCap
// bytes, and an exported function _start. Everything else (the code, the
// types, the rest of the layout) is wazero's to validate. It returns the
// binary to compile: bin, or a copy whose table maxima were bounded and
// whose data segments were coalesced (coalesceData). The error says what
// to change. It never panics on any input.
func inspect(bin []byte, memCap int64) (shape, []byte, error) {
	var s shape
	switch {
	case len(bin) < 8 || !bytes.Equal(bin[:4], []byte("\x00asm")):
		return s, nil, errors.New("is not a WebAssembly module (no \\0asm header)")
	case bin[4] != 1 || bin[5] != 0 || bin[6] != 0 || bin[7] != 0:
		if bin[6] == 1 && bin[7] == 0 {
			return s, nil, errors.New("is a WebAssembly component, not a core module: build it for WASI preview 1 (Go: GOOS=wasip1 GOARCH=wasm; Rust: --target wasm32-wasip1)")
		}
		return s, nil, fmt.Errorf("has WebAssembly version %d; only version 1 modules run", uint32(bin[4])|uint32(bin[5])<<8|uint32(bin[6])<<16|uint32(bin[7])<<24)
	}
	r := &reader{b: bin, off: 8}
	var bad []string
	var splices []splice
	var data *splice
	dataCount := false
	for r.off < len(r.b) {
		secStart := r.off
		id := r.byte()
		size := r.u32()
		if r.err != nil {
			return s, nil, fmt.Errorf("is malformed: a section header is cut short at byte %d", r.off)
		}
		if uint64(size) > uint64(len(r.b)-r.off) {
			return s, nil, fmt.Errorf("is malformed: section %d claims %d bytes, only %d remain", id, size, len(r.b)-r.off)
		}
		sec := &reader{b: r.b[:r.off+int(size)], off: r.off}
		r.off += int(size)
		switch id {
		case 2: // imports
			n := sec.u32()
			for i := uint32(0); i < n && sec.err == nil; i++ {
				mod, name := sec.name(), sec.name()
				kind := sec.byte()
				if sec.err != nil {
					break
				}
				if kind != 0 {
					bad = append(bad, fmt.Sprintf("imports a %s %s.%s (only WASI functions may be imported)", externName(kind), mod, name))
					break // the import's layout depends on its kind
				}
				sec.u32()
				if mod != WASI {
					bad = append(bad, fmt.Sprintf("imports %s.%s (only %s may be imported)", mod, name, WASI))
				}
			}
		case 4: // tables
			n := sec.u32()
			if n > MaxTables {
				bad = append(bad, fmt.Sprintf("declares %d tables; the limit is %d", n, MaxTables))
				break
			}
			payload := appendU32(nil, n)
			rewrite := false
			for i := uint32(0); i < n && sec.err == nil; i++ {
				from := sec.off
				switch t := sec.byte(); t {
				case 0x70, 0x6f: // funcref, externref
				case 0x63, 0x64: // (ref null? heaptype)
					sec.s33()
				case 0x40:
					bad = append(bad, "declares a table with an initializer expression, which is not supported")
					n = 0
					continue
				default:
					bad = append(bad, fmt.Sprintf("declares a table of unknown type 0x%02x", t))
					n = 0
					continue
				}
				payload = append(payload, sec.b[from:sec.off]...)
				flag := sec.byte()
				min := sec.u32()
				max := uint32(MaxTableEntries)
				switch flag {
				case 0x00:
					rewrite = true
				case 0x01:
					if m := sec.u32(); m <= MaxTableEntries {
						max = m
					} else {
						rewrite = true
					}
				default:
					bad = append(bad, fmt.Sprintf("declares a table with limits flag 0x%02x (shared or 64-bit tables are not supported)", flag))
				}
				if min > MaxTableEntries {
					bad = append(bad, fmt.Sprintf("declares a table of %d entries; the limit is %d", min, MaxTableEntries))
				}
				payload = appendU32(appendU32(append(payload, 0x01), min), max)
			}
			if rewrite && sec.err == nil && sec.off == len(sec.b) {
				splices = append(splices, splice{start: secStart, end: sec.off, id: 4, payload: payload})
			}
		case 5: // memories
			n := sec.u32()
			if n > 1 {
				bad = append(bad, fmt.Sprintf("declares %d memories; one is supported", n))
				break
			}
			if n == 1 {
				flag := sec.byte()
				min := sec.u32()
				if flag == 0x01 {
					sec.u32()
				}
				switch {
				case sec.err != nil:
				case flag > 0x01:
					bad = append(bad, fmt.Sprintf("declares a memory with limits flag 0x%02x (shared or 64-bit memories are not supported)", flag))
				case uint64(min)*pageSize > uint64(memCap):
					bad = append(bad, fmt.Sprintf("declares an initial memory of %s, above the tool's memory cap of %s (memory: in toolbox.yaml, at most 1GiB)", sizeName(uint64(min)*pageSize), sizeName(uint64(memCap))))
				}
			}
		case 7: // exports
			n := sec.u32()
			for i := uint32(0); i < n && sec.err == nil; i++ {
				name := sec.name()
				kind := sec.byte()
				sec.u32()
				if name == "_start" && kind == 0 {
					s.start = true
				}
			}
		case 8:
			bad = append(bad, "has a start section (code that runs while an instance is made); a WASI command starts from its exported _start")
		case 11: // data
			if payload := coalesceData(sec.b[sec.off:], memCap); payload != nil {
				data = &splice{start: secStart, end: len(sec.b), id: 11, payload: payload}
			}
			sec.off = len(sec.b)
		case 12: // data count: code may name data segments
			dataCount = true
		}
		if sec.err != nil {
			return s, nil, fmt.Errorf("is malformed: section %d: %v", id, sec.err)
		}
	}
	if !s.start {
		bad = append(bad, "exports no function _start: build it as a WASI command (a main package for GOOS=wasip1, a binary crate for wasm32-wasip1), not a library or reactor")
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return s, nil, errors.New(strings.Join(dedupe(bad), "; "))
	}
	if data != nil && !dataCount {
		splices = append(splices, *data)
	}
	if len(splices) == 0 {
		return s, bin, nil
	}
	// Splice the rewritten sections in place of the declared ones (in the
	// binary's order).
	grow := 0
	for _, sp := range splices {
		grow += len(sp.payload) + 6
	}
	out := make([]byte, 0, len(bin)+grow)
	from := 0
	for _, sp := range splices {
		out = append(out, bin[from:sp.start]...)
		out = append(out, sp.id)
		out = appendU32(out, uint32(len(sp.payload)))
		out = append(out, sp.payload...)
		from = sp.end
	}
	return s, append(out, bin[from:]...), nil
}

// splice is a section rewritten: section id with payload replaces the
// bytes [start, end) of the binary.
type splice struct {
	start, end int
	id         byte
	payload    []byte
}

// Data segments are coalesced when a module has many: instantiating
// copies every active segment into the instance's memory, one by one, and
// a Go module has tens of thousands of small ones (jsonpick: 38,992, with
// a few bytes of padding between), which cost most of the ≈3 ms an
// instance takes to make. Joined with the padding's zeros they are a
// handful.
const (
	// maxDataGap is the widest gap between two segments joined.
	maxDataGap = 256
	// minDataSegments is how many segments a module needs to have them
	// coalesced.
	minDataSegments = 64
)

// coalesceData returns the payload of a data section whose consecutive
// active segments are joined where nothing lies between them but a gap of
// at most maxDataGap bytes (zeros, as the memory is before the segments
// are copied): a segment joins the one before it when it follows it both
// in the section and in memory, with no other segment between. That
// writes the same bytes in the same order. It returns nil (keep the
// section) when there is little to gain, when a segment is passive, has
// an offset that is not a constant, or overlaps another (the order of
// writes would matter), when the section does not parse (wazero says
// why), or when the joined segments would be over twice the section or
// over the memory cap. A section with a data count section beside it is
// kept by the caller: code may then name segments by index.
func coalesceData(sec []byte, memCap int64) []byte {
	type segment struct {
		off  uint64
		data []byte
	}
	r := &reader{b: sec}
	n := r.u32()
	if r.err != nil || n < minDataSegments || uint64(n) > uint64(len(sec))/4 {
		return nil
	}
	segs := make([]segment, n)
	for i := range segs {
		// Active, memory 0, offset (i32.const k), as every compiler of
		// WASI commands writes them.
		if r.u32() != 0 || r.byte() != 0x41 {
			return nil
		}
		off := r.s32()
		if r.byte() != 0x0b {
			return nil
		}
		size := r.u32()
		if r.err != nil || uint64(size) > uint64(len(sec)-r.off) {
			return nil
		}
		segs[i] = segment{off: uint64(uint32(off)), data: sec[r.off : r.off+int(size)]}
		r.off += int(size)
	}
	if r.off != len(sec) {
		return nil
	}
	// The successor of each segment in memory; none may overlap another.
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return segs[order[a]].off < segs[order[b]].off })
	next := make([]int, n)
	for i := range next {
		next[i] = -1
	}
	for i := 0; i+1 < len(order); i++ {
		a, b := segs[order[i]], segs[order[i+1]]
		if a.off+uint64(len(a.data)) > b.off {
			return nil
		}
		next[order[i]] = order[i+1]
	}
	// Runs of segments to join, in the section's order.
	type run struct{ first, last int }
	var runs []run
	total := uint64(0)
	for i := range segs {
		if k := len(runs) - 1; k >= 0 && next[runs[k].last] == i {
			prev := segs[runs[k].last]
			if gap := segs[i].off - prev.off - uint64(len(prev.data)); gap <= maxDataGap {
				total += gap + uint64(len(segs[i].data))
				runs[k].last = i
				continue
			}
		}
		total += uint64(len(segs[i].data))
		runs = append(runs, run{i, i})
	}
	if len(runs) >= int(n)/2 || total > 2*uint64(len(sec)) || total > uint64(memCap) {
		return nil
	}
	out := make([]byte, 0, total+uint64(len(runs))*12+5)
	out = appendU32(out, uint32(len(runs)))
	for _, rn := range runs {
		first, last := segs[rn.first], segs[rn.last]
		size := last.off + uint64(len(last.data)) - first.off
		out = append(out, 0x00, 0x41)
		out = appendS32(out, int32(uint32(first.off)))
		out = append(out, 0x0b)
		out = appendU32(out, uint32(size))
		at := len(out)
		out = append(out, make([]byte, size)...)
		for i := rn.first; i <= rn.last; i++ {
			copy(out[at+int(segs[i].off-first.off):], segs[i].data)
		}
	}
	return out
}

// appendS32 appends v as a signed LEB128.
func appendS32(b []byte, v int32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func appendU32(b []byte, v uint32) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

const pageSize = 64 << 10

func externName(kind byte) string {
	switch kind {
	case 1:
		return "table"
	case 2:
		return "memory"
	case 3:
		return "global"
	case 4:
		return "tag"
	}
	return fmt.Sprintf("kind-%d import", kind)
}

// sizeName writes a byte count as KiB, MiB or GiB.
func sizeName(n uint64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		if n%(1<<20) == 0 {
			return fmt.Sprintf("%dMiB", n>>20)
		}
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

func dedupe(xs []string) []string {
	out := xs[:0]
	for i, x := range xs {
		if i == 0 || x != xs[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// reader reads a section; the first error sticks and every later read
// returns zero.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s cut short or malformed at byte %d", what, r.off)
	}
}

func (r *reader) byte() byte {
	if r.err != nil || r.off >= len(r.b) {
		r.fail("a byte")
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i == 4 && c > 0x0f {
			r.fail("a number")
			return 0
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			return v
		}
	}
	r.fail("a number")
	return 0
}

// s32 reads a signed LEB128 of at most 32 bits.
func (r *reader) s32() int32 {
	var v int32
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		if i == 4 && c&0x80 == 0 && c&0x70 != (c&0x08)*0x0e {
			break // bits past the 32nd that do not repeat its sign
		}
		v |= int32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i < 4 && c&0x40 != 0 {
				v |= -1 << (7 * (i + 1))
			}
			return v
		}
	}
	r.fail("a number")
	return 0
}

// s33 skips a signed LEB128 of at most 33 bits (a heap type).
func (r *reader) s33() {
	for i := 0; i < 5; i++ {
		if c := r.byte(); r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.fail("a heap type")
}

// name reads a length-prefixed UTF-8 name.
func (r *reader) name() string {
	n := r.u32()
	if r.err != nil {
		return ""
	}
	if uint64(n) > uint64(len(r.b)-r.off) {
		r.fail("a name")
		return ""
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return strings.ToValidUTF8(s, "\uFFFD")
}
