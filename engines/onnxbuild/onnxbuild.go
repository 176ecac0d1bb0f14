// Package onnxbuild writes ONNX graphs: the node, initializer and attribute
// plumbing shared by the translators that turn other formats into ONNX models
// run by ONNX Runtime (tf2onnx for TensorFlow SavedModels, caffe for Caffe
// networks). The messages are those of package onnxpb.
package onnxbuild

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/tensor"
)

// Opset is the ONNX opset the translators target.
const Opset = 18

var onnxTypes = map[tensor.DType]onnxpb.TensorProto_DataType{
	tensor.Float32:  onnxpb.TensorProto_FLOAT,
	tensor.Uint8:    onnxpb.TensorProto_UINT8,
	tensor.Int8:     onnxpb.TensorProto_INT8,
	tensor.Uint16:   onnxpb.TensorProto_UINT16,
	tensor.Int16:    onnxpb.TensorProto_INT16,
	tensor.Int32:    onnxpb.TensorProto_INT32,
	tensor.Int64:    onnxpb.TensorProto_INT64,
	tensor.String:   onnxpb.TensorProto_STRING,
	tensor.Bool:     onnxpb.TensorProto_BOOL,
	tensor.Float16:  onnxpb.TensorProto_FLOAT16,
	tensor.Float64:  onnxpb.TensorProto_DOUBLE,
	tensor.Uint32:   onnxpb.TensorProto_UINT32,
	tensor.Uint64:   onnxpb.TensorProto_UINT64,
	tensor.BFloat16: onnxpb.TensorProto_BFLOAT16,
}

// Type is the ONNX element type of d, as an attribute value (Cast's "to").
func Type(d tensor.DType) int64 { return int64(onnxTypes[d]) }

// ValueInfo declares a graph input or output; a negative dimension is
// symbolic (named after the value), a nil shape is unknown rank.
func ValueInfo(name string, dt tensor.DType, shape []int64) *onnxpb.ValueInfoProto {
	tt := &onnxpb.TypeProto_Tensor{ElemType: int32(onnxTypes[dt])}
	if shape != nil {
		tt.Shape = &onnxpb.TensorShapeProto{}
		for i, d := range shape {
			dim := &onnxpb.TensorShapeProto_Dimension{}
			if d >= 0 {
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}
			} else {
				dim.Value = &onnxpb.TensorShapeProto_Dimension_DimParam{DimParam: fmt.Sprintf("%s_dim%d", name, i)}
			}
			tt.Shape.Dim = append(tt.Shape.Dim, dim)
		}
	}
	return &onnxpb.ValueInfoProto{Name: name, Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: tt}}}
}

// Graph collects nodes and initializers. Generated names start with Prefix,
// which keeps them apart from the names of the graph's inputs and outputs.
type Graph struct {
	Prefix string
	Nodes  []*onnxpb.NodeProto
	Inits  []*onnxpb.TensorProto
	seq    int
}

// Fresh returns a new value or node name.
func (g *Graph) Fresh(hint string) string {
	g.seq++
	return fmt.Sprintf("%s%s_%d", g.Prefix, hint, g.seq)
}

// Emit appends one node.
func (g *Graph) Emit(op string, inputs, outputs []string, attrs ...*onnxpb.AttributeProto) {
	g.Nodes = append(g.Nodes, &onnxpb.NodeProto{
		OpType: op, Input: inputs, Output: outputs, Name: g.Fresh(op), Attribute: attrs,
	})
}

// OpN emits op with n fresh outputs and returns their names. Inputs and
// attributes are given in any order: strings are inputs.
func (g *Graph) OpN(op string, n int, args ...any) []string {
	var ins []string
	var attrs []*onnxpb.AttributeProto
	for _, a := range args {
		switch a := a.(type) {
		case string:
			ins = append(ins, a)
		case []string:
			ins = append(ins, a...)
		case *onnxpb.AttributeProto:
			attrs = append(attrs, a)
		default:
			panic(fmt.Sprintf("onnxbuild: bad op argument %T", a))
		}
	}
	outs := make([]string, n)
	for i := range outs {
		outs[i] = g.Fresh("v")
	}
	g.Emit(op, ins, outs, attrs...)
	return outs
}

// Op1 emits op with one output and returns its name.
func (g *Graph) Op1(op string, args ...any) string { return g.OpN(op, 1, args...)[0] }

// Constant adds t as an initializer and returns its name.
func (g *Graph) Constant(t tensor.Tensor) string {
	name := g.Fresh("const")
	tp := &onnxpb.TensorProto{Name: name, Dims: t.Shape, DataType: int32(onnxTypes[t.DType])}
	if t.DType == tensor.String {
		tp.StringData = t.Strings
	} else {
		tp.RawData = t.Data
	}
	g.Inits = append(g.Inits, tp)
	return name
}

// I64Const adds a 1-D int64 constant.
func (g *Graph) I64Const(v []int64) string {
	return g.Constant(I64Tensor(v, []int64{int64(len(v))}))
}

// I64Scalar adds a scalar int64 constant.
func (g *Graph) I64Scalar(v int64) string {
	return g.Constant(I64Tensor([]int64{v}, []int64{}))
}

// F32Const adds a float32 constant of the given shape. It takes v over
// without copying (weights can be hundreds of megabytes): the caller must
// not change v afterwards.
func (g *Graph) F32Const(v []float32, shape []int64) string {
	return g.Constant(tensor.Own("", shape, v))
}

// I64Tensor packs v as an int64 tensor.
func I64Tensor(v []int64, shape []int64) tensor.Tensor { return tensor.FromInt64("", shape, v) }

// AttrInt is an INT attribute.
func AttrInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INT, I: v}
}

// AttrFloat is a FLOAT attribute.
func AttrFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_FLOAT, F: v}
}

// AttrInts is an INTS attribute.
func AttrInts(name string, v []int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INTS, Ints: v}
}

// AttrString is a STRING attribute.
func AttrString(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_STRING, S: []byte(v)}
}

// Model serializes graph as an IR-8, opset-Opset ModelProto.
func Model(graph *onnxpb.GraphProto, producer string) ([]byte, error) {
	mp := &onnxpb.ModelProto{
		IrVersion:    8,
		ProducerName: producer,
		OpsetImport:  []*onnxpb.OperatorSetIdProto{{Domain: "", Version: Opset}},
		Graph:        graph,
	}
	return proto.Marshal(mp)
}
