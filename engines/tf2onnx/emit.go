package tf2onnx

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/tensor"
)

// constValue wraps a constant as a value.
func (c *converter) constValue(t tensor.Tensor) *value {
	tt := t
	return &value{name: c.Constant(t), dtype: t.DType, konst: &tt, rank: len(t.Shape)}
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
		return c.Constant(onnxbuild.I64Tensor(is, v.konst.Shape))
	}
	return c.Op1("Cast", v.name, onnxbuild.AttrInt("to", int64(onnxpb.TensorProto_INT64)))
}

// as1D returns v as a 1-D int64 vector (a scalar becomes [v]).
func (c *converter) as1D(v *value) string {
	if is, ok := ints(v.konst); ok {
		return c.I64Const(is)
	}
	return c.Op1("Reshape", c.asInt64(v), c.I64Const([]int64{-1}))
}
