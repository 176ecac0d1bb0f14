package tf2onnx

import (
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/internal/require"
)

// TestFunctionRestoreKeys follows the TF2 restore functions of the real
// fixtures to the checkpoint keys of their variables.
func TestFunctionRestoreKeys(t *testing.T) {
	base := require.ConformanceDir(t, "tensorflow")
	tests := []struct {
		dir  string
		want map[string]string
	}{
		{"saved_model_half_plus_two_tf2_cpu/00000123", map[string]string{
			"a": "a/.ATTRIBUTES/VARIABLE_VALUE", "b": "b/.ATTRIBUTES/VARIABLE_VALUE", "c": "c/.ATTRIBUTES/VARIABLE_VALUE"}},
		{"VarsAndArithmeticObjectGraph", map[string]string{
			"variable_x": "x/.ATTRIBUTES/VARIABLE_VALUE", "child_variable": "child/z/.ATTRIBUTES/VARIABLE_VALUE"}},
		// Two variables share the name uninitialized_variable: the object
		// graph cannot tell them apart, the restore function can.
		{"UninitializedVariable", map[string]string{
			"uninitialized_variable":   "uninitialized_variable/.ATTRIBUTES/VARIABLE_VALUE",
			"uninitialized_variable_1": "sub_module/uninitialized_variable/.ATTRIBUTES/VARIABLE_VALUE"}},
	}
	for _, tc := range tests {
		m, err := savedmodel.Load(filepath.Join(base, tc.dir))
		if err != nil {
			t.Fatal(err)
		}
		got := functionRestoreKeys(m)
		for v, k := range tc.want {
			if got[v] != k {
				t.Errorf("%s: variable %s -> %q, want %q (all: %v)", tc.dir, v, got[v], k, got)
			}
		}
	}
}
