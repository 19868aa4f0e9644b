package workspace

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"

	"github.com/armory-dev/armory"
	args "github.com/armory-dev/armory/toolargs"
)

// Search is workspace.search: find files by glob (doublestar syntax, e.g.
// "src/**/*.go"; a glob without / matches file names at any depth) and/or
// lines by regular expression (Go RE2 syntax: matching is linear in the
// input, no catastrophic backtracking). Content matches come back as
// "path:line: text". Everything is bounded: SearchMaxEntries
// entries visited, SearchMaxFiles files read,
// SearchFileBytes read per file, max_results results (at most
// SearchMaxResults), SearchLineBytes shown per line.
// Binary files (a NUL byte in the first 8000 bytes), symbolic links and
// .git folders are skipped. Safe for concurrent use.
type Search struct{}

var _ armory.Tool = (*Search)(nil)

func (*Search) Spec() armory.Spec {
	return armory.Spec{
		Name: "workspace.search",
		Description: "Search your workspace (or a granted @project:/@org: folder): files by glob pattern and/or lines by regular expression. " +
			"Content matches come back as path:line: text. Bounded: skips binary files, symbolic links and .git; reads at most 1 MB per file.",
		InputSchema: args.Schema(nil,
			`"pattern":{"type":"string","description":"Regular expression (Go RE2 syntax) searched line by line in file contents. Omit to list the files matching glob."},`+
				`"glob":{"type":"string","description":"File pattern relative to path, e.g. **/*.go or src/*.{ts,tsx}; a pattern without / matches file names at any depth. Default: every file."},`+
				`"path":{"type":"string","description":`+schemaString("Folder to search in. "+wsPathDoc+" Default: the workspace itself.")+`},`+
				`"case_insensitive":{"type":"boolean","description":"Match pattern without regard to case (default false)"},`+
				fmt.Sprintf(`"max_results":{"type":"integer","minimum":1,"maximum":%d,"description":"Most results to return (default %d)"}`, SearchMaxResults, SearchDefaultResults)),
	}
}

func (*Search) Manifest() armory.Manifest {
	return armory.Manifest{Danger: armory.DangerCautious, Capabilities: []armory.Capability{armory.CapReadFS}, Permission: armory.PermAuto, Category: armory.CatFileRead}
}

// searchArgs are the arguments of workspace.search.
type searchArgs struct {
	Pattern         string `json:"pattern"`
	Glob            string `json:"glob"`
	Path            string `json:"path"`
	CaseInsensitive bool   `json:"case_insensitive"`
	MaxResults      *int   `json:"max_results"`
}

// compileSearch validates and compiles the glob and the pattern. The
// returned glob is the one matched against paths relative to the search
// folder; base is its literal leading folder (where the walk can start).
func compileSearch(a *searchArgs) (glob, base string, re *regexp.Regexp, err error) {
	if a.Pattern == "" && a.Glob == "" {
		return "", "", nil, fmt.Errorf("give a pattern (regular expression over contents), a glob (file pattern), or both")
	}
	if len(a.Pattern) > SearchPatternLen || len(a.Glob) > SearchPatternLen {
		return "", "", nil, fmt.Errorf("pattern and glob may be at most %d bytes", SearchPatternLen)
	}
	glob = a.Glob
	if glob == "" {
		glob = "**"
	}
	if strings.HasPrefix(glob, "/") || strings.IndexByte(glob, 0) >= 0 {
		return "", "", nil, fmt.Errorf("glob %q must be relative to the search folder (no leading /)", a.Glob)
	}
	for _, seg := range strings.Split(glob, "/") {
		if seg == ".." || seg == "." {
			return "", "", nil, fmt.Errorf("glob %q may not contain . or .. segments; set path to search another folder", a.Glob)
		}
	}
	if !strings.Contains(glob, "/") {
		glob = "**/" + glob
	}
	if !doublestar.ValidatePattern(glob) {
		return "", "", nil, fmt.Errorf("glob %q is not a valid pattern (check brackets and braces)", a.Glob)
	}
	base, _ = doublestar.SplitPattern(glob)
	if a.Pattern != "" {
		expr := a.Pattern
		if a.CaseInsensitive {
			expr = "(?i)" + expr
		}
		re, err = regexp.Compile(expr)
		if err != nil {
			return "", "", nil, fmt.Errorf("pattern is not a valid regular expression (Go RE2 syntax; no look-around or back-references): %v", err)
		}
	}
	return glob, base, re, nil
}

