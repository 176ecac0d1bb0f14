package tensorflow

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/protobuf/proto"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"
	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"
	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// graphBuilder writes small SavedModels the way TensorFlow lays them out:
// Placeholder inputs, Const nodes, variables restored from a tensor bundle
// by RestoreV2 + Assign (TF1) or AssignVariableOp (resource variables).
type graphBuilder struct {
	nodes  []*nodepb.NodeDef
	vars   []tensor.Tensor
	inputs map[string]*corepb.TensorInfo
	seq    int
	// outShapes gives signature output shapes; outputs not listed have an
	// unknown rank.
	outShapes map[string][]int64
	// restores are what the saver's restore op runs (a NoOp named by
	// SaverDef.restore_op_name, waiting for them).
	restores []string
}

func newBuilder() *graphBuilder { return &graphBuilder{inputs: map[string]*corepb.TensorInfo{}} }

func tfType(t testing.TB, d tensor.DType) typespb.DataType {
	dt, ok := savedmodel.TFDType(d)
	if !ok {
		t.Fatalf("no tf dtype for %s", d)
	}
	return dt
}

func shapeProto(shape []int64) *shapepb.TensorShapeProto {
	if shape == nil {
		return &shapepb.TensorShapeProto{UnknownRank: true}
	}
	s := &shapepb.TensorShapeProto{}
	for _, d := range shape {
		s.Dim = append(s.Dim, &shapepb.TensorShapeProto_Dim{Size: d})
	}
	return s
}

func (b *graphBuilder) name(op string) string {
	b.seq++
	return fmt.Sprintf("%s_%d", op, b.seq)
}

// attr converts a Go value to an AttrValue.
func attr(v any) *attrpb.AttrValue {
	switch v := v.(type) {
	case string:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_S{S: []byte(v)}}
	case int:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: int64(v)}}
	case int64:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_I{I: v}}
	case float32:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_F{F: v}}
	case bool:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_B{B: v}}
	case []int64:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_List{List: &attrpb.AttrValue_ListValue{I: v}}}
	case typespb.DataType:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Type{Type: v}}
	case *tensorpb.TensorProto:
		return &attrpb.AttrValue{Value: &attrpb.AttrValue_Tensor{Tensor: v}}
	}
	panic(fmt.Sprintf("attr of %T", v))
}

// node adds a node and returns its name ("name" is output 0).
func (b *graphBuilder) node(op string, inputs []string, attrs map[string]any) string {
	n := &nodepb.NodeDef{Name: b.name(op), Op: op, Input: inputs, Attr: map[string]*attrpb.AttrValue{}}
	for k, v := range attrs {
		n.Attr[k] = attr(v)
	}
	b.nodes = append(b.nodes, n)
	return n.Name
}

// op adds a node with attribute T set from dtype.
func (b *graphBuilder) op(t testing.TB, op string, dt tensor.DType, inputs []string, attrs map[string]any) string {
	if attrs == nil {
		attrs = map[string]any{}
	}
	if _, ok := attrs["T"]; !ok {
		attrs["T"] = tfType(t, dt)
	}
	return b.node(op, inputs, attrs)
}

// input adds a Placeholder that is a signature input under key.
func (b *graphBuilder) input(t testing.TB, key string, dt tensor.DType, shape []int64) string {
	n := &nodepb.NodeDef{Name: key, Op: "Placeholder", Attr: map[string]*attrpb.AttrValue{
		"dtype": attr(tfType(t, dt)), "shape": {Value: &attrpb.AttrValue_Shape{Shape: shapeProto(shape)}},
	}}
	b.nodes = append(b.nodes, n)
	b.inputs[key] = &corepb.TensorInfo{Encoding: &corepb.TensorInfo_Name{Name: key + ":0"}, Dtype: tfType(t, dt), TensorShape: shapeProto(shape)}
	return key
}

