package skills

import (
	"archive/tar"
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/netguard"
)

// Defaults and fixed bounds of installing a skill pack.
const (
	defaultMaxDownload  = 32 << 20
	defaultMaxFiles     = 2000
	defaultMaxUnpacked  = 128 << 20
	defaultMaxFileSize  = 32 << 20
	defaultFetchTimeout = 60 * time.Second

	// fetchMaxRedirects is how many redirects an archive download follows.
	fetchMaxRedirects = 5
	// maxSkillDepth is how many path components an entry may have.
	maxSkillDepth = 32
	// maxNameBytes and maxComponentBytes bound an entry's path and each of
	// its components.
	maxNameBytes      = 4096
	maxComponentBytes = 255
	// tarEntryOverhead is the decompressed tar data allowed per entry
	// besides file contents (headers, long names, PAX records, padding).
	// Together with MaxUnpacked it bounds the whole decompressed stream, so
	// huge "skipped" data of folders or refused entries cannot be used to
	// make the unpacker decompress without end.
	tarEntryOverhead = 16 << 10

	// skillFile is the file every skill pack has at its root.
	skillFile = "SKILL.md"

	fetchUserAgent = "Armory skill installer"
)

// Operation names of the errors of this file.
const (
	opFetch  = "skills.fetch"
	opUnpack = "skills.unpack"
	opCopy   = "skills.copy"
)

// fetchOptions bound the install of one skill pack, from an archive URL
// (fetchArchive), from an archive at hand (unpackArchive) or from a local
// folder (copySkillDir). A zero or negative field takes its default, so the
// zero value is the safe default.
type fetchOptions struct {
	// MaxDownload bounds the bytes read from the network (default 32 MiB).
	MaxDownload int64
	// MaxFiles bounds the entries of a pack, files and folders counted
	// alike (default 2000).
	MaxFiles int
	// MaxUnpacked bounds the bytes of all files written, counted as they
	// are decompressed and written, whatever the archive's headers claim
	// (default 128 MiB).
	MaxUnpacked int64
	// MaxFileSize bounds one file, counted the same way (default 32 MiB).
	MaxFileSize int64
	// Timeout bounds a download from the first connect to the last byte
	// (default 60 s).
	Timeout time.Duration
	// Guard is the outbound network policy, the one tool.fetch dials
	// through: every address connected to (redirects included) must pass
	// it. Nil means netguard.New(netguard.Options{}): public addresses only.
	Guard *netguard.Guard
}

// withDefaults returns o with every unset field at its default.
func (o fetchOptions) withDefaults() fetchOptions {
	if o.MaxDownload <= 0 {
		o.MaxDownload = defaultMaxDownload
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = defaultMaxFiles
	}
	if o.MaxUnpacked <= 0 {
		o.MaxUnpacked = defaultMaxUnpacked
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = defaultMaxFileSize
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultFetchTimeout
	}
	if o.Guard == nil {
		o.Guard = netguard.New(netguard.Options{})
	}
	return o
}

