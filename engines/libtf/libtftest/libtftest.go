// Package libtftest gives the libtensorflow runtime's tests what they share:
// the TensorFlow environment (scripts/python-venv.sh tensorflow), the
// library in it, and the SavedModels that TensorFlow writes at test time
// with their reference outputs (engines/libtf/testdata/gen_models.py).
package libtftest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
)

// Env is the environment's python and the TensorFlow library in it.
type Env struct {
	Python  string
	Library string // site-packages/tensorflow/libtensorflow_cc.so.2
}

// Setup finds the environment (skipping, or failing under
// EAS_REQUIRE_PYTHON=1, without it) and points EAS_TENSORFLOW_LIB at its
// library for the test.
func Setup(t testing.TB) Env {
	t.Helper()
	py := pyvenv.Python(t, "tensorflow")
	libs, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Dir(py)), "lib", "python3*", "site-packages", "tensorflow", "libtensorflow_cc.so.2"))
	if len(libs) == 0 {
		require.Missing(t, require.Python, "the tensorflow environment %s has no site-packages/tensorflow/libtensorflow_cc.so.2: run bash scripts/python-venv.sh tensorflow", filepath.Dir(filepath.Dir(py)))
	}
	t.Setenv("EAS_TENSORFLOW_LIB", libs[0])
	return Env{Python: py, Library: libs[0]}
}

// Case is one signature's reference: its inputs and TensorFlow's outputs.
type Case struct {
	Inputs, Outputs map[string]tensor.Tensor
}

// Models has TensorFlow write the test SavedModels into a temporary
// directory and returns it with the references: model -> signature -> case.
func Models(t testing.TB, env Env) (string, map[string]map[string]Case) {
	t.Helper()
	return Generate(t, env, filepath.Join(require.RepoRoot(), "engines", "libtf", "testdata", "gen_models.py"))
}

// Generate runs a generator script as gen_models.py runs: `script OUT_DIR`
// writes SavedModels into OUT_DIR and OUT_DIR/ref.json, {"<model>":
// {"<signature>": {"inputs": {...}, "outputs": {...}}}} with each tensor
// {"dtype", "shape", "data"} (strings as text).
func Generate(t testing.TB, env Env, script string) (string, map[string]map[string]Case) {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command(env.Python, script, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", filepath.Base(script), err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]map[string]struct {
		Inputs, Outputs map[string]jsonTensor
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	refs := map[string]map[string]Case{}
	for model, sigs := range raw {
		refs[model] = map[string]Case{}
		for sig, c := range sigs {
			rc := Case{Inputs: map[string]tensor.Tensor{}, Outputs: map[string]tensor.Tensor{}}
			for name, jt := range c.Inputs {
				rc.Inputs[name] = jt.tensor(t, name)
			}
			for name, jt := range c.Outputs {
				rc.Outputs[name] = jt.tensor(t, name)
			}
			refs[model][sig] = rc
		}
	}
	return dir, refs
}

type jsonTensor struct {
	DType string            `json:"dtype"`
	Shape []int64           `json:"shape"`
	Data  []json.RawMessage `json:"data"`
}

func (j jsonTensor) tensor(t testing.TB, name string) tensor.Tensor {
	t.Helper()
	dec := func(i int, v any) {
		if err := json.Unmarshal(j.Data[i], v); err != nil {
			t.Fatalf("ref.json %s[%d]: %v", name, i, err)
		}
	}
	n := len(j.Data)
	switch j.DType {
	case "FP32":
		v := make([]float32, n)
		for i := range v {
			dec(i, &v[i])
		}
		return tensor.FromFloat32(name, j.Shape, v)
	case "INT64":
		v := make([]int64, n)
		for i := range v {
			dec(i, &v[i])
		}
		return tensor.FromInt64(name, j.Shape, v)
	case "INT32":
		v := make([]int32, n)
		for i := range v {
			dec(i, &v[i])
		}
		return tensor.FromInt32(name, j.Shape, v)
	case "BOOL":
		v := make([]bool, n)
		for i := range v {
			dec(i, &v[i])
		}
		return tensor.FromBool(name, j.Shape, v)
	case "BYTES":
		v := make([]string, n)
		for i := range v {
			dec(i, &v[i])
		}
		return tensor.FromStrings(name, j.Shape, v)
	}
	t.Fatalf("ref.json %s: dtype %s", name, j.DType)
	return tensor.Tensor{}
}

// Sorted returns the case's inputs in name order.
func (c Case) Sorted() []tensor.Tensor {
	names := make([]string, 0, len(c.Inputs))
	for n := range c.Inputs {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]tensor.Tensor, len(names))
	for i, n := range names {
		out[i] = c.Inputs[n]
	}
	return out
}

// String describes a case for messages.
func (c Case) String() string {
	return fmt.Sprintf("%d inputs, %d outputs", len(c.Inputs), len(c.Outputs))
}
