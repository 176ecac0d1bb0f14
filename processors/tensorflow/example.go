package tensorflow

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/wamuir/graft/tensorflow/core/example/example_protos_go_proto"

	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
)

// parseExamples parses a vector of serialized tf.Example protos (the input
// of a classify or regress signature) into one [batch] + shape tensor per
// dense feature the signature reads, as TensorFlow's ParseExample does:
// a missing feature takes its default, a required one is an error.
func parseExamples(p tf2onnx.Port, t tensor.Tensor) ([]tensor.Tensor, error) {
	if t.DType != tensor.String {
		return nil, badinput.Errorf("input %q holds serialized tf.Example protos and must be DT_STRING, got %s", p.Key, tfName(t.DType))
	}
	if len(t.Shape) > 1 {
		return nil, badinput.Errorf("input %q must be a vector of serialized tf.Example protos, got shape %s", p.Key, tensor.FormatShape(t.Shape))
	}
	n := len(t.Strings)
	examples := make([]*examplepb.Example, n)
	for i, s := range t.Strings {
		var ex examplepb.Example
		if err := proto.Unmarshal(s, &ex); err != nil {
			return nil, badinput.Errorf("input %q: element %d is not a serialized tf.Example: %v", p.Key, i, err)
		}
		examples[i] = &ex
	}
	out := make([]tensor.Tensor, 0, len(p.Features))
	for _, f := range p.Features {
		per := int64(1)
		for _, d := range f.Shape {
			per *= d
		}
		shape := append([]int64{int64(n)}, f.Shape...)
		res := tensor.Tensor{Name: f.Input, DType: f.DType, Shape: shape}
		if f.DType == tensor.String {
			res.Strings = make([][]byte, 0, int64(n)*per)
		} else {
			res.Data = make([]byte, 0, int64(n)*per*int64(f.DType.Size()))
		}
		for i, ex := range examples {
			feat := ex.GetFeatures().GetFeature()[f.Key]
			var count int
			switch f.DType {
			case tensor.Float32:
				v := feat.GetFloatList().GetValue()
				if feat != nil && feat.GetFloatList() == nil && feat.Kind != nil {
					return nil, badinput.Errorf("input %q: example %d: feature %q must be a float_list", p.Key, i, f.Key)
				}
				count = len(v)
				if int64(count) == per {
					for _, x := range v {
						res.Data = binary.LittleEndian.AppendUint32(res.Data, math.Float32bits(x))
					}
				}
			case tensor.Int64:
				v := feat.GetInt64List().GetValue()
				if feat != nil && feat.GetInt64List() == nil && feat.Kind != nil {
					return nil, badinput.Errorf("input %q: example %d: feature %q must be an int64_list", p.Key, i, f.Key)
				}
				count = len(v)
				if int64(count) == per {
					for _, x := range v {
						res.Data = binary.LittleEndian.AppendUint64(res.Data, uint64(x))
					}
				}
			case tensor.String:
				v := feat.GetBytesList().GetValue()
				if feat != nil && feat.GetBytesList() == nil && feat.Kind != nil {
					return nil, badinput.Errorf("input %q: example %d: feature %q must be a bytes_list", p.Key, i, f.Key)
				}
				count = len(v)
				if int64(count) == per {
					res.Strings = append(res.Strings, v...)
				}
			}
			switch {
			case int64(count) == per:
			case count == 0 && f.Default != nil:
				appendDefault(&res, f.Default, per)
			case count == 0:
				return nil, badinput.Errorf("input %q: example %d has no feature %q, which the signature requires (%s, shape %s, no default)",
					p.Key, i, f.Key, tfName(f.DType), tensor.FormatShape(f.Shape))
			default:
				return nil, badinput.Errorf("input %q: example %d: feature %q has %d values; the signature reads %d (shape %s)",
					p.Key, i, f.Key, count, per, tensor.FormatShape(f.Shape))
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// appendDefault appends per elements of def (repeating a single value).
func appendDefault(res *tensor.Tensor, def *tensor.Tensor, per int64) {
	k := def.NumElements()
	for j := range per {
		src := j
		if src >= k {
			src = k - 1
		}
		if res.DType == tensor.String {
			res.Strings = append(res.Strings, def.Strings[src])
			continue
		}
		sz := int64(res.DType.Size())
		res.Data = append(res.Data, def.Data[src*sz:(src+1)*sz]...)
	}
}