// fetchArchive downloads the skill pack archive at rawURL and unpacks it
// into dest (see unpackArchive), which must not exist yet while its parent
// folder must.
//
// Only http and https URLs are accepted. The GET goes through o.Guard's
// transport, so every address dialled, redirects included, passes the
// network policy; at most fetchMaxRedirects redirects are followed, only to
// http(s). A status other than 2xx is an error naming it. The body is read
// into an unlinked temporary file next to dest and capped at
// o.MaxDownload: a longer body is an error. The archive's kind (zip, tar or
// gzip'd tar) is sniffed from its first bytes; the URL, its file name and
// the Content-Type are not trusted. o.Timeout bounds the download.
//
// On any error nothing is left behind: neither dest nor a temporary file or
// folder. Errors are *armory.Error values: KindInvalid (bad URL, not an
// archive, broken archive), KindBlocked (refused by the network policy or
// an unsafe entry), KindTooLarge (a bound), KindTimeout, KindNotFound,
// KindPermission, KindUnavailable (the server), KindConflict (dest exists),
// KindInternal (local I/O).
func fetchArchive(ctx context.Context, rawURL string, dest string, o fetchOptions) error {
	o = o.withDefaults()
	u, err := parseArchiveURL(rawURL)
	if err != nil {
		return err
	}
	if err := checkDest(opFetch, dest); err != nil {
		return err
	}
	if err := o.Guard.CheckURL(u); err != nil {
		return fetchError(ctx, u, err, o.Timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tr := o.Guard.Transport()
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: netguard.CheckRedirect(fetchMaxRedirects)}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return armory.E(opFetch, armory.KindInvalid, fmt.Sprintf("cannot request %s", u.Redacted()), err)
	}
	req.Header.Set("User-Agent", fetchUserAgent)
	req.Header.Set("Accept", "application/zip, application/gzip, application/x-tar, application/octet-stream;q=0.9, */*;q=0.5")
	resp, err := client.Do(req)
	if err != nil {
		return fetchError(ctx, u, err, o.Timeout)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return armory.E(opFetch, statusKind(resp.StatusCode), fmt.Sprintf("the server answered HTTP %d %s for %s; no skill was installed",
			resp.StatusCode, http.StatusText(resp.StatusCode), resp.Request.URL.Redacted()))
	}
	tooLarge := func() error {
		return armory.E(opFetch, armory.KindTooLarge, fmt.Sprintf("the archive at %s is larger than %s, the download limit; no skill was installed",
			u.Redacted(), sizeText(o.MaxDownload)))
	}
	if resp.ContentLength > o.MaxDownload {
		return tooLarge()
	}
	spool, cleanup, err := spoolFile(dest)
	if err != nil {
		return err
	}
	defer cleanup()
	w := &recordingWriter{w: spool}
	n, err := io.Copy(w, io.LimitReader(resp.Body, o.MaxDownload+1))
	if n > o.MaxDownload {
		return tooLarge()
	}
	if w.err != nil {
		return armory.E(opFetch, armory.KindInternal, "cannot store the download", w.err)
	}
	if err != nil {
		return fetchError(ctx, u, err, o.Timeout)
	}
	return unpackArchive(spool, n, dest, o)
}

// parseArchiveURL checks an archive URL: absolute, http or https, with a
// host.
func parseArchiveURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, armory.E(opFetch, armory.KindInvalid, "the archive URL is empty; give an absolute http:// or https:// URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, armory.E(opFetch, armory.KindInvalid, fmt.Sprintf("the archive URL %q does not parse: %v", raw, errors.Unwrap(err)))
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	case "":
		return nil, armory.E(opFetch, armory.KindInvalid, fmt.Sprintf("the archive URL %q has no scheme; give an absolute http:// or https:// URL", u.Redacted()))
	default:
		return nil, armory.E(opFetch, armory.KindInvalid, fmt.Sprintf("the archive URL scheme %q is not supported; only http and https", u.Scheme))
	}
	if u.Hostname() == "" {
		return nil, armory.E(opFetch, armory.KindInvalid, fmt.Sprintf("the archive URL %q has no host", u.Redacted()))
	}
	u.Fragment = ""
	return u, nil
}

// fetchError turns a failed download into an error a model or user can act
// on.
func fetchError(ctx context.Context, u *url.URL, err error, timeout time.Duration) error {
	target := u.Redacted()
	var tm *netguard.TooManyRedirectsError
	var dns *net.DNSError
	if b, ok := netguard.IsBlocked(err); ok {
		return armory.E(opFetch, armory.KindBlocked, fmt.Sprintf("refused to fetch %s: %s; no skill was installed", target, b.Error()))
	}
	switch {
	case errors.As(err, &tm):
		return armory.E(opFetch, armory.KindBlocked, fmt.Sprintf("refused to fetch %s: %s; no skill was installed", target, tm.Error()))
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return armory.E(opFetch, armory.KindTimeout, fmt.Sprintf("no complete download from %s within %s; no skill was installed", target, timeout))
	case errors.Is(ctx.Err(), context.Canceled) || errors.Is(err, context.Canceled):
		return armory.E(opFetch, armory.KindTimeout, fmt.Sprintf("fetching %s was cancelled; no skill was installed", target))
	case errors.As(err, &dns) && dns.IsNotFound:
		return armory.E(opFetch, armory.KindNotFound, fmt.Sprintf("host %s not found; check the archive URL", dns.Name))
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return armory.E(opFetch, armory.KindUnavailable, fmt.Sprintf("cannot fetch %s: %v; no skill was installed", target, err))
}

// statusKind classifies an HTTP status other than 2xx.
func statusKind(status int) armory.Kind {
	switch {
	case status == http.StatusNotFound || status == http.StatusGone:
		return armory.KindNotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return armory.KindPermission
	case status == http.StatusRequestTimeout || status == http.StatusGatewayTimeout:
		return armory.KindTimeout
	case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
		return armory.KindInvalid
	}
	return armory.KindUnavailable // 5xx, 429, a redirect without a target
}

// spoolFile creates the temporary file a download is read into, next to
// dest, and unlinks it at once where the system allows, so not even a crash
// leaves it behind. cleanup closes (and if need be removes) it.
func spoolFile(dest string) (*os.File, func(), error) {
	f, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".download-*")
	if err != nil {
		return nil, nil, armory.E(opFetch, armory.KindInternal, fmt.Sprintf("cannot create a temporary file next to %s", dest), err)
	}
	removed := os.Remove(f.Name()) == nil
	return f, func() {
		f.Close()
		if !removed {
			os.Remove(f.Name())
		}
	}, nil
}

