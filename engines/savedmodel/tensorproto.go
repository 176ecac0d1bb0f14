package savedmodel

import (
	"encoding/binary"
	"fmt"
	"math"

	tensorpb "github.com/wamuir/graft/tensorflow/core/framework/tensor_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/eas-server/eas-server/tensor"
)

// maxConstElements bounds a constant; maxFilledElements bounds one expanded
// from fewer values than its shape holds (TensorFlow stores a filled
// constant as one value plus a shape), which costs memory the model file
// does not pay for.
const (
	maxConstElements  = 1 << 31
	maxFilledElements = 1 << 24
)

// TensorFromProto converts a TensorProto (a Const node's value) to a tensor.
// A proto holding fewer values than its shape needs repeats the last one,
// as TensorFlow does.
func TensorFromProto(tp *tensorpb.TensorProto) (tensor.Tensor, error) {
	shape, err := ShapeOf(tp.GetTensorShape())
	if err != nil {
		return tensor.Tensor{}, err
	}
	if shape == nil {
		shape = []int64{}
	}
	n, err := numElements(shape)
	if err != nil {
		return tensor.Tensor{}, err
	}
	if n > maxConstElements {
		return tensor.Tensor{}, fmt.Errorf("constant of shape %v has more than %d elements", shape, maxConstElements)
	}
	dt, ok := DTypeOf(tp.GetDtype())
	if !ok {
		return tensor.Tensor{}, fmt.Errorf("constant of dtype %s is not supported", tp.GetDtype())
	}
	t := tensor.Tensor{DType: dt, Shape: shape}
	if dt == tensor.String {
		vals := tp.StringVal
		if int64(len(vals)) > n {
			return t, fmt.Errorf("string constant has %d values for shape %v", len(vals), shape)
		}
		if int64(len(vals)) < n && n > maxFilledElements {
			return t, fmt.Errorf("string constant of shape %v is filled from %d values; more than %d filled elements are refused", shape, len(vals), maxFilledElements)
		}
		t.Strings = make([][]byte, n)
		for i := range t.Strings {
			switch {
			case i < len(vals):
				t.Strings[i] = vals[i]
			case len(vals) > 0:
				t.Strings[i] = vals[len(vals)-1]
			default:
				t.Strings[i] = []byte{}
			}
		}
		return t, nil
	}
	size := int64(dt.Size())
	if len(tp.TensorContent) > 0 {
		if int64(len(tp.TensorContent)) != n*size {
			return t, fmt.Errorf("constant has %d content bytes for shape %v of %s", len(tp.TensorContent), shape, dt)
		}
		t.Data = append([]byte(nil), tp.TensorContent...)
		return t, nil
	}
	// One element at a time from the typed repeated field.
	var count int
	var put func(dst []byte, i int)
	switch tp.GetDtype() {
	case typespb.DataType_DT_FLOAT:
		count = len(tp.FloatVal)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint32(d, math.Float32bits(tp.FloatVal[i])) }
	case typespb.DataType_DT_DOUBLE:
		count = len(tp.DoubleVal)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint64(d, math.Float64bits(tp.DoubleVal[i])) }
	case typespb.DataType_DT_INT32:
		count = len(tp.IntVal)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint32(d, uint32(tp.IntVal[i])) }
	case typespb.DataType_DT_INT16, typespb.DataType_DT_UINT16:
		count = len(tp.IntVal)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint16(d, uint16(tp.IntVal[i])) }
	case typespb.DataType_DT_INT8, typespb.DataType_DT_UINT8:
		count = len(tp.IntVal)
		put = func(d []byte, i int) { d[0] = byte(tp.IntVal[i]) }
	case typespb.DataType_DT_HALF, typespb.DataType_DT_BFLOAT16:
		count = len(tp.HalfVal)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint16(d, uint16(tp.HalfVal[i])) }
	case typespb.DataType_DT_INT64:
		count = len(tp.Int64Val)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint64(d, uint64(tp.Int64Val[i])) }
	case typespb.DataType_DT_BOOL:
		count = len(tp.BoolVal)
		put = func(d []byte, i int) {
			d[0] = 0
			if tp.BoolVal[i] {
				d[0] = 1
			}
		}
	case typespb.DataType_DT_UINT32:
		count = len(tp.Uint32Val)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint32(d, tp.Uint32Val[i]) }
	case typespb.DataType_DT_UINT64:
		count = len(tp.Uint64Val)
		put = func(d []byte, i int) { binary.LittleEndian.PutUint64(d, tp.Uint64Val[i]) }
	default:
		return t, fmt.Errorf("constant of dtype %s is not supported", tp.GetDtype())
	}
	if int64(count) > n {
		return t, fmt.Errorf("constant has %d values for shape %v", count, shape)
	}
	if int64(count) < n && n > maxFilledElements {
		return t, fmt.Errorf("constant of shape %v is filled from %d values; more than %d filled elements are refused", shape, count, maxFilledElements)
	}
	t.Data = make([]byte, n*size)
	if count == 0 {
		return t, nil
	}
	for i := int64(0); i < n; i++ {
		src := int(i)
		if src >= count {
			src = count - 1
		}
		put(t.Data[i*size:], src)
	}
	return t, nil
}
