package onnx

import (
	"errors"
	"os"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/internal/loadtest"
)

// TestLoadRefusesStreamsAndOversize: ONNX Runtime reads the model file
// itself, so Load refuses a device and a file over MaxModelBytes before
// handing the path over (no runtime needed for the test).
func TestLoadRefusesStreamsAndOversize(t *testing.T) {
	big := loadtest.Sparse(t, t.TempDir(), "big.onnx", 1<<30, nil)
	cases := []struct {
		path string
		want error
	}{{big, processors.ErrModelTooLarge}}
	if _, err := os.Stat("/dev/zero"); err == nil {
		cases = append(cases, struct {
			path string
			want error
		}{"/dev/zero", processors.ErrNotRegular})
	}
	for _, c := range cases {
		m := New("onnx_cpu")
		if err := m.Configure(processors.Spec{Code: "onnx_cpu", ModelSource: c.path, MaxModelBytes: 1 << 20}); err != nil {
			t.Fatal(err)
		}
		err := loadtest.Bounded(t, func() error { return m.Load(t.Context(), processors.Files{ModelPath: c.path}) })
		if !errors.Is(err, c.want) {
			t.Errorf("Load(%s) = %v, want %v", c.path, err, c.want)
		}
	}
}
