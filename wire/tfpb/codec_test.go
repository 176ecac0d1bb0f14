package tfpb

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
// the generated code.
func array(dtype int32, dims []int64, valField protowire.Number, packed []byte) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(dtype))
	shape := protowire.AppendTag(nil, 1, protowire.BytesType)
	var dimBytes []byte
	for _, d := range dims {
		dimBytes = protowire.AppendVarint(dimBytes, uint64(d))
	}
	shape = protowire.AppendBytes(shape, dimBytes)
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	b = protowire.AppendBytes(b, shape)
	if valField != 0 {
		b = protowire.AppendTag(b, valField, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	return b
}

func varints(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = protowire.AppendVarint(b, uint64(x))
	}
	return b
}

func doubles(v ...float64) []byte {
	var b []byte
	for _, f := range v {
		b = protowire.AppendFixed64(b, math.Float64bits(f))
	}
	return b
}

func entry(field protowire.Number, key string, value []byte) []byte {
	var e []byte
	e = protowire.AppendTag(e, 1, protowire.BytesType)
	e = protowire.AppendString(e, key)
	e = protowire.AppendTag(e, 2, protowire.BytesType)
	e = protowire.AppendBytes(e, value)
	b := protowire.AppendTag(nil, field, protowire.BytesType)
	return protowire.AppendBytes(b, e)
}

func TestDecodeHandBuilt(t *testing.T) {
	var body []byte
	body = protowire.AppendTag(body, 1, protowire.BytesType)
	body = protowire.AppendString(body, "predict")
	body = append(body, entry(2, "z_bool", array(10, []int64{2}, 8, varints(1, 0)))...)
	body = append(body, entry(2, "a_double", array(2, []int64{1, 2}, 4, doubles(0.5, -3)))...)
	body = append(body, entry(2, "m_int8", array(6, []int64{2}, 5, varints(-128, 127)))...)
	body = protowire.AppendTag(body, 3, protowire.BytesType)
	body = protowire.AppendString(body, "probs")
	req, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Tensor{
		tensor.FromFloat64("a_double", []int64{1, 2}, []float64{0.5, -3}),
		tensor.FromInt8("m_int8", []int64{2}, []int8{-128, 127}),
		tensor.FromBool("z_bool", []int64{2}, []bool{true, false}),
	}
	if len(req.Inputs) != 3 {
		t.Fatalf("%d inputs", len(req.Inputs))
	}
	for i := range want {
		if !tensor.Equal(req.Inputs[i], want[i]) {
			t.Errorf("input %d = %+v, want %+v", i, req.Inputs[i], want[i])
		}
	}
	if req.SignatureName != "predict" || !slices.Equal(req.OutputFilter, []string{"probs"}) {
		t.Errorf("signature %q filter %v", req.SignatureName, req.OutputFilter)
	}
}

func TestDefaults(t *testing.T) {
	body := entry(2, "x", array(3, []int64{1}, 5, varints(4)))
	req, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if req.SignatureName != DefaultSignature || req.OutputFilter != nil {
		t.Fatalf("signature %q filter %v", req.SignatureName, req.OutputFilter)
	}
}

func TestEncodeResponseWireBytes(t *testing.T) {
	got, err := EncodeResponse([]tensor.Tensor{
		tensor.FromInt64("b", []int64{1}, []int64{-1}),
		tensor.FromFloat64("a", []int64{1}, []float64{2}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// Deterministic marshalling writes map entries in key order.
	want := append(entry(1, "a", array(2, []int64{1}, 4, doubles(2))), entry(1, "b", array(9, []int64{1}, 7, varints(-1)))...)
	if !slices.Equal(got, want) {
		t.Fatalf("bytes\n got % x\nwant % x", got, want)
	}
}

func TestRoundTripEveryDType(t *testing.T) {
	samples := tensortest.Samples()
	body, err := EncodeRequest("", samples, []string{"out"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tensor.Tensor{}
	for _, in := range req.Inputs {
		byName[in.Name] = in
	}
	for _, s := range samples {
		if !tensor.Equal(byName[s.Name], s) {
			t.Errorf("%s: got %+v, want %+v", s.Name, byName[s.Name], s)
		}
	}
	resp, err := EncodeResponse(samples)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := DecodeResponse(resp)
	if err != nil || len(outs) != len(samples) {
		t.Fatalf("DecodeResponse: %d, %v", len(outs), err)
	}
	for _, o := range outs {
		if !tensor.Equal(o, byName[o.Name]) {
			t.Errorf("response %s changed", o.Name)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{"garbage", []byte{0xff, 0xff, 0xff}, "not a tensorflow PredictRequest"},
		{"no inputs", nil, "no inputs"},
		{"count", entry(2, "x", array(1, []int64{2, 2}, 3, nil)), `input "x": array_shape [2,2] needs 4 values in float_val, got 0`},
		{"wrong field", entry(2, "x", array(9, []int64{1}, 5, varints(1))), "DT_INT64 carries its values in int64_val"},
		{"uint8 range", entry(2, "x", array(4, []int64{1}, 5, varints(256))), "outside the DT_UINT8 range 0..255"},
		{"no dtype", entry(2, "x", nil), "DT_INVALID is not supported"},
		{"empty filter", append(entry(2, "x", array(3, []int64{1}, 5, varints(4))), 0x1a, 0x00), "empty name"},
		{"empty input name", entry(2, "", array(3, []int64{1}, 5, varints(4))), "empty name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest(tt.body)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !badinput.Is(err) {
				t.Fatalf("err %T is not an InputError", err)
			}
		})
	}
}

func FuzzTF(f *testing.F) {
	body, err := EncodeRequest("serving_default", tensortest.Samples(), []string{"y"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	for _, s := range tensortest.Samples() {
		b, _ := EncodeRequest("", []tensor.Tensor{s}, nil)
		f.Add(b)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body)
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
		again, err := EncodeRequest(req.SignatureName, req.Inputs, req.OutputFilter)
		if err != nil {
			t.Fatal(err)
		}
		req2, err := DecodeRequest(again)
		if err != nil {
			t.Fatal(err)
		}
		for i := range req.Inputs {
			if !tensor.Equal(req.Inputs[i], req2.Inputs[i]) {
				t.Fatalf("round trip changed %q", req.Inputs[i].Name)
			}
		}
	})
}
