package tf2onnx_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
)

// genTables has the tensorflow venv's TensorFlow write the mutable-table
// and ParseSingleExample SavedModels and their references
// (testdata/gen_tables.py).
func genTables(t *testing.T) (string, map[string]json.RawMessage) {
	t.Helper()
	py := pyvenv.Python(t, "tensorflow")
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "engines", "tf2onnx", "testdata", "gen_tables.py")
	if out, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_tables.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string]json.RawMessage
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return dir, ref
}

// TestMutableTablesAgainstTensorFlow: MutableHashTable (string -> int64,
// int64 -> float, string -> float vector) and DenseHashTable contents
// inserted before saving live in the variables bundle alone; the
// translation reads them as TensorFlow restores them (the TF2 restore
// function, the TF1 saver's RestoreV2 -> LookupTableImportV2) and looks up
// present and absent keys as TensorFlow does. A signature that writes a
// table when served is refused, naming the write. ParseSingleExample
// translates (processors/tensorflow's TestTablesServed checks its outputs
// against TensorFlow's).
func TestMutableTablesAgainstTensorFlow(t *testing.T) {
	dir, ref := genTables(t)
	for _, model := range []string{"mutable", "mutable_v1"} {
		t.Run(model, func(t *testing.T) {
			var c map[string]refCase
			if err := json.Unmarshal(ref[model], &c); err != nil {
				t.Fatal(err)
			}
			check(t, filepath.Join(dir, model), c["serving_default"])
		})
	}
	// ParseSingleExample of a scalar input: its features are parsed in
	// Go without the batch dimension (served and compared with
	// TensorFlow's outputs by processors/tensorflow's TestTablesServed).
	// ParseExampleV2 of a scalar (tf.io.parse_single_example) likewise.
	for model, nfeat := range map[string]int{"single": 5, "single_v2": 2} {
		t.Run(model, func(t *testing.T) {
			m, err := savedmodel.Load(filepath.Join(dir, model))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := tf2onnx.Convert(m, "serving_default")
			if err != nil {
				t.Fatal(err)
			}
			if len(ts.Inputs) != 1 || ts.Inputs[0].Kind != tf2onnx.Examples || len(ts.Inputs[0].Features) != nfeat {
				t.Fatalf("inputs %+v, want one Examples port with %d features", ts.Inputs, nfeat)
			}
			for _, f := range ts.Inputs[0].Features {
				if !f.Single {
					t.Errorf("feature %q is not parsed as one example's", f.Key)
				}
			}
		})
	}
	t.Run("writes", func(t *testing.T) {
		m, err := savedmodel.Load(filepath.Join(dir, "writes"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tf2onnx.Convert(m, "serving_default")
		var ue *tf2onnx.UnsupportedError
		if !errors.As(err, &ue) || ue.Ops["LookupTableInsertV2"] == nil || ue.Ops["LookupTableFindV2"] == nil ||
			!strings.Contains(ue.Reasons["LookupTableFindV2"], "writes lookup tables") {
			t.Fatalf("err %v, want LookupTableInsertV2 and LookupTableFindV2 refused", err)
		}
	})
}
