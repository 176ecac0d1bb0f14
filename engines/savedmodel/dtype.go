package savedmodel

import (
	"fmt"

	shapepb "github.com/wamuir/graft/tensorflow/core/framework/tensor_shape_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/eas-server/eas-server/tensor"
)

// TensorFlow dtypes used by name in this package and its users.
const (
	DTString   = typespb.DataType_DT_STRING
	DTResource = typespb.DataType_DT_RESOURCE
)

var dtypes = map[typespb.DataType]tensor.DType{
	typespb.DataType_DT_FLOAT:    tensor.Float32,
	typespb.DataType_DT_DOUBLE:   tensor.Float64,
	typespb.DataType_DT_INT32:    tensor.Int32,
	typespb.DataType_DT_UINT8:    tensor.Uint8,
	typespb.DataType_DT_INT16:    tensor.Int16,
	typespb.DataType_DT_INT8:     tensor.Int8,
	typespb.DataType_DT_STRING:   tensor.String,
	typespb.DataType_DT_INT64:    tensor.Int64,
	typespb.DataType_DT_BOOL:     tensor.Bool,
	typespb.DataType_DT_BFLOAT16: tensor.BFloat16,
	typespb.DataType_DT_UINT16:   tensor.Uint16,
	typespb.DataType_DT_HALF:     tensor.Float16,
	typespb.DataType_DT_UINT32:   tensor.Uint32,
	typespb.DataType_DT_UINT64:   tensor.Uint64,
}

// DTypeOf maps a TensorFlow dtype (or its reference variant) to ours.
func DTypeOf(dt typespb.DataType) (tensor.DType, bool) {
	if dt > 100 {
		dt -= 100 // DT_FLOAT_REF and friends
	}
	d, ok := dtypes[dt]
	return d, ok
}

// TFDType maps our dtype to TensorFlow's.
func TFDType(d tensor.DType) (typespb.DataType, bool) {
	for k, v := range dtypes {
		if v == d {
			return k, true
		}
	}
	return typespb.DataType_DT_INVALID, false
}

// ShapeOf converts a TensorShapeProto; nil means unknown rank.
func ShapeOf(s *shapepb.TensorShapeProto) ([]int64, error) {
	if s == nil || s.UnknownRank {
		return nil, nil
	}
	if len(s.Dim) > 64 {
		return nil, fmt.Errorf("rank %d is more than 64", len(s.Dim))
	}
	out := make([]int64, len(s.Dim))
	for i, d := range s.Dim {
		out[i] = d.Size
		if d.Size < -1 {
			return nil, fmt.Errorf("dimension %d is %d", i, d.Size)
		}
	}
	return out, nil
}

func typesDType(v int32) typespb.DataType { return typespb.DataType(v) }

// shapeOf builds a TensorShapeProto.
func shapeOf(dims ...int64) *shapepb.TensorShapeProto {
	s := &shapepb.TensorShapeProto{}
	for _, d := range dims {
		s.Dim = append(s.Dim, &shapepb.TensorShapeProto_Dim{Size: d})
	}
	return s
}
