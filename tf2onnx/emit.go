package tf2onnx

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/tf2onnx/onnxpb"
)

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

func onnxType(d tensor.DType) int64 { return int64(onnxTypes[d]) }

func valueInfo(name string, dt tensor.DType, shape []int64) *onnxpb.ValueInfoProto {
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

// fresh returns a new value or node name. The prefix keeps generated names
// apart from signature keys, which name the graph's inputs and outputs.
func (c *converter) fresh(hint string) string {
	c.seq++
	return fmt.Sprintf("_tf2onnx/%s_%d", hint, c.seq)
}

// emit appends one ONNX node.
func (c *converter) emit(op string, inputs, outputs []string, attrs ...*onnxpb.AttributeProto) {
	c.nodes = append(c.nodes, &onnxpb.NodeProto{
		OpType: op, Input: inputs, Output: outputs, Name: c.fresh(op), Attribute: attrs,
	})
}

// opN emits op with n fresh outputs and returns their names. Inputs and
// attributes are given in any order: strings are inputs.
func (c *converter) opN(op string, n int, args ...any) []string {
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
			panic(fmt.Sprintf("tf2onnx: bad op argument %T", a))
		}
	}
	outs := make([]string, n)
	for i := range outs {
		outs[i] = c.fresh("v")
	}
	c.emit(op, ins, outs, attrs...)
	return outs
}

func (c *converter) op1(op string, args ...any) string { return c.opN(op, 1, args...)[0] }

func attrInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INT, I: v}
}

func attrFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_FLOAT, F: v}
}

func attrInts(name string, v []int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_INTS, Ints: v}
}

func attrString(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_STRING, S: []byte(v)}
}

// constant adds t as an initializer and returns its name.
func (c *converter) constant(t tensor.Tensor) string {
	name := c.fresh("const")
	tp := &onnxpb.TensorProto{Name: name, Dims: t.Shape, DataType: int32(onnxTypes[t.DType])}
	if t.DType == tensor.String {
		tp.StringData = t.Strings
	} else {
		tp.RawData = t.Data
	}
	c.inits = append(c.inits, tp)
	return name
}

// constValue wraps a constant as a value.
func (c *converter) constValue(t tensor.Tensor) *value {
	tt := t
	return &value{name: c.constant(t), dtype: t.DType, konst: &tt, rank: len(t.Shape)}
}

// i64Const adds a 1-D int64 constant (a scalar when v is empty and
// scalar... use i64Scalar for that).
func (c *converter) i64Const(v []int64) string {
	return c.constant(i64Tensor(v, []int64{int64(len(v))}))
}

func (c *converter) i64Scalar(v int64) string {
	return c.constant(i64Tensor([]int64{v}, []int64{}))
}

func i64Tensor(v []int64, shape []int64) tensor.Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return tensor.Tensor{DType: tensor.Int64, Shape: shape, Data: b}
}

// scalarOf makes a scalar constant of dtype dt holding f.
func scalarOf(dt tensor.DType, f float64) (tensor.Tensor, error) {
	t := tensor.Tensor{DType: dt, Shape: []int64{}, Data: make([]byte, dt.Size())}
	switch dt {
	case tensor.Float32:
		binary.LittleEndian.PutUint32(t.Data, math.Float32bits(float32(f)))
	case tensor.Float64:
		binary.LittleEndian.PutUint64(t.Data, math.Float64bits(f))
	case tensor.Float16:
		binary.LittleEndian.PutUint16(t.Data, tensor.Float32ToFloat16(float32(f)))
	case tensor.BFloat16:
		binary.LittleEndian.PutUint16(t.Data, tensor.Float32ToBFloat16(float32(f)))
	case tensor.Int8, tensor.Uint8, tensor.Bool:
		t.Data[0] = byte(int64(f))
	case tensor.Int16, tensor.Uint16:
		binary.LittleEndian.PutUint16(t.Data, uint16(int64(f)))
	case tensor.Int32, tensor.Uint32:
		binary.LittleEndian.PutUint32(t.Data, uint32(int64(f)))
	case tensor.Int64, tensor.Uint64:
		binary.LittleEndian.PutUint64(t.Data, uint64(int64(f)))
	default:
		return t, fmt.Errorf("no numeric constant of dtype %s", dt)
	}
	return t, nil
}

// ints reads an integer constant (int32 or int64) as int64s.
func ints(t *tensor.Tensor) ([]int64, bool) {
	if t == nil {
		return nil, false
	}
	n := int(t.NumElements())
	out := make([]int64, n)
	switch t.DType {
	case tensor.Int32:
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	case tensor.Int64:
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	default:
		return nil, false
	}
	return out, true
}

// asInt64 returns v as an int64 ONNX value (shape inputs, axes, indices),
// converting a constant at translation time and casting otherwise.
func (c *converter) asInt64(v *value) string {
	if v.dtype == tensor.Int64 {
		return v.name
	}
	if is, ok := ints(v.konst); ok {
		return c.constant(i64Tensor(is, v.konst.Shape))
	}
	return c.op1("Cast", v.name, attrInt("to", int64(onnxpb.TensorProto_INT64)))
}

// as1D returns v as a 1-D int64 vector (a scalar becomes [v]).
func (c *converter) as1D(v *value) string {
	if is, ok := ints(v.konst); ok {
		return c.i64Const(is)
	}
	return c.op1("Reshape", c.asInt64(v), c.i64Const([]int64{-1}))
}
