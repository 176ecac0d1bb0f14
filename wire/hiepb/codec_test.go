package hiepb

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/tensor/tensortest"
)

// tensorProto builds a TensorProto's bytes by hand with protowire,
// independently of the generated code.
func tensorProto(name string, dims []int64, dataType int32, raw []byte, strs ...string) []byte {
	var b []byte
	if name != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, name)
	}
	var packed []byte
	for _, d := range dims {
		packed = protowire.AppendVarint(packed, uint64(d))
	}
	if len(dims) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	if dataType != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(dataType))
	}
	if len(raw) > 0 {
		b = protowire.AppendTag(b, 5, protowire.BytesType)
		b = protowire.AppendBytes(b, raw)
	}
	for _, s := range strs {
		b = protowire.AppendTag(b, 6, protowire.BytesType)
		b = protowire.AppendString(b, s)
	}
	return b
}

func dataProto(tensors ...[]byte) []byte {
	var b []byte
	for _, t := range tensors {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, t)
	}
	return b
}

func le32(v ...float32) []byte {
	var b []byte
	for _, f := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func TestDecodeHandBuilt(t *testing.T) {
	ids := binary.LittleEndian.AppendUint64(nil, 7)
	ids = binary.LittleEndian.AppendUint64(ids, uint64(math.MaxUint64)) // -1
	body := dataProto(
		tensorProto("x", []int64{1, 3}, Float, le32(0.5, -1, 2)),
		tensorProto("ids", []int64{2}, Int64, ids),
		tensorProto("words", []int64{2}, String, nil, "a", "bc"),
		tensorProto("flag", nil, Bool, []byte{1}),
	)
	got, err := DecodeDataProto(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Tensor{
		tensor.FromFloat32("x", []int64{1, 3}, []float32{0.5, -1, 2}),
		tensor.FromInt64("ids", []int64{2}, []int64{7, -1}),
		tensor.FromStrings("words", []int64{2}, []string{"a", "bc"}),
		tensor.FromBool("flag", nil, []bool{true}),
	}
	if len(got) != len(want) {
		t.Fatalf("%d tensors, want %d", len(got), len(want))
	}
	for i := range want {
		if !tensor.Equal(got[i], want[i]) {
			t.Errorf("tensor %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestEncodeWireBytes(t *testing.T) {
	got, err := EncodeDataProto([]tensor.Tensor{tensor.FromFloat32("y", []int64{2}, []float32{1, -0.25})})
	if err != nil {
		t.Fatal(err)
	}
	want := dataProto(tensorProto("y", []int64{2}, Float, le32(1, -0.25)))
	if !slices.Equal(got, want) {
		t.Fatalf("bytes\n got % x\nwant % x", got, want)
	}
}

func TestDataTypeNumbers(t *testing.T) {
	// The numbers are ONNX's TensorProto.DataType; docs/protocol.md lists them ("Tensor data types").
	want := map[tensor.DType]int32{
		tensor.Float32: 1, tensor.Uint8: 2, tensor.Int8: 3, tensor.Uint16: 4, tensor.Int16: 5,
		tensor.Int32: 6, tensor.Int64: 7, tensor.String: 8, tensor.Bool: 9, tensor.Float16: 10,
		tensor.Float64: 11, tensor.Uint32: 12, tensor.Uint64: 13, tensor.BFloat16: 16,
	}
	for d, n := range want {
		if got, ok := DataType(d); !ok || got != n {
			t.Errorf("DataType(%s) = %d, %v; want %d", d, got, ok, n)
		}
	}
}

func TestRoundTripEveryDType(t *testing.T) {
	samples := tensortest.Samples()
	body, err := EncodeDataProto(samples)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDataProto(body)
	if err != nil {
		t.Fatal(err)
	}
	for i := range samples {
		if !tensor.Equal(got[i], samples[i]) {
			t.Errorf("%s: got %+v, want %+v", samples[i].Name, got[i], samples[i])
		}
	}
	resp, err := DecodeResponse(body)
	if err != nil || len(resp) != len(samples) {
		t.Fatalf("DecodeResponse: %d tensors, %v", len(resp), err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := tensorProto("x", []int64{2}, Float, le32(1, 2))
	tests := []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{"garbage", []byte("{\"json\": true}"), "not a hie.processor.DataProto"},
		{"truncated", dataProto(good)[:len(dataProto(good))-2], "not a hie.processor.DataProto"},
		{"empty", nil, "no tensors"},
		{"short raw", dataProto(tensorProto("x", []int64{3}, Float, le32(1, 2))), "dims [3] of FP32 need 12 bytes of raw_data (3 elements of 4 bytes), got 8"},
		{"long raw", dataProto(tensorProto("x", []int64{1}, Float, le32(1, 2))), "need 4 bytes"},
		{"undefined", dataProto(tensorProto("x", []int64{1}, 0, le32(1))), "data_type 0 is not supported"},
		{"complex", dataProto(tensorProto("x", []int64{1}, 14, le32(1, 2))), "data_type 14 is not supported"},
		{"no name", dataProto(tensorProto("", []int64{2}, Float, le32(1, 2))), "has no name"},
		{"duplicate", dataProto(good, good), `"x" appears more than once`},
		{"bool byte", dataProto(tensorProto("b", []int64{1}, Bool, []byte{7})), "only 0 and 1"},
		{"string in raw", dataProto(tensorProto("s", []int64{1}, String, []byte("abc"))), "string_data"},
		{"string count", dataProto(tensorProto("s", []int64{2}, String, nil, "a")), "need 2 elements in string_data, got 1"},
		{"raw with strings", dataProto(tensorProto("x", []int64{1}, Float, le32(1), "a")), "string_data holds 1"},
		{"negative", dataProto(tensorProto("x", []int64{-1}, Float, nil)), "must be >= 0"},
		{"huge", dataProto(tensorProto("x", []int64{1 << 40, 1 << 40}, Float, nil)), "more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeDataProto(tt.body)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !badinput.Is(err) {
				t.Fatalf("err %T is not an InputError", err)
			}
		})
	}
}

func FuzzHIE(f *testing.F) {
	body, err := EncodeDataProto(tensortest.Samples())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	for _, s := range tensortest.Samples() {
		b, _ := EncodeDataProto([]tensor.Tensor{s})
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0x03, 0x12, 0x01})
	f.Fuzz(func(t *testing.T, body []byte) {
		ts, err := DecodeDataProto(body)
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("error %v is not an InputError", err)
			}
			return
		}
		for _, x := range ts {
			if err := x.Validate(); err != nil {
				t.Fatalf("decoded an invalid tensor: %v", err)
			}
		}
		again, err := EncodeDataProto(ts)
		if err != nil {
			t.Fatal(err)
		}
		ts2, err := DecodeDataProto(again)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ts {
			if !tensor.Equal(ts[i], ts2[i]) {
				t.Fatalf("round trip changed tensor %d", i)
			}
		}
	})
}
