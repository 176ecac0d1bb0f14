package tf2onnx_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"

	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"
)

// TestControlFlowAgainstTensorFlow has the tensorflow venv's TensorFlow
// write SavedModels with tf.while_loop and tf.cond inside tf.function
// (testdata/gen_control.py: several loop variables with a counter, a trip
// count from an input, a loop variable whose shape grows, a
// maximum_iterations cap, a nested loop with a tf.cond in its body, If and
// StatelessIf on input-dependent predicates, a tf.switch_case with an
// index out of range), translates them and compares
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
		{"switch", []string{"If"}},
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

// TestControlFlowHandBuilt runs the hand-written While and StatelessIf of
// the fuzz seed (no TensorFlow needed): acc = x*2+1 n times, the counter,
// and acc-1 or acc+1 as the counter passed 1; n = 0 runs no iteration.
func TestControlFlowHandBuilt(t *testing.T) {
	mg, err := savedmodel.ParseMetaGraph(tf2onnx.ControlSeed(t, false), savedmodel.ServeTag)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := tf2onnx.Convert(&savedmodel.Model{MetaGraph: mg}, "serving_default")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		n         int32
		acc, y    []float32
		wantSteps int32
	}{
		{3, []float32{15, 23, 31}, []float32{14, 22, 30}, 3},
		{1, []float32{3, 5, 7}, []float32{4, 6, 8}, 1},
		{0, []float32{1, 2, 3}, []float32{2, 3, 4}, 0},
	} {
		got := run(t, ts.Model, tensor.FromFloat32("x", []int64{3}, []float32{1, 2, 3}), tensor.FromInt32("n", []int64{1}, []int32{tc.n}))
		for _, want := range []tensor.Tensor{tensor.FromFloat32("acc", []int64{3}, tc.acc), tensor.FromFloat32("y", []int64{3}, tc.y),
			tensor.FromInt32("steps", []int64{1}, []int32{tc.wantSteps})} {
			i := slices.IndexFunc(got, func(g tensor.Tensor) bool { return g.Name == want.Name })
			if i < 0 {
				t.Fatalf("n=%d: no output %s", tc.n, want.Name)
			}
			if err := tensor.Close(got[i], want, tensor.F32Elementwise.For(want.DType)); err != nil {
				t.Errorf("n=%d: %v", tc.n, err)
			}
		}
	}
}

// TestControlFlowRefused: what the translation cannot express is refused
// by name with the reason, not mistranslated: a While carrying a tensor
// list (DT_VARIANT), and TF1 control flow frames (their NextIteration back
// edge is not reported as a cycle).
func TestControlFlowRefused(t *testing.T) {
	mg, err := savedmodel.ParseMetaGraph(tf2onnx.ControlSeed(t, true), savedmodel.ServeTag)
	if err != nil {
		t.Fatal(err)
	}
	_, err = tf2onnx.Convert(&savedmodel.Model{MetaGraph: mg}, "serving_default")
	var ue *tf2onnx.UnsupportedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "While (w): a loop variable is a tensor list") {
		t.Errorf("a While carrying a tensor list: err = %v, want it refused as such", err)
	}

	// x -> Enter -> Merge <- NextIteration <- body; Merge -> Less ->
	// LoopCond -> Switch -> Exit: tf.compat.v1.while_loop without
	// control flow v2.
	g := &graphpb.GraphDef{Node: []*nodepb.NodeDef{
		nd("x", "Placeholder"), constF("limit", 10), constF("one", 1),
		nd("enter", "Enter", "x"), nd("merge", "Merge", "enter", "next"),
		nd("less", "Less", "merge", "limit"), nd("cond", "LoopCond", "less"),
		nd("switch", "Switch", "merge", "cond"), nd("ident", "Identity", "switch:1"),
		nd("add", "AddV2", "ident", "one"), nd("next", "NextIteration", "add"),
		nd("exit", "Exit", "switch"),
	}}
	sig := &corepb.SignatureDef{Inputs: map[string]*corepb.TensorInfo{"x": tinfo("x:0", -1)}, Outputs: map[string]*corepb.TensorInfo{"y": tinfo("exit:0", -1)}}
	_, err = tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"serving_default": sig}), "serving_default")
	if !errors.As(err, &ue) {
		t.Fatalf("TF1 loop: err = %v, want *UnsupportedError", err)
	}
	for _, op := range []string{"Exit", "Switch", "LoopCond", "Merge", "NextIteration", "Enter"} {
		if _, ok := ue.Ops[op]; !ok {
			t.Errorf("TF1 loop: %s not named in %v", op, err)
		}
	}
	if !strings.Contains(err.Error(), "TF1 control flow") {
		t.Errorf("TF1 loop: %v does not say why", err)
	}
}
