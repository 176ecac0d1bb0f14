package caffepb

import (
	"math"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
)

// FuzzDecodeRequest feeds arbitrary bodies to DecodeRequest: it must not
// panic, must fail only with a *badinput.Error, and whatever it accepts must
// be valid FP32 tensors with as many values as their shapes say, which
// survive a re-encode unchanged.
func FuzzDecodeRequest(f *testing.F) {
	inputNames := []string{"data", "im_info"}
	named, err := EncodeRequest([]tensor.Tensor{
		tensor.FromFloat32("data", []int64{1, 3, 2, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
		tensor.FromFloat32("im_info", []int64{1, 3}, []float32{600, 800, 1}),
	}, []string{"prob"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(named)
	positional, err := EncodeRequest([]tensor.Tensor{tensor.FromFloat32("", []int64{2}, []float32{1, 2})}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(positional)
	f.Add(cat(str(1, "x"), msg(2, array(shapeMsg(true, 1, 2), floats(true, 1, float32(math.NaN()))))))
	f.Add(msg(2, array(shapeMsg(false, 2), floats(true, 1), floats(false, 2))))
	f.Add(msg(2, array(shapeMsg(true, math.MaxInt64, 2), floats(true, 1))))
	f.Add(msg(2, array(shapeMsg(true, 1<<20, 1<<20, 2), floats(true, 1))))
	f.Add(msg(2, array(shapeMsg(true, 0), nil)))
	f.Add(msg(2, array(shapeMsg(true, -1), floats(true, 1))))
	f.Add(msg(2, array(nil, floats(true, 1))))
	f.Add(cat(msg(2, vec(1)), msg(2, vec(2)), msg(2, vec(3))))
	f.Add(cat(str(1, "a"), str(1, "a"), msg(2, vec(1)), msg(2, vec(2))))
	f.Add(cat(msg(2, vec(1)), str(3, ""), str(3, "prob")))
	f.Add([]byte{})
	f.Add([]byte{0x12, 0x7f})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body, inputNames)
		if err != nil {
			if _, ok := err.(*badinput.Error); !ok {
				t.Fatalf("error %v is %T, not a *badinput.Error", err, err)
			}
			return
		}
		if len(req.Inputs) == 0 {
			t.Fatal("decoded a request with no inputs")
		}
		seen := map[string]bool{}
		for _, in := range req.Inputs {
			if err := in.Validate(); err != nil {
				t.Fatalf("decoded an invalid tensor: %v", err)
			}
			if in.DType != tensor.Float32 {
				t.Fatalf("input %q is %s, not FP32", in.Name, in.DType)
			}
			n, err := tensor.Elements(in.Shape)
			if err != nil || n < 1 || len(in.Shape) == 0 || len(in.Shape) > MaxAxes {
				t.Fatalf("input %q has shape %v (%d elements, %v)", in.Name, in.Shape, n, err)
			}
			if in.NumElements() != n || int64(len(in.Data)) != 4*n {
				t.Fatalf("input %q: shape %v, %d data bytes", in.Name, in.Shape, len(in.Data))
			}
			if in.Name == "" || seen[in.Name] {
				t.Fatalf("input name %q is empty or repeated", in.Name)
			}
			seen[in.Name] = true
		}
		again, err := EncodeRequest(req.Inputs, req.OutputFilter)
		if err != nil {
			t.Fatal(err)
		}
		req2, err := DecodeRequest(again, inputNames)
		if err != nil {
			t.Fatal(err)
		}
		if len(req2.Inputs) != len(req.Inputs) || len(req2.OutputFilter) != len(req.OutputFilter) {
			t.Fatalf("round trip changed the request: %+v -> %+v", req, req2)
		}
		for i := range req.Inputs {
			if !tensor.Equal(req.Inputs[i], req2.Inputs[i]) {
				t.Fatalf("round trip changed %q", req.Inputs[i].Name)
			}
		}
	})
}