func tensorProto(t testing.TB, v tensor.Tensor) *tensorpb.TensorProto {
	tp := &tensorpb.TensorProto{Dtype: tfType(t, v.DType), TensorShape: shapeProto(v.Shape)}
	if v.DType == tensor.String {
		tp.StringVal = v.Strings
	} else {
		tp.TensorContent = v.Data
	}
	return tp
}

// konst adds a Const node.
func (b *graphBuilder) konst(t testing.TB, v tensor.Tensor) string {
	return b.node("Const", nil, map[string]any{"dtype": tfType(t, v.DType), "value": tensorProto(t, v)})
}

func (b *graphBuilder) i32(t testing.TB, v ...int32) string {
	return b.konst(t, tensor.FromInt32("", []int64{int64(len(v))}, v))
}

func (b *graphBuilder) i32Scalar(t testing.TB, v int32) string {
	return b.konst(t, tensor.FromInt32("", []int64{}, []int32{v}))
}

// variable adds a TF1 VariableV2 (read through Identity) or a resource
// variable (VarHandleOp read by ReadVariableOp) whose value is saved in the
// bundle under a checkpoint key unlike its node name, so the test proves the
// key comes from the restore ops.
func (b *graphBuilder) variable(t testing.TB, v tensor.Tensor, resource bool) string {
	dt := tfType(t, v.DType)
	key := fmt.Sprintf("layer%d/weights", len(b.vars))
	v.Name = key
	b.vars = append(b.vars, v)
	names := b.konst(t, tensor.FromStrings("", []int64{1}, []string{key}))
	slices := b.konst(t, tensor.FromStrings("", []int64{1}, []string{""}))
	prefix := b.konst(t, tensor.FromStrings("", []int64{}, []string{"variables/variables"}))
	restore := b.node("RestoreV2", []string{prefix, names, slices}, nil)
	if resource {
		h := b.node("VarHandleOp", nil, map[string]any{"dtype": dt, "shared_name": b.name("var")})
		b.node("AssignVariableOp", []string{h, restore}, map[string]any{"dtype": dt})
		return b.node("ReadVariableOp", []string{h}, map[string]any{"dtype": dt})
	}
	vn := b.node("VariableV2", nil, map[string]any{"dtype": dt})
	b.node("Assign", []string{vn, restore}, map[string]any{"T": dt})
	return b.node("Identity", []string{vn}, map[string]any{"T": dt})
}

// save writes the SavedModel with one serving_default signature whose
// outputs (key -> tensor name) have unknown shapes.
func (b *graphBuilder) save(t testing.TB, outputs map[string]string, outTypes map[string]tensor.DType) string {
	dir := t.TempDir()
	sig := &corepb.SignatureDef{Inputs: b.inputs, Outputs: map[string]*corepb.TensorInfo{}, MethodName: "tensorflow/serving/predict"}
	for k, name := range outputs {
		sig.Outputs[k] = &corepb.TensorInfo{Encoding: &corepb.TensorInfo_Name{Name: name}, Dtype: tfType(t, outTypes[k]), TensorShape: shapeProto(b.outShapes[k])}
	}
	mg := &corepb.MetaGraphDef{
		MetaInfoDef:  &corepb.MetaGraphDef_MetaInfoDef{Tags: []string{"serve"}},
		GraphDef:     &graphpb.GraphDef{Node: b.nodes},
		SignatureDef: map[string]*corepb.SignatureDef{"serving_default": sig},
	}
	if len(b.restores) > 0 {
		var deps []string
		for _, r := range b.restores {
			deps = append(deps, "^"+r)
		}
		mg.SaverDef = &corepb.SaverDef{RestoreOpName: b.node("NoOp", deps, nil)}
		mg.GraphDef.Node = b.nodes
	}
	data, err := proto.Marshal(&corepb.SavedModel{MetaGraphs: []*corepb.MetaGraphDef{mg}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "saved_model.pb"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if len(b.vars) > 0 {
		os.Mkdir(filepath.Join(dir, "variables"), 0o755)
		if err := savedmodel.WriteBundle(filepath.Join(dir, "variables", "variables"), b.vars, true); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
