package torchpb

import (
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/tensor/tensortest"
)

// array builds an ArrayProto's bytes by hand with protowire, independently of
// the generated code: dtype (1), array_shape (2, its dims packed as a proto3
// encoder writes them) and one packed value field.
func array(dtype int32, dims []int64, valField protowire.Number, packed []byte) []byte {
	shape := protowire.AppendTag(nil, 1, protowire.BytesType)
	shape = protowire.AppendBytes(shape, packedVarints(dims...))
	return arrayWithShape(dtype, shape, valField, packed)
}

// arrayUnpacked is array with the dims written one tag each, which a decoder
// must accept too.
func arrayUnpacked(dtype int32, dims []int64, valField protowire.Number, packed []byte) []byte {
	var shape []byte
	for _, d := range dims {
		shape = protowire.AppendTag(shape, 1, protowire.VarintType)
		shape = protowire.AppendVarint(shape, uint64(d))
	}
	return arrayWithShape(dtype, shape, valField, packed)
}

func arrayWithShape(dtype int32, shape []byte, valField protowire.Number, packed []byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(dtype))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, shape)
	if valField != 0 {
		b = protowire.AppendTag(b, valField, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	return b
}

func packedFloats(v ...float32) []byte {
	var b []byte
	for _, f := range v {
		b = protowire.AppendFixed32(b, math.Float32bits(f))
	}
	return b
}

func packedVarints(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = protowire.AppendVarint(b, uint64(x))
	}
	return b
}

func mapEntry(key string, value []byte) []byte {
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, key)
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendBytes(e, value)
	return e
}

func TestDecodeHandBuilt(t *testing.T) {
	var body []byte
	// inputs[0]: DT_FLOAT [2,2] = 1..4
	body = protowire.AppendTag(body, 1, protowire.BytesType)
	body = protowire.AppendBytes(body, arrayUnpacked(1, []int64{2, 2}, 3, packedFloats(1, 2, 3, 4)))
	// output_filter: [1] (packed)
	body = protowire.AppendTag(body, 2, protowire.BytesType)
	body = protowire.AppendBytes(body, packedVarints(1))
	// map_inputs["mask"]: DT_BOOL [3] as int_val 1,0,1
	body = protowire.AppendTag(body, 3, protowire.BytesType)
	body = protowire.AppendBytes(body, mapEntry("mask", array(10, []int64{3}, 5, packedVarints(1, 0, 1))))
	// map_inputs["ids"]: DT_INT64 [2] = 5, -6
	body = protowire.AppendTag(body, 3, protowire.BytesType)
	body = protowire.AppendBytes(body, mapEntry("ids", array(9, []int64{2}, 7, packedVarints(5, -6))))
	// debug_level = 100
	body = protowire.AppendTag(body, 100, protowire.VarintType)
	body = protowire.AppendVarint(body, 100)

	req, err := DecodeRequest(body, []string{"x", "other"})
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Tensor{
		tensor.FromFloat32("x", []int64{2, 2}, []float32{1, 2, 3, 4}),
		tensor.FromInt64("ids", []int64{2}, []int64{5, -6}),
		tensor.FromBool("mask", []int64{3}, []bool{true, false, true}),
	}
	if len(req.Inputs) != len(want) {
		t.Fatalf("got %d inputs, want %d", len(req.Inputs), len(want))
	}
	for i := range want {
		if !tensor.Equal(req.Inputs[i], want[i]) {
			t.Errorf("input %d = %+v, want %+v", i, req.Inputs[i], want[i])
		}
	}
	if !slices.Equal(req.OutputFilter, []int32{1}) || req.DebugLevel != 100 {
		t.Errorf("output_filter %v debug_level %d", req.OutputFilter, req.DebugLevel)
	}
}

func TestEncodeResponseWireBytes(t *testing.T) {
	got, err := EncodeResponse([]tensor.Tensor{tensor.FromFloat32("y", []int64{1, 2}, []float32{0.5, -1})})
	if err != nil {
		t.Fatal(err)
	}
	var want []byte
	want = protowire.AppendTag(want, 1, protowire.BytesType)
	want = protowire.AppendBytes(want, array(1, []int64{1, 2}, 3, packedFloats(0.5, -1)))
	if !slices.Equal(got, want) {
		t.Fatalf("response bytes\n got % x\nwant % x", got, want)
	}
}

func TestRoundTripEveryDType(t *testing.T) {
	for _, s := range tensortest.Samples() {
		t.Run(s.Name, func(t *testing.T) {
			for _, named := range []bool{false, true} {
				body, err := EncodeRequest([]tensor.Tensor{s}, named, []int32{0})
				if err != nil {
					t.Fatal(err)
				}
				req, err := DecodeRequest(body, []string{s.Name})
				if err != nil {
					t.Fatal(err)
				}
				if len(req.Inputs) != 1 || !tensor.Equal(req.Inputs[0], s) {
					t.Fatalf("named=%v: got %+v, want %+v", named, req.Inputs, s)
				}
			}
			resp, err := EncodeResponse([]tensor.Tensor{s})
			if err != nil {
				t.Fatal(err)
			}
			outs, err := DecodeResponse(resp, []string{s.Name})
			if err != nil {
				t.Fatal(err)
			}
			if len(outs) != 1 || !tensor.Equal(outs[0], s) {
				t.Fatalf("response: got %+v, want %+v", outs, s)
			}
		})
	}
}

