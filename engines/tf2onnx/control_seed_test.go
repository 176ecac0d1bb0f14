package tf2onnx

import (
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

	"github.com/eas-server/eas-server/engines/savedmodel"
)

// ControlSeed is controlSeed for the external tests.
var ControlSeed = controlSeed

// controlSeed is a saved_model.pb written the way TF2 writes control flow,
// by hand: x float [-1], n int32 [] -> a While over (i = 0, acc = x, n)
// with cond i < n and body (i + 1, acc * 2 + 1, n), then a StatelessIf on
// i > 1 whose branches take acc - 1 and acc + 1: outputs acc, steps (i),
// y. With variant set, the loop also carries a DT_VARIANT (a tensor list)
// that it passes on unchanged, which the translation refuses.
func controlSeed(tb testing.TB, variant bool) []byte {
	tb.Helper()
	i32, f32, b := typespb.DataType_DT_INT32, typespb.DataType_DT_FLOAT, typespb.DataType_DT_BOOL
	typ := func(t typespb.DataType) *attrpb.AttrValue {
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: t}}
	}
	types := func(ts ...typespb.DataType) *attrpb.AttrValue {
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{Type: ts}}}
	}
	fn := func(name string) *attrpb.AttrValue {
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Func{Func: &attrpb.NameAttrList{Name: name}}}
	}
	konst := func(name string, t *tensorpb.TensorProto) *nodepb.NodeDef {
		t.TensorShape = &shapepb.TensorShapeProto{}
		return &nodepb.NodeDef{Name: name, Op: "Const", Attr: map[string]*attrpb.AttrValue{"dtype": typ(t.Dtype), "value": {Value: &attrpb.AttrValue_Tensor{Tensor: t}}}}
	}
	op := func(name, op string, in ...string) *nodepb.NodeDef {
		return &nodepb.NodeDef{Name: name, Op: op, Input: in}
	}
	arg := func(name string, t typespb.DataType) *opdefpb.OpDef_ArgDef {
		return &opdefpb.OpDef_ArgDef{Name: name, Type: t}
	}
	loopArgs := func() []*opdefpb.OpDef_ArgDef {
		a := []*opdefpb.OpDef_ArgDef{arg("i", i32), arg("acc", f32), arg("n", i32)}
		if variant {
			a = append(a, arg("list", typespb.DataType_DT_VARIANT))
		}
		return a
	}
	body := &funcpb.FunctionDef{
		Signature: &opdefpb.OpDef{Name: "body", InputArg: loopArgs(),
			OutputArg: []*opdefpb.OpDef_ArgDef{arg("i_out", i32), arg("acc_out", f32), arg("n_out", i32)}},
		NodeDef: []*nodepb.NodeDef{
			konst("one", &tensorpb.TensorProto{Dtype: i32, IntVal: []int32{1}}),
			konst("two", &tensorpb.TensorProto{Dtype: f32, FloatVal: []float32{2}}),
			konst("onef", &tensorpb.TensorProto{Dtype: f32, FloatVal: []float32{1}}),
			op("i1", "AddV2", "i", "one:output:0"),
			op("m", "Mul", "acc", "two:output:0"),
			op("a", "AddV2", "m:z:0", "onef:output:0"),
			op("id", "Identity", "a:z:0"),
		},
		Ret: map[string]string{"i_out": "i1:z:0", "acc_out": "id:output:0", "n_out": "n"},
	}
	if variant {
		body.Signature.OutputArg = append(body.Signature.OutputArg, arg("list_out", typespb.DataType_DT_VARIANT))
		body.Ret["list_out"] = "list"
	}
	cond := &funcpb.FunctionDef{
		Signature: &opdefpb.OpDef{Name: "cond", InputArg: loopArgs(), OutputArg: []*opdefpb.OpDef_ArgDef{arg("out", b)}},
		NodeDef:   []*nodepb.NodeDef{op("lt", "Less", "i", "n")},
		Ret:       map[string]string{"out": "lt:z:0"},
	}
	branch := func(name, o string) *funcpb.FunctionDef {
		return &funcpb.FunctionDef{
			Signature: &opdefpb.OpDef{Name: name, InputArg: []*opdefpb.OpDef_ArgDef{arg("v", f32)}, OutputArg: []*opdefpb.OpDef_ArgDef{arg("r", f32)}},
			NodeDef:   []*nodepb.NodeDef{konst("k", &tensorpb.TensorProto{Dtype: f32, FloatVal: []float32{1}}), op("r", o, "v", "k:output:0")},
			Ret:       map[string]string{"r": "r:z:0"},
		}
	}
	while := op("w", "While", "zero", "x", "n")
	while.Attr = map[string]*attrpb.AttrValue{"T": types(i32, f32, i32), "cond": fn("cond"), "body": fn("body")}
	if variant {
		while.Input = append(while.Input, "list")
		while.Attr["T"] = types(i32, f32, i32, typespb.DataType_DT_VARIANT)
	}
	ifNode := op("branch", "StatelessIf", "p", "w:1")
	ifNode.Attr = map[string]*attrpb.AttrValue{"Tcond": typ(b), "Tin": types(f32), "Tout": types(f32),
		"then_branch": fn("dec"), "else_branch": fn("inc")}
	g := &graphpb.GraphDef{
		Node: []*nodepb.NodeDef{
			{Name: "x", Op: "Placeholder", Attr: map[string]*attrpb.AttrValue{"dtype": typ(f32)}},
			{Name: "n", Op: "Placeholder", Attr: map[string]*attrpb.AttrValue{"dtype": typ(i32)}},
			{Name: "list", Op: "Placeholder", Attr: map[string]*attrpb.AttrValue{"dtype": typ(typespb.DataType_DT_VARIANT)}},
			konst("zero", &tensorpb.TensorProto{Dtype: i32, IntVal: []int32{0}}),
			konst("limit", &tensorpb.TensorProto{Dtype: i32, IntVal: []int32{1}}),
			while,
			op("p", "Greater", "w", "limit"),
			ifNode,
		},
		Library: &funcpb.FunctionDefLibrary{Function: []*funcpb.FunctionDef{body, cond, branch("dec", "Sub"), branch("inc", "AddV2")}},
	}
	ti := func(name string, dt typespb.DataType, dims ...int64) *corepb.TensorInfo {
		s := &shapepb.TensorShapeProto{}
		for _, d := range dims {
			s.Dim = append(s.Dim, &shapepb.TensorShapeProto_Dim{Size: d})
		}
		return &corepb.TensorInfo{Encoding: &corepb.TensorInfo_Name{Name: name}, Dtype: dt, TensorShape: s}
	}
	sm := &corepb.SavedModel{MetaGraphs: []*corepb.MetaGraphDef{{
		MetaInfoDef: &corepb.MetaGraphDef_MetaInfoDef{Tags: []string{"serve"}},
		GraphDef:    g,
		SignatureDef: map[string]*corepb.SignatureDef{"serving_default": {
			Inputs:  map[string]*corepb.TensorInfo{"x": ti("x:0", f32, -1), "n": ti("n:0", i32)},
			Outputs: map[string]*corepb.TensorInfo{"acc": ti("w:1", f32, -1), "steps": ti("w:0", i32), "y": ti("branch:0", f32, -1)},
		}},
	}}}
	out, err := proto.Marshal(sm)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// TestControlSeed: the seed translates to a well-formed model (subgraphs
// checked in their scopes), with the variant refused by name.
func TestControlSeed(t *testing.T) {
	mg, err := savedmodel.ParseMetaGraph(controlSeed(t, false), savedmodel.ServeTag)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Convert(&savedmodel.Model{MetaGraph: mg}, "serving_default")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkSignature(ts); err != nil {
		t.Fatal(err)
	}
}
