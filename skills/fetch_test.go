package skills

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"fmt"
	"hash/crc32"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/armory-dev/armory"
	"github.com/armory-dev/armory/netguard"
)

// entType is the kind of a test archive entry.
type entType uint8

const (
	reg entType = iota
	dir
	symlink
	hardlink
	chardev
	blockdev
	fifo
)

// ent is one entry of a test archive.
type ent struct {
	name string
	body string
	typ  entType
	mode int64  // permission bits; 0 means 0644 (files) or 0755 (folders)
	link string // target of a symlink or hard link
}

func file(name, body string) ent { return ent{name: name, body: body} }
func exe(name, body string) ent  { return ent{name: name, body: body, mode: 0o755} }
func folder(name string) ent     { return ent{name: name, typ: dir} }

func (e ent) perm() int64 {
	switch {
	case e.mode != 0:
		return e.mode
	case e.typ == dir:
		return 0o755
	}
	return 0o644
}

// makeTar builds a tar archive of es (GNU format where a name needs it).
func makeTar(t testing.TB, es ...ent) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Mode: e.perm(), Size: int64(len(e.body)), Linkname: e.link, ModTime: time.Unix(1700000000, 0)}
		switch e.typ {
		case reg:
			h.Typeflag = tar.TypeReg
		case dir:
			h.Typeflag = tar.TypeDir
		case symlink:
			h.Typeflag = tar.TypeSymlink
		case hardlink:
			h.Typeflag = tar.TypeLink
		case chardev:
			h.Typeflag = tar.TypeChar
		case blockdev:
			h.Typeflag = tar.TypeBlock
		case fifo:
			h.Typeflag = tar.TypeFifo
		}
		if e.typ != reg {
			h.Size = 0
		}
		if !utf8Safe(e.name) {
			h.Format = tar.FormatGNU
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("tar header %q: %v", e.name, err)
		}
		if h.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func utf8Safe(s string) bool { return strings.ToValidUTF8(s, "") == s }

func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func makeTgz(t testing.TB, es ...ent) []byte { return gz(t, makeTar(t, es...)) }