// Execute runs the search. Failures: KindInvalid (bad arguments, pattern
// or glob), KindNotFound, KindPermission, KindUnavailable, KindTimeout
// when ctx ends. Hitting a bound is not a failure: the result says which
// bound stopped the search.
func (t *Search) Execute(ctx context.Context, inv armory.Invocation) armory.Result {
	const op = "workspace.search"
	var a searchArgs
	if err := args.Decode(op, inv.Args, &a); err != nil {
		return armory.FailErr(err)
	}
	maxResults := SearchDefaultResults
	if a.MaxResults != nil {
		if *a.MaxResults < 1 || *a.MaxResults > SearchMaxResults {
			return armory.Failf(armory.KindInvalid, "max_results must be between 1 and %d", SearchMaxResults)
		}
		maxResults = *a.MaxResults
	}
	glob, base, re, err := compileSearch(&a)
	if err != nil {
		return armory.Failf(armory.KindInvalid, "%v", err)
	}
	tg, err := parseTarget(op, inv.Agent, a.Path)
	if err != nil {
		return armory.FailErr(err)
	}
	start := tg.rel
	if base != "." {
		start = path.Join(tg.rel, base)
	}
	fd, err := openIn(op, tg, start, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NONBLOCK)
	if err != nil {
		if err == unix.ENOENT && base != "." {
			return armory.Result{Success: true, Text: fmt.Sprintf("no files match %q in %s", a.Glob, tg)}
		}
		if err == unix.ENOTDIR && base == "." {
			return armory.Failf(armory.KindInvalid, "%s is not a folder; set path to a folder", tg)
		}
		return armory.FailErr(fsError(op, wsPath{prefix: tg.prefix, dir: tg.dir, rel: start}, err))
	}
	defer unix.Close(fd)

	s := searcher{re: re, glob: glob, max: maxResults, tg: tg}
	// Paths are matched relative to the search folder and shown relative
	// to the root, so they can be passed to workspace.read as they are.
	walkPrefix := ""
	if base != "." {
		walkPrefix = base
	}
	err = walkTree(ctx, fd, walkPrefix, 1, SearchMaxEntries+1, s.visit)
	if err != nil && err != errStopWalk {
		if ctx.Err() != nil {
			return wsCtxFail(op, ctx.Err())
		}
		return armory.FailErr(fsError(op, tg, err))
	}
	return armory.Result{Success: true, Text: s.report(a), Value: map[string]any{
		"results": s.results, "files_scanned": s.files, "entries_visited": s.entries, "truncated": s.stop != "",
	}}
}

// searcher carries the state of one search.
type searcher struct {
	re      *regexp.Regexp
	glob    string
	max     int
	tg      wsPath
	buf     []byte
	out     strings.Builder
	results int
	entries int
	files   int
	binary  int
	cut     int    // files larger than SearchFileBytes
	matched int    // files with at least one result
	stop    string // why the search stopped early, "" if it did not
}

func (s *searcher) visit(e *walkEntry) (bool, error) {
	s.entries++
	if s.entries > SearchMaxEntries {
		s.stop = fmt.Sprintf("visited %d files and folders (the limit); set path or glob to search a smaller part", SearchMaxEntries)
		return false, errStopWalk
	}
	switch e.st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return !strings.EqualFold(e.name, ".git"), nil
	case unix.S_IFREG:
	default:
		return false, nil // links, FIFOs, devices, sockets
	}
	if !doublestar.MatchUnvalidated(s.glob, e.rel) {
		return false, nil
	}
	show := s.tg.show(path.Join(s.tg.rel, e.rel))
	if s.re == nil {
		s.add(show)
		s.matched++
		return false, s.full()
	}
	if s.files >= SearchMaxFiles {
		s.stop = fmt.Sprintf("read %d files (the limit); set path or glob to search fewer files", SearchMaxFiles)
		return false, errStopWalk
	}
	s.files++
	data, ok := s.load(e)
	if !ok {
		return false, nil
	}
	found := false
	for line := 1; len(data) > 0; line++ {
		text := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			text, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		loc := s.re.FindIndex(text)
		if loc == nil {
			continue
		}
		found = true
		s.add(fmt.Sprintf("%s:%d: %s", show, line, excerpt(text, loc[0])))
		if err := s.full(); err != nil {
			s.matched++
			return false, err
		}
	}
	if found {
		s.matched++
	}
	return false, nil
}

