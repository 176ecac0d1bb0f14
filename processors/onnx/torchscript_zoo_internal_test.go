package onnx

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// zooRefs is tsRefs read once: refs.json holds the zoo's images and is
// several MB, seconds to parse under -race.
var (
	zooRefsMu sync.Mutex
	zooRefs   map[string]tsRefModel
)

// TorchScriptCasesForTest gives the zoo tests (package onnx_test too) every
// case of a generated model: the model's path, and per case its inputs
// (named as forward's parameters) and reference outputs.
func TorchScriptCasesForTest(t testing.TB, model string) (path string, ins, outs [][]tensor.Tensor) {
	t.Helper()
	zooRefsMu.Lock()
	defer zooRefsMu.Unlock()
	if zooRefs == nil {
		zooRefs = tsRefs(t)
	}
	ref, ok := zooRefs[model]
	if !ok {
		t.Fatalf("refs.json has no model %q", model)
	}
	for c, cs := range ref.Cases {
		ins = append(ins, tsInputs(t, ref, c, true))
		var o []tensor.Tensor
		for _, r := range cs.Outputs {
			o = append(o, r.tensor(t))
		}
		outs = append(outs, o)
	}
	return filepath.Join(tsModels(t), model+".pt"), ins, outs
}

// TestTorchScriptPadKeepsFeatureAxis merges transformer requests of 20 and 32
// tokens into one run padded to 32 tokens, which is also the hidden size:
// only the sequence axis (1) of the undeclared output is cut back, and each
// request gets PyTorch's answer for its own length.
func TestTorchScriptPadKeepsFeatureAxis(t *testing.T) {
	path, ins, outs := TorchScriptCasesForTest(t, "encoder")
	for _, batcher := range []string{"pad", "bucket"} {
		t.Run(batcher, func(t *testing.T) {
			m := load(t, "pytorch_cpu_1.10", path, func(s *processors.Spec) {
				s.Batcher, s.PadValue, s.Buckets = batcher, 0, []int{8, 32}
			})
			cases := []int{5, 6, 3} // [1,20], [2,32], [1,12]: one bucket
			var tps []*processors.TensorPayload
			for _, c := range cases {
				tps = append(tps, &processors.TensorPayload{Inputs: ins[c]})
			}
			ps := checked(t, m, tps...)
			keys := map[string]bool{}
			for _, p := range ps {
				k, ok := m.BatchKey(p)
				if !ok {
					t.Fatal("not batchable")
				}
				keys[k] = true
			}
			if len(keys) != 1 {
				t.Fatalf("%d batch keys, want 1", len(keys))
			}
			before := m.runs.Load()
			res, err := m.Run(t.Context(), ps)
			if err != nil {
				t.Fatal(err)
			}
			if n := m.runs.Load() - before; n != 1 {
				t.Fatalf("%d runs, want 1 padded run", n)
			}
			for i, c := range cases {
				if len(res[i].Outputs) != 1 {
					t.Fatalf("request %d: %d outputs", i, len(res[i].Outputs))
				}
				if err := tensor.Close(res[i].Outputs[0], outs[c][0], tensor.F32Accumulated); err != nil {
					t.Errorf("request %d (%s): %v", i, tensor.FormatShape(ins[c][0].Shape), err)
				}
			}
		})
	}
}
