package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
)

// SyncPolicy says when the file sink forces its writes to stable storage.
type SyncPolicy int

const (
	// SyncAlways (the default): the head file is moved only by Sync (and
	// Close), after the log file is synced, so it never runs ahead of the
	// data; a file is synced before the sink rotates away from it, and a
	// new file is created with its directory fsynced. AppendSealed itself
	// never waits for stable storage: the trail is a copy of the store,
	// whose commits are the durable record (audit/trail syncs in batches).
	SyncAlways SyncPolicy = iota
	// SyncNever leaves flushing to the operating system (records survive a
	// process crash, not an OS crash or power loss) and syncs only on Close.
	// After an OS crash the head may be ahead of the data, which VerifyDir
	// then reports as truncation.
	SyncNever
)

// FileOptions configures a FileSink. The zero value is valid.
type FileOptions struct {
	// MaxRecords is the number of records per file before rotating to the
	// next one (default 1000).
	MaxRecords int
	// Sync is the fsync policy (default SyncAlways).
	Sync SyncPolicy
	// MaxLine is the longest JSON line, in bytes, that the sink writes and
	// that readers accept (default 1 MiB, minimum 64 KiB). A record that
	// would be longer is shrunk before it is sealed: its Args become a JSON
	// string holding a cut of their text, and Result and Justification are
	// cut at MaxSummary.
	MaxLine int
}

func (o FileOptions) withDefaults() FileOptions {
	if o.MaxRecords <= 0 {
		o.MaxRecords = 1000
	}
	if o.MaxLine <= 0 {
		o.MaxLine = 1 << 20
	}
	if o.MaxLine < 64<<10 {
		o.MaxLine = 64 << 10
	}
	return o
}

// File names in a sink directory.
const (
	HeadFile = "audit.head"
	lockFile = "audit.lock"
	headSize = 255 // the head file is one fixed-size line, rewritten in place
)

var logName = regexp.MustCompile(`^audit-([0-9]{6,})\.jsonl$`)

// LogFileName returns the name of the n-th log file (1-based).
func LogFileName(n int) string { return fmt.Sprintf("audit-%06d.jsonl", n) }

// ErrClosed is returned by a FileSink used after Close.
var ErrClosed = errors.New("audit: sink closed")

// ErrLocked is returned (wrapped) by OpenFile when another FileSink, in this
// process or another one, holds the directory.
var ErrLocked = errors.New("directory in use by another writer")

// FileSink writes copies of sealed records (the store's, see AppendSealed)
// as JSON lines to <dir>/audit-000001.jsonl, rotating to audit-000002.jsonl
// after MaxRecords records, and so on. The chain continues across files:
// the first record of a file has as PrevHash the Hash of the last record of
// the previous file. The head (last Seq and Hash) is kept in
// <dir>/audit.head (see SyncPolicy), so that VerifyDir detects a truncated
// or deleted tail.
//
// One process owns a directory at a time (an exclusive lock on
// <dir>/audit.lock, where the platform supports it). A FileSink is safe for
// concurrent use; its writes are serialized.
type FileSink struct {
	mu      sync.Mutex
	dir     string
	opts    FileOptions
	lock    *os.File
	headF   *os.File
	f       *os.File
	fileNum int // number of the current file, 0 before the first
	inFile  int // records in the current file
	head    Head
	err     error // sticky write error; the sink must be reopened
	closed  bool
	buf     bytes.Buffer
}

// OpenFile opens (creating it and dir when needed) the sink in dir and
// resumes the chain after its last record. A final line without its newline
// (a write torn by a crash, never acknowledged) is cut off. OpenFile
// returns a *ChainError when the files end before the recorded head (a
// truncated trail: appending would hide the truncation), and an error when
// another FileSink holds the directory. It does not verify the whole chain;
// use VerifyDir.
func OpenFile(dir string, opts FileOptions) (*FileSink, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: open sink: %w", err)
	}
	s := &FileSink{dir: dir, opts: opts}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: open sink: %w", err)
	}
	if err := lockExclusive(lock); err != nil {
		lock.Close()
		return nil, fmt.Errorf("audit: open sink %s: %w: %w", dir, ErrLocked, err)
	}
	s.lock = lock
	if err := s.resume(); err != nil {
		s.closeFiles()
		return nil, err
	}
	return s, nil
}

