package kserve

import (
	"strconv"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

// benchInput is the MLP benchmark's batch: [64, 2048] FP32.
func benchInput() tensor.Tensor {
	v := make([]float32, 64*2048)
	for i := range v {
		v[i] = float32(i%1000) * 0.001
	}
	return tensor.FromFloat32("x", []int64{64, 2048}, v)
}

func BenchmarkDecodeJSON(b *testing.B) {
	body, _, err := EncodeRequest(&InferRequest{Inputs: []tensor.Tensor{benchInput()}}, false)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body, ""); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBinary(b *testing.B) {
	body, hl, err := EncodeRequest(&InferRequest{Inputs: []tensor.Tensor{benchInput()}}, true)
	if err != nil {
		b.Fatal(err)
	}
	h := strconv.Itoa(hl)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeRequest(body, h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeJSON(b *testing.B) {
	resp := &InferResponse{ModelName: "m", Outputs: []tensor.Tensor{benchInput()}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := EncodeResponse(resp, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeBinary(b *testing.B) {
	resp := &InferResponse{ModelName: "m", Outputs: []tensor.Tensor{benchInput()}}
	req := &InferRequest{BinaryDataOutput: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := EncodeResponse(resp, req); err != nil {
			b.Fatal(err)
		}
	}
}