// load reads at most SearchFileBytes of a regular file, without
// following links or blocking; ok is false for files that vanished,
// changed type or look binary.
func (s *searcher) load(e *walkEntry) ([]byte, bool) {
	fd, err := unix.Openat(e.dirfd, e.name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, false
	}
	want := min(st.Size, SearchFileBytes)
	if st.Size > SearchFileBytes {
		s.cut++
	}
	if int64(cap(s.buf)) < want {
		s.buf = make([]byte, want)
	}
	n, err := preadFull(fd, s.buf[:want], 0)
	if err != nil {
		return nil, false
	}
	data := s.buf[:n]
	if bytes.IndexByte(data[:min(n, 8000)], 0) >= 0 {
		s.binary++
		return nil, false
	}
	return data, true
}

func (s *searcher) add(line string) {
	if s.results > 0 {
		s.out.WriteByte('\n')
	}
	s.out.WriteString(line)
	s.results++
}

func (s *searcher) full() error {
	if s.results >= s.max {
		s.stop = fmt.Sprintf("reached max_results (%d); narrow the pattern, glob or path, or raise max_results (at most %d)", s.max, SearchMaxResults)
		return errStopWalk
	}
	return nil
}

func (s *searcher) report(a searchArgs) string {
	var b strings.Builder
	if s.results == 0 {
		if s.re != nil {
			fmt.Fprintf(&b, "no matches for %q", a.Pattern)
		} else {
			b.WriteString("no files match")
		}
		if a.Glob != "" {
			fmt.Fprintf(&b, " in files matching %q", a.Glob)
		}
		fmt.Fprintf(&b, " under %s", s.tg)
	} else {
		b.WriteString(s.out.String())
	}
	if s.re != nil {
		fmt.Fprintf(&b, "\n[%d matches in %d files; %d files read]", s.results, s.matched, s.files)
	} else {
		fmt.Fprintf(&b, "\n[%d files]", s.results)
	}
	if s.binary > 0 {
		fmt.Fprintf(&b, "\n[skipped %d binary files]", s.binary)
	}
	if s.cut > 0 {
		fmt.Fprintf(&b, "\n[%d files are larger than %d bytes: only their start was searched]", s.cut, SearchFileBytes)
	}
	if s.stop != "" {
		fmt.Fprintf(&b, "\n[stopped early: %s]", s.stop)
	}
	return b.String()
}

// excerpt returns a matching line for display: without a trailing \r,
// valid UTF-8, and at most SearchLineBytes long, showing the
// match (which starts at byte at) with some context before it.
func excerpt(line []byte, at int) string {
	line = bytes.TrimSuffix(line, []byte{'\r'})
	if len(line) <= SearchLineBytes {
		return strings.ToValidUTF8(string(line), "\uFFFD")
	}
	from := max(0, min(at, len(line))-SearchLineBytes/3)
	for from > 0 && from < len(line) && !utf8.RuneStart(line[from]) {
		from--
	}
	to := min(len(line), from+SearchLineBytes)
	for to < len(line) && to > from && !utf8.RuneStart(line[to]) {
		to--
	}
	var b strings.Builder
	if from > 0 {
		b.WriteString("…")
	}
	b.WriteString(strings.ToValidUTF8(string(line[from:to]), "\uFFFD"))
	if to < len(line) {
		b.WriteString("…")
	}
	return b.String()
}
