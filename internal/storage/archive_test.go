package storage

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ent is one archive entry for the builders below: typ is 'f' (file), 'd'
// (directory), 'l' (symlink to link) or 'h' (hard link to link).
type ent struct {
	name, body, link string
	typ              byte
}

func makeTar(t testing.TB, ents []ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Mode: 0o644, Linkname: e.link}
		switch e.typ {
		case 'f':
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		case 'd':
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case 'l':
			h.Typeflag = tar.TypeSymlink
		case 'h':
			h.Typeflag = tar.TypeLink
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == 'f' {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func makeZip(t testing.TB, ents []ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range ents {
		h := &zip.FileHeader{Name: e.name, Method: zip.Deflate}
		body := e.body
		switch e.typ {
		case 'd':
			h.Name = strings.TrimSuffix(e.name, "/") + "/"
			h.SetMode(fs.ModeDir | 0o755)
		case 'l':
			h.SetMode(fs.ModeSymlink | 0o777)
			body = e.link
		default:
			h.SetMode(0o644)
		}
		w, err := zw.CreateHeader(h)
		if err != nil {
			t.Fatal(err)
		}
		if e.typ != 'd' {
			w.Write([]byte(body))
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// archiveFile writes data as dir/name and returns its path.
func archiveFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

var goodEntries = []ent{
	{name: "model/", typ: 'd'},
	{name: "model/weights.bin", body: "weights v1", typ: 'f'},
	{name: "model/sub/config.json", body: `{"layers": 2}`, typ: 'f'},
	{name: "model/latest", link: "weights.bin", typ: 'l'},
}

func TestExtractKinds(t *testing.T) {
	tarBytes := makeTar(t, append(goodEntries, ent{name: "model/copy.bin", link: "model/weights.bin", typ: 'h'}))
	fixture, err := os.ReadFile("testdata/model.tar.bz2")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		data  []byte
		files map[string]string
	}{
		{"m.zip", makeZip(t, goodEntries), map[string]string{"model/weights.bin": "weights v1", "model/sub/config.json": `{"layers": 2}`, "model/latest": "weights v1"}},
		{"m.tar", tarBytes, map[string]string{"model/weights.bin": "weights v1", "model/latest": "weights v1", "model/copy.bin": "weights v1"}},
		{"m.tar.gz", gz(t, tarBytes), map[string]string{"model/sub/config.json": `{"layers": 2}`, "model/copy.bin": "weights v1"}},
		{"M.TGZ", gz(t, tarBytes), map[string]string{"model/weights.bin": "weights v1"}},
		{"m.tar.bz2", fixture, map[string]string{"model.bin": "weights v1\n", "sub/config.json": "{\"layers\": 2}\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := archiveFile(t, dir, tc.name, tc.data)
			dst := filepath.Join(dir, "out")
			os.Mkdir(dst, 0o755)
			if err := Extract(src, dst, Limits{}); err != nil {
				t.Fatalf("Extract: %v", err)
			}
			for name, want := range tc.files {
				got, err := os.ReadFile(filepath.Join(dst, name))
				if err != nil || string(got) != want {
					t.Errorf("%s = %q, %v; want %q", name, got, err, want)
				}
			}
		})
	}
}

func TestExtractRefuses(t *testing.T) {
	evilBz2, err := os.ReadFile("testdata/evil.tar.bz2")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string // file name: its suffix picks the kind
		data func(t testing.TB) []byte
		lim  Limits
		want string
	}{
		{"slip.zip", func(t testing.TB) []byte { return makeZip(t, []ent{{name: "../evil.txt", body: "x", typ: 'f'}}) }, Limits{}, "outside the target directory (zip-slip)"},
		{"slip-backslash.zip", func(t testing.TB) []byte {
			return makeZip(t, []ent{{name: `a\..\..\evil.txt`, body: "x", typ: 'f'}})
		}, Limits{}, "zip-slip"},
		{"abs.tar", func(t testing.TB) []byte { return makeTar(t, []ent{{name: "/tmp/evil.txt", body: "x", typ: 'f'}}) }, Limits{}, "zip-slip"},
		{"slip.tar.gz", func(t testing.TB) []byte {
			return gz(t, makeTar(t, []ent{{name: "a/../../evil.txt", body: "x", typ: 'f'}}))
		}, Limits{}, "zip-slip"},
		{"slip.tar.bz2", func(testing.TB) []byte { return evilBz2 }, Limits{}, "zip-slip"},
		{"abslink.tar", func(t testing.TB) []byte { return makeTar(t, []ent{{name: "passwd", link: "/etc/passwd", typ: 'l'}}) }, Limits{}, `link "passwd" points to "/etc/passwd", outside`},
		{"uplink.zip", func(t testing.TB) []byte { return makeZip(t, []ent{{name: "a/up", link: "../../x", typ: 'l'}}) }, Limits{}, "outside the target directory"},
		{"chain.tar", func(t testing.TB) []byte {
			// Each link looks inside on its own; together they leave.
			return makeTar(t, []ent{
				{name: "deep/a/b/s", link: "../../..", typ: 'l'},
				{name: "l", link: "deep/a/b/s/..", typ: 'l'},
			})
		}, Limits{}, `link "l" points to "deep/a/b/s/..", which resolves outside`},
		{"through.tar", func(t testing.TB) []byte {
			return makeTar(t, []ent{
				{name: "sub", typ: 'd'},
				{name: "d", link: "sub", typ: 'l'},
				{name: "d/x", body: "x", typ: 'f'},
			})
		}, Limits{}, `is written through the link "d"`},
		{"dangling.tar", func(t testing.TB) []byte { return makeTar(t, []ent{{name: "l", link: "missing", typ: 'l'}}) }, Limits{}, "does not exist in the archive"},
		{"hardout.tar", func(t testing.TB) []byte { return makeTar(t, []ent{{name: "h", link: "../../etc/passwd", typ: 'h'}}) }, Limits{}, `hard link "h" points to "../../etc/passwd"`},
		{"bytes.tar.gz", func(t testing.TB) []byte {
			return gz(t, makeTar(t, []ent{{name: "big", body: strings.Repeat("0", 5000), typ: 'f'}}))
		}, Limits{MaxBytes: 4096}, "expands past the limit of 4096 bytes"},
		{"bytes.zip", func(t testing.TB) []byte {
			return makeZip(t, []ent{{name: "a", body: strings.Repeat("0", 3000), typ: 'f'}, {name: "b", body: strings.Repeat("0", 3000), typ: 'f'}})
		}, Limits{MaxBytes: 4096}, "expands past the limit of 4096 bytes"},
		{"entries.zip", func(t testing.TB) []byte {
			return makeZip(t, []ent{{name: "a", typ: 'f'}, {name: "b", typ: 'f'}, {name: "c", typ: 'f'}})
		}, Limits{MaxEntries: 2}, "3 entries, more than the limit of 2"},
		{"entries.tar", func(t testing.TB) []byte {
			return makeTar(t, []ent{{name: "a", typ: 'f'}, {name: "b", typ: 'f'}, {name: "c", typ: 'f'}})
		}, Limits{MaxEntries: 2}, "more than 2 entries"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			src := archiveFile(t, dir, tc.name, tc.data(t))
			dst := filepath.Join(dir, "out")
			os.Mkdir(dst, 0o755)
			err := Extract(src, dst, tc.lim)
			if !errors.Is(err, ErrUnsafeArchive) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Extract = %v; want ErrUnsafeArchive with %q", err, tc.want)
			}
			assertOnly(t, dir, tc.name, "out")
		})
	}
}

func TestExtractCorrupt(t *testing.T) {
	for _, name := range []string{"x.zip", "x.tar.gz", "x.tar.bz2", "x.tar"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := archiveFile(t, dir, name, []byte("this is not an archive at all, not even close"))
			err := Extract(src, dir, Limits{})
			if err == nil || !strings.Contains(err.Error(), "truncated") {
				t.Fatalf("Extract = %v; want an error saying the file is not such an archive", err)
			}
		})
	}
}

