package kservegrpc

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/tensor"
)

func TestRoundTrip(t *testing.T) {
	ins := []tensor.Tensor{
		tensor.FromFloat32("x", []int64{2, 2}, []float32{1, -2, 3.5, 4}),
		tensor.FromInt64("ids", []int64{3}, []int64{-1, 0, 1 << 40}),
		tensor.FromStrings("text", []int64{2}, []string{"héllo", ""}),
		tensor.FromBool("mask", []int64{1, 2}, []bool{true, false}),
	}
	req := RequestFromTensors("m", "1", "r1", ins, []string{"y"})
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var back ModelInferRequest
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got, err := TensorsFromRequest(&back)
	if err != nil {
		t.Fatal(err)
	}
	if back.GetModelName() != "m" || back.GetId() != "r1" || back.GetOutputs()[0].GetName() != "y" {
		t.Fatalf("header fields lost: %v", &back)
	}
	for i := range ins {
		if !tensor.Equal(got[i], ins[i]) || got[i].Name != ins[i].Name {
			t.Errorf("tensor %d: got %+v, want %+v", i, got[i], ins[i])
		}
	}
	resp := ResponseFromTensors("m", "1", "r1", ins)
	outs, err := TensorsFromResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ins {
		if !tensor.Equal(outs[i], ins[i]) {
			t.Errorf("output %d differs", i)
		}
	}
}

// TestTypedContents decodes tensors sent in the typed fields, as clients
// without raw contents do.
func TestTypedContents(t *testing.T) {
	req := &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{
		{Name: "f", Datatype: "FP32", Shape: []int64{2}, Contents: &InferTensorContents{Fp32Contents: []float32{1.5, -1}}},
		{Name: "i8", Datatype: "INT8", Shape: []int64{2}, Contents: &InferTensorContents{IntContents: []int32{-3, 7}}},
		{Name: "u16", Datatype: "UINT16", Shape: []int64{1}, Contents: &InferTensorContents{UintContents: []uint32{65535}}},
		{Name: "s", Datatype: "BYTES", Shape: []int64{1}, Contents: &InferTensorContents{BytesContents: [][]byte{[]byte("ab")}}},
	}}
	got, err := TensorsFromRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Tensor{
		tensor.FromFloat32("f", []int64{2}, []float32{1.5, -1}),
		tensor.FromInt8("i8", []int64{2}, []int8{-3, 7}),
		tensor.FromUint16("u16", []int64{1}, []uint16{65535}),
		tensor.FromStrings("s", []int64{1}, []string{"ab"}),
	}
	for i := range want {
		if !tensor.Equal(got[i], want[i]) {
			t.Errorf("%s: got %+v, want %+v", want[i].Name, got[i], want[i])
		}
	}
}

func TestBadRequests(t *testing.T) {
	cases := []struct {
		name string
		req  *ModelInferRequest
		want string
	}{
		{"raw count", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FP32", Shape: []int64{1}}}, RawInputContents: [][]byte{{0, 0, 0, 0}, {1}}}, "2 entries for 1 inputs"},
		{"raw size", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FP32", Shape: []int64{2}}}, RawInputContents: [][]byte{{0, 0, 0, 0}}}, "needs 8"},
		{"dtype", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FLOAT", Shape: []int64{1}}}}, "unknown datatype"},
		{"negative", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FP32", Shape: []int64{-1}}}}, "negative"},
		{"huge", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FP32", Shape: []int64{1 << 20, 1 << 20}}}}, "more than"},
		{"typed count", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "INT64", Shape: []int64{2}, Contents: &InferTensorContents{Int64Contents: []int64{1}}}}}, "hold 1 INT64"},
		{"string prefix", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "BYTES", Shape: []int64{1}}}, RawInputContents: [][]byte{{9, 0, 0, 0, 'a'}}}, "runs past"},
		{"fp16 typed", &ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{{Name: "a", Datatype: "FP16", Shape: []int64{1}}}}, "raw contents"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := TensorsFromRequest(c.req)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// FuzzTensorsFromRequest feeds arbitrary protobuf bytes through the decoder:
// it must never panic, and what it accepts must hold the bytes its shape
// claims.
func FuzzTensorsFromRequest(f *testing.F) {
	seed, _ := proto.Marshal(RequestFromTensors("m", "", "", []tensor.Tensor{
		tensor.FromFloat32("x", []int64{1, 2}, []float32{1, 2}),
		tensor.FromStrings("s", []int64{1}, []string{"a"}),
	}, nil))
	f.Add(seed)
	typed, _ := proto.Marshal(&ModelInferRequest{Inputs: []*ModelInferRequest_InferInputTensor{
		{Name: "i", Datatype: "INT32", Shape: []int64{2}, Contents: &InferTensorContents{IntContents: []int32{1, 2}}},
	}})
	f.Add(typed)
	f.Fuzz(func(t *testing.T, b []byte) {
		var req ModelInferRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		ts, err := TensorsFromRequest(&req)
		if err != nil {
			return
		}
		for _, x := range ts {
			if x.DType == tensor.String {
				if int64(len(x.Strings)) != x.NumElements() {
					t.Fatalf("%s: %d strings for shape %v", x.Name, len(x.Strings), x.Shape)
				}
			} else if int64(len(x.Data)) != x.NumElements()*int64(x.DType.Size()) {
				t.Fatalf("%s: %d bytes for shape %v", x.Name, len(x.Data), x.Shape)
			}
		}
	})
}
