package graphpipe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/graphpipe/graphpipefb"
)

// every GraphPipe type but Null, with values at the edges of each.
func everyType() []tensor.Tensor {
	return []tensor.Tensor{
		tensor.FromUint8("", []int64{2}, []uint8{0, 255}),
		tensor.FromInt8("", []int64{2}, []int8{-128, 127}),
		tensor.FromUint16("", []int64{2}, []uint16{0, 65535}),
		tensor.FromInt16("", []int64{2}, []int16{-32768, 32767}),
		tensor.FromUint32("", []int64{2}, []uint32{0, 1<<32 - 1}),
		tensor.FromInt32("", []int64{2}, []int32{-1 << 31, 1<<31 - 1}),
		tensor.FromUint64("", []int64{2}, []uint64{0, 1<<64 - 1}),
		tensor.FromInt64("", []int64{1, 2}, []int64{-1 << 63, 1<<63 - 1}),
		tensor.FromFloat16Bits("", []int64{2}, []uint16{0x3c00, 0xfc00}),
		tensor.FromFloat32("", []int64{2, 1}, []float32{1.5, -3e38}),
		tensor.FromFloat64("", []int64{}, []float64{-1e300}),
		tensor.FromStrings("", []int64{3}, []string{"", "héllo", "a\x00b"}),
		tensor.FromFloat32("", []int64{0, 4}, nil),
	}
}