func TestDecodeErrors(t *testing.T) {
	good := array(1, []int64{2}, 3, packedFloats(1, 2))
	input := func(a []byte) []byte {
		b := protowire.AppendTag(nil, 1, protowire.BytesType)
		return protowire.AppendBytes(b, a)
	}
	tests := []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{"garbage", []byte("this is not a protobuf"), "not a pytorch.eas.PredictRequest"},
		{"truncated", input(good)[:len(input(good))-3], "not a pytorch.eas.PredictRequest"},
		{"empty", nil, "no inputs"},
		{"too many positional", append(input(good), input(good)...), "2 positional inputs but the model takes 1"},
		{"count", input(array(1, []int64{3}, 3, packedFloats(1, 2))), `inputs[0] ("x"): array_shape [3] needs 3 values in float_val, got 2`},
		{"wrong field", input(array(1, []int64{2}, 5, packedVarints(1, 2))), "carries its values in float_val, but the array has 2 values in int_val"},
		{"unsupported", input(array(8, []int64{1}, 3, packedFloats(1))), "DT_COMPLEX64 is not supported"},
		{"unknown enum", input(array(99, []int64{1}, 3, packedFloats(1))), "ArrayDataType(99) is not supported"},
		{"bool range", input(array(10, []int64{1}, 5, packedVarints(2))), "must be 0 or 1"},
		{"int8 range", input(array(6, []int64{1}, 5, packedVarints(200))), "outside the DT_INT8 range -128..127"},
		{"uint32 range", input(array(22, []int64{1}, 7, packedVarints(-1))), "outside the DT_UINT32 range"},
		{"negative dim", input(array(1, []int64{-2}, 3, packedFloats(1, 2))), "must be >= 0"},
		{"duplicate", append(input(good), func() []byte {
			b := protowire.AppendTag(nil, 3, protowire.BytesType)
			return protowire.AppendBytes(b, mapEntry("x", good))
		}()...), "both by position and in map_inputs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest(tt.body, []string{"x"})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !badinput.Is(err) {
				t.Fatalf("err %T is not an InputError", err)
			}
		})
	}
}

func TestOutputNames(t *testing.T) {
	names, err := OutputNames([]int32{2, 0}, []string{"a", "b", "c"})
	if err != nil || !slices.Equal(names, []string{"c", "a"}) {
		t.Fatalf("OutputNames = %v, %v", names, err)
	}
	if names, err := OutputNames(nil, []string{"a"}); names != nil || err != nil {
		t.Fatalf("empty filter = %v, %v", names, err)
	}
	_, err = OutputNames([]int32{3}, []string{"a", "b", "c"})
	if err == nil || !strings.Contains(err.Error(), "output_filter[0] = 3, but the model has 3 outputs") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzTorch(f *testing.F) {
	for _, s := range tensortest.Samples() {
		body, err := EncodeRequest([]tensor.Tensor{s}, false, []int32{0})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(body)
		body, _ = EncodeRequest([]tensor.Tensor{s}, true, nil)
		f.Add(body)
	}
	f.Add([]byte{})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	names := []string{"a", "b", "c"}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body, names)
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("error %v is not an InputError", err)
			}
			return
		}
		for _, in := range req.Inputs {
			if err := in.Validate(); err != nil {
				t.Fatalf("decoded an invalid tensor: %v", err)
			}
		}
		// What decodes must encode and decode back to the same tensors.
		again, err := EncodeRequest(req.Inputs, true, req.OutputFilter)
		if err != nil {
			t.Fatal(err)
		}
		req2, err := DecodeRequest(again, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(req2.Inputs) != len(req.Inputs) {
			t.Fatalf("round trip: %d inputs, want %d", len(req2.Inputs), len(req.Inputs))
		}
		byName := map[string]tensor.Tensor{}
		for _, in := range req2.Inputs {
			byName[in.Name] = in
		}
		for _, in := range req.Inputs {
			if !tensor.Equal(byName[in.Name], in) {
				t.Fatalf("round trip changed %q", in.Name)
			}
		}
	})
}

func TestHalfOverflow(t *testing.T) {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, array(19, []int64{2}, 3, packedFloats(1, 70000)))
	_, err := DecodeRequest(b, []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "float_val[1] = 70000 does not fit DT_HALF") {
		t.Fatalf("err = %v", err)
	}
	// Infinity itself is a half value and passes.
	b = protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendBytes(b, array(19, []int64{1}, 3, packedFloats(float32(math.Inf(1)))))
	req, err := DecodeRequest(b, []string{"x"})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := req.Inputs[0].AsUint16(); h[0] != 0x7c00 {
		t.Fatalf("+Inf decoded as %#04x", h[0])
	}
}
