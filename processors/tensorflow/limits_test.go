package tensorflow

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/internal/loadtest"
)

// TestLoadRefusesHostileSavedModel: a SavedModel whose saved_model.pb is a
// FIFO, or whose variables are over MaxModelBytes, is refused before
// savedmodel reads it.
func TestLoadRefusesHostileSavedModel(t *testing.T) {
	fifoDir := t.TempDir()
	loadtest.FIFO(t, fifoDir, "saved_model.pb")
	bigDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(bigDir, "saved_model.pb"), []byte{}, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(bigDir, "variables"), 0o700); err != nil {
		t.Fatal(err)
	}
	loadtest.Sparse(t, filepath.Join(bigDir, "variables"), "variables.data-00000-of-00001", 1<<30, nil)
	for _, c := range []struct {
		dir  string
		want error
	}{{fifoDir, processors.ErrNotRegular}, {bigDir, processors.ErrModelTooLarge}} {
		m := New("tensorflow_cpu_2.3")
		if err := m.Configure(processors.Spec{Code: "tensorflow_cpu_2.3", ModelSource: c.dir, MaxModelBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		err := loadtest.Bounded(t, func() error { return m.Load(t.Context(), processors.Files{ModelPath: c.dir}) })
		if !errors.Is(err, c.want) {
			t.Errorf("Load(%s) = %v, want %v", c.dir, err, c.want)
		}
	}
}