func (s *FileSink) resume() error {
	nums, err := logFiles(s.dir)
	if err != nil {
		return err
	}
	recorded, err := readHead(s.dir)
	if err != nil {
		return err
	}
	// Find the last record: walk back over empty files.
	for i := len(nums) - 1; i >= 0; i-- {
		path := filepath.Join(s.dir, LogFileName(nums[i]))
		last, count, err := repairTail(path, s.opts.MaxLine)
		if err != nil {
			return err
		}
		if i == len(nums)-1 {
			s.fileNum, s.inFile = nums[i], count
		}
		if last != nil {
			s.head = Head{Seq: last.Seq, Hash: last.Hash}
			break
		}
	}
	if recorded.Seq > s.head.Seq {
		return &ChainError{Seq: s.head.Seq + 1, Reason: fmt.Sprintf("trail truncated: recorded head is seq %d, files end at seq %d", recorded.Seq, s.head.Seq)}
	}
	if recorded.Seq == s.head.Seq && recorded.Hash != s.head.Hash {
		return &ChainError{Seq: s.head.Seq, Reason: "hash differs from the recorded head"}
	}
	hf, err := os.OpenFile(filepath.Join(s.dir, HeadFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("audit: open sink: %w", err)
	}
	s.headF = hf
	if s.fileNum > 0 {
		f, err := os.OpenFile(filepath.Join(s.dir, LogFileName(s.fileNum)), os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("audit: open sink: %w", err)
		}
		s.f = f
	}
	return nil
}

// repairTail scans a log file, cuts off a torn final line, and returns its
// last record and its number of records.
func repairTail(path string, maxLine int) (*Record, int, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: open sink: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	var (
		good  int64 // offset after the last complete line
		count int
		last  []byte
	)
	for {
		line, err := readLine(br, maxLine)
		if err == io.EOF {
			break
		}
		if errors.Is(err, errTorn) {
			if terr := f.Truncate(good); terr != nil {
				return nil, 0, fmt.Errorf("audit: repair torn line in %s: %w", path, terr)
			}
			break
		}
		if err != nil {
			return nil, 0, fmt.Errorf("audit: %s: line %d: %w", path, count+1, err)
		}
		good += int64(len(line)) + 1
		count++
		last = append(last[:0], line...)
	}
	if last == nil {
		return nil, 0, nil
	}
	rec, err := decodeLine(last)
	if err != nil {
		return nil, 0, fmt.Errorf("audit: %s: last line: %w", path, err)
	}
	return rec, count, nil
}

var errTorn = errors.New("final line has no newline")

// readLine returns the next line without its newline. It fails with
// errTooLong when the line exceeds max bytes (without reading it all into
// memory) and with errTorn for a final line without a newline.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(line)+len(frag) > max+1 {
			return nil, fmt.Errorf("line longer than %d bytes", max)
		}
		switch {
		case err == nil:
			if line == nil {
				return frag[:len(frag)-1], nil
			}
			line = append(line, frag[:len(frag)-1]...)
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, frag...)
		case err == io.EOF:
			if len(line)+len(frag) == 0 {
				return nil, io.EOF
			}
			return nil, errTorn
		default:
			return nil, err
		}
	}
}

func decodeLine(line []byte) (*Record, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	rec := new(Record)
	if err := dec.Decode(rec); err != nil {
		return nil, fmt.Errorf("bad record: %w", err)
	}
	if dec.More() {
		return nil, errors.New("bad record: trailing data")
	}
	return rec, nil
}

func logFiles(dir string) ([]int, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var nums []int
	for _, e := range ents {
		m := logName.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		n, err := strconv.Atoi(m[1])
		if err != nil || n <= 0 {
			continue
		}
		nums = append(nums, n)
	}
	slices.Sort(nums)
	return nums, nil
}

func readHead(dir string) (Head, error) {
	b, err := os.ReadFile(filepath.Join(dir, HeadFile))
	if errors.Is(err, os.ErrNotExist) {
		return Head{}, nil
	}
	if err != nil {
		return Head{}, fmt.Errorf("audit: read head: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return Head{}, nil
	}
	var h Head
	if err := json.Unmarshal(b, &h); err != nil {
		return Head{}, fmt.Errorf("audit: corrupt head file %s: %w", HeadFile, err)
	}
	return h, nil
}

// Head returns the head of the chain: the last appended record's Seq and
// Hash.
func (s *FileSink) Head() Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
}