// checkDest refuses a dest that exists or whose parent folder does not.
func checkDest(op, dest string) error {
	if dest == "" {
		return armory.E(op, armory.KindInvalid, "no destination folder given")
	}
	if _, err := os.Lstat(dest); err == nil {
		return armory.E(op, armory.KindConflict, fmt.Sprintf("%s already exists; a skill pack is installed into a new folder", dest))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return armory.E(op, armory.KindInternal, fmt.Sprintf("cannot check %s", dest), err)
	}
	parent := filepath.Dir(dest)
	fi, err := os.Stat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return armory.E(op, armory.KindNotFound, fmt.Sprintf("the folder %s to install into does not exist", parent))
	case err != nil:
		return armory.E(op, armory.KindInternal, fmt.Sprintf("cannot check %s", parent), err)
	case !fi.IsDir():
		return armory.E(op, armory.KindInvalid, fmt.Sprintf("%s is not a folder", parent))
	}
	return nil
}

// archiveKind is what sniffArchive recognised.
type archiveKind uint8

const (
	notArchive archiveKind = iota
	zipArchive
	gzipArchive // a gzip stream that must hold a tar archive
	tarArchive
)

// sniffArchive recognises an archive by its first bytes: a zip local file
// header (or the end record of an empty zip), the gzip magic, or the ustar
// magic of a POSIX, PAX or GNU tar header.
func sniffArchive(head []byte) archiveKind {
	switch {
	case bytes.HasPrefix(head, []byte("PK\x03\x04")), bytes.HasPrefix(head, []byte("PK\x05\x06")):
		return zipArchive
	case bytes.HasPrefix(head, []byte{0x1f, 0x8b}):
		return gzipArchive
	case isTarHeader(head):
		return tarArchive
	}
	return notArchive
}

// isTarHeader reports whether head starts with a tar header block.
func isTarHeader(head []byte) bool {
	return len(head) >= 262 && string(head[257:262]) == "ustar"
}

// unpackArchive unpacks the skill pack archive r (size bytes, a zip, a tar
// or a gzip'd tar, recognised from its first bytes) into dest, which must
// not exist yet while its parent folder must.
//
// It unpacks into a temporary folder next to dest (".<name>.tmp-*") and
// renames the result to dest only when everything went well, so on any
// error neither dest nor the temporary folder is left. When every entry
// sits under one top-level folder, that folder is stripped. Entries under
// a top-level __MACOSX/ folder (macOS resource forks) are skipped. A
// SKILL.md file must exist at the root of the result.
//
// The archive is refused, with an error naming the offending entry, for:
// a name that is absolute, has a ".." component, is not valid UTF-8,
// contains a NUL, a backslash or another control character, is longer
// than 4096 bytes (or 255 in one component) or nests deeper than 32
// levels; a symbolic or hard link, a device file, a FIFO or any other
// entry that is not a regular file or a folder; an encrypted zip entry; a
// duplicate entry, or a file where a folder of the same name is (or the
// reverse); more than o.MaxFiles entries; a file beyond o.MaxFileSize or
// all files beyond o.MaxUnpacked. The sizes are counted on the bytes
// actually decompressed, whatever the headers claim. Files are written with
// mode 0644, or 0755 when the archive marks them executable; folders 0755.
// Error kinds as fetchArchive's.
func unpackArchive(r io.ReaderAt, size int64, dest string, o fetchOptions) error {
	o = o.withDefaults()
	if size < 0 {
		return armory.E(opUnpack, armory.KindInvalid, "the archive has a negative size")
	}
	if err := checkDest(opUnpack, dest); err != nil {
		return err
	}
	head := make([]byte, min(size, 512))
	if n, err := r.ReadAt(head, 0); n < len(head) {
		return armory.E(opUnpack, armory.KindInternal, "cannot read the archive", err)
	}
	kind := sniffArchive(head)
	if kind == notArchive {
		what := "empty"
		if size > 0 {
			what = "like " + http.DetectContentType(head)
		}
		return armory.E(opUnpack, armory.KindInvalid, fmt.Sprintf("the content is not a zip, tar or tar.gz archive (it looks %s); no skill was installed", what))
	}
	return installTree(opUnpack, "archive entry", dest, o, true, func(u *unpacker) error {
		if kind == zipArchive {
			return u.unzip(r, size)
		}
		return u.untarStream(io.NewSectionReader(r, 0, size), kind == gzipArchive)
	})
}

