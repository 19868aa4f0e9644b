package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func openSink(t *testing.T, dir string, opts FileOptions) *FileSink {
	t.Helper()
	s, err := OpenFile(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func fill(t *testing.T, s *FileSink, n int) {
	t.Helper()
	for i := range n {
		if err := s.Append(sampleRecord(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

func TestFileSinkRotatesAtExactly1000(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{Sync: SyncNever})
	fill(t, s, 1000)
	if _, err := os.Stat(filepath.Join(dir, "audit-000002.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("second file exists after exactly 1000 records")
	}
	if n := countLines(t, filepath.Join(dir, "audit-000001.jsonl")); n != 1000 {
		t.Fatalf("first file has %d lines", n)
	}
	fill(t, s, 1)
	if n := countLines(t, filepath.Join(dir, "audit-000002.jsonl")); n != 1 {
		t.Fatalf("second file has %d lines", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
}

func TestFileSinkChainAcrossFilesAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxRecords: 10})
	fill(t, s, 25)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: the chain resumes in the last, partly filled file.
	s2 := openSink(t, dir, FileOptions{MaxRecords: 10})
	if h := s2.Head(); h.Seq != 25 {
		t.Fatalf("head after reopen: %+v", h)
	}
	fill(t, s2, 10)
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	wantLines := map[string]int{"audit-000001.jsonl": 10, "audit-000002.jsonl": 10, "audit-000003.jsonl": 10, "audit-000004.jsonl": 5}
	for name, want := range wantLines {
		if got := countLines(t, filepath.Join(dir, name)); got != want {
			t.Fatalf("%s: %d lines, want %d", name, got, want)
		}
	}
	var prev *Record
	for rec, err := range ReadDir(dir, 0) {
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && rec.PrevHash != prev.Hash {
			t.Fatalf("seq %d not linked to %d", rec.Seq, prev.Seq)
		}
		prev = rec
	}
	if prev.Seq != 35 {
		t.Fatalf("last seq %d", prev.Seq)
	}
	first := readLines(t, filepath.Join(dir, "audit-000002.jsonl"))[0]
	var r Record
	if err := json.Unmarshal([]byte(first), &r); err != nil {
		t.Fatal(err)
	}
	if r.Seq != 11 || r.PrevHash == "" {
		t.Fatalf("first record of file 2: seq %d prev %q", r.Seq, r.PrevHash)
	}
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

func writeLines(t *testing.T, path string, lines []string) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.TrimSuffix(l, "\n") + "\n")
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyDirDetectsTampering(t *testing.T) {
	f2 := "audit-000002.jsonl"
	f3 := "audit-000003.jsonl"
	tests := []struct {
		name    string
		tamper  func(t *testing.T, dir string)
		wantSeq int64
		wantMsg string
	}{
		{"intact", func(*testing.T, string) {}, 0, ""},
		{"edit a field", func(t *testing.T, dir string) {
			p := filepath.Join(dir, f2)
			lines := readLines(t, p)
			lines[6] = strings.Replace(lines[6], `"agent":"alice"`, `"agent":"mallory"`, 1)
			writeLines(t, p, lines)
		}, 17, "hash mismatch"},
		{"delete a line", func(t *testing.T, dir string) {
			p := filepath.Join(dir, f2)
			lines := readLines(t, p)
			writeLines(t, p, append(lines[:6:6], lines[7:]...))
		}, 17, "missing"},
		{"swap two lines", func(t *testing.T, dir string) {
			p := filepath.Join(dir, f2)
			lines := readLines(t, p)
			lines[6], lines[7] = lines[7], lines[6]
			writeLines(t, p, lines)
		}, 17, "found seq 18"},
		{"truncate the last file", func(t *testing.T, dir string) {
			p := filepath.Join(dir, f3)
			lines := readLines(t, p)
			writeLines(t, p, lines[:3])
		}, 24, "truncated"},
		{"delete the last file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, f3)); err != nil {
				t.Fatal(err)
			}
		}, 21, "truncated"},
		{"delete a whole middle file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, f2)); err != nil {
				t.Fatal(err)
			}
		}, 11, "records 11..20 missing"},
		{"delete the first file", func(t *testing.T, dir string) {
			if err := os.Remove(filepath.Join(dir, "audit-000001.jsonl")); err != nil {
				t.Fatal(err)
			}
		}, 1, "missing"},
		{"garbage line", func(t *testing.T, dir string) {
			p := filepath.Join(dir, f2)
			lines := readLines(t, p)
			lines[6] = "not json"
			writeLines(t, p, lines)
		}, 17, "unreadable"},
		{"unknown field added", func(t *testing.T, dir string) {
			p := filepath.Join(dir, f2)
			lines := readLines(t, p)
			lines[6] = strings.Replace(lines[6], `{`, `{"note":"x",`, 1)
			writeLines(t, p, lines)
		}, 17, "unreadable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openSink(t, dir, FileOptions{MaxRecords: 10})
			fill(t, s, 26)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			tc.tamper(t, dir)
			err := VerifyDir(dir)
			if tc.wantSeq == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var ce *ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("want ChainError, got %v", err)
			}
			if ce.Seq != tc.wantSeq || !strings.Contains(ce.Reason, tc.wantMsg) {
				t.Fatalf("got %q, want seq %d with %q", err, tc.wantSeq, tc.wantMsg)
			}
		})
	}
}