// AppendSealed appends copies of records another trail already sealed (the
// store's), as they are: their Seq, PrevHash and Hash are kept, and each
// must continue the sink's chain (Seq one past the head, PrevHash the
// head's Hash) and carry the hash of its content, else AppendSealed
// returns a *ChainError and writes nothing of the batch. It does not wait
// for stable storage (Sync does). A record whose line
// would exceed MaxLine is an error (a copy is never shrunk).
func (s *FileSink) AppendSealed(recs []*Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.err != nil {
		return s.err
	}
	head := s.head
	for _, rec := range recs {
		switch {
		case rec.Seq != head.Seq+1:
			return &ChainError{Seq: head.Seq + 1, Reason: fmt.Sprintf("copy: expected seq %d, got seq %d", head.Seq+1, rec.Seq)}
		case rec.PrevHash != head.Hash:
			return &ChainError{Seq: rec.Seq, Reason: "copy: prev_hash does not continue the trail"}
		case rec.ComputeHash() != rec.Hash:
			return &ChainError{Seq: rec.Seq, Reason: "copy: hash does not match the record's content"}
		}
		head = Head{Seq: rec.Seq, Hash: rec.Hash}
	}
	for len(recs) > 0 {
		if s.f == nil || s.inFile >= s.opts.MaxRecords {
			if err := s.rotate(); err != nil {
				s.fail(&ioError{err})
				return s.err
			}
		}
		n := min(len(recs), s.opts.MaxRecords-s.inFile)
		s.buf.Reset()
		for _, rec := range recs[:n] {
			line, err := marshalLine(rec)
			if err != nil {
				return err
			}
			if len(line) > s.opts.MaxLine+1 {
				return fmt.Errorf("audit: record seq %d does not fit in %d bytes", rec.Seq, s.opts.MaxLine)
			}
			s.buf.Write(line)
		}
		if _, err := s.f.Write(s.buf.Bytes()); err != nil {
			s.fail(&ioError{fmt.Errorf("audit: write: %w", err)})
			return s.err
		}
		last := recs[n-1]
		s.head = Head{Seq: last.Seq, Hash: last.Hash}
		s.inFile += n
		if s.opts.Sync == SyncNever {
			if err := s.writeHead(s.head, false); err != nil {
				s.fail(&ioError{err})
				return s.err
			}
		}
		recs = recs[n:]
	}
	return nil
}

// fail makes an I/O error sticky (under mu).
func (s *FileSink) fail(err error) {
	var ioe *ioError
	if errors.As(err, &ioe) {
		s.err = fmt.Errorf("audit: sink failed, reopen it: %w", ioe.err)
	}
}

// ioError marks a failed write or sync, after which the files may hold a
// partial line; other errors (a record that cannot be encoded) leave the
// sink usable.
type ioError struct{ err error }

func (e *ioError) Error() string { return e.err.Error() }
func (e *ioError) Unwrap() error { return e.err }

// marshalLine encodes rec as one JSON line (with its newline).
func marshalLine(rec *Record) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(rec); err != nil {
		return nil, fmt.Errorf("audit: encode record: %w", err)
	}
	return b.Bytes(), nil
}

func (s *FileSink) rotate() error {
	if s.f != nil {
		if s.opts.Sync == SyncAlways {
			if err := s.f.Sync(); err != nil {
				return fmt.Errorf("audit: sync: %w", err)
			}
		}
		if err := s.f.Close(); err != nil {
			return fmt.Errorf("audit: close: %w", err)
		}
		s.f = nil
	}
	next := s.fileNum + 1
	f, err := os.OpenFile(filepath.Join(s.dir, LogFileName(next)), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: rotate: %w", err)
	}
	if s.opts.Sync == SyncAlways {
		if err := syncDir(s.dir); err != nil {
			f.Close()
			return err
		}
	}
	s.f, s.fileNum, s.inFile = f, next, 0
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit: sync dir: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("audit: sync dir: %w", err)
	}
	return nil
}

