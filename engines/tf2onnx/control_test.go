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

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
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
		{"tf1_loops", []string{"Loop"}},
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
		for _, model := range []string{"nested", "tf1_loops"} {
			m, err := savedmodel.Load(filepath.Join(dir, model))
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
				t.Errorf("%s: Loops nest %d deep, want 2", model, d)
			}
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
// list (DT_VARIANT), and a TF1 cond (Switch and Merge).
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

	// A TF1 cond (Switch and Merge outside a loop frame): y = x > 0 ?
	// x * 2 : -x.
	g := &graphpb.GraphDef{Node: []*nodepb.NodeDef{
		nd("x", "Placeholder"), constF("zero", 0), constF("two", 2),
		nd("pred", "Greater", "x", "zero"), nd("switch", "Switch", "x", "pred"),
		nd("t", "Mul", "switch:1", "two"), nd("f", "Neg", "switch"),
		nd("merge", "Merge", "f", "t"),
	}}
	sig := &corepb.SignatureDef{Inputs: map[string]*corepb.TensorInfo{"x": tinfo("x:0")}, Outputs: map[string]*corepb.TensorInfo{"y": tinfo("merge:0")}}
	_, err = tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"serving_default": sig}), "serving_default")
	if !errors.As(err, &ue) {
		t.Fatalf("TF1 cond: err = %v, want *UnsupportedError", err)
	}
	for _, op := range []string{"Switch", "Merge"} {
		if _, ok := ue.Ops[op]; !ok {
			t.Errorf("TF1 cond: %s not named in %v", op, err)
		}
	}
	if !strings.Contains(err.Error(), "TF1 control flow") {
		t.Errorf("TF1 cond: %v does not say why", err)
	}
}

// TestTF1LoopHandBuilt: a TF1 loop frame by hand, x -> Enter -> Merge <-
// NextIteration <- Identity(Switch:1) + 1; Merge < limit -> LoopCond ->
// Switch -> Exit (the limit entering as a constant), and an Exit whose
// Switch reads no LoopCond, refused.
func TestTF1LoopHandBuilt(t *testing.T) {
	enter := func(name, in string, constant bool) *nodepb.NodeDef {
		n := nd(name, "Enter", in)
		n.Attr["frame_name"] = &attrpb.AttrValue{Value: &attrpb.AttrValue_S{S: []byte("loop")}}
		n.Attr["is_constant"] = &attrpb.AttrValue{Value: &attrpb.AttrValue_B{B: constant}}
		return n
	}
	g := &graphpb.GraphDef{Node: []*nodepb.NodeDef{
		nd("x", "Placeholder"), constF("limit", 10), constF("one", 1),
		enter("enter", "x", false), enter("limit_in", "limit", true), nd("merge", "Merge", "enter", "next"),
		nd("less", "Less", "merge", "limit_in"), nd("cond", "LoopCond", "less"),
		nd("switch", "Switch", "merge", "cond"), nd("ident", "Identity", "switch:1"),
		nd("add", "AddV2", "ident", "one"), nd("next", "NextIteration", "add"),
		nd("exit", "Exit", "switch"),
		nd("bad_switch", "Switch", "x", "less"), nd("bad_exit", "Exit", "bad_switch"),
	}}
	sig := &corepb.SignatureDef{Inputs: map[string]*corepb.TensorInfo{"x": tinfo("x:0")}, Outputs: map[string]*corepb.TensorInfo{"y": tinfo("exit:0")}}
	ts, err := tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"serving_default": sig}), "serving_default")
	if err != nil {
		t.Fatal(err)
	}
	for x, want := range map[float32]float32{0.5: 10.5, 12: 12, -3: 10} {
		got := run(t, ts.Model, tensor.FromFloat32("x", []int64{1}, []float32{x}))
		if err := tensor.Close(got[0], tensor.FromFloat32("y", []int64{1}, []float32{want}), tensor.F32Elementwise); err != nil {
			t.Errorf("x = %g: %v", x, err)
		}
	}
	sig.Outputs["y"] = tinfo("bad_exit:0")
	_, err = tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"serving_default": sig}), "serving_default")
	if err == nil || !strings.Contains(err.Error(), "Exit (bad_exit): TF1 control flow: a loop whose Switch does not read a LoopCond") {
		t.Errorf("an Exit outside a loop frame: err = %v, want it refused", err)
	}
}
