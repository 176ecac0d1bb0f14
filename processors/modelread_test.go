package processors_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/internal/loadtest"
)

var pmmlFile = processors.ModelFile{Kind: "PMML", Exts: []string{".pmml"}}

// TestFindRefusesNonRegular: Find answers regular files only, whichever
// way the file is named: model_path itself, model_entry, or the one match
// in the directory.
func TestFindRefusesNonRegular(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err == nil {
		_, err := pmmlFile.Find("/dev/zero", "")
		if err == nil || err.Error() != "model_path: /dev/zero is not a regular file (a character device); only regular files are read" {
			t.Errorf("Find(/dev/zero) = %v", err)
		}
		if !errors.Is(err, processors.ErrNotRegular) {
			t.Errorf("Find(/dev/zero) = %v, not ErrNotRegular", err)
		}
	}
	dir := t.TempDir()
	fifo := loadtest.FIFO(t, dir, "m.pmml")
	for _, c := range []struct{ path, entry, prefix string }{
		{fifo, "", "model_path: "},
		{dir, "", "model_path: "},
		{dir, "m.pmml", "model_entry: "},
	} {
		_, err := pmmlFile.Find(c.path, c.entry)
		if !errors.Is(err, processors.ErrNotRegular) || !strings.HasPrefix(err.Error(), c.prefix+fifo+" is not a regular file (a named pipe (FIFO))") {
			t.Errorf("Find(%s, %q) = %v, want %s%s is not a regular file", c.path, c.entry, err, c.prefix, fifo)
		}
	}
	// A symlink to a regular file is a model file.
	real := filepath.Join(t.TempDir(), "real.pmml")
	os.WriteFile(real, []byte("<PMML/>"), 0o600)
	dir2 := t.TempDir()
	link := filepath.Join(dir2, "m.pmml")
	if err := os.Symlink(real, link); err != nil {
		t.Skip(err)
	}
	for _, c := range []struct{ path, entry string }{{link, ""}, {dir2, ""}, {dir2, "m.pmml"}} {
		if got, err := pmmlFile.Find(c.path, c.entry); err != nil || got != link {
			t.Errorf("Find(%s, %q) = %q, %v; want %s", c.path, c.entry, got, err, link)
		}
	}
}

func TestModelLimit(t *testing.T) {
	for _, c := range []struct{ set, want int64 }{{0, processors.DefaultMaxModelBytes}, {-1, processors.DefaultMaxModelBytes}, {5, 5}} {
		if got := (processors.Spec{MaxModelBytes: c.set}).ModelLimit(); got != c.want {
			t.Errorf("ModelLimit with MaxModelBytes %d = %d, want %d", c.set, got, c.want)
		}
	}
}

// TestReadModel: the bytes of a regular file (or a symlink to one) within
// the limit; the limit is inclusive.
func TestReadModel(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1<<20) // 10 MiB: several chunks
	p := filepath.Join(t.TempDir(), "m.bin")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link.bin")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, link} {
		for _, limit := range []int64{0, int64(len(data))} {
			got, err := processors.ReadModel(t.Context(), path, limit)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("ReadModel(%s, %d) = %d bytes, %v; want the %d bytes", path, limit, len(got), err, len(data))
			}
		}
	}
	_, err := processors.ReadModel(t.Context(), p, int64(len(data))-1)
	if !errors.Is(err, processors.ErrModelTooLarge) {
		t.Errorf("ReadModel(limit one byte short) = %v, want ErrModelTooLarge", err)
	}
	if _, err := processors.ReadModel(t.Context(), filepath.Join(t.TempDir(), "none"), 0); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadModel(missing) = %v, want ErrNotExist", err)
	}
}

// TestReadModelRefusesStreams: /dev/zero, a FIFO and a sparse file over the
// limit are refused without reading them. Run it also without -race.
func TestReadModelRefusesStreams(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		path  string
		limit int64
		want  error
	}{
		"fifo":   {loadtest.FIFO(t, dir, "fifo"), 0, processors.ErrNotRegular},
		"sparse": {loadtest.Sparse(t, dir, "sparse", 8<<30, nil), 1 << 20, processors.ErrModelTooLarge},
		"dir":    {dir, 0, processors.ErrNotRegular},
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases["dev-zero"] = struct {
			path  string
			limit int64
			want  error
		}{"/dev/zero", 0, processors.ErrNotRegular}
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := loadtest.Bounded(t, func() error {
				_, err := processors.ReadModel(t.Context(), c.path, c.limit)
				return err
			})
			if !errors.Is(err, c.want) {
				t.Errorf("ReadModel(%s) = %v, want %v", c.path, err, c.want)
			}
			err = loadtest.Bounded(t, func() error {
				r, err := processors.OpenModel(t.Context(), c.path, c.limit)
				if err == nil {
					r.Close()
				}
				return err
			})
			if !errors.Is(err, c.want) {
				t.Errorf("OpenModel(%s) = %v, want %v", c.path, err, c.want)
			}
		})
	}
}

// TestOpenModelCancelled: a read of a huge (sparse) file stops with ctx's
// error at the first Read after ctx is done, having read little of it.
func TestOpenModelCancelled(t *testing.T) {
	path := loadtest.Sparse(t, t.TempDir(), "huge", 16<<30, nil)
	ctx, cancel := context.WithCancel(t.Context())
	r, err := processors.OpenModel(ctx, path, 32<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var n int64
	err = loadtest.Bounded(t, func() error {
		buf := make([]byte, 1<<20)
		for {
			k, err := r.Read(buf)
			if n += int64(k); n >= 8<<20 {
				cancel()
			}
			if err != nil {
				return err
			}
		}
	})
	if err != context.Canceled {
		t.Fatalf("read after cancel = %v, want context.Canceled itself", err)
	}
	if n > 16<<20 {
		t.Errorf("read %d bytes; the read should stop right after the cancel at 8 MiB", n)
	}
}

// TestReadModelCancelled: ReadModel returns ctx's error, whether ctx is
// done before the call or while it reads.
func TestReadModelCancelled(t *testing.T) {
	path := loadtest.Sparse(t, t.TempDir(), "big", 32<<20, nil)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := processors.ReadModel(ctx, path, 0); err != context.Canceled {
		t.Errorf("ReadModel(cancelled ctx) = %v, want context.Canceled", err)
	}
	if _, err := processors.ReadModel(loadtest.CancelAfter(t.Context(), 3), path, 0); err != context.Canceled {
		t.Errorf("ReadModel(ctx cancelled mid-read) = %v, want context.Canceled", err)
	}
}

// TestOpenModelGrowing: a file that grows past the limit after it was
// opened fails the read with ErrModelTooLarge.
func TestOpenModelGrowing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "grows")
	if err := os.WriteFile(path, make([]byte, 100), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := processors.OpenModel(t.Context(), path, 1000)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := os.WriteFile(path, make([]byte, 5000), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(r); !errors.Is(err, processors.ErrModelTooLarge) {
		t.Errorf("reading a file grown past the limit = %v, want ErrModelTooLarge", err)
	}
}