// writeHead rewrites the fixed-size head line in place (one small write at
// offset 0, atomic in practice on every disk and file system we target).
// Its callers hold mu.
func (s *FileSink) writeHead(head Head, sync bool) error {
	b, _ := json.Marshal(head) // a Head always marshals
	line := make([]byte, headSize+1)
	copy(line, b)
	for i := len(b); i < headSize; i++ {
		line[i] = ' '
	}
	line[headSize] = '\n'
	if _, err := s.headF.WriteAt(line, 0); err != nil {
		return fmt.Errorf("audit: write head: %w", err)
	}
	if sync {
		if err := s.headF.Sync(); err != nil {
			return fmt.Errorf("audit: sync head: %w", err)
		}
	}
	return nil
}

// Sync forces written records and the head to stable storage (useful with
// SyncNever).
func (s *FileSink) Sync() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return s.syncLocked()
}

// syncLocked syncs the log file and writes and syncs the head (under mu).
func (s *FileSink) syncLocked() error {
	if s.f != nil {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("audit: sync: %w", err)
		}
	}
	return s.writeHead(s.head, true)
}

// Close syncs and closes the sink. It is idempotent.
func (s *FileSink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	var err error
	if s.err == nil {
		if err = s.syncLocked(); err != nil {
			s.err = err
		}
	}
	return errors.Join(err, s.closeFiles())
}

func (s *FileSink) closeFiles() error {
	var errs []error
	for _, f := range []*os.File{s.f, s.headF, s.lock} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	s.f, s.headF, s.lock = nil, nil, nil
	return errors.Join(errs...)
}

// ReadError is an unreadable line in a log file.
type ReadError struct {
	File string
	Line int
	Err  error
}

func (e *ReadError) Error() string { return fmt.Sprintf("audit: %s:%d: %v", e.File, e.Line, e.Err) }
func (e *ReadError) Unwrap() error { return e.Err }

// ReadDir streams the records of every log file in dir, in file order and
// line order, holding one line at a time (at most maxLine bytes; 0 means the
// FileOptions default). A line that is too long, not a record, or torn
// yields a *ReadError and ends the iteration.
func ReadDir(dir string, maxLine int) iter.Seq2[*Record, error] {
	maxLine = FileOptions{MaxLine: maxLine}.withDefaults().MaxLine
	return func(yield func(*Record, error) bool) {
		nums, err := logFiles(dir)
		if err != nil {
			yield(nil, err)
			return
		}
		for _, n := range nums {
			name := LogFileName(n)
			if !readFile(filepath.Join(dir, name), name, maxLine, yield) {
				return
			}
		}
	}
}

func readFile(path, name string, maxLine int, yield func(*Record, error) bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return yield(nil, fmt.Errorf("audit: %w", err))
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br, maxLine)
		if err == io.EOF {
			return true
		}
		if err != nil {
			yield(nil, &ReadError{File: name, Line: lineNo, Err: err})
			return false
		}
		rec, err := decodeLine(line)
		if err != nil {
			yield(nil, &ReadError{File: name, Line: lineNo, Err: err})
			return false
		}
		if !yield(rec, nil) {
			return false
		}
	}
}

// VerifyDir verifies the whole chain across every log file in dir and checks
// it against the recorded head (audit.head), so that an edited, deleted,
// duplicated, reordered or unreadable record, a deleted file, and a
// truncated tail are all reported as a *ChainError naming the first broken
// seq. Without a head file a missing tail cannot be detected. It reads one
// line at a time. It may run while a FileSink appends to dir: the head is
// read first and a sink writes data before head, so it then verifies a
// prefix of the growing trail (with SyncNever after an OS crash the head may
// be ahead of the data, which is reported as truncation).
//
// Lines are read as by ReadDir(dir, maxLine). Each record that verifies is
// passed to each (when not nil) in Seq order, so that a caller can compare
// the trail with another copy in the same pass; an error from each ends the
// walk and is returned. VerifyDir returns the head of the records verified.
func VerifyDir(dir string, maxLine int, each func(*Record) error) (Head, error) {
	head, err := readHead(dir)
	if err != nil {
		return Head{}, err
	}
	v := NewVerifier(head)
	for rec, err := range ReadDir(dir, maxLine) {
		if err != nil {
			var re *ReadError
			if errors.As(err, &re) {
				return v.Head(), v.Fail(fmt.Sprintf("unreadable record (%s line %d: %v)", re.File, re.Line, re.Err))
			}
			return v.Head(), err
		}
		if err := v.Add(rec); err != nil {
			return v.Head(), err
		}
		if each != nil {
			if err := each(rec); err != nil {
				return v.Head(), err
			}
		}
	}
	return v.Head(), v.End()
}
