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

// add seals recs after the sink's head, as the store seals its records, and
// appends the copies; with SyncAlways it then syncs, as the trail's
// follower does.
func add(s *FileSink, recs ...*Record) error {
	head := s.Head()
	for _, r := range recs {
		head = r.Seal(head)
	}
	if err := s.AppendSealed(recs); err != nil {
		return err
	}
	if s.opts.Sync == SyncAlways {
		return s.Sync()
	}
	return nil
}

func fill(t *testing.T, s *FileSink, n int) {
	t.Helper()
	for i := range n {
		if err := add(s, sampleRecord(i)); err != nil {
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
	if err := verifyDir(dir); err != nil {
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
	if err := verifyDir(dir); err != nil {
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
			wantChainError(t, verifyDir(dir), tc.wantSeq, tc.wantMsg)
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
	if err := verifyDir(dir); err != nil {
		t.Fatal(err)
	}
	if n := countLines(t, p); n != 7 {
		t.Fatalf("%d lines", n)
	}
}

func TestFileSinkLineLimit(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxLine: 64 << 10})
	fill(t, s, 1)
	s.Close()
	if err := verifyDir(dir); err != nil {
		t.Fatal(err)
	}
	// A reader never holds more than MaxLine: a longer line is an error at
	// its seq, not an allocation.
	p := filepath.Join(dir, "audit-000001.jsonl")
	big := `{"id":"x","seq":2,"args":"` + strings.Repeat("a", 2<<20) + `"}` + "\n"
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(big)
	f.Close()
	err := verifyDir(dir)
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

// Copies of the same records appended from several goroutines (two
// followers racing for one folder would, were the lock not there): each
// seq is written once, every other copy is refused as a chain error, and
// the trail verifies.
func TestFileSinkConcurrentCopies(t *testing.T) {
	dir := t.TempDir()
	s := openSink(t, dir, FileOptions{MaxRecords: 100, Sync: SyncNever})
	var chain []*Record
	var head Head
	for i := range 250 {
		r := sampleRecord(i)
		head = r.Seal(head)
		chain = append(chain, r)
	}
	var wg sync.WaitGroup
	var refused atomic.Int64
	for range 8 {
		wg.Go(func() {
			for i := 0; i < len(chain); i += 5 {
				for s.Head().Seq < int64(i) {
					runtime.Gosched() // wait until the records before this batch are in
				}
				err := s.AppendSealed(chain[i : i+5])
				var ce *ChainError
				switch {
				case errors.As(err, &ce):
					refused.Add(1)
				case err != nil:
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if h := s.Head(); h.Seq != 250 || h.Hash != head.Hash {
		t.Fatalf("head %+v, want seq 250", h)
	}
	if n := refused.Load(); n != 7*50 {
		t.Fatalf("%d copies refused, want %d (each batch written exactly once)", n, 7*50)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := add(s, sampleRecord(1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if err := verifyDir(dir); err != nil {
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
	if err := add(s, rec); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Fatalf("oversized record: %v", err)
	}
	fill(t, s, 3) // the sink still works and the chain has no gap
	s.Close()
	if err := verifyDir(dir); err != nil {
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
		add(s, sampleRecord(i))
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
		if err := verifyDir(d); err != nil {
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