func TestRequestRoundTrip(t *testing.T) {
	in := &Request{Config: "cfg", InputNames: []string{"a", "", "c"}, Inputs: everyType(), OutputNames: []string{"y", "z"}}
	body, err := EncodeRequest(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if got.Metadata || got.Config != "cfg" || strings.Join(got.InputNames, ",") != "a,,c" || strings.Join(got.OutputNames, ",") != "y,z" {
		t.Fatalf("decoded %+v", got)
	}
	if len(got.Inputs) != len(in.Inputs) {
		t.Fatalf("%d inputs, want %d", len(got.Inputs), len(in.Inputs))
	}
	for i := range in.Inputs {
		w := in.Inputs[i]
		g := got.Inputs[i]
		g.Name, w.Name = "", ""
		if err := tensor.Close(g, w, tensor.Exact); err != nil {
			t.Errorf("input %d (%s): %v", i, w.DType, err)
		}
	}
	named, err := got.Named([]string{"m0", "m1", "m2", "m3"})
	if err == nil {
		t.Fatalf("13 inputs named by a 4-input model's defaults: %v", named)
	}
	got.Inputs = got.Inputs[:3]
	named, err = got.Named([]string{"m0", "m1", "m2"})
	if err != nil {
		t.Fatal(err)
	}
	if named[0].Name != "a" || named[1].Name != "m1" || named[2].Name != "c" {
		t.Errorf("names %q %q %q, want a m1 c", named[0].Name, named[1].Name, named[2].Name)
	}
}

func TestMetadataRequestAndResponse(t *testing.T) {
	body, err := EncodeRequest(&Request{Metadata: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRequest(body)
	if err != nil || !got.Metadata {
		t.Fatalf("%+v, %v", got, err)
	}
	m := &Metadata{Name: "mlp", Version: "1", Server: "eas-server", Description: "d",
		Inputs:  []IOMetadata{{Name: "x", Shape: []int64{-1, 4}, Type: uint8(graphpipefb.TypeFloat32)}},
		Outputs: []IOMetadata{{Name: "y", Description: "out", Shape: []int64{-1, 3}, Type: uint8(graphpipefb.TypeInt64)}}}
	dm, err := DecodeMetadata(EncodeMetadata(m))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(m)
	b, _ := json.Marshal(dm)
	if !bytes.Equal(a, b) {
		t.Errorf("metadata round trip:\n got %s\nwant %s", b, a)
	}
}

func TestInferResponseRoundTrip(t *testing.T) {
	outs := everyType()
	outs = append(outs, tensor.FromBool("", []int64{3}, []bool{true, false, true}), tensor.FromBFloat16Bits("", []int64{2}, []uint16{0x3fc0, 0xc000}))
	body, err := EncodeInferResponse(outs, []Error{{Code: 3, Message: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	got, errs, err := DecodeInferResponse(body)
	if err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || errs[0] != (Error{3, "m"}) {
		t.Errorf("errors %+v", errs)
	}
	want := everyType()
	want = append(want, tensor.FromUint8("", []int64{3}, []uint8{1, 0, 1}), tensor.FromFloat32("", []int64{2}, []float32{1.5, -2}))
	if len(got) != len(want) {
		t.Fatalf("%d outputs, want %d", len(got), len(want))
	}
	for i := range want {
		g := got[i]
		g.Name = ""
		if err := tensor.Close(g, want[i], tensor.Exact); err != nil {
			t.Errorf("output %d: %v", i, err)
		}
	}
}

func TestDecodeRequestRefuses(t *testing.T) {
	good, _ := EncodeRequest(&Request{Inputs: []tensor.Tensor{tensor.FromFloat32("", []int64{2}, []float32{1, 2})}})
	bad := map[string][]byte{
		"empty":     nil,
		"short":     []byte{1, 2, 3},
		"json":      []byte(`{"inputs": [1, 2, 3]}`),
		"root past": {0xff, 0xff, 0, 0, 0, 0, 0, 0},
		"truncated": good[:len(good)-9],
		"no req":    mustBuild(t, graphpipefb.ReqNONE),
		"unknown":   mustBuild(t, 9),
	}
	// A tensor whose shape needs more bytes than it has.
	b, err := EncodeRequest(&Request{Inputs: []tensor.Tensor{{DType: tensor.Float32, Shape: []int64{2}, Data: make([]byte, 8)}}})
	if err != nil {
		t.Fatal(err)
	}
	// Patch the shape in place (2 -> 3): find the int64 2.
	if i := bytes.Index(b, []byte{2, 0, 0, 0, 0, 0, 0, 0}); i >= 0 {
		p := bytes.Clone(b)
		p[i] = 3
		bad["shape vs data"] = p
	} else {
		t.Fatal("shape not found in the encoded request")
	}
	for name, body := range bad {
		_, err := DecodeRequest(body)
		if !badinput.Is(err) {
			t.Errorf("%s: %v, want a bad-input error", name, err)
		}
	}
	if _, err := DecodeRequest(bad["json"]); err == nil || !strings.Contains(err.Error(), "looks like JSON") {
		t.Errorf("JSON body: %v, want a hint", err)
	}
	if _, err := DecodeRequest(good); err != nil {
		t.Errorf("good: %v", err)
	}
}

func mustBuild(t *testing.T, rt graphpipefb.Req) []byte {
	t.Helper()
	b, err := EncodeRequest(&Request{Metadata: true})
	if err != nil {
		t.Fatal(err)
	}
	// The union's type byte is the only byte 2 (ReqMetadataRequest) of the
	// Request table.
	i := bytes.LastIndexByte(b, byte(graphpipefb.ReqMetadataRequest))
	if i < 0 {
		t.Fatal("req_type not found")
	}
	b[i] = byte(rt)
	return b
}

func TestNullTypeRefused(t *testing.T) {
	b, err := EncodeRequest(&Request{Inputs: []tensor.Tensor{tensor.FromUint8("", []int64{1}, []uint8{7})}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodeRequest(b)
	if err != nil || len(r.Inputs) != 1 {
		t.Fatal(r, err)
	}
	// Set the tensor's type byte (Uint8 = 1) to Null: try every byte 1
	// and keep the flip that the decoder refuses as a Null tensor.
	for i := range b {
		if b[i] != byte(graphpipefb.TypeUint8) {
			continue
		}
		p := bytes.Clone(b)
		p[i] = byte(graphpipefb.TypeNull)
		_, err := DecodeRequest(p)
		if err != nil && strings.Contains(err.Error(), "Null") {
			if !badinput.Is(err) {
				t.Fatalf("Null: %v, want a bad-input error", err)
			}
			return
		}
	}
	t.Fatal("no byte flip gave a Null tensor's refusal")
}

func FuzzDecodeRequest(f *testing.F) {
	for _, r := range []*Request{
		{Metadata: true},
		{Inputs: everyType(), InputNames: []string{"x"}, OutputNames: []string{"y"}, Config: "c"},
		{Inputs: []tensor.Tensor{tensor.FromFloat32("", []int64{1, 4}, []float32{1, 2, 3, 4})}},
	} {
		b, err := EncodeRequest(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"inputs":[]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := DecodeRequest(body)
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("%v is not a bad-input error", err)
			}
			return
		}
		// What decodes encodes again to the same request.
		again, err := EncodeRequest(r)
		if err != nil {
			t.Fatalf("re-encoding %+v: %v", r, err)
		}
		r2, err := DecodeRequest(again)
		if err != nil {
			t.Fatalf("decoding the re-encoded request: %v", err)
		}
		if r2.Metadata != r.Metadata || r2.Config != r.Config || len(r2.Inputs) != len(r.Inputs) ||
			strings.Join(r2.InputNames, "\x00") != strings.Join(r.InputNames, "\x00") || strings.Join(r2.OutputNames, "\x00") != strings.Join(r.OutputNames, "\x00") {
			t.Fatalf("re-encoded request differs: %+v vs %+v", r2, r)
		}
		for i := range r.Inputs {
			if !tensor.Equal(r.Inputs[i], r2.Inputs[i]) {
				t.Fatalf("input %d differs after a round trip", i)
			}
		}
	})
}
