package compact

import "testing"

// BenchmarkExtract measures compaction throughput on realistic streams;
// go test -bench prints MB/s (target: ≥ 500 MB/s).
func BenchmarkExtract(b *testing.B) {
	for _, name := range []string{"cursor_success.ndjson", "cursor_truncated.ndjson", "claude_success.ndjson"} {
		in := readFixture(b, name)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := extract(fixtureTool(name), in); !ok {
					b.Fatal("not recognised")
				}
			}
		})
	}
}

// BenchmarkStream measures the incremental path fed in 4 KiB chunks, as a
// pipe delivers live output.
func BenchmarkStream(b *testing.B) {
	in := readFixture(b, "cursor_success.ndjson")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		s := NewStream("devtools.cursor-agent")
		for rest := in; len(rest) > 0; {
			n := min(4096, len(rest))
			s.Write(rest[:n])
			rest = rest[n:]
		}
		if _, ok := s.Summary(); !ok {
			b.Fatal("not recognised")
		}
	}
}
