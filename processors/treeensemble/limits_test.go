package treeensemble_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/internal/loadtest"
	"github.com/eas-server/eas-server/processors/treeensemble"
)

// load configures a parameter_server processor with spec and loads
// model_path under loadtest.Bounded: a load that reads an endless stream
// fails the test instead of growing without bound (issue 14: 3 GB in 2 s).
func load(t *testing.T, ctx context.Context, spec processors.Spec, path string) error {
	t.Helper()
	spec.Code, spec.ModelSource = "parameter_server", path
	p := &treeensemble.Processor{}
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

// TestLoadRefusesFIFO: a named pipe (as model_path, as model_entry, or the
// only model file in the directory) is refused without opening it.
func TestLoadRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := loadtest.FIFO(t, dir, "model.json")
	for _, path := range []string{fifo, dir} {
		err := load(t, t.Context(), processors.Spec{}, path)
		if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
			t.Errorf("Load(%s) = %v, want a not-a-regular-file error", path, err)
		}
	}
	err := load(t, t.Context(), processors.Spec{ModelEntry: "model.json"}, dir)
	if err == nil || !strings.Contains(err.Error(), "is not a regular file") {
		t.Errorf("Load(%s, model_entry model.json) = %v, want a not-a-regular-file error", dir, err)
	}
}

// TestLoadRefusesOverLimit: a (sparse) file larger than MaxModelBytes is
// refused without reading it.
func TestLoadRefusesOverLimit(t *testing.T) {
	path := loadtest.Sparse(t, t.TempDir(), "big.json", 1<<30, []byte(`{"learner": `))
	err := load(t, t.Context(), processors.Spec{MaxModelBytes: 1 << 20}, path)
	if !errors.Is(err, processors.ErrModelTooLarge) {
		t.Fatalf("Load(1 GiB file, limit 1 MiB) = %v, want ErrModelTooLarge", err)
	}
}

// TestLoadCancelledMidRead: cancelling the load while it reads a large
// file returns ctx's error from the read loop. The buffer for the whole
// file (its size as stat says) is allocated up front, hence the bound.
func TestLoadCancelledMidRead(t *testing.T) {
	path := loadtest.Sparse(t, t.TempDir(), "big.json", 64<<20, []byte(`{"learner": `))
	ctx := loadtest.CancelAfter(t.Context(), 4)
	p := &treeensemble.Processor{}
	if err := p.Configure(processors.Spec{Code: "parameter_server", ModelSource: path}); err != nil {
		t.Fatal(err)
	}
	err := loadtest.BoundedBy(t, 100<<20, func() error { return p.Load(ctx, processors.Files{ModelPath: path}) })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Load with a cancelled ctx = %v, want context.Canceled", err)
	}
}

// TestLoadSymlinkToFile: a symlink to a regular file is a model file.
func TestLoadSymlinkToFile(t *testing.T) {
	abs, err := filepath.Abs("../../engines/trees/testdata/xgboost/binary.json")
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "model.json")
	if err := os.Symlink(abs, link); err != nil {
		t.Skip(err)
	}
	if err := load(t, t.Context(), processors.Spec{}, link); err != nil {
		t.Fatalf("Load(symlink to binary.json) = %v", err)
	}
}
