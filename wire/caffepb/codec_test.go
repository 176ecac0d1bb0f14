package caffepb

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

// The helpers below build messages by hand with protowire, independently of
// the generated code, so the tests pin the field numbers and both encodings
// of repeated scalars: packed (one length-delimited run) and unpacked (one
// tag per value, proto2's default that Caffe's C++ and Java writers use).

// shapeMsg is an ArrayShape: dim (1) as int64 varints.
func shapeMsg(packed bool, dims ...int64) []byte {
	var b []byte
	if packed {
		var run []byte
		for _, d := range dims {
			run = protowire.AppendVarint(run, uint64(d))
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		return protowire.AppendBytes(b, run)
	}
	for _, d := range dims {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(d))
	}
	return b
}

// floats is the data (2) field of an ArrayProto.
func floats(packed bool, v ...float32) []byte {
	var b []byte
	if packed {
		var run []byte
		for _, f := range v {
			run = protowire.AppendFixed32(run, math.Float32bits(f))
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		return protowire.AppendBytes(b, run)
	}
	for _, f := range v {
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(f))
	}
	return b
}

// array is an ArrayProto: shape (1, left out when nil) and then data, the
// bytes of floats (possibly several runs concatenated).
func array(shape []byte, data ...[]byte) []byte {
	var b []byte
	if shape != nil {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, shape)
	}
	for _, d := range data {
		b = append(b, d...)
	}
	return b
}