func TestOpenFileRefusesTruncatedTrail(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxRecords: 10})
	fill(t, s, 15)
	s.Close()
	if err := os.Remove(filepath.Join(dir, "audit-000002.jsonl")); err != nil {
		t.Fatal(err)
	}
	_, err := OpenFile(dir, FileOptions{MaxRecords: 10})
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Seq != 11 {
		t.Fatalf("got %v", err)
	}
}

func TestFileSinkRepairsTornLine(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{})
	fill(t, s, 5)
	s.Close()
	p := filepath.Join(dir, "audit-000001.jsonl")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"torn","seq":6,"ti`) // crash mid-write: no newline
	f.Close()
	s2 := openSink(t, dir, FileOptions{})
	if s2.Head().Seq != 5 {
		t.Fatalf("head %+v", s2.Head())
	}
	fill(t, s2, 2)
	s2.Close()
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
	if n := countLines(t, p); n != 7 {
		t.Fatalf("%d lines", n)
	}
}

func TestFileSinkLineLimit(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxLine: 64 << 10})
	// Many short strings: each under MaxArgString, together far over MaxLine.
	parts := make([]string, 0, 100)
	for range 100 {
		parts = append(parts, strings.Repeat("z", 4000))
	}
	args, _ := json.Marshal(parts)
	rec := sampleRecord(1)
	rec.Args = args
	rec.Result = strings.Repeat("r", 10000)
	if err := s.Append(rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Args) > 64<<10 || !strings.Contains(string(rec.Args), "bytes cut") || len(rec.Result) > MaxSummary {
		t.Fatalf("record not shrunk: args %d bytes, result %d", len(rec.Args), len(rec.Result))
	}
	s.Close()
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
	// A reader never holds more than MaxLine: a longer line is an error at
	// its seq, not an allocation.
	p := filepath.Join(dir, "audit-000001.jsonl")
	big := `{"id":"x","seq":2,"args":"` + strings.Repeat("a", 2<<20) + `"}` + "\n"
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(big)
	f.Close()
	err := VerifyDir(dir)
	var ce *ChainError
	if !errors.As(err, &ce) || ce.Seq != 2 || !strings.Contains(ce.Reason, "longer than") {
		t.Fatalf("got %v", err)
	}
}

func TestFileSinkSingleWriter(t *testing.T) {
	dir := t.TempDir()
	openSink(t, dir, FileOptions{})
	if _, err := OpenFile(dir, FileOptions{}); err == nil {
		t.Fatal("second writer on the same directory was allowed")
	}
}

