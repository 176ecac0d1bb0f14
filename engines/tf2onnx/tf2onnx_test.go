package tf2onnx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	funcpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	opdefpb "github.com/wamuir/graft/tensorflow/core/framework/op_def_go_proto"
	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/processors/onnx"
	"github.com/eas-server/eas-server/tensor"
)

func nd(name, op string, inputs ...string) *nodepb.NodeDef {
	return &nodepb.NodeDef{Name: name, Op: op, Input: inputs, Attr: map[string]*attrpb.AttrValue{}}
}

func floatType() *attrpb.AttrValue {
	return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: typespb.DataType_DT_FLOAT}}
}

func constF(name string, v float32) *nodepb.NodeDef {
	n := nd(name, "Const")
	n.Attr["dtype"] = floatType()
	n.Attr["value"] = &attrpb.AttrValue{Value: &attrpb.AttrValue_Tensor{Tensor: &tensorpb.TensorProto{
		Dtype: typespb.DataType_DT_FLOAT, TensorShape: &shapepb.TensorShapeProto{}, FloatVal: []float32{v}}}}
	return n
}

func tinfo(name string, dims ...int64) *corepb.TensorInfo {
	s := &shapepb.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &shapepb.TensorShapeProto_Dim{Size: d})
	}
	return &corepb.TensorInfo{Encoding: &corepb.TensorInfo_Name{Name: name}, Dtype: typespb.DataType_DT_FLOAT, TensorShape: s}
}

func model(g *graphpb.GraphDef, sigs map[string]*corepb.SignatureDef) *savedmodel.Model {
	return &savedmodel.Model{MetaGraph: &corepb.MetaGraphDef{
		MetaInfoDef: &corepb.MetaGraphDef_MetaInfoDef{Tags: []string{"serve"}}, GraphDef: g, SignatureDef: sigs}}
}

// TestUnsupportedOpsInOneError: every untranslatable op on the signature's
// path is named in one error with the signature; ops off the path are not.
func TestUnsupportedOpsInOneError(t *testing.T) {
	g := &graphpb.GraphDef{Node: []*nodepb.NodeDef{
		nd("x", "Placeholder"),
		nd("engine", "TRTEngineOp", "x"),
		nd("table", "HashTableV2"),
		nd("lookup", "LookupTableFindV2", "table", "engine", "x"),
		nd("y", "Mul", "lookup", "x"),
		nd("unused", "Fancy", "x"),
		nd("z", "Identity", "y:0", "^unused"),
	}}
	sig := &corepb.SignatureDef{Inputs: map[string]*corepb.TensorInfo{"x": tinfo("x:0", -1)}, Outputs: map[string]*corepb.TensorInfo{"z": tinfo("z:0", -1)}}
	_, err := tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"predict": sig}), "predict")
	var ue *tf2onnx.UnsupportedError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want *UnsupportedError", err)
	}
	for _, w := range []string{`"predict"`, "TRTEngineOp (engine)", "LookupTableFindV2 (lookup)", `table "table" is not filled`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %s", err, w)
		}
	}
	if strings.Contains(err.Error(), "Fancy") {
		t.Errorf("error %q names an op that is not on the path", err)
	}
	if _, err := tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"predict": sig}), "other"); err == nil || !strings.Contains(err.Error(), "predict") {
		t.Errorf("unknown signature: err %v should list the model's signatures", err)
	}
}

// TestStatefulControlDependency: an output that waits for an assignment
// through a control input is refused, not silently run without it.
func TestStatefulControlDependency(t *testing.T) {
	g := &graphpb.GraphDef{Node: []*nodepb.NodeDef{
		nd("x", "Placeholder"), nd("v", "VariableV2"), nd("upd", "AssignAdd", "v", "x"),
		nd("group", "NoOp", "^upd"), nd("y", "Identity", "x", "^group"),
	}}
	sig := &corepb.SignatureDef{Inputs: map[string]*corepb.TensorInfo{"x": tinfo("x:0", 1)}, Outputs: map[string]*corepb.TensorInfo{"y": tinfo("y:0", 1)}}
	_, err := tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"serving_default": sig}), "serving_default")
	if err == nil || !strings.Contains(err.Error(), "AssignAdd (upd)") {
		t.Errorf("err = %v, want the AssignAdd named", err)
	}
}