// str is a string field; msg is an embedded-message field.
func str(num protowire.Number, s string) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func msg(num protowire.Number, m []byte) []byte {
	b := protowire.AppendTag(nil, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func cat(parts ...[]byte) []byte { return slices.Concat(parts...) }

// vec is a valid one-axis input: shape [len(v)], packed data.
func vec(v ...float32) []byte {
	return array(shapeMsg(true, int64(len(v))), floats(true, v...))
}

func wantInputs(t *testing.T, got []tensor.Tensor, want ...tensor.Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d tensors, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !tensor.Equal(got[i], want[i]) {
			t.Errorf("tensor %d = %+v, want %+v", i, got[i], want[i])
		}
		if err := got[i].Validate(); err != nil {
			t.Errorf("tensor %d: %v", i, err)
		}
	}
}

func TestDecodeHandBuilt(t *testing.T) {
	body := cat(
		// input_name (1), both names first as a protobuf writer groups them.
		str(1, "im_info"),
		str(1, "data"),
		// input_data (2)[0]: packed dims [1,3], unpacked floats.
		msg(2, array(shapeMsg(true, 1, 3), floats(false, 600, 800, 1.5))),
		// input_data (2)[1]: unpacked dims [1,2,2], data split into a packed
		// run and unpacked values, which a decoder must concatenate.
		msg(2, array(shapeMsg(false, 1, 2, 2), floats(true, 1, -2), floats(false, 3.25, float32(math.Inf(1))))),
		// output_filter (3)
		str(3, "bbox"),
		str(3, "cls_prob"),
	)
	req, err := DecodeRequest(body, []string{"data", "im_info"})
	if err != nil {
		t.Fatal(err)
	}
	wantInputs(t, req.Inputs,
		tensor.FromFloat32("im_info", []int64{1, 3}, []float32{600, 800, 1.5}),
		tensor.FromFloat32("data", []int64{1, 2, 2}, []float32{1, -2, 3.25, float32(math.Inf(1))}),
	)
	if !slices.Equal(req.OutputFilter, []string{"bbox", "cls_prob"}) {
		t.Errorf("output_filter %q", req.OutputFilter)
	}
}

func TestDecodeUnpackedEverything(t *testing.T) {
	// The bytes a proto2 writer without [packed=true] sends.
	body := msg(2, array(shapeMsg(false, 2, 1), floats(false, 0.5, -0.25)))
	req, err := DecodeRequest(body, []string{"data"})
	if err != nil {
		t.Fatal(err)
	}
	wantInputs(t, req.Inputs, tensor.FromFloat32("data", []int64{2, 1}, []float32{0.5, -0.25}))
	if req.OutputFilter != nil {
		t.Errorf("output_filter %q, want nil", req.OutputFilter)
	}
}

func TestDecodePositional(t *testing.T) {
	body := cat(msg(2, vec(1, 2)), msg(2, vec(3)))
	req, err := DecodeRequest(body, []string{"data", "im_info", "unused"})
	if err != nil {
		t.Fatal(err)
	}
	wantInputs(t, req.Inputs,
		tensor.FromFloat32("data", []int64{2}, []float32{1, 2}),
		tensor.FromFloat32("im_info", []int64{1}, []float32{3}),
	)
}

func TestEncodeResponseWireBytes(t *testing.T) {
	got, err := EncodeResponse([]tensor.Tensor{
		tensor.FromFloat32("prob", []int64{1, 2}, []float32{0.5, -1}),
		tensor.FromFloat32("loss", []int64{1}, []float32{3}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// proto2 repeated scalars without [packed=true] go unpacked; fields in
	// number order: output_name (1), then output_data (2).
	want := cat(
		str(1, "prob"), str(1, "loss"),
		msg(2, array(shapeMsg(false, 1, 2), floats(false, 0.5, -1))),
		msg(2, array(shapeMsg(false, 1), floats(false, 3))),
	)
	if !slices.Equal(got, want) {
		t.Fatalf("response bytes\n got % x\nwant % x", got, want)
	}
}

func TestEncodeRequestWireBytes(t *testing.T) {
	got, err := EncodeRequest([]tensor.Tensor{tensor.FromFloat32("data", []int64{1}, []float32{2})}, []string{"prob"})
	if err != nil {
		t.Fatal(err)
	}
	want := cat(str(1, "data"), msg(2, array(shapeMsg(false, 1), floats(false, 2))), str(3, "prob"))
	if !slices.Equal(got, want) {
		t.Fatalf("request bytes\n got % x\nwant % x", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	in := []tensor.Tensor{
		tensortest.Sample(tensor.Float32),
		tensor.FromFloat32("data", []int64{1, 3, 2, 2}, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}),
	}
	body, err := EncodeRequest(in, []string{"prob", "fc7"})
	if err != nil {
		t.Fatal(err)
	}
	req, err := DecodeRequest(body, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantInputs(t, req.Inputs, in...)
	if !slices.Equal(req.OutputFilter, []string{"prob", "fc7"}) {
		t.Errorf("output_filter %q", req.OutputFilter)
	}

	// Unnamed inputs travel by position.
	anon := []tensor.Tensor{tensor.FromFloat32("", []int64{2}, []float32{1, 2}), tensor.FromFloat32("", []int64{1}, []float32{3})}
	body, err = EncodeRequest(anon, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, err = DecodeRequest(body, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	wantInputs(t, req.Inputs, tensor.FromFloat32("a", []int64{2}, []float32{1, 2}), tensor.FromFloat32("b", []int64{1}, []float32{3}))

	// Responses may hold what no request may: a scalar and an empty blob.
	outs := []tensor.Tensor{
		tensor.FromFloat32("prob", []int64{2, 3}, []float32{0.1, 0.2, 0.7, 1, 0, -0}),
		tensor.FromFloat32("loss", nil, []float32{0.25}),
		tensor.FromFloat32("rois", []int64{0, 5}, nil),
	}
	resp, err := EncodeResponse(outs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	outs[1].Shape = []int64{} // nil and empty are the same shape on the wire
	wantInputs(t, got, outs...)
}

func TestEncodeConvertsNumeric(t *testing.T) {
	for _, s := range tensortest.Samples() {
		t.Run(s.Name, func(t *testing.T) {
			resp, err := EncodeResponse([]tensor.Tensor{s})
			if s.DType == tensor.Bool || s.DType == tensor.String {
				if err == nil || !strings.Contains(err.Error(), "carries only numbers") {
					t.Fatalf("err = %v, want a refusal of %s", err, s.DType)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeResponse(resp)
			if err != nil {
				t.Fatal(err)
			}
			f, _ := s.Float64s()
			want := make([]float32, len(f))
			for i, x := range f {
				want[i] = float32(x)
			}
			wantInputs(t, got, tensor.FromFloat32(s.Name, s.Shape, want))
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	bad := tensor.FromFloat32("x", []int64{3}, []float32{1, 2})
	if _, err := EncodeResponse([]tensor.Tensor{bad}); err == nil || !strings.Contains(err.Error(), "needs 12 bytes") {
		t.Errorf("invalid tensor: err = %v", err)
	}
	if _, err := EncodeRequest([]tensor.Tensor{bad}, nil); err == nil || !strings.Contains(err.Error(), "needs 12 bytes") {
		t.Errorf("invalid tensor: err = %v", err)
	}
	mixed := []tensor.Tensor{tensor.FromFloat32("a", []int64{1}, []float32{1}), tensor.FromFloat32("", []int64{1}, []float32{1})}
	if _, err := EncodeRequest(mixed, nil); err == nil || !strings.Contains(err.Error(), "1 of 2 inputs are named") {
		t.Errorf("mixed names: err = %v", err)
	}
	if _, err := EncodeRequest([]tensor.Tensor{tensortest.Sample(tensor.String)}, nil); err == nil || !strings.Contains(err.Error(), "BYTES") {
		t.Errorf("string input: err = %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	good := msg(2, vec(1, 2))
	manyDims := make([]int64, MaxAxes+1)
	for i := range manyDims {
		manyDims[i] = 1
	}
	tests := []struct {
		name    string
		body    []byte
		wantErr []string
	}{
		{"garbage", []byte("this is not a protobuf"), []string{"not a caffe.eas.PredictRequest"}},
		{"truncated", good[:len(good)-3], []string{"not a caffe.eas.PredictRequest"}},
		// protobuf skips a known field number with the wrong wire type as unknown.
		{"wrong wire type", cat(protowire.AppendTag(nil, 2, protowire.VarintType), []byte{1}), []string{"no inputs"}},
		{"bad length", []byte{0x12, 0x7f, 0x00}, []string{"not a caffe.eas.PredictRequest"}},
		{"empty", nil, []string{"no inputs", "input_data"}},
		{"names only", str(1, "data"), []string{"no inputs"}},
		{"too many positional", cat(good, good, good), []string{"3 positional inputs", "model takes 2", `"data", "im_info"`}},
		{"name count", cat(str(1, "data"), str(1, "im_info"), good), []string{"2 input_name entries but 1 input_data"}},
		{"fewer names", cat(str(1, "data"), good, good), []string{"1 input_name entries but 2 input_data"}},
		{"empty name", cat(str(1, "data"), str(1, ""), good, good), []string{"input_name[1] is empty"}},
		{"duplicate name", cat(str(1, "data"), str(1, "data"), good, good), []string{`input "data" is given more than once`}},
		{"no shape", msg(2, array(nil, floats(true, 1, 2, 3))), []string{`input_data[0] ("data")`, "shape is missing", "3 values", "N-D"}},
		{"nil array", msg(2, nil), []string{"shape is missing", "0 values"}},
		{"no dims", msg(2, array([]byte{}, floats(true, 1))), []string{"shape has no dims", "[1]"}},
		{"too many dims", msg(2, array(shapeMsg(true, manyDims...), floats(true, 1))), []string{"33 dims", "at most 32"}},
		{"negative dim", msg(2, array(shapeMsg(true, 2, -1), floats(true, 1, 2))), []string{"dim 1 is -1", ">= 1"}},
		{"zero dim", msg(2, array(shapeMsg(true, 1, 0, 3))), []string{"[1,0,3] has no elements", "dim 1 is 0"}},
		{"count", msg(2, array(shapeMsg(true, 2, 3), floats(true, 1, 2, 3, 4, 5))), []string{"shape [2,3] needs 6 values in data, got 5"}},
		{"count unpacked", msg(2, array(shapeMsg(false, 4), floats(false, 1))), []string{"shape [4] needs 4 values in data, got 1"}},
		{"no data", msg(2, array(shapeMsg(true, 1, 3))), []string{"needs 3 values in data, got 0"}},
		{"huge dim", msg(2, array(shapeMsg(true, math.MaxInt64), floats(true, 1))), []string{"more than", "elements"}},
		{"overflowing product", msg(2, array(shapeMsg(true, 1<<32, 1<<32, 1<<32), floats(true, 1))), []string{"more than", "elements"}},
		{"max dims product", msg(2, array(shapeMsg(false, math.MaxInt64, math.MaxInt64), floats(true, 1))), []string{"more than"}},
		{"empty filter name", cat(good, str(3, "")), []string{"output_filter[0] is empty"}},
		{"duplicate filter", cat(good, str(3, "prob"), str(3, "prob")), []string{`output_filter lists "prob" twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := DecodeRequest(tt.body, []string{"data", "im_info"})
			if err == nil {
				t.Fatalf("decoded %+v, want an error", req)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %q, want it to contain %q", err, w)
				}
			}
			if _, ok := err.(*badinput.Error); !ok {
				t.Fatalf("err %T is not a *badinput.Error", err)
			}
		})
	}
}

func TestDecodeResponseErrors(t *testing.T) {
	tests := []struct {
		name    string
		body    []byte
		wantErr string
	}{
		{"garbage", []byte{0xff, 0xff}, "decode caffe response"},
		{"name count", cat(str(1, "a"), str(1, "b"), msg(2, vec(1))), "2 output_name entries but 1 output_data"},
		{"no shape", cat(str(1, "a"), msg(2, array(nil, floats(true, 1)))), `output_data[0] ("a"): shape is missing`},
		{"negative dim", cat(str(1, "a"), msg(2, array(shapeMsg(true, -3)))), "dims must be >= 0"},
		{"count", cat(str(1, "a"), msg(2, array(shapeMsg(true, 0, 2), floats(true, 1)))), "needs 0 values in data, got 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeResponse(tt.body)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	got, err := DecodeResponse(nil)
	if err != nil || len(got) != 0 {
		t.Fatalf("empty response: %v, %v", got, err)
	}
}

// TestDecodeDoesNotShareInputs checks that each input owns its data: a model
// that scribbles on one input must not change another.
func TestDecodeDoesNotShareInputs(t *testing.T) {
	body := cat(msg(2, vec(1, 2)), msg(2, vec(3, 4)))
	req, err := DecodeRequest(body, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range req.Inputs[0].Data {
		req.Inputs[0].Data[i] = 0xff
	}
	v, _ := req.Inputs[1].AsFloat32()
	if !slices.Equal(v, []float32{3, 4}) {
		t.Fatalf("input b = %v after writing input a", v)
	}
}