// copySkillDir installs the skill pack in the local folder src into dest,
// which must not exist yet while its parent folder must, by the rules of
// unpackArchive: no symbolic link is followed or copied (a link anywhere,
// src itself included, refuses the folder), nor a device file, FIFO or
// socket; the same names, bounds and modes; a temporary folder next to
// dest renamed into place, so on error nothing is left; SKILL.md required
// at the root. No top-level folder is stripped. dest may not lie inside
// src. Error kinds as fetchArchive's, and KindNotFound when src does not
// exist.
func copySkillDir(src, dest string, o fetchOptions) error {
	o = o.withDefaults()
	fi, err := os.Lstat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return armory.E(opCopy, armory.KindNotFound, fmt.Sprintf("the skill folder %s does not exist", src))
	case err != nil:
		return armory.E(opCopy, armory.KindInternal, fmt.Sprintf("cannot read %s", src), err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return armory.E(opCopy, armory.KindBlocked, fmt.Sprintf("%s is a symbolic link; links are not followed, give the folder itself", src))
	case !fi.IsDir():
		return armory.E(opCopy, armory.KindInvalid, fmt.Sprintf("%s is not a folder", src))
	}
	if err := checkDest(opCopy, dest); err != nil {
		return err
	}
	if inside(src, dest) {
		return armory.E(opCopy, armory.KindInvalid, fmt.Sprintf("%s lies inside the skill folder %s; install it elsewhere", dest, src))
	}
	srcRoot, err := os.OpenRoot(src)
	if err != nil {
		return armory.E(opCopy, armory.KindInternal, fmt.Sprintf("cannot open %s", src), err)
	}
	defer srcRoot.Close()
	return installTree(opCopy, "folder entry", dest, o, false, func(u *unpacker) error {
		return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return armory.E(opCopy, armory.KindInternal, fmt.Sprintf("cannot read %s", p), err)
			}
			rel, err := filepath.Rel(src, p)
			if err != nil {
				return armory.E(opCopy, armory.KindInternal, fmt.Sprintf("cannot read %s", p), err)
			}
			if rel == "." {
				return nil
			}
			return u.copyEntry(srcRoot, rel, d)
		})
	})
}

// copyEntry copies one entry of a local folder, rel to its root.
func (u *unpacker) copyEntry(srcRoot *os.Root, rel string, d fs.DirEntry) error {
	name := filepath.ToSlash(rel)
	if err := u.count(); err != nil {
		return err
	}
	p, _, reason := cleanName(name)
	if reason != "" {
		return u.refuse(name, armory.KindBlocked, reason)
	}
	if err := u.checkType(name, d.Type()); err != nil {
		return err
	}
	if d.IsDir() {
		return u.dir(name, p)
	}
	info, err := d.Info()
	if err != nil {
		return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot read %s", name), err)
	}
	f, err := srcRoot.Open(rel)
	if err != nil {
		return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot read %s", name), err)
	}
	defer f.Close()
	// The file opened must be the one walked: not a link swapped in since.
	if opened, err := f.Stat(); err != nil || !opened.Mode().IsRegular() || !os.SameFile(info, opened) {
		return u.refuse(name, armory.KindBlocked, "changed while it was copied")
	}
	return u.file(name, p, f, info.Mode()&0o111 != 0, info.Size())
}

// inside reports whether dest lies inside (or is) src, also through
// symbolic links in their paths.
func inside(src, dest string) bool {
	under := func(a, b string) bool {
		rel, err := filepath.Rel(a, b)
		return err == nil && (rel == "." || filepath.IsLocal(rel))
	}
	as, err1 := filepath.Abs(src)
	ad, err2 := filepath.Abs(dest)
	if err1 != nil || err2 != nil {
		return false
	}
	if under(as, ad) {
		return true
	}
	rs, err1 := filepath.EvalSymlinks(as)
	rp, err2 := filepath.EvalSymlinks(filepath.Dir(ad))
	return err1 == nil && err2 == nil && under(rs, filepath.Join(rp, filepath.Base(ad)))
}