// assertOnly fails when dir holds anything but the named entries: an
// extraction wrote outside its target.
func assertOnly(t testing.TB, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{}
	for _, n := range names {
		allowed[n] = true
	}
	for _, e := range ents {
		if !allowed[e.Name()] {
			t.Errorf("extraction left %q outside its target", e.Name())
		}
	}
}

// FuzzExtract feeds arbitrary bytes to every archive kind. Whatever the
// bytes, nothing may appear outside the target, and a successful
// extraction leaves no link that resolves outside it.
func FuzzExtract(f *testing.F) {
	f.Add(byte(0), makeZip(f, goodEntries))
	f.Add(byte(1), makeTar(f, goodEntries))
	f.Add(byte(2), gz(f, makeTar(f, goodEntries)))
	f.Add(byte(0), makeZip(f, []ent{{name: "../x", body: "x", typ: 'f'}}))
	f.Add(byte(1), makeTar(f, []ent{{name: "deep/a/b/s", link: "../../..", typ: 'l'}, {name: "l", link: "deep/a/b/s/..", typ: 'l'}}))
	f.Add(byte(1), makeTar(f, []ent{{name: "d", link: ".", typ: 'l'}, {name: "d/d/x", body: "x", typ: 'f'}}))
	if b, err := os.ReadFile("testdata/model.tar.bz2"); err == nil {
		f.Add(byte(3), b)
	}
	names := []string{"a.zip", "a.tar", "a.tar.gz", "a.tar.bz2"}
	f.Fuzz(func(t *testing.T, kind byte, data []byte) {
		dir := t.TempDir()
		name := names[int(kind)%len(names)]
		src := archiveFile(t, dir, name, data)
		dst := filepath.Join(dir, "out")
		os.Mkdir(dst, 0o755)
		err := Extract(src, dst, Limits{MaxBytes: 1 << 20, MaxEntries: 100})
		assertOnly(t, dir, name, "out")
		if err != nil {
			return
		}
		real, _ := filepath.EvalSymlinks(dst)
		filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return nil
			}
			res, err := filepath.EvalSymlinks(p)
			if err != nil {
				t.Errorf("link %s dangles after a successful extraction", p)
				return nil
			}
			if rel, err := filepath.Rel(real, res); err != nil || !(rel == "." || filepath.IsLocal(rel)) {
				t.Errorf("link %s resolves to %s, outside %s", p, res, real)
			}
			return nil
		})
	})
}
