package loadgen

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/caffepb"
	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// TensorSpec is a generated input: "NAME:DTYPE:D1xD2x..." such as
// "input:FP32:1x2048". Values are uniform in [-1, 1) (integers in [0, 100)).
type TensorSpec struct {
	Name  string
	DType tensor.DType
	Shape []int64
}

// ParseTensorSpec parses "NAME:DTYPE:D1xD2".
func ParseTensorSpec(s string) (TensorSpec, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return TensorSpec{}, fmt.Errorf("tensor %q: want NAME:DTYPE:D1xD2..., e.g. input:FP32:1x2048", s)
	}
	dt, err := tensor.ParseDType(strings.ToUpper(parts[1]))
	if err != nil || dt == tensor.String {
		return TensorSpec{}, fmt.Errorf("tensor %q: datatype must be a numeric KServe name (FP32, INT64, ...)", s)
	}
	var shape []int64
	for _, d := range strings.Split(parts[2], "x") {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			return TensorSpec{}, fmt.Errorf("tensor %q: bad dimension %q", s, d)
		}
		shape = append(shape, n)
	}
	return TensorSpec{Name: parts[0], DType: dt, Shape: shape}, nil
}

// Generate makes a tensor of random values for spec.
func (s TensorSpec) Generate(rng *rand.Rand) tensor.Tensor {
	t := tensor.Tensor{Name: s.Name, DType: s.DType, Shape: append([]int64(nil), s.Shape...)}
	n := int(t.NumElements())
	size := s.DType.Size()
	t.Data = make([]byte, n*size)
	for i := range n {
		b := t.Data[i*size : (i+1)*size]
		f := rng.Float64()*2 - 1
		switch s.DType {
		case tensor.Float32:
			binary.LittleEndian.PutUint32(b, math.Float32bits(float32(f)))
		case tensor.Float64:
			binary.LittleEndian.PutUint64(b, math.Float64bits(f))
		case tensor.Float16:
			binary.LittleEndian.PutUint16(b, tensor.Float32ToFloat16(float32(f)))
		case tensor.BFloat16:
			binary.LittleEndian.PutUint16(b, tensor.Float32ToBFloat16(float32(f)))
		case tensor.Bool:
			if f > 0 {
				b[0] = 1
			}
		default:
			v := uint64(rng.IntN(100))
			for j := range size {
				b[j] = byte(v >> (8 * j))
			}
		}
	}
	return t
}

// Formats lists the body formats EncodeBody writes.
var Formats = []string{"torch", "hie", "caffe", "kserve-json", "kserve-binary"}

// EncodeBody writes a request body carrying ts in format, and the extra
// headers it needs.
func EncodeBody(format string, ts []tensor.Tensor) ([]byte, map[string]string, error) {
	switch format {
	case "torch":
		b, err := torchpb.EncodeRequest(ts, true, nil)
		return b, nil, err
	case "hie":
		b, err := hiepb.EncodeDataProto(ts)
		return b, nil, err
	case "caffe":
		b, err := caffepb.EncodeRequest(ts, nil)
		return b, nil, err
	case "kserve-json", "kserve-binary":
		b, hlen, err := kserve.EncodeRequest(&kserve.InferRequest{Inputs: ts}, format == "kserve-binary")
		if err != nil {
			return nil, nil, err
		}
		h := map[string]string{"Content-Type": "application/json"}
		if hlen > 0 {
			h = map[string]string{kserve.HeaderContentLength: strconv.Itoa(hlen), "Content-Type": "application/octet-stream"}
		}
		return b, h, nil
	}
	return nil, nil, fmt.Errorf("format %q: want one of %s", format, strings.Join(Formats, ", "))
}