// installTree runs fill on an unpacker writing into a new temporary folder
// next to dest, then checks the result (stripping a lone top-level folder
// when strip is set), requires SKILL.md at its root and renames it to dest.
// Whatever fails, the temporary folder is removed.
func installTree(op, noun, dest string, o fetchOptions, strip bool, fill func(*unpacker) error) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return armory.E(op, armory.KindInternal, fmt.Sprintf("cannot create a temporary folder next to %s", dest), err)
	}
	cleanup := tmp
	defer func() {
		if cleanup != "" {
			os.RemoveAll(cleanup)
		}
	}()
	root, err := os.OpenRoot(tmp)
	if err != nil {
		return armory.E(op, armory.KindInternal, fmt.Sprintf("cannot open %s", tmp), err)
	}
	u := &unpacker{op: op, noun: noun, o: o, root: root, skipMacOS: strip, paths: map[string]pathKind{}, explicit: map[string]bool{}}
	err = fill(u)
	if cerr := root.Close(); err == nil && cerr != nil {
		err = armory.E(op, armory.KindInternal, "cannot close the temporary folder", cerr)
	}
	if err != nil {
		return err
	}
	top := tmp
	if strip {
		entries, err := os.ReadDir(tmp)
		if err != nil {
			return armory.E(op, armory.KindInternal, fmt.Sprintf("cannot read %s", tmp), err)
		}
		if len(entries) == 1 && entries[0].Type().IsDir() {
			top = filepath.Join(tmp, entries[0].Name())
		}
	}
	if err := checkSkillRoot(op, top); err != nil {
		return err
	}
	if err := os.Chmod(top, 0o755); err != nil {
		return armory.E(op, armory.KindInternal, fmt.Sprintf("cannot set the mode of %s", top), err)
	}
	if _, err := os.Lstat(dest); err == nil {
		return armory.E(op, armory.KindConflict, fmt.Sprintf("%s appeared while the skill pack was unpacked; nothing was installed", dest))
	}
	if err := os.Rename(top, dest); err != nil {
		return armory.E(op, armory.KindInternal, fmt.Sprintf("cannot move the skill pack to %s", dest), err)
	}
	if top == tmp {
		cleanup = ""
	}
	return nil
}

