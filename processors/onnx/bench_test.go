package onnx

import (
	"fmt"
	"os"
	"testing"

	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// BenchmarkMLP measures one in-process session run of an MLP at batch 1 and
// 64, the numbers BENCHMARKS.md compares HTTP round trips against. It uses
// testdata/mlp.onnx (16->32->8), or the model at $EAS_BENCH_MLP, e.g. the
// three-layer 2048-wide benchmark MLP:
//
//	/usr/bin/python3 scripts/gen-test-models.py --bench-mlp /tmp/mlp2048.onnx
//	EAS_BENCH_MLP=/tmp/mlp2048.onnx go test -run '^$' -bench MLP ./processors/onnx/
//
// Intra-op threads are the machine's cores, as for a service without
// metadata.cpu.
func BenchmarkMLP(b *testing.B) {
	path := os.Getenv("EAS_BENCH_MLP")
	if path == "" {
		path = "testdata/mlp.onnx"
	}
	m := load(b, "pytorch_cpu_1.10", path, func(s *processors.Spec) { s.CPU = 0 })
	in := m.Metadata().Inputs[0]
	width := in.Shape[len(in.Shape)-1]
	for _, n := range []int64{1, 64} {
		b.Run(fmt.Sprintf("width=%d/batch=%d", width, n), func(b *testing.B) {
			v := make([]float32, n*width)
			for i := range v {
				v[i] = float32(i%97) / 97
			}
			p := &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat32(in.Name, []int64{n, width}, v)}}
			batch := checked(b, m, p)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.Run(b.Context(), batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