// makeZip builds a zip archive of es; types other than files and folders
// are marked with the Unix mode in the external attributes, as zip tools
// do.
func makeZip(t testing.TB, es ...ent) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range es {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		perm := fs.FileMode(e.perm())
		body := e.body
		switch e.typ {
		case reg:
			h.SetMode(perm)
		case dir:
			h.SetMode(fs.ModeDir | perm)
			h.Method = zip.Store
		case symlink, hardlink:
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		case chardev:
			h.SetMode(fs.ModeDevice | fs.ModeCharDevice | perm)
		case blockdev:
			h.SetMode(fs.ModeDevice | perm)
		case fifo:
			h.SetMode(fs.ModeNamedPipe | perm)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatalf("zip header %q: %v", e.name, err)
		}
		if body != "" {
			if _, err := w.Write([]byte(body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// lyingZip builds a zip whose one entry claims to unpack to claimed bytes
// but holds actual zero bytes.
func lyingZip(t testing.TB, name string, claimed uint64, actual int) []byte {
	t.Helper()
	content := make([]byte, actual)
	var comp bytes.Buffer
	fw, err := flate.NewWriter(&comp, flate.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	fw.Write(content)
	fw.Close()
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, CRC32: crc32.ChecksumIEEE(content),
		CompressedSize64: uint64(comp.Len()), UncompressedSize64: claimed}
	h.SetMode(0o644)
	w, err := zw.CreateRaw(h)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(comp.Bytes())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// zeros is n zero bytes as a string, the body of bombs.
func zeros(n int) string { return string(make([]byte, n)) }

// many returns n small files under prefix, and a SKILL.md.
func many(prefix string, n int) []ent {
	es := []ent{file(prefix+"SKILL.md", "# s\n")}
	for i := range n {
		es = append(es, file(fmt.Sprintf("%sf%04d.txt", prefix, i), "x"))
	}
	return es
}

// deep is a file nested in levels folders.
func deep(levels int) string { return strings.Repeat("d/", levels) + "f.txt" }

// assertEmpty fails unless dir holds nothing: no destination, no
// temporary folder, no download spool.
func assertEmpty(t testing.TB, dir string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}

// wantErr checks err's kind and that its text holds every part of want.
func wantErr(t testing.TB, err error, kind armory.Kind, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s error with %q", kind, want)
	}
	if got := armory.KindOf(err); got != kind {
		t.Errorf("kind %s, want %s (%v)", got, kind, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

// unpackInto unpacks data into a new dest under a fresh parent folder; on
// an error it checks that the parent is left empty.
func unpackInto(t testing.TB, data []byte, o fetchOptions) (string, error) {
	t.Helper()
	parent := t.TempDir()
	dest := filepath.Join(parent, "skill")
	err := unpackArchive(bytes.NewReader(data), int64(len(data)), dest, o)
	if err != nil {
		assertEmpty(t, parent)
	}
	return dest, err
}

// tree lists dir as "path mode" lines (files with their content), sorted.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		v := fmt.Sprintf("%v", fi.Mode())
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[filepath.ToSlash(rel)] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t testing.TB, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q, want %q", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected %s (%q)", k, v)
		}
	}
}

// The archives a skill pack arrives in unpack to the pack, a lone
// top-level folder stripped, with the modes of the contract.
func TestUnpackArchiveGood(t *testing.T) {
	packTree := map[string]string{
		"SKILL.md":       "-rw-r--r-- # Pack\n",
		"scripts":        "drwxr-xr-x",
		"scripts/run.sh": "-rwxr-xr-x #!/bin/sh\n",
		"references":     "drwxr-xr-x",
		"references/a":   "-rw-r--r-- A",
		"assets":         "drwxr-xr-x",
	}
	withTop := func(top string) []ent {
		return []ent{
			folder(top),
			file(top+"SKILL.md", "# Pack\n"),
			folder(top + "scripts/"),
			exe(top+"scripts/run.sh", "#!/bin/sh\n"),
			{name: top + "references/a", body: "A", mode: 0o600}, // a parent only implied; 0600 → 0644
			{name: top + "assets/", typ: dir, mode: 0o700},       // 0700 → 0755
		}
	}
	noDirs := []ent{file("SKILL.md", "# Pack\n"), exe("scripts/run.sh", "#!/bin/sh\n"), file("references/a", "A"), folder("assets/")}
	dotted := []ent{folder("./"), file("./SKILL.md", "# Pack\n"), exe("./scripts/run.sh", "#!/bin/sh\n"), file("./references/a", "A"), folder("./assets/")}
	for _, tc := range []struct {
		name string
		data func(t *testing.T) []byte
	}{
		{"zip with a top folder", func(t *testing.T) []byte { return makeZip(t, withTop("pack-1.0/")...) }},
		{"zip without a top folder", func(t *testing.T) []byte { return makeZip(t, noDirs...) }},
		{"zip from macOS with __MACOSX", func(t *testing.T) []byte {
			return makeZip(t, append(withTop("pack/"), folder("__MACOSX/"), file("__MACOSX/pack/._SKILL.md", "fork"))...)
		}},
		{"tar.gz with a top folder", func(t *testing.T) []byte { return makeTgz(t, withTop("pack-1.0/")...) }},
		{"tar.gz without a top folder", func(t *testing.T) []byte { return makeTgz(t, noDirs...) }},
		{"tar.gz of ./", func(t *testing.T) []byte { return makeTgz(t, dotted...) }},
		{"plain tar with a top folder", func(t *testing.T) []byte { return makeTar(t, withTop("pack/")...) }},
		{"tar.gz with a global header (a git archive)", func(t *testing.T) []byte {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "pax_global_header", PAXRecords: map[string]string{"comment": "0123abcd"}}); err != nil {
				t.Fatal(err)
			}
			tw.Flush()
			rest := makeTar(t, withTop("repo-0123abcd/")...)
			return gz(t, append(b.Bytes(), rest...))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest, err := unpackInto(t, tc.data(t), fetchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sameTree(t, tree(t, dest), packTree)
			fi, err := os.Stat(dest)
			if err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("dest: %v %v", fi.Mode(), err)
			}
			es, _ := os.ReadDir(filepath.Dir(dest))
			if len(es) != 1 {
				t.Errorf("the parent holds %d entries, want only the skill", len(es))
			}
		})
	}
}

// Unsafe or oversized archives are refused with an error naming the
// entry, and nothing is left: neither dest nor the temporary folder.
func TestUnpackArchiveRefusals(t *testing.T) {
	outside := t.TempDir()
	small := fetchOptions{MaxFiles: 5, MaxFileSize: 1 << 10, MaxUnpacked: 2 << 10}
	bomb := fetchOptions{MaxFileSize: 1 << 20, MaxUnpacked: 2 << 20, MaxFiles: 100}
	skill := file("SKILL.md", "# s\n")
	type tc struct {
		name string
		data func(t *testing.T) []byte
		o    fetchOptions
		kind armory.Kind
		want []string
	}
	cases := []tc{
		// Names.
		{"zip ../evil", func(t *testing.T) []byte { return makeZip(t, skill, file("../evil", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`"../evil"`, `".." component`}},
		{"tar ../evil", func(t *testing.T) []byte { return makeTar(t, skill, file("../evil", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`"../evil"`, `".." component`}},
		{"tgz ../evil", func(t *testing.T) []byte { return makeTgz(t, skill, file("../evil", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`"../evil"`, `".." component`}},
		{"zip /etc/x", func(t *testing.T) []byte { return makeZip(t, skill, file("/etc/x", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`"/etc/x"`, "absolute path"}},
		{"tar /etc/x", func(t *testing.T) []byte { return makeTar(t, skill, file("/etc/x", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`"/etc/x"`, "absolute path"}},
		{"zip a/../../b", func(t *testing.T) []byte { return makeZip(t, skill, file("a/../../b", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`"a/../../b"`, `".." component`}},
		{"tar a/../../b", func(t *testing.T) []byte { return makeTar(t, skill, file("a/../../b", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`"a/../../b"`, `".." component`}},
		{"zip a/.. staying inside", func(t *testing.T) []byte { return makeZip(t, skill, file("a/../b", "x")) }, fetchOptions{}, armory.KindBlocked, []string{`".." component`}},
		{"zip backslashes", func(t *testing.T) []byte { return makeZip(t, skill, file(`..\..\evil`, "x")) }, fetchOptions{}, armory.KindBlocked, []string{"backslash"}},
		{"zip NUL", func(t *testing.T) []byte { return makeZip(t, skill, file("SKILL.md\x00.txt", "x")) }, fetchOptions{}, armory.KindBlocked, []string{"NUL"}},
		{"zip control character", func(t *testing.T) []byte { return makeZip(t, skill, file("a\nb", "x")) }, fetchOptions{}, armory.KindBlocked, []string{"control character"}},
		{"zip invalid UTF-8", func(t *testing.T) []byte { return makeZip(t, skill, file("\xff\xfe.md", "x")) }, fetchOptions{}, armory.KindBlocked, []string{"not valid UTF-8"}},
		{"tar invalid UTF-8", func(t *testing.T) []byte { return makeTar(t, skill, file("a/\xc0.md", "x")) }, fetchOptions{}, armory.KindBlocked, []string{"not valid UTF-8"}},
		{"zip drive letter", func(t *testing.T) []byte { return makeZip(t, skill, file("C:/Windows/x", "x")) }, fetchOptions{}, armory.KindBlocked, []string{"drive letter"}},
		{"zip nested 33 deep", func(t *testing.T) []byte { return makeZip(t, skill, file(deep(32), "x")) }, fetchOptions{}, armory.KindBlocked, []string{"deeper than 32"}},
		{"tar long component", func(t *testing.T) []byte { return makeTar(t, skill, file(strings.Repeat("n", 256), "x")) }, fetchOptions{}, armory.KindBlocked, []string{"longer than 255"}},
		// Links and special files.
		{"tar symlink", func(t *testing.T) []byte {
			return makeTar(t, skill, ent{name: "scripts/tool", typ: symlink, link: "/bin/sh"})
		}, fetchOptions{}, armory.KindBlocked, []string{`"scripts/tool"`, "symbolic link", `"/bin/sh"`}},
		{"zip symlink", func(t *testing.T) []byte {
			return makeZip(t, skill, ent{name: "scripts/tool", typ: symlink, link: "/bin/sh"})
		}, fetchOptions{}, armory.KindBlocked, []string{`"scripts/tool"`, "symbolic link"}},
		{"tar symlink out, then a file through it", func(t *testing.T) []byte {
			return makeTar(t, skill, ent{name: "escape", typ: symlink, link: outside}, file("escape/pwned.txt", "pwned"))
		}, fetchOptions{}, armory.KindBlocked, []string{`"escape"`, "symbolic link"}},
		{"zip symlink out, then a file through it", func(t *testing.T) []byte {
			return makeZip(t, skill, ent{name: "escape", typ: symlink, link: "../../../../" + outside}, file("escape/pwned.txt", "pwned"))
		}, fetchOptions{}, armory.KindBlocked, []string{`"escape"`, "symbolic link"}},
		{"tar relative symlink out, then a file through it", func(t *testing.T) []byte {
			return makeTgz(t, folder("pack/"), file("pack/SKILL.md", "s"), ent{name: "pack/up", typ: symlink, link: "../.."}, file("pack/up/pwned.txt", "pwned"))
		}, fetchOptions{}, armory.KindBlocked, []string{`"pack/up"`, "symbolic link"}},
		{"tar hard link", func(t *testing.T) []byte {
			return makeTar(t, skill, ent{name: "passwd", typ: hardlink, link: "/etc/passwd"})
		}, fetchOptions{}, armory.KindBlocked, []string{`"passwd"`, "hard link", `"/etc/passwd"`}},
		{"tar hard link inside", func(t *testing.T) []byte {
			return makeTar(t, skill, ent{name: "again.md", typ: hardlink, link: "SKILL.md"})
		}, fetchOptions{}, armory.KindBlocked, []string{`"again.md"`, "hard link"}},
		{"tar char device", func(t *testing.T) []byte { return makeTar(t, skill, ent{name: "null", typ: chardev}) }, fetchOptions{}, armory.KindBlocked, []string{`"null"`, "device file"}},
		{"tar block device", func(t *testing.T) []byte { return makeTar(t, skill, ent{name: "sda", typ: blockdev}) }, fetchOptions{}, armory.KindBlocked, []string{`"sda"`, "device file"}},
		{"tar fifo", func(t *testing.T) []byte { return makeTar(t, skill, ent{name: "pipe", typ: fifo}) }, fetchOptions{}, armory.KindBlocked, []string{`"pipe"`, "FIFO"}},
		{"zip device", func(t *testing.T) []byte { return makeZip(t, skill, ent{name: "null", typ: chardev}) }, fetchOptions{}, armory.KindBlocked, []string{`"null"`, "device file"}},
		{"zip fifo", func(t *testing.T) []byte { return makeZip(t, skill, ent{name: "pipe", typ: fifo}) }, fetchOptions{}, armory.KindBlocked, []string{`"pipe"`, "FIFO"}},
		// Duplicates and clashes.
		{"zip duplicate", func(t *testing.T) []byte { return makeZip(t, skill, file("SKILL.md", "# evil\n")) }, fetchOptions{}, armory.KindInvalid, []string{`"SKILL.md"`, "appears twice"}},
		{"tar duplicate", func(t *testing.T) []byte { return makeTar(t, skill, file("a", "1"), file("./a", "2")) }, fetchOptions{}, armory.KindInvalid, []string{`"./a"`, "appears twice"}},
		{"tar duplicate folder", func(t *testing.T) []byte { return makeTar(t, skill, folder("a/"), folder("a/")) }, fetchOptions{}, armory.KindInvalid, []string{`"a/"`, "appears twice"}},
		{"zip file then folder", func(t *testing.T) []byte { return makeZip(t, skill, file("a", "1"), file("a/b", "2")) }, fetchOptions{}, armory.KindInvalid, []string{`"a/b"`, `folder "a"`}},
		{"zip folder then file", func(t *testing.T) []byte { return makeZip(t, skill, file("a/b", "2"), file("a", "1")) }, fetchOptions{}, armory.KindInvalid, []string{`"a"`, "folder of the same name"}},
		// Bounds.
		{"zip too many files", func(t *testing.T) []byte { return makeZip(t, many("", 5)...) }, small, armory.KindTooLarge, []string{"more than the limit of 5"}},
		{"tgz too many files", func(t *testing.T) []byte { return makeTgz(t, many("", 5)...) }, small, armory.KindTooLarge, []string{"more than 5 entries"}},
		{"tar file beyond MaxFileSize", func(t *testing.T) []byte { return makeTar(t, skill, file("big", zeros(1025))) }, small, armory.KindTooLarge, []string{`"big"`, "larger than 1 KiB"}},
		{"zip file beyond MaxFileSize", func(t *testing.T) []byte { return makeZip(t, skill, file("big", zeros(1025))) }, small, armory.KindTooLarge, []string{`"big"`, "larger than 1 KiB"}},
		{"tar total beyond MaxUnpacked", func(t *testing.T) []byte {
			return makeTar(t, skill, file("a", zeros(1000)), file("b", zeros(1000)), file("c", zeros(1000)))
		}, small, armory.KindTooLarge, []string{`"c"`, "beyond 2 KiB unpacked"}},
		{"zip bomb", func(t *testing.T) []byte {
			data := makeZip(t, skill, file("bomb", zeros(16<<20)))
			if len(data) > 64<<10 {
				t.Fatalf("not a bomb: %d bytes", len(data))
			}
			return data
		}, bomb, armory.KindTooLarge, []string{`"bomb"`}},
		{"zip bomb of many files", func(t *testing.T) []byte {
			es := []ent{skill}
			for i := range 8 {
				es = append(es, file(fmt.Sprintf("b%d", i), zeros(1<<20)))
			}
			return makeZip(t, es...)
		}, bomb, armory.KindTooLarge, []string{`"b1"`, "beyond 2 MiB unpacked"}},
		{"zip bomb that lies in its headers", func(t *testing.T) []byte { return lyingZip(t, "SKILL.md", 100, 8<<20) }, bomb, armory.KindInvalid, []string{`"SKILL.md"`, "cannot be read"}},
		{"tar.gz bomb of many files", func(t *testing.T) []byte {
			es := []ent{skill}
			for i := range 16 {
				es = append(es, file(fmt.Sprintf("b%02d", i), zeros(512<<10)))
			}
			data := makeTgz(t, es...)
			if len(data) > 64<<10 {
				t.Fatalf("not a bomb: %d bytes", len(data))
			}
			return data
		}, bomb, armory.KindTooLarge, []string{`"b03"`, "beyond 2 MiB unpacked"}},
		{"tar.gz bomb in skipped data", func(t *testing.T) []byte {
			return makeTgz(t, skill, file("__MACOSX/huge", zeros(8<<20)))
		}, bomb, armory.KindTooLarge, []string{"decompresses to more than"}},
		// Not a skill pack.
		{"no SKILL.md", func(t *testing.T) []byte { return makeZip(t, file("README.md", "r"), file("x", "y")) }, fetchOptions{}, armory.KindInvalid, []string{"no SKILL.md", "README.md, x"}},
		{"SKILL.md two folders down", func(t *testing.T) []byte { return makeTgz(t, file("a/b/SKILL.md", "s")) }, fetchOptions{}, armory.KindInvalid, []string{"no SKILL.md", "its root holds b"}},
		{"skill.md in the wrong case", func(t *testing.T) []byte { return makeZip(t, file("skill.md", "s")) }, fetchOptions{}, armory.KindInvalid, []string{`"skill.md"`, "exactly SKILL.md"}},
		{"SKILL.md a folder", func(t *testing.T) []byte {
			return makeZip(t, folder("SKILL.md/"), file("SKILL.md/x", "s"), file("README.md", "r"))
		}, fetchOptions{}, armory.KindInvalid, []string{"not a regular file"}},
		{"empty zip", func(t *testing.T) []byte { return makeZip(t) }, fetchOptions{}, armory.KindInvalid, []string{"no SKILL.md", "empty"}},
		{"empty input", func(t *testing.T) []byte { return nil }, fetchOptions{}, armory.KindInvalid, []string{"not a zip, tar or tar.gz archive", "looks empty"}},
		{"html", func(t *testing.T) []byte { return []byte("<!doctype html><html><body>Sign in</body></html>") }, fetchOptions{}, armory.KindInvalid, []string{"not a zip, tar or tar.gz archive", "text/html"}},
		{"gzip of something else", func(t *testing.T) []byte { return gz(t, []byte("just text")) }, fetchOptions{}, armory.KindInvalid, []string{"does not hold a tar archive"}},
		{"truncated zip", func(t *testing.T) []byte { d := makeZip(t, skill); return d[:len(d)-30] }, fetchOptions{}, armory.KindInvalid, []string{"zip archive cannot be read"}},
		{"truncated tar.gz", func(t *testing.T) []byte { d := makeTgz(t, skill, file("x", zeros(9000))); return d[:len(d)/2] }, fetchOptions{}, armory.KindInvalid, []string{"gzip stream cannot be read", "unexpected EOF"}},
		{"tar.gz truncated in a file", func(t *testing.T) []byte {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			d := makeTar(t, skill, file("x", "0123456789abcdef0123456789abcdef"))
			zw.Write(d[:1536+16]) // SKILL.md's header and block, x's header, half of x
			zw.Close()
			return b.Bytes()
		}, fetchOptions{}, armory.KindInvalid, []string{`"x" cannot be read`, "unexpected EOF"}},
		{"gzip checksum broken", func(t *testing.T) []byte { d := makeTgz(t, skill); d[len(d)-8] ^= 0xff; return d }, fetchOptions{}, armory.KindInvalid, []string{"checksum"}},
		// A failure after files were written leaves nothing either.
		{"a late link after many files", func(t *testing.T) []byte {
			return makeTgz(t, append(many("pack/", 50), ent{name: "pack/zz", typ: symlink, link: "/"})...)
		}, fetchOptions{}, armory.KindBlocked, []string{`"pack/zz"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := unpackInto(t, c.data(t), c.o)
			wantErr(t, err, c.kind, c.want...)
			if !strings.Contains(err.Error(), "no skill was installed") {
				t.Errorf("the error does not say nothing was installed: %v", err)
			}
			assertEmpty(t, outside)
		})
	}
}

// dest must not exist; an existing one is left untouched.
func TestUnpackArchiveDest(t *testing.T) {
	data := makeZip(t, file("SKILL.md", "# s\n"))
	parent := t.TempDir()
	dest := filepath.Join(parent, "skill")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest, "keep"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := unpackArchive(bytes.NewReader(data), int64(len(data)), dest, fetchOptions{})
	wantErr(t, err, armory.KindConflict, "already exists")
	sameTree(t, tree(t, parent), map[string]string{"skill": "drwxr-xr-x", "skill/keep": "-rw-r--r-- k"})

	err = unpackArchive(bytes.NewReader(data), int64(len(data)), filepath.Join(parent, "missing", "skill"), fetchOptions{})
	wantErr(t, err, armory.KindNotFound, "does not exist")
}

// The modes of the contract hold whatever the umask.
func TestUnpackArchiveModesIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dest, err := unpackInto(t, makeTgz(t, file("SKILL.md", "s"), exe("bin/run", "r")), fetchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, tree(t, dest), map[string]string{"SKILL.md": "-rw-r--r-- s", "bin": "drwxr-xr-x", "bin/run": "-rwxr-xr-x r"})
}

// localGuard is the default policy with the loopback address the test
// servers listen on opened.
func localGuard() *netguard.Guard {
	return netguard.New(netguard.Options{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
}

// archiveServer serves test archives and misbehaviours on 127.0.0.1.
func archiveServer(t *testing.T) *httptest.Server {
	t.Helper()
	zipPack := makeZip(t, folder("pack/"), file("pack/SKILL.md", "# Zip\n"), exe("pack/scripts/run.sh", "#!/bin/sh\n"))
	tgzPack := makeTgz(t, file("SKILL.md", "# Tgz\n"))
	mux := http.NewServeMux()
	mux.HandleFunc("/pack.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain") // not trusted either way
		w.Write(zipPack)
	})
	mux.HandleFunc("/really-a-tgz.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/zip")
		w.Write(tgzPack)
	})
	mux.HandleFunc("/big.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(2<<20))
		w.Write(make([]byte, 2<<20))
	})
	mux.HandleFunc("/big-chunked.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Write(zipPack) // a valid start, then more than the limit
		for range 64 {
			if _, err := w.Write(make([]byte, 64<<10)); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/missing.zip", http.NotFound)
	mux.HandleFunc("/private.zip", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", http.StatusForbidden) })
	mux.HandleFunc("/broken.zip", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "oops", http.StatusInternalServerError) })
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/zip")
		w.Write([]byte("<!DOCTYPE html><html><head><title>Sign in</title></head><body>Sign in</body></html>"))
	})
	redirect := func(to string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) }
	}
	mux.HandleFunc("/to-pack", redirect("/pack.zip"))
	mux.HandleFunc("/to-private", redirect("http://10.0.0.1/pack.zip"))
	mux.HandleFunc("/to-metadata", redirect("http://169.254.169.254/latest/meta-data/"))
	mux.HandleFunc("/to-file", redirect("file:///etc/passwd"))
	mux.HandleFunc("/loop", redirect("/loop"))
	mux.HandleFunc("/slow.zip", func(w http.ResponseWriter, r *http.Request) {
		w.Write(zipPack[:10])
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchArchive(t *testing.T) {
	srv := archiveServer(t)
	ctx := context.Background()
	local := fetchOptions{Guard: localGuard()}

	t.Run("zip with a top folder", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "skill")
		if err := fetchArchive(ctx, srv.URL+"/pack.zip", dest, local); err != nil {
			t.Fatal(err)
		}
		sameTree(t, tree(t, dest), map[string]string{"SKILL.md": "-rw-r--r-- # Zip\n", "scripts": "drwxr-xr-x", "scripts/run.sh": "-rwxr-xr-x #!/bin/sh\n"})
		es, _ := os.ReadDir(filepath.Dir(dest))
		if len(es) != 1 {
			t.Errorf("the parent holds %d entries, want only the skill", len(es))
		}
	})
	t.Run("kind sniffed, not taken from the URL", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "skill")
		if err := fetchArchive(ctx, srv.URL+"/really-a-tgz.zip", dest, local); err != nil {
			t.Fatal(err)
		}
		sameTree(t, tree(t, dest), map[string]string{"SKILL.md": "-rw-r--r-- # Tgz\n"})
	})
	t.Run("a redirect within bounds", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "skill")
		if err := fetchArchive(ctx, srv.URL+"/to-pack", dest, local); err != nil {
			t.Fatal(err)
		}
	})

	host := strings.TrimPrefix(srv.URL, "http://")
	_, port, _ := net.SplitHostPort(host)
	for _, c := range []struct {
		name string
		url  string
		o    fetchOptions
		kind armory.Kind
		want []string
	}{
		{"oversized, with a length", srv.URL + "/big.zip", fetchOptions{Guard: localGuard(), MaxDownload: 1 << 20}, armory.KindTooLarge, []string{"larger than 1 MiB", "download limit"}},
		{"oversized, chunked", srv.URL + "/big-chunked.zip", fetchOptions{Guard: localGuard(), MaxDownload: 1 << 20}, armory.KindTooLarge, []string{"larger than 1 MiB"}},
		{"HTTP 404", srv.URL + "/missing.zip", local, armory.KindNotFound, []string{"HTTP 404 Not Found", "/missing.zip"}},
		{"HTTP 403", srv.URL + "/private.zip", local, armory.KindPermission, []string{"HTTP 403 Forbidden"}},
		{"HTTP 500", srv.URL + "/broken.zip", local, armory.KindUnavailable, []string{"HTTP 500 Internal Server Error"}},
		{"not an archive", srv.URL + "/login", local, armory.KindInvalid, []string{"not a zip, tar or tar.gz archive", "text/html"}},
		{"redirect to a private address", srv.URL + "/to-private", local, armory.KindBlocked, []string{"network policy refuses", "10.0.0.1", "private address"}},
		{"redirect to the metadata address", srv.URL + "/to-metadata", local, armory.KindBlocked, []string{"169.254.169.254", "cloud metadata address"}},
		{"redirect to file://", srv.URL + "/to-file", local, armory.KindBlocked, []string{`scheme "file"`}},
		{"too many redirects", srv.URL + "/loop", local, armory.KindBlocked, []string{"stopped after 5 redirects"}},
		{"timeout", srv.URL + "/slow.zip", fetchOptions{Guard: localGuard(), Timeout: 200 * time.Millisecond}, armory.KindTimeout, []string{"within 200ms"}},
		// The default guard: public addresses only.
		{"metadata address, default guard", "http://169.254.169.254/latest/meta-data/iam/", fetchOptions{}, armory.KindBlocked, []string{"cloud metadata address"}},
		{"metadata address in decimal, default guard", "http://2852039166/latest/", fetchOptions{}, armory.KindBlocked, []string{"cloud metadata address"}},
		{"localhost, default guard", "http://localhost:" + port + "/pack.zip", fetchOptions{}, armory.KindBlocked, []string{"network policy refuses localhost", "loopback address"}},
		{"127.0.0.1, default guard", srv.URL + "/pack.zip", fetchOptions{}, armory.KindBlocked, []string{"loopback address"}},
		{"[::1], default guard", "http://[::1]:" + port + "/pack.zip", fetchOptions{}, armory.KindBlocked, []string{"loopback address"}},
		{"private address, default guard", "http://192.168.1.1/pack.zip", fetchOptions{}, armory.KindBlocked, []string{"private address"}},
		// Schemes and shapes.
		{"file://", "file:///etc/passwd", local, armory.KindInvalid, []string{`scheme "file" is not supported`}},
		{"ftp://", "ftp://example.com/pack.zip", local, armory.KindInvalid, []string{`scheme "ftp" is not supported`}},
		{"no scheme", "example.com/pack.zip", local, armory.KindInvalid, []string{"has no scheme"}},
		{"no host", "http:///pack.zip", local, armory.KindInvalid, []string{"has no host"}},
		{"empty", " ", local, armory.KindInvalid, []string{"empty"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			parent := t.TempDir()
			err := fetchArchive(ctx, c.url, filepath.Join(parent, "skill"), c.o)
			wantErr(t, err, c.kind, c.want...)
			assertEmpty(t, parent)
		})
	}

	t.Run("dest exists", func(t *testing.T) {
		parent := t.TempDir()
		dest := filepath.Join(parent, "skill")
		os.Mkdir(dest, 0o755)
		wantErr(t, fetchArchive(ctx, srv.URL+"/pack.zip", dest, local), armory.KindConflict, "already exists")
		if es, _ := os.ReadDir(dest); len(es) != 0 {
			t.Errorf("the existing dest was changed: %v", es)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		parent := t.TempDir()
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		err := fetchArchive(cctx, srv.URL+"/pack.zip", filepath.Join(parent, "skill"), local)
		wantErr(t, err, armory.KindTimeout, "cancelled")
		assertEmpty(t, parent)
	})
}

// skillFolder makes a local skill pack and returns its path.
func skillFolder(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "pack")
	for name, body := range map[string]string{"SKILL.md": "# Local\n", "scripts/run.sh": "#!/bin/sh\n", "references/deep/ref.md": "ref"} {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "scripts/run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "assets"), 0o700); err != nil {
		t.Fatal(err)
	}
	return src
}

func TestCopySkillDir(t *testing.T) {
	t.Run("good", func(t *testing.T) {
		src := skillFolder(t)
		dest := filepath.Join(t.TempDir(), "skill")
		if err := copySkillDir(src, dest, fetchOptions{}); err != nil {
			t.Fatal(err)
		}
		sameTree(t, tree(t, dest), map[string]string{
			"SKILL.md": "-rw-r--r-- # Local\n", "scripts": "drwxr-xr-x", "scripts/run.sh": "-rwxr-xr-x #!/bin/sh\n",
			"references": "drwxr-xr-x", "references/deep": "drwxr-xr-x", "references/deep/ref.md": "-rw-r--r-- ref", "assets": "drwxr-xr-x",
		})
	})
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, src string) string // returns the src to copy
		o     fetchOptions
		kind  armory.Kind
		want  []string
	}{
		{"symlink to a file outside", func(t *testing.T, src string) string {
			must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "scripts", "secret")))
			return src
		}, fetchOptions{}, armory.KindBlocked, []string{`"scripts/secret"`, "symbolic link"}},
		{"symlink to a folder outside", func(t *testing.T, src string) string {
			must(t, os.Symlink(outside, filepath.Join(src, "references", "out")))
			return src
		}, fetchOptions{}, armory.KindBlocked, []string{`"references/out"`, "symbolic link"}},
		{"symlink inside the pack", func(t *testing.T, src string) string {
			must(t, os.Symlink("SKILL.md", filepath.Join(src, "README.md")))
			return src
		}, fetchOptions{}, armory.KindBlocked, []string{`"README.md"`, "symbolic link"}},
		{"the folder itself a symlink", func(t *testing.T, src string) string {
			link := filepath.Join(t.TempDir(), "link")
			must(t, os.Symlink(src, link))
			return link
		}, fetchOptions{}, armory.KindBlocked, []string{"is a symbolic link"}},
		{"a FIFO", func(t *testing.T, src string) string {
			must(t, syscall.Mkfifo(filepath.Join(src, "assets", "pipe"), 0o644))
			return src
		}, fetchOptions{}, armory.KindBlocked, []string{`"assets/pipe"`, "FIFO"}},
		{"a backslash in a name", func(t *testing.T, src string) string {
			must(t, os.WriteFile(filepath.Join(src, `a\b`), nil, 0o644))
			return src
		}, fetchOptions{}, armory.KindBlocked, []string{"backslash"}},
		{"too many files", func(t *testing.T, src string) string { return src }, fetchOptions{MaxFiles: 4}, armory.KindTooLarge, []string{"more than 4 entries"}},
		{"a file beyond MaxFileSize", func(t *testing.T, src string) string {
			must(t, os.WriteFile(filepath.Join(src, "assets", "big"), make([]byte, 2000), 0o644))
			return src
		}, fetchOptions{MaxFileSize: 1000}, armory.KindTooLarge, []string{`"assets/big"`, "larger than 1000 bytes"}},
		{"total beyond MaxUnpacked", func(t *testing.T, src string) string {
			for i := range 4 {
				must(t, os.WriteFile(filepath.Join(src, "assets", strconv.Itoa(i)), make([]byte, 800), 0o644))
			}
			return src
		}, fetchOptions{MaxUnpacked: 2000}, armory.KindTooLarge, []string{"beyond 2000 bytes unpacked"}},
		{"nested too deep", func(t *testing.T, src string) string {
			p := filepath.Join(src, filepath.FromSlash(deep(32)))
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.WriteFile(p, nil, 0o644))
			return src
		}, fetchOptions{}, armory.KindBlocked, []string{"deeper than 32"}},
		{"no SKILL.md", func(t *testing.T, src string) string {
			must(t, os.Remove(filepath.Join(src, "SKILL.md")))
			return src
		}, fetchOptions{}, armory.KindInvalid, []string{"no SKILL.md", "assets, references, scripts"}},
		{"missing folder", func(t *testing.T, src string) string { return filepath.Join(src, "nope") }, fetchOptions{}, armory.KindNotFound, []string{"does not exist"}},
		{"a file, not a folder", func(t *testing.T, src string) string { return filepath.Join(src, "SKILL.md") }, fetchOptions{}, armory.KindInvalid, []string{"not a folder"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := c.setup(t, skillFolder(t))
			parent := t.TempDir()
			err := copySkillDir(src, filepath.Join(parent, "skill"), c.o)
			wantErr(t, err, c.kind, c.want...)
			assertEmpty(t, parent)
			if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
				t.Error(err)
			}
		})
	}
	t.Run("dest inside the folder", func(t *testing.T) {
		src := skillFolder(t)
		wantErr(t, copySkillDir(src, filepath.Join(src, "assets", "copy"), fetchOptions{}), armory.KindInvalid, "lies inside")
		if es, _ := os.ReadDir(filepath.Join(src, "assets")); len(es) != 0 {
			t.Errorf("left in the source: %v", es)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzUnpackArchive: whatever the bytes, unpackArchive writes nothing
// outside dest, leaves nothing at all when it fails, and what it installs
// holds only regular files and folders with the contract's modes and a
// SKILL.md.
func FuzzUnpackArchive(f *testing.F) {
	skill := file("SKILL.md", "# s\n")
	seeds := [][]byte{
		makeZip(f, folder("p/"), file("p/SKILL.md", "s"), exe("p/x.sh", "x")),
		makeTgz(f, skill, file("a/b", "c")),
		makeTar(f, folder("./"), skill, folder("./d/")),
		makeZip(f, skill, file("../evil", "x")),
		makeTar(f, skill, file("/etc/x", "x")),
		makeTar(f, skill, ent{name: "l", typ: symlink, link: "../../"}, file("l/x", "x")),
		makeZip(f, skill, ent{name: "l", typ: symlink, link: "/"}, file("l/x", "x")),
		makeTar(f, skill, ent{name: "h", typ: hardlink, link: "/etc/passwd"}),
		makeZip(f, skill, file("a", "1"), file("a/b", "2")),
		lyingZip(f, "SKILL.md", 10, 1000),
		gz(f, []byte("text")),
		[]byte("PK\x05\x06"),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		base := t.TempDir()
		parent := filepath.Join(base, "a", "b", "c")
		must(t, os.MkdirAll(parent, 0o755))
		dest := filepath.Join(parent, "skill")
		o := fetchOptions{MaxFiles: 64, MaxUnpacked: 1 << 20, MaxFileSize: 256 << 10}
		err := unpackArchive(bytes.NewReader(data), int64(len(data)), dest, o)
		walkErr := filepath.WalkDir(base, func(p string, d fs.DirEntry, werr error) error {
			if werr != nil {
				return werr
			}
			rel, _ := filepath.Rel(base, p)
			switch filepath.ToSlash(rel) {
			case ".", "a", "a/b", "a/b/c":
				return nil
			}
			if p != dest && !strings.HasPrefix(p, dest+string(filepath.Separator)) {
				t.Fatalf("written outside dest: %s (unpack error: %v)", rel, err)
			}
			if err != nil {
				t.Fatalf("the unpack failed (%v) but left %s", err, rel)
			}
			fi, ierr := os.Lstat(p)
			if ierr != nil {
				return ierr
			}
			switch m := fi.Mode(); {
			case m.IsDir() && m.Perm() == 0o755:
			case m.IsRegular() && (m.Perm() == 0o644 || m.Perm() == 0o755):
			default:
				t.Fatalf("%s has mode %v", rel, m)
			}
			return nil
		})
		if walkErr != nil {
			t.Fatal(walkErr)
		}
		if err == nil {
			if fi, serr := os.Lstat(filepath.Join(dest, "SKILL.md")); serr != nil || !fi.Mode().IsRegular() {
				t.Fatalf("installed without a SKILL.md: %v", serr)
			}
		}
	})
}