// checkSkillRoot requires a regular SKILL.md file at the root of dir.
func checkSkillRoot(op, dir string) error {
	fi, err := os.Lstat(filepath.Join(dir, skillFile))
	if err == nil {
		if !fi.Mode().IsRegular() {
			return armory.E(op, armory.KindInvalid, "SKILL.md at the root of the skill pack is not a regular file; no skill was installed")
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return armory.E(op, armory.KindInternal, "cannot check SKILL.md", err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if strings.EqualFold(e.Name(), skillFile) {
			return armory.E(op, armory.KindInvalid, fmt.Sprintf("the skill pack has %q at its root but the file must be named exactly SKILL.md; no skill was installed", e.Name()))
		}
		names = append(names, e.Name())
	}
	found := "it is empty"
	if len(names) > 0 {
		if len(names) > 10 {
			names = append(names[:10], "…")
		}
		found = "its root holds " + strings.Join(names, ", ")
	}
	return armory.E(op, armory.KindInvalid, fmt.Sprintf("the skill pack has no SKILL.md at its root (%s); no skill was installed", found))
}

// pathKind is what an unpacker wrote at a path.
type pathKind uint8

const (
	dirPath pathKind = iota + 1
	filePath
)

// unpacker writes the entries of one skill pack into a temporary folder
// through an os.Root, which refuses any path escaping it even if a name
// check were to miss one. It counts entries and bytes against the bounds.
type unpacker struct {
	op        string
	noun      string // "archive entry", "folder entry"
	o         fetchOptions
	root      *os.Root
	skipMacOS bool                // skip entries under a top-level __MACOSX/
	paths     map[string]pathKind // every path written, named or implied
	explicit  map[string]bool     // the paths entries named
	entries   int
	written   int64
}

// refuse is the error for an entry, naming it; reason is a clause ("is a
// symbolic link").
func (u *unpacker) refuse(name string, kind armory.Kind, reason string) error {
	return armory.E(u.op, kind, fmt.Sprintf("%s %q %s; no skill was installed", u.noun, name, reason))
}

// count admits one more entry.
func (u *unpacker) count() error {
	u.entries++
	if u.entries > u.o.MaxFiles {
		return armory.E(u.op, armory.KindTooLarge, fmt.Sprintf("the skill pack has more than %d entries (files and folders), the limit; no skill was installed", u.o.MaxFiles))
	}
	return nil
}

// checkType refuses everything but regular files and folders.
func (u *unpacker) checkType(name string, m fs.FileMode) error {
	switch {
	case m&fs.ModeSymlink != 0:
		return u.refuse(name, armory.KindBlocked, "is a symbolic link; a skill pack has no need for links")
	case m&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return u.refuse(name, armory.KindBlocked, "is a device file")
	case m&fs.ModeNamedPipe != 0:
		return u.refuse(name, armory.KindBlocked, "is a FIFO (named pipe)")
	case m&fs.ModeSocket != 0:
		return u.refuse(name, armory.KindBlocked, "is a socket")
	case m.Type()&^fs.ModeDir != 0:
		return u.refuse(name, armory.KindBlocked, "is neither a regular file nor a folder")
	}
	return nil
}

// cleanName checks an entry's name and returns it as a clean relative
// slash path ("" for the root itself), whether it ended in a slash, and
// the reason it is refused ("" when it is not). "." and empty components
// are dropped ("./a//b" is "a/b"); ".." is refused wherever it stands.
func cleanName(name string) (p string, slash bool, reason string) {
	switch {
	case !utf8.ValidString(name):
		return "", false, "is not valid UTF-8"
	case strings.IndexByte(name, 0) >= 0:
		return "", false, "contains a NUL byte"
	case strings.IndexByte(name, '\\') >= 0:
		return "", false, "contains a backslash; archive paths separate folders with / only"
	case strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "", false, "contains a control character"
	case len(name) > maxNameBytes:
		return "", false, fmt.Sprintf("is longer than %d bytes", maxNameBytes)
	case strings.HasPrefix(name, "/"):
		return "", false, "is an absolute path"
	case len(name) >= 2 && name[1] == ':' && ('a' <= name[0]|0x20 && name[0]|0x20 <= 'z'):
		return "", false, "starts with a drive letter (an absolute Windows path)"
	}
	var parts []string
	for c := range strings.SplitSeq(name, "/") {
		switch {
		case c == "" || c == ".":
			continue
		case c == "..":
			return "", false, `has a ".." component, which would leave the skill folder`
		case len(c) > maxComponentBytes:
			return "", false, fmt.Sprintf("has a path component longer than %d bytes", maxComponentBytes)
		}
		parts = append(parts, c)
	}
	if len(parts) > maxSkillDepth {
		return "", false, fmt.Sprintf("is nested deeper than %d levels", maxSkillDepth)
	}
	return strings.Join(parts, "/"), strings.HasSuffix(name, "/"), ""
}

// skip reports whether the entry at p is left out (macOS resource forks).
func (u *unpacker) skip(p string) bool {
	return u.skipMacOS && (p == "__MACOSX" || strings.HasPrefix(p, "__MACOSX/"))
}

// dir creates the folder p (and its parents) for the entry name.
func (u *unpacker) dir(name, p string) error {
	if p == "" {
		return nil // the root itself, as in "./"
	}
	if u.explicit[p] {
		return u.refuse(name, armory.KindInvalid, "appears twice")
	}
	u.explicit[p] = true
	return u.mkdirs(name, p)
}

// mkdirs creates p and every parent of it not created yet, mode 0755.
func (u *unpacker) mkdirs(name, p string) error {
	for i := 0; ; {
		j := strings.IndexByte(p[i:], '/')
		prefix := p
		if j >= 0 {
			prefix = p[:i+j]
		}
		switch u.paths[prefix] {
		case filePath:
			return u.refuse(name, armory.KindInvalid, fmt.Sprintf("needs a folder %q where the pack has a file", prefix))
		case dirPath:
		default:
			if err := u.root.Mkdir(prefix, 0o755); err != nil {
				if errors.Is(err, fs.ErrExist) {
					return u.refuse(name, armory.KindInvalid, fmt.Sprintf("collides with another entry at %q (names differing only in case?)", prefix))
				}
				return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot create the folder %s", prefix), err)
			}
			if err := u.root.Chmod(prefix, 0o755); err != nil {
				return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot set the mode of %s", prefix), err)
			}
			u.paths[prefix] = dirPath
		}
		if j < 0 {
			return nil
		}
		i += j + 1
	}
}

// file writes the file p for the entry name from r, mode 0755 when exec
// is set and 0644 otherwise. declared is the size the archive claims (-1
// when unknown); it refuses early, but the bounds hold on the bytes read.
func (u *unpacker) file(name, p string, r io.Reader, exec bool, declared int64) error {
	if p == "" {
		return u.refuse(name, armory.KindInvalid, "names no file")
	}
	if u.explicit[p] {
		return u.refuse(name, armory.KindInvalid, "appears twice")
	}
	u.explicit[p] = true
	if u.paths[p] == dirPath {
		return u.refuse(name, armory.KindInvalid, "is a file where the pack has a folder of the same name")
	}
	if parent := path.Dir(p); parent != "." {
		if err := u.mkdirs(name, parent); err != nil {
			return err
		}
	}
	fileTooLarge := func() error {
		return u.refuse(name, armory.KindTooLarge, fmt.Sprintf("is larger than %s, the limit for one file", sizeText(u.o.MaxFileSize)))
	}
	totalTooLarge := func() error {
		return u.refuse(name, armory.KindTooLarge, fmt.Sprintf("takes the skill pack beyond %s unpacked, the limit", sizeText(u.o.MaxUnpacked)))
	}
	if declared > u.o.MaxFileSize {
		return fileTooLarge()
	}
	if declared > u.o.MaxUnpacked-u.written {
		return totalTooLarge()
	}
	perm := fs.FileMode(0o644)
	if exec {
		perm = 0o755
	}
	f, err := u.root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return u.refuse(name, armory.KindInvalid, "collides with another entry (names differing only in case?)")
		}
		return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot create %s", p), err)
	}
	defer f.Close()
	u.paths[p] = filePath
	limit := min(u.o.MaxFileSize, u.o.MaxUnpacked-u.written)
	w := &recordingWriter{w: f}
	n, err := io.Copy(w, io.LimitReader(r, limit+1))
	u.written += n
	if n > limit {
		if n > u.o.MaxFileSize {
			return fileTooLarge()
		}
		return totalTooLarge()
	}
	if w.err != nil {
		return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot write %s", p), w.err)
	}
	if err != nil {
		return u.refuse(name, armory.KindInvalid, fmt.Sprintf("cannot be read: %v", err))
	}
	if err := f.Chmod(perm); err != nil {
		return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot set the mode of %s", p), err)
	}
	if err := f.Close(); err != nil {
		return armory.E(u.op, armory.KindInternal, fmt.Sprintf("cannot write %s", p), err)
	}
	return nil
}

