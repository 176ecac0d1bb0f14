package onnx

import (
	"math/rand/v2"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

func seqPayload(rng *rand.Rand, n, t int64) *processors.TensorPayload {
	v := make([]float32, n*t*6)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat32("tokens", []int64{n, t, 6}, v)}, Outputs: []string{"hidden"}}
}

// TestPadAndBucketBatchersMatchSingleRuns merges requests of different
// sequence lengths into one padded run and checks that every request gets
// exactly the output (shape and values) it gets alone.
func TestPadAndBucketBatchersMatchSingleRuns(t *testing.T) {
	for _, batcher := range []string{"pad", "bucket"} {
		t.Run(batcher, func(t *testing.T) {
			m := load(t, "pytorch_cpu_1.10", "testdata/seq.onnx", func(s *processors.Spec) {
				s.Batcher, s.PadValue, s.Buckets = batcher, 0, []int{4, 16}
			})
			rng := rand.New(rand.NewPCG(7, 7))
			batch := []*processors.TensorPayload{seqPayload(rng, 1, 3), seqPayload(rng, 2, 7), seqPayload(rng, 1, 1), seqPayload(rng, 3, 12)}
			if batcher == "bucket" {
				// Only lengths within one bucket share a run.
				batch = []*processors.TensorPayload{seqPayload(rng, 2, 5), seqPayload(rng, 1, 9), seqPayload(rng, 1, 16)}
			}
			keys := map[string]bool{}
			for _, p := range batch {
				k, ok := keyOf(m, p)
				if !ok {
					t.Fatal("a valid payload is not batchable")
				}
				keys[k] = true
			}
			if len(keys) != 1 {
				t.Fatalf("%s: payloads of different lengths got %d batch keys, want 1", batcher, len(keys))
			}
			before := m.runs.Load()
			merged, err := m.Run(t.Context(), checked(t, m, batch...))
			if err != nil {
				t.Fatal(err)
			}
			if n := m.runs.Load() - before; n != 1 {
				t.Fatalf("%d payloads took %d session runs, want 1 padded run", len(batch), n)
			}
			for i, p := range batch {
				alone, err := m.Run(t.Context(), checked(t, m, p))
				if err != nil {
					t.Fatal(err)
				}
				got := merged[i].Outputs[0]
				want := alone[0].Outputs[0]
				if err := tensor.Close(got, want, tensor.F32Accumulated); err != nil {
					t.Errorf("request %d (shape %v): merged %s vs alone %s: %v", i, p.Inputs[0].Shape,
						tensor.FormatShape(got.Shape), tensor.FormatShape(want.Shape), err)
				}
			}
		})
	}
}

func TestBucketKeysSeparateLengths(t *testing.T) {
	m := load(t, "pytorch_cpu_1.10", "testdata/seq.onnx", func(s *processors.Spec) {
		s.Batcher, s.Buckets = "bucket", []int{4, 16}
	})
	rng := rand.New(rand.NewPCG(1, 1))
	key := func(tlen int64) string {
		k, ok := keyOf(m, seqPayload(rng, 1, tlen))
		if !ok {
			t.Fatal("not batchable")
		}
		return k
	}
	if key(2) != key(4) || key(5) != key(16) || key(17) != key(100) {
		t.Error("lengths in one bucket got different keys")
	}
	if key(4) == key(5) || key(16) == key(17) {
		t.Error("lengths in different buckets share a key")
	}
	c := load(t, "pytorch_cpu_1.10", "testdata/seq.onnx")
	k3, _ := keyOf(c, seqPayload(rng, 1, 3))
	k4, _ := keyOf(c, seqPayload(rng, 1, 4))
	if k3 == k4 {
		t.Error("concat batcher: different lengths share a key")
	}
}
