package tensorflow

import (
	"encoding/binary"
	"math"
	"slices"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/wamuir/graft/tensorflow/core/example/example_protos_go_proto"

	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
)

// parseExamples parses a vector of serialized tf.Example protos (the input
// of a classify or regress signature) into one [batch] + shape tensor per
// dense feature the signature reads, as TensorFlow's ParseExample does:
// a missing feature takes its default, a required one is an error; and
// into indices, values and dense shape per sparse (VarLen) feature.
// Features parsed from one example (Feature.Single: ParseSingleExample, a
// scalar input) are parsed the same way, as a batch of one, and lose the
// batch dimension.
func parseExamples(p tf2onnx.Port, t tensor.Tensor) ([]tensor.Tensor, error) {
	if t.DType != tensor.String {
		return nil, badinput.Errorf("input %q holds serialized tf.Example protos and must be DT_STRING, got %s", p.Key, tfName(t.DType))
	}
	if len(t.Shape) > 1 {
		return nil, badinput.Errorf("input %q must be a vector of serialized tf.Example protos, got shape %s", p.Key, tensor.FormatShape(t.Shape))
	}
	single := slices.ContainsFunc(p.Features, func(f tf2onnx.Feature) bool { return f.Single })
	if single && len(t.Strings) != 1 {
		return nil, badinput.Errorf("input %q is one serialized tf.Example (a scalar), got shape %s", p.Key, tensor.FormatShape(t.Shape))
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
		if f.Sparse {
			sp, err := parseSparse(p.Key, f, examples)
			if err != nil {
				return nil, err
			}
			if f.Single {
				sp = unbatchSparse(sp)
			}
			out = append(out, sp...)
			continue
		}
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
		if f.Single {
			res.Shape = slices.Clone(f.Shape)
		}
		out = append(out, res)
	}
	return out, nil
}

// unbatchSparse turns the SparseTensor of a batch of one example (indices
// [n, 2], dense shape [1, width]) into the one example's: indices [n, 1]
// (the positions), dense shape [width].
func unbatchSparse(sp []tensor.Tensor) []tensor.Tensor {
	idx, _ := sp[0].AsInt64()
	pos := make([]int64, len(idx)/2)
	for i := range pos {
		pos[i] = idx[2*i+1]
	}
	shape, _ := sp[2].AsInt64()
	return []tensor.Tensor{
		tensor.FromInt64(sp[0].Name, []int64{int64(len(pos)), 1}, pos),
		sp[1],
		tensor.FromInt64(sp[2].Name, []int64{1}, shape[1:]),
	}
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

// parseSparse gathers a VarLen feature of each example into a
// SparseTensor, as TensorFlow's ParseExample: indices (example, position)
// in example order, values, and dense shape [examples, most values]. An
// example without the feature has no values; one holding another list
// type is an error.
func parseSparse(key string, f tf2onnx.Feature, examples []*examplepb.Example) ([]tensor.Tensor, error) {
	var idx []int64
	vals := tensor.Tensor{Name: f.Input + tf2onnx.SparseValues, DType: f.DType}
	width := 0
	for i, ex := range examples {
		feat := ex.GetFeatures().GetFeature()[f.Key]
		count := 0
		switch f.DType {
		case tensor.Float32:
			if feat != nil && feat.GetFloatList() == nil && feat.Kind != nil {
				return nil, badinput.Errorf("input %q: example %d: feature %q must be a float_list", key, i, f.Key)
			}
			v := feat.GetFloatList().GetValue()
			for _, x := range v {
				vals.Data = binary.LittleEndian.AppendUint32(vals.Data, math.Float32bits(x))
			}
			count = len(v)
		case tensor.Int64:
			if feat != nil && feat.GetInt64List() == nil && feat.Kind != nil {
				return nil, badinput.Errorf("input %q: example %d: feature %q must be an int64_list", key, i, f.Key)
			}
			v := feat.GetInt64List().GetValue()
			for _, x := range v {
				vals.Data = binary.LittleEndian.AppendUint64(vals.Data, uint64(x))
			}
			count = len(v)
		case tensor.String:
			if feat != nil && feat.GetBytesList() == nil && feat.Kind != nil {
				return nil, badinput.Errorf("input %q: example %d: feature %q must be a bytes_list", key, i, f.Key)
			}
			v := feat.GetBytesList().GetValue()
			vals.Strings = append(vals.Strings, v...)
			count = len(v)
		}
		for j := range count {
			idx = append(idx, int64(i), int64(j))
		}
		width = max(width, count)
	}
	n := int64(len(idx) / 2)
	vals.Shape = []int64{n}
	if f.DType == tensor.String && vals.Strings == nil {
		vals.Strings = [][]byte{}
	}
	return []tensor.Tensor{
		tensor.FromInt64(f.Input+tf2onnx.SparseIndices, []int64{n, 2}, idx),
		vals,
		tensor.FromInt64(f.Input+tf2onnx.SparseShape, []int64{2}, []int64{int64(len(examples)), int64(width)}),
	}, nil
}