// unzip writes the entries of the zip archive r.
func (u *unpacker) unzip(r io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(r, size)
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) { // names are checked below, entry by entry
		return armory.E(u.op, armory.KindInvalid, fmt.Sprintf("the zip archive cannot be read: %v; no skill was installed", err))
	}
	if len(zr.File) > u.o.MaxFiles {
		return armory.E(u.op, armory.KindTooLarge, fmt.Sprintf("the skill pack has %d entries (files and folders), more than the limit of %d; no skill was installed", len(zr.File), u.o.MaxFiles))
	}
	for _, f := range zr.File {
		if err := u.count(); err != nil {
			return err
		}
		p, slash, reason := cleanName(f.Name)
		if reason != "" {
			return u.refuse(f.Name, armory.KindBlocked, reason)
		}
		mode := f.Mode()
		if err := u.checkType(f.Name, mode); err != nil {
			return err
		}
		if u.skip(p) {
			continue
		}
		if mode.IsDir() || slash {
			if err := u.dir(f.Name, p); err != nil {
				return err
			}
			continue
		}
		if f.Flags&0x1 != 0 {
			return u.refuse(f.Name, armory.KindInvalid, "is encrypted")
		}
		declared := int64(math.MaxInt64)
		if f.UncompressedSize64 < math.MaxInt64 {
			declared = int64(f.UncompressedSize64)
		}
		rc, err := f.Open()
		if err != nil {
			return u.refuse(f.Name, armory.KindInvalid, fmt.Sprintf("cannot be read: %v", err))
		}
		err = u.file(f.Name, p, rc, mode&0o111 != 0, declared)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// errStreamLimit ends a decompressed tar stream that grew beyond its bound.
var errStreamLimit = errors.New("the decompressed archive is larger than its limit")

// boundedReader reads at most n bytes of r and then fails with
// errStreamLimit, remembering that it did.
type boundedReader struct {
	r    io.Reader
	n    int64
	over bool
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n <= 0 {
		b.over = true
		return 0, errStreamLimit
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	return n, err
}

// untarStream writes the entries of the tar archive in r, gunzipping it
// first when gz is set. The decompressed stream as a whole is bounded too.
func (u *unpacker) untarStream(r io.Reader, gz bool) error {
	if gz {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return armory.E(u.op, armory.KindInvalid, fmt.Sprintf("the gzip stream cannot be read: %v; no skill was installed", err))
		}
		defer zr.Close()
		r = zr
	}
	bound := u.o.MaxUnpacked + int64(u.o.MaxFiles)*tarEntryOverhead + 1<<20
	b := &boundedReader{r: r, n: bound}
	br := bufio.NewReaderSize(b, 4096)
	overErr := func() error {
		return armory.E(u.op, armory.KindTooLarge, fmt.Sprintf("the tar data decompresses to more than %s, beyond what the limits allow (%s of files, %d entries); no skill was installed",
			sizeText(bound), sizeText(u.o.MaxUnpacked), u.o.MaxFiles))
	}
	if gz {
		head, err := br.Peek(512)
		switch {
		case b.over:
			return overErr()
		case isTarHeader(head):
		case err != nil && err != io.EOF:
			return armory.E(u.op, armory.KindInvalid, fmt.Sprintf("the gzip stream cannot be read: %v; no skill was installed", err))
		default:
			return armory.E(u.op, armory.KindInvalid, "the gzip stream does not hold a tar archive; no skill was installed")
		}
	}
	err := u.untar(br)
	if err == nil && gz {
		// Read to the end of the gzip stream so that its checksum is verified.
		if _, derr := io.Copy(io.Discard, br); derr != nil && !b.over {
			err = armory.E(u.op, armory.KindInvalid, fmt.Sprintf("the gzip stream is corrupt: %v; no skill was installed", derr))
		}
	}
	if b.over {
		return overErr()
	}
	return err
}

// untar writes the entries of the tar stream r.
func (u *unpacker) untar(r io.Reader) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil && !errors.Is(err, tar.ErrInsecurePath) { // names are checked below
			return armory.E(u.op, armory.KindInvalid, fmt.Sprintf("the tar archive cannot be read: %v; no skill was installed", err))
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			continue // archive-wide metadata (a commit id), no entry
		}
		if err := u.count(); err != nil {
			return err
		}
		p, slash, reason := cleanName(hdr.Name)
		if reason != "" {
			return u.refuse(hdr.Name, armory.KindBlocked, reason)
		}
		switch hdr.Typeflag {
		case tar.TypeSymlink:
			return u.refuse(hdr.Name, armory.KindBlocked, fmt.Sprintf("is a symbolic link (to %q); a skill pack has no need for links", hdr.Linkname))
		case tar.TypeLink:
			return u.refuse(hdr.Name, armory.KindBlocked, fmt.Sprintf("is a hard link (to %q); a skill pack has no need for links", hdr.Linkname))
		case tar.TypeChar, tar.TypeBlock:
			return u.refuse(hdr.Name, armory.KindBlocked, "is a device file")
		case tar.TypeFifo:
			return u.refuse(hdr.Name, armory.KindBlocked, "is a FIFO (named pipe)")
		case tar.TypeDir:
			if u.skip(p) {
				continue
			}
			if err := u.dir(hdr.Name, p); err != nil {
				return err
			}
		case tar.TypeReg:
			if slash {
				return u.refuse(hdr.Name, armory.KindInvalid, "is a file whose name ends in a slash")
			}
			if u.skip(p) {
				continue
			}
			if err := u.file(hdr.Name, p, tr, hdr.Mode&0o111 != 0, hdr.Size); err != nil {
				return err
			}
		default:
			return u.refuse(hdr.Name, armory.KindBlocked, fmt.Sprintf("has the unsupported tar entry type %q; a skill pack holds regular files and folders only", hdr.Typeflag))
		}
	}
}

// sizeText writes a byte count for messages: "32 MiB", "512 KiB", "1000 bytes".
func sizeText(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// recordingWriter passes writes on and keeps the first error, telling a
// failed write from a failed read after io.Copy.
type recordingWriter struct {
	w   io.Writer
	err error
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	n, err := w.w.Write(p)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}