func TestFileSinkConcurrentAppends(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxRecords: 100, Sync: SyncNever})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				var err error
				if i%2 == 0 {
					err = s.Append(sampleRecord(g*100 + i))
				} else {
					err = s.AppendBatch([]*Record{sampleRecord(i), sampleRecord(i + 1)})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if h := s.Head(); h.Seq != 8*(25+50) {
		t.Fatalf("head %+v", h)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(sampleRecord(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
}

func TestHeadFileIsFixedSize(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{})
	fill(t, s, 3)
	b, err := os.ReadFile(filepath.Join(dir, HeadFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != headSize+1 {
		t.Fatalf("head file is %d bytes", len(b))
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Scan()
	var h Head
	if err := json.Unmarshal(bytes.TrimSpace(sc.Bytes()), &h); err != nil || h != s.Head() {
		t.Fatalf("head %+v vs %+v (%v)", h, s.Head(), err)
	}
}

func TestFileSinkOversizedRecordKeepsSinkUsable(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxLine: 64 << 10})
	rec := sampleRecord(1)
	rec.Agent = strings.Repeat("a", 100<<10) // not a shrinkable field
	if err := s.Append(rec); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("oversized record: %v", err)
	}
	fill(t, s, 3) // the sink still works and the chain has no gap
	s.Close()
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
	if h := s.Head(); h.Seq != 3 {
		t.Fatalf("head %+v", h)
	}
}

// FuzzVerifyDir feeds arbitrary bytes to the JSONL reader and verifier: they
// must never panic, and a trail they accept must be a chain whose records
// all hash to their Hash.
func FuzzVerifyDir(f *testing.F) {
	dir := f.TempDir()
	s, err := OpenFile(dir, FileOptions{Sync: SyncNever})
	if err != nil {
		f.Fatal(err)
	}
	for i := range 3 {
		s.Append(sampleRecord(i))
	}
	s.Close()
	good, _ := os.ReadFile(filepath.Join(dir, "audit-000001.jsonl"))
	f.Add(good)
	f.Add([]byte("{}\n"))
	f.Add([]byte(`{"seq":1}` + "\n" + `{"seq":1}`))
	f.Add([]byte("\n\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "audit-000001.jsonl"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := VerifyDir(d); err != nil {
			return
		}
		var prev Head
		for rec, err := range ReadDir(d, 0) {
			if err != nil {
				t.Fatalf("VerifyDir accepted a trail ReadDir rejects: %v", err)
			}
			if rec.Seq != prev.Seq+1 || rec.PrevHash != prev.Hash || rec.ComputeHash() != rec.Hash {
				t.Fatalf("VerifyDir accepted a broken chain at seq %d", rec.Seq)
			}
			prev = Head{Seq: rec.Seq, Hash: rec.Hash}
		}
	})
}

// The same with SyncAlways and rotation: concurrent appends share syncs,
// across file boundaries, and the trail verifies.
func TestFileSinkConcurrentAppendsSyncAlways(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxRecords: 7})
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 20 {
				var err error
				if i%3 == 0 {
					err = s.AppendNoSync(sampleRecord(g*100 + i))
				} else {
					err = s.Append(sampleRecord(g*100 + i))
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if h, err := readHead(dir); err != nil || h.Seq != 16*20 {
		t.Fatalf("head after close: %+v %v", h, err)
	}
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
}

// Appends that arrive while a sync runs wait for it, and one sync then
// covers all of them: ten appends written while the sync lock is held
// cost at most one sync after it is released (the first waiter's), and
// none returns before.
func TestFileSinkGroupsSyncs(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{})
	fill(t, s, 1)
	s.syncMu.Lock() // a sync in progress
	var returned atomic.Int64
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			if err := s.Append(sampleRecord(i)); err != nil {
				t.Error(err)
			}
			returned.Add(1)
		})
	}
	for s.Head().Seq < 11 {
		runtime.Gosched()
	}
	if n := returned.Load(); n != 0 {
		t.Fatalf("%d appends returned while their sync could not run", n)
	}
	if h, _ := readHead(dir); h.Seq != 1 {
		t.Fatalf("head file moved to %d before the data was synced", h.Seq)
	}
	durable, syncs := s.durable, s.syncs
	s.syncMu.Unlock()
	wg.Wait()
	if h, _ := readHead(dir); h.Seq != 11 || s.durable != 11 || durable != 1 {
		t.Fatalf("after the group sync: head file %+v, durable %d (was %d)", h, s.durable, durable)
	}
	if n := s.syncs - syncs; n != 1 {
		t.Fatalf("%d syncs for ten appends written during one sync, want 1", n)
	}
}

// AppendNoSync returns without waiting for a sync and does not move the
// head file; the next Append's sync covers it.
func TestFileSinkAppendNoSync(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{})
	fill(t, s, 2)
	s.syncMu.Lock() // no sync can run: AppendNoSync must not need one
	if err := s.AppendNoSync(sampleRecord(3)); err != nil {
		t.Fatal(err)
	}
	s.syncMu.Unlock()
	if h, _ := readHead(dir); h.Seq != 2 {
		t.Fatalf("head file at %d after AppendNoSync, want 2 (it must not run ahead of synced data)", h.Seq)
	}
	if err := s.Append(sampleRecord(4)); err != nil {
		t.Fatal(err)
	}
	if h, _ := readHead(dir); h.Seq != 4 || s.durable != 4 {
		t.Fatalf("head file at %+v, durable %d after the next Append, want 4", h, s.durable)
	}
	if err := VerifyDir(dir); err != nil {
		t.Fatal(err)
	}
}
