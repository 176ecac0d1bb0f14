package tf2onnx_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
)

// TestControlFlowAgainstTensorFlow has the tensorflow venv's TensorFlow
// write SavedModels with tf.while_loop and tf.cond inside tf.function
// (testdata/gen_control.py: several loop variables with a counter, a trip
// count from an input, a loop variable whose shape grows, a
// maximum_iterations cap, a nested loop with a tf.cond in its body, If and
// StatelessIf on input-dependent predicates), translates them and compares
// what ONNX Runtime computes with TensorFlow's outputs.
func TestControlFlowAgainstTensorFlow(t *testing.T) {
	py := pyvenv.Python(t, "tensorflow")
	dir := t.TempDir()
	script := filepath.Join(require.RepoRoot(), "engines", "tf2onnx", "testdata", "gen_control.py")
	if out, err := exec.Command(py, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("gen_control.py: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "ref.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref map[string][]refCase
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model string
		ops   []string // ONNX ops the translation must hold, subgraphs included
	}{
		{"loops", []string{"Loop"}},
		{"nested", []string{"Loop", "If"}},
		{"cond", []string{"If"}},
	} {
		t.Run(tc.model, func(t *testing.T) {
			cases := ref[tc.model]
			if len(cases) == 0 {
				t.Fatalf("gen_control.py wrote no case for %s", tc.model)
			}
			var ts *tf2onnx.Signature
			for _, c := range cases {
				ts = check(t, filepath.Join(dir, tc.model), c)
			}
			ops := onnxOps(t, ts.Model)
			for _, op := range tc.ops {
				if !slices.Contains(ops, op) {
					t.Errorf("the translation has no ONNX %s (ops %v)", op, ops)
				}
			}
		})
	}
	t.Run("nested loops nest", func(t *testing.T) {
		m, err := savedmodel.Load(filepath.Join(dir, "nested"))
		if err != nil {
			t.Fatal(err)
		}
		ts, err := tf2onnx.Convert(m, "serving_default")
		if err != nil {
			t.Fatal(err)
		}
		var mp onnxpb.ModelProto
		if err := proto.Unmarshal(ts.Model, &mp); err != nil {
			t.Fatal(err)
		}
		if d := loopDepth(mp.Graph); d != 2 {
			t.Errorf("Loops nest %d deep, want 2", d)
		}
	})
}

// onnxOps lists the op types of a model's nodes, subgraphs included.
func onnxOps(t *testing.T, model []byte) []string {
	t.Helper()
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(model, &mp); err != nil {
		t.Fatal(err)
	}
	var ops []string
	var walk func(g *onnxpb.GraphProto)
	walk = func(g *onnxpb.GraphProto) {
		for _, n := range g.GetNode() {
			ops = append(ops, n.GetOpType())
			for _, a := range n.GetAttribute() {
				if a.GetG() != nil {
					walk(a.GetG())
				}
			}
		}
	}
	walk(mp.Graph)
	return ops
}

// loopDepth is how deep Loop nodes nest in g.
func loopDepth(g *onnxpb.GraphProto) int {
	d := 0
	for _, n := range g.GetNode() {
		for _, a := range n.GetAttribute() {
			if a.GetG() == nil {
				continue
			}
			sub := loopDepth(a.GetG())
			if n.GetOpType() == "Loop" {
				sub++
			}
			d = max(d, sub)
		}
	}
	return d
}
