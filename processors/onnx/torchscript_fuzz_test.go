package onnx

import (
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// FuzzTorchScriptDecode is FuzzDecode for TorchScript models served by
// pytorch_cpu_1.10: arbitrary bodies through the Torch protobuf Decode.
// Every decode error is a bad input (400); an accepted body runs and encodes
// without an error other than a bad input (a shape or dtype the model
// raises on, an output_filter past forward's outputs). Two models: the
// traced MLP ([N,4] float32 -> [N,3]) and "two" (two inputs a and b, a
// tuple of two outputs).
func FuzzTorchScriptDecode(f *testing.F) {
	x := tensor.From("input", []int64{1, 4}, make([]float32, 4))
	a := tensor.From("a", []int64{2, 4}, make([]float32, 8))
	b := tensor.From("b", []int64{2, 4}, make([]float32, 8))
	seeds := [][]byte{nil, []byte("garbage")}
	for _, ins := range [][]tensor.Tensor{{x}, {a, b}} {
		for _, named := range []bool{false, true} {
			for _, filter := range [][]int32{nil, {0}, {1}, {2}} {
				body, err := torchpb.EncodeRequest(ins, named, filter)
				if err != nil {
					f.Fatal(err)
				}
				seeds = append(seeds, body)
			}
		}
	}
	// An int64 and a float64 input, and a mismatched shape.
	for _, ins := range [][]tensor.Tensor{
		{tensor.From("", []int64{1, 4}, []int64{1, 2, 3, 4})},
		{tensor.From("", []int64{2, 2}, []float64{1, 2, 3, 4})},
		{a, tensor.From("b", []int64{3}, make([]float32, 3))},
	} {
		body, err := torchpb.EncodeRequest(ins, false, nil)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, body)
	}
	for _, s := range seeds {
		f.Add(s)
	}
	dir := tsModels(f)
	mlp := load(f, "pytorch_cpu_1.10", filepath.Join(dir, "mlp.pt"))
	two := load(f, "pytorch_cpu_1.10", filepath.Join(dir, "two.pt"))
	if !mlp.torch || !two.torch {
		f.Fatal("the TorchScript models are not served by libtorch")
	}
	models := map[string]*Model{"mlp.pt": mlp, "two.pt": two}
	f.Fuzz(func(t *testing.T, body []byte) {
		for name, m := range models {
			p, err := m.Decode(t.Context(), &processors.Request{Body: body})
			if err != nil {
				if !badinput.Is(err) {
					t.Fatalf("%s: decode error is not a 400: %v", name, err)
				}
				continue
			}
			size := 0
			for _, in := range p.Inputs {
				size += len(in.Data)
			}
			if size > 1<<20 {
				continue // a valid but huge request; not what this fuzzes
			}
			res, err := m.Run(t.Context(), []*Payload{p})
			if err != nil {
				if !badinput.Is(err) {
					t.Fatalf("%s: accepted body failed to run with a non-400 error: %v", name, err)
				}
				continue
			}
			if _, err := m.Encode(t.Context(), p, res[0]); err != nil && !badinput.Is(err) {
				t.Fatalf("%s: encoding the answer: %v", name, err)
			}
		}
	})
}
