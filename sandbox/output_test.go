package sandbox

import (
	"bytes"
	"fmt"
	"testing"
	"testing/iotest"
)

// FuzzCapture checks the output cap on arbitrary data, caps and read
// sizes: the kept bytes are the prefix, the total counts everything, the
// marker counts what was dropped, and progress saw exactly the result.
func FuzzCapture(f *testing.F) {
	f.Add([]byte("hello world"), 5, false)
	f.Add([]byte("short"), 64, true)
	f.Add(bytes.Repeat([]byte{0}, 100000), 65536, false)
	f.Fuzz(func(t *testing.T, data []byte, max int, oneByte bool) {
		if max <= 0 || max > 1<<20 {
			return
		}
		var seen []byte
		sink := &progressSink{fn: func(stream string, chunk []byte) { seen = append(seen, chunk...) }}
		c := newCapture("stdout", max, sink)
		var r = bytes.NewReader(data)
		if oneByte {
			c.drain(iotest.OneByteReader(r))
		} else {
			c.drain(r)
		}
		got := c.result()
		if c.total != int64(len(data)) {
			t.Fatalf("total %d, want %d", c.total, len(data))
		}
		keep := min(max, len(data))
		want := append([]byte(nil), data[:keep]...)
		if len(data) > max {
			want = fmt.Appendf(want, "\n(%d bytes, truncated)", len(data)-max)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("result %q, want %q", got, want)
		}
		if !bytes.Equal(seen, got) {
			t.Fatalf("progress saw %q, result %q", seen, got)
		}
	})
}
