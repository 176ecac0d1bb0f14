package torchpb

import (
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

func BenchmarkDecodeRequest(b *testing.B) {
	v := make([]float32, 64*2048)
	for i := range v {
		v[i] = float32(i%1000) * 0.001
	}
	body, err := EncodeRequest([]tensor.Tensor{tensor.FromFloat32("x", []int64{64, 2048}, v)}, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body, []string{"x"}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	v := make([]float32, 64*2048)
	out := []tensor.Tensor{tensor.FromFloat32("y", []int64{64, 2048}, v)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeResponse(out); err != nil {
			b.Fatal(err)
		}
	}
}
