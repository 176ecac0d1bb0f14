package pmml_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/internal/loadtest"
	pmmlproc "github.com/eas-server/eas-server/processors/pmml"
)

// load configures a pmml processor with spec and loads model_path under
// loadtest.Bounded: a load that reads an endless stream fails the test
// instead of growing without bound (issue 14: 16.9 GB in two minutes).
func load(t *testing.T, ctx context.Context, spec processors.Spec, path string) error {
	t.Helper()
	spec.Code, spec.ModelSource = "pmml", path
	p := &pmmlproc.Processor{}
	if err := p.Configure(spec); err != nil {
		t.Fatal(err)
	}
	return loadtest.Bounded(t, func() error { return p.Load(ctx, processors.Files{ModelPath: path}) })
}

// TestLoadRefusesDevZero: model_path /dev/zero is refused before a byte is
// read. Run it also without -race: the allocation bound is the point.
func TestLoadRefusesDevZero(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip(err)
	}
	err := load(t, t.Context(), processors.Spec{}, "/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "model_path: /dev/zero is not a regular file") {
		t.Fatalf("Load(/dev/zero) = %v, want a not-a-regular-file error", err)
	}
}

// TestLoadRefusesFIFO: a named pipe (as model_path, or the only .pmml in
// the directory) is refused without opening it, which would block.
func TestLoadRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := loadtest.FIFO(t, dir, "model.pmml")
	for _, path := range []string{fifo, dir} {
		err := load(t, t.Context(), processors.Spec{}, path)
		if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
			t.Errorf("Load(%s) = %v, want a not-a-regular-file error", path, err)
		}
	}
}

// TestLoadRefusesOverLimit: a (sparse) file larger than MaxModelBytes is
// refused without reading it.
func TestLoadRefusesOverLimit(t *testing.T) {
	path := loadtest.Sparse(t, t.TempDir(), "big.pmml", 1<<30, []byte(`<PMML version="4.4">`))
	err := load(t, t.Context(), processors.Spec{MaxModelBytes: 1 << 20}, path)
	if !errors.Is(err, processors.ErrModelTooLarge) {
		t.Fatalf("Load(1 GiB file, limit 1 MiB) = %v, want ErrModelTooLarge", err)
	}
}

// TestLoadRefusesOverPMMLLimit: without a service limit, PMML's own bound
// refuses a document no PMML model needs.
func TestLoadRefusesOverPMMLLimit(t *testing.T) {
	path := loadtest.Sparse(t, t.TempDir(), "big.pmml", 4<<30, []byte(`<PMML version="4.4">`))
	err := load(t, t.Context(), processors.Spec{}, path)
	if !errors.Is(err, processors.ErrModelTooLarge) {
		t.Fatalf("Load(4 GiB file) = %v, want ErrModelTooLarge", err)
	}
}

// TestLoadCancelledMidRead: cancelling the load while it reads a large
// file returns ctx's error from the read loop, having read little of it.
func TestLoadCancelledMidRead(t *testing.T) {
	path := loadtest.Sparse(t, t.TempDir(), "big.pmml", 512<<20, []byte(`<PMML version="4.4"><!-- `))
	ctx := loadtest.CancelAfter(t.Context(), 16)
	err := load(t, ctx, processors.Spec{}, path)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Load with a cancelled ctx = %v, want context.Canceled", err)
	}
}

// TestLoadSymlinkToFile: a symlink to a regular file is a model file.
func TestLoadSymlinkToFile(t *testing.T) {
	abs, err := filepath.Abs("../../engines/pmml/testdata/lr.pmml")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "model.pmml")
	if err := os.Symlink(abs, link); err != nil {
		t.Skip(err)
	}
	if err := load(t, t.Context(), processors.Spec{}, link); err != nil {
		t.Fatalf("Load(symlink to lr.pmml) = %v", err)
	}
}