// TestFunctionInlining builds a TF2-style graph: the signature output comes
// from StatefulPartitionedCall -> wrapper function -> PartitionedCall ->
// body function, with a captured constant, and runs the translated model.
func TestFunctionInlining(t *testing.T) {
	arg := func(name string, dt typespb.DataType) *opdefpb.OpDef_ArgDef {
		return &opdefpb.OpDef_ArgDef{Name: name, Type: dt}
	}
	call := func(name, op, fn string, inputs ...string) *nodepb.NodeDef {
		n := nd(name, op, inputs...)
		n.Attr["f"] = &attrpb.AttrValue{Value: &attrpb.AttrValue_Func{Func: &attrpb.NameAttrList{Name: fn}}}
		return n
	}
	body := &funcpb.FunctionDef{
		Signature: &opdefpb.OpDef{Name: "body", InputArg: []*opdefpb.OpDef_ArgDef{arg("a", typespb.DataType_DT_FLOAT), arg("k", typespb.DataType_DT_FLOAT)},
			OutputArg: []*opdefpb.OpDef_ArgDef{arg("out", typespb.DataType_DT_FLOAT)}},
		NodeDef: []*nodepb.NodeDef{nd("m", "Mul", "a", "k"), constF("two", 2), nd("s", "AddV2", "m:z:0", "two:output:0")},
		Ret:     map[string]string{"out": "s:z:0"},
	}
	wrapper := &funcpb.FunctionDef{
		Signature: &opdefpb.OpDef{Name: "wrapper", InputArg: []*opdefpb.OpDef_ArgDef{arg("x", typespb.DataType_DT_FLOAT), arg("cap", typespb.DataType_DT_FLOAT)},
			OutputArg: []*opdefpb.OpDef_ArgDef{arg("y", typespb.DataType_DT_FLOAT)}},
		NodeDef: []*nodepb.NodeDef{call("inner", "PartitionedCall", "body", "x", "cap"), nd("id", "Identity", "inner:output:0")},
		Ret:     map[string]string{"y": "id:output:0"},
	}
	g := &graphpb.GraphDef{
		Node: []*nodepb.NodeDef{
			nd("serving_default_x", "Placeholder"), constF("k", 3),
			call("StatefulPartitionedCall", "StatefulPartitionedCall", "wrapper", "serving_default_x", "k"),
		},
		Library: &funcpb.FunctionDefLibrary{Function: []*funcpb.FunctionDef{body, wrapper}},
	}
	sig := &corepb.SignatureDef{Inputs: map[string]*corepb.TensorInfo{"x": tinfo("serving_default_x:0", -1)},
		Outputs: map[string]*corepb.TensorInfo{"y": tinfo("StatefulPartitionedCall:0", -1)}}
	ts, err := tf2onnx.Convert(model(g, map[string]*corepb.SignatureDef{"serving_default": sig}), "serving_default")
	if err != nil {
		t.Fatal(err)
	}
	var mp onnxpb.ModelProto
	if err := proto.Unmarshal(ts.Model, &mp); err != nil {
		t.Fatal(err)
	}
	if mp.OpsetImport[0].Version != tf2onnx.Opset {
		t.Errorf("opset %d", mp.OpsetImport[0].Version)
	}
	if !ts.Batchable {
		t.Error("signature with [-1] input and output is not batchable")
	}
	got := run(t, ts.Model, tensor.FromFloat32("x", []int64{3}, []float32{1, -1, 0.5}))
	want := tensor.FromFloat32("y", []int64{3}, []float32{5, -1, 3.5})
	if err := tensor.Close(got[0], want, tensor.F32Elementwise); err != nil {
		t.Error(err)
	}
}

// run executes an ONNX model through the ONNX processor's runtime.
func run(t *testing.T, model []byte, inputs ...tensor.Tensor) []tensor.Tensor {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m.onnx")
	if err := os.WriteFile(f, model, 0o644); err != nil {
		t.Fatal(err)
	}
	rt := onnx.NewRuntime("tensorflow_cpu_2.3", false, "")
	if err := rt.Configure(processors.Spec{Code: "tensorflow_cpu_2.3", ModelSource: f, CPU: 1}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Load(context.Background(), processors.Files{ModelPath: f}); err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	p, err := rt.FromTensors(t.Context(), &processors.TensorPayload{Inputs: inputs})
	if err != nil {
		t.Fatal(err)
	}
	res, err := rt.Run(context.Background(), []*onnx.Payload{p})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].Outputs
}
