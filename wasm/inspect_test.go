package wasm

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
)

// dataSegment is an active data segment of memory 0 at off.
func dataSegment(off int32, data []byte) []byte {
	return cat([]byte{0x00, 0x41}, sleb(off), []byte{0x0b}, leb(uint32(len(data))), data)
}

// dataSegments counts the data segments of a binary (-1: no data section).
func dataSegments(t *testing.T, bin []byte) int {
	t.Helper()
	r := &reader{b: bin, off: 8}
	for r.off < len(bin) {
		id, size := r.byte(), r.u32()
		if r.err != nil {
			t.Fatal(r.err)
		}
		if id == 11 {
			return int(r.u32())
		}
		r.off += int(size)
	}
	return -1
}

// memoryAfterInstantiation instantiates bin with wazero (no code run) and
// returns its memory.
func memoryAfterInstantiation(t *testing.T, bin []byte) []byte {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfig().WithCompilationCache(mustCache(t)))
	defer rt.Close(ctx)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	mod, err := rt.InstantiateWithConfig(ctx, bin, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	mem, ok := mod.Memory().Read(0, mod.Memory().Size())
	if !ok {
		t.Fatal("cannot read the memory")
	}
	return bytes.Clone(mem)
}

// Many small data segments are joined into a few, with the same memory
// after instantiation; what could change it is left alone.
func TestDataSegmentsCoalesced(t *testing.T) {
	var segs [][]byte
	// A segment inside the next group's gaps, first in the section: the
	// group is not joined across it.
	segs = append(segs, dataSegment(4, []byte{0xee, 0xee}))
	for i := range 80 {
		segs = append(segs, dataSegment(int32(8*i), []byte{byte(i), 1, 2, byte(i)})) // 4-byte gaps
	}
	for i := range 80 {
		segs = append(segs, dataSegment(int32(2000+10*i), []byte{9, byte(i), 9, byte(i)}))
	}
	segs = append(segs, dataSegment(60000, []byte("far away"))) // past maxDataGap
	bin := command(nothing, oneMemory, section(11, vec(segs...)))
	_, out, err := inspect(bin, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(memoryAfterInstantiation(t, bin), memoryAfterInstantiation(t, out)) {
		t.Fatal("the memory differs after coalescing")
	}
	// The one in the gap, the first of the group (the one in the gap
	// follows it in memory), the rest of the group, the second group, the
	// far one.
	if n := dataSegments(t, out); n != 5 {
		t.Fatalf("%d data segments after coalescing (from %d), want 5", n, len(segs))
	}

	// Kept as they are: overlapping segments, a passive one, an offset
	// that is not a constant, a data count section (code may name
	// segments), too few segments, a memory cap the joined ones exceed.
	many := func(extra ...[]byte) [][]byte {
		var s [][]byte
		for i := range 100 {
			s = append(s, dataSegment(int32(8*i), []byte{1, 2, 3, 4}))
		}
		return append(s, extra...)
	}
	for name, bin := range map[string][]byte{
		"overlap":        command(nothing, oneMemory, section(11, vec(many(dataSegment(2, []byte{7, 7, 7}))...))),
		"passive":        command(nothing, oneMemory, section(11, vec(many(cat([]byte{0x01}, leb(2), []byte{5, 5}))...))),
		"global offset":  command(nothing, oneMemory, section(11, vec(many(cat([]byte{0x00, 0x23, 0x00, 0x0b}, leb(1), []byte{5}))...))),
		"data count":     command(nothing, oneMemory, section(11, vec(many()...)), section(12, leb(100))),
		"few":            command(nothing, oneMemory, section(11, vec(many()[:10]...))),
		"cut short":      command(nothing, oneMemory, section(11, vec(many()...)[:300])),
		"memory cap 512": command(nothing, oneMemory, section(11, vec(many()...))),
	} {
		memCap := int64(1 << 20)
		if name == "memory cap 512" {
			memCap = 512 // less than the joined segments; inspect refuses no initial memory of one page here
			_, out, _ := inspect(bin, 1<<20)
			if dataSegments(t, out) == 100 {
				t.Fatal("the control case was not coalesced")
			}
		}
		_, out, _ := inspect(bin, memCap)
		if out != nil && !bytes.Equal(out, bin) {
			t.Errorf("%s: the data section was rewritten", name)
		}
	}
}

// A Go module's tens of thousands of segments become a few, and its
// memory after instantiation is the same.
func TestGoModuleDataCoalesced(t *testing.T) {
	bin, err := os.ReadFile(probe(t))
	if err != nil {
		t.Fatal(err)
	}
	_, out, err := inspect(bin, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	before, after := dataSegments(t, bin), dataSegments(t, out)
	if before < 1000 || after > 32 {
		t.Fatalf("%d data segments, %d after coalescing", before, after)
	}
	if !bytes.Equal(memoryAfterInstantiation(t, bin), memoryAfterInstantiation(t, out)) {
		t.Fatal("the memory differs after coalescing")
	}
}
