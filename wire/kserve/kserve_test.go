package kserve

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/tensor/tensortest"
)

func TestDecodeJSON(t *testing.T) {
	body := `{"id":"r1","parameters":{"binary_data_output":true},
	 "inputs":[
	  {"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4.5]]},
	  {"name":"ids","shape":[3],"datatype":"INT64","data":[1,-2,9007199254740993]},
	  {"name":"s","shape":[2],"datatype":"BYTES","data":["a","\u00e9\n"]},
	  {"name":"b","shape":[],"datatype":"BOOL","data":true},
	  {"name":"h","shape":[1,2],"datatype":"FP16","data":[[1.5, -2e-3]]},
	  {"name":"e","shape":[0,4],"datatype":"UINT8","data":[]}],
	 "outputs":[{"name":"y","parameters":{"binary_data":false}},{"name":"z"}]}`
	req, err := DecodeRequest([]byte(body), "")
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Tensor{
		tensor.FromFloat32("x", []int64{2, 2}, []float32{1, 2, 3, 4.5}),
		tensor.FromInt64("ids", []int64{3}, []int64{1, -2, 9007199254740993}),
		tensor.FromStrings("s", []int64{2}, []string{"a", "é\n"}),
		tensor.FromBool("b", []int64{}, []bool{true}),
		tensor.FromFloat16Bits("h", []int64{1, 2}, []uint16{0x3e00, tensor.Float32ToFloat16(-2e-3)}),
		tensor.FromUint8("e", []int64{0, 4}, nil),
	}
	if len(req.Inputs) != len(want) {
		t.Fatalf("%d inputs, want %d", len(req.Inputs), len(want))
	}
	for i := range want {
		if !tensor.Equal(req.Inputs[i], want[i]) {
			t.Errorf("input %d = %+v, want %+v", i, req.Inputs[i], want[i])
		}
	}
	if req.ID != "r1" || !req.BinaryDataOutput {
		t.Errorf("id %q binary_data_output %v", req.ID, req.BinaryDataOutput)
	}
	if !slices.Equal(req.OutputNames(), []string{"y", "z"}) {
		t.Errorf("outputs %v", req.OutputNames())
	}
	if req.WantsBinary("y") || !req.WantsBinary("z") || !req.WantsBinary("other") {
		t.Errorf("WantsBinary y=%v z=%v other=%v; want false true true", req.WantsBinary("y"), req.WantsBinary("z"), req.WantsBinary("other"))
	}
}

// binaryBody builds a request by hand: the JSON header text and the raw
// chunks, returning the body and the header value.
func binaryBody(header string, chunks ...[]byte) ([]byte, string) {
	body := []byte(header)
	for _, c := range chunks {
		body = append(body, c...)
	}
	return body, strconv.Itoa(len(header))
}

func TestDecodeBinary(t *testing.T) {
	fp := binary.LittleEndian.AppendUint32(nil, math.Float32bits(1.25))
	fp = binary.LittleEndian.AppendUint32(fp, math.Float32bits(-8))
	var strs []byte
	strs = binary.LittleEndian.AppendUint32(strs, 2)
	strs = append(strs, "ab"...)
	strs = binary.LittleEndian.AppendUint32(strs, 0)
	header := `{"inputs":[
	 {"name":"x","shape":[1,2],"datatype":"FP32","parameters":{"binary_data_size":8}},
	 {"name":"j","shape":[2],"datatype":"INT32","data":[7,8]},
	 {"name":"s","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}]}`
	body, hl := binaryBody(header, fp, strs)
	req, err := DecodeRequest(body, hl)
	if err != nil {
		t.Fatal(err)
	}
	want := []tensor.Tensor{
		tensor.FromFloat32("x", []int64{1, 2}, []float32{1.25, -8}),
		tensor.FromInt32("j", []int64{2}, []int32{7, 8}),
		tensor.FromStrings("s", []int64{2}, []string{"ab", ""}),
	}
	for i := range want {
		if !tensor.Equal(req.Inputs[i], want[i]) {
			t.Errorf("input %d = %+v, want %+v", i, req.Inputs[i], want[i])
		}
	}
}

func TestEncodeResponseJSON(t *testing.T) {
	resp := &InferResponse{ModelName: "m", ModelVersion: "1", ID: "r1", Outputs: []tensor.Tensor{
		tensor.FromFloat32("y", []int64{2}, []float32{0.1, -2}),
		tensor.FromStrings("s", []int64{1}, []string{"a\"b"}),
		tensor.FromBool("b", nil, []bool{false}),
	}}
	body, hl, err := EncodeResponse(resp, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model_name":"m","model_version":"1","id":"r1","outputs":[` +
		`{"name":"y","shape":[2],"datatype":"FP32","data":[0.1,-2]},` +
		`{"name":"s","shape":[1],"datatype":"BYTES","data":["a\"b"]},` +
		`{"name":"b","shape":[],"datatype":"BOOL","data":[false]}]}`
	if string(body) != want || hl != 0 {
		t.Fatalf("body\n got %s (header %d)\nwant %s", body, hl, want)
	}
}

func TestEncodeResponseBinary(t *testing.T) {
	req := &InferRequest{Outputs: []RequestedOutput{{Name: "y", Binary: ptr(true)}, {Name: "s", Binary: ptr(true)}, {Name: "j"}}}
	resp := &InferResponse{ModelName: "m", Outputs: []tensor.Tensor{
		tensor.FromFloat32("y", []int64{1}, []float32{2}),
		tensor.FromInt32("j", []int64{1}, []int32{3}),
		tensor.FromStrings("s", []int64{2}, []string{"hi", ""}),
	}}
	body, hl, err := EncodeResponse(resp, req)
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"model_name":"m","outputs":[` +
		`{"name":"y","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}},` +
		`{"name":"j","shape":[1],"datatype":"INT32","data":[3]},` +
		`{"name":"s","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":10}}]}`
	if hl != len(wantJSON) || string(body[:hl]) != wantJSON {
		t.Fatalf("header %d\n got %s\nwant %s", hl, body[:min(hl, len(body))], wantJSON)
	}
	tail := []byte{0, 0, 0, 0x40, 2, 0, 0, 0, 'h', 'i', 0, 0, 0, 0}
	if !slices.Equal(body[hl:], tail) {
		t.Fatalf("binary section % x, want % x", body[hl:], tail)
	}
}

func ptr[T any](v T) *T { return &v }

func TestRoundTripEveryDType(t *testing.T) {
	samples := tensortest.Samples()
	for _, binaryIn := range []bool{false, true} {
		for _, binaryOut := range []bool{false, true} {
			name := "json"
			if binaryIn {
				name = "binary"
			}
			if binaryOut {
				name += "-binary"
			} else {
				name += "-json"
			}
			t.Run(name, func(t *testing.T) {
				body, hl, err := EncodeRequest(&InferRequest{ID: "x", Inputs: samples, BinaryDataOutput: binaryOut}, binaryIn)
				if err != nil {
					t.Fatal(err)
				}
				if (hl > 0) != binaryIn {
					t.Fatalf("header length %d with binary inputs %v", hl, binaryIn)
				}
				hv := ""
				if hl > 0 {
					hv = strconv.Itoa(hl)
				}
				req, err := DecodeRequest(body, hv)
				if err != nil {
					t.Fatal(err)
				}
				for i := range samples {
					if !tensor.Equal(req.Inputs[i], samples[i]) {
						t.Errorf("request %s: got %+v, want %+v", samples[i].Name, req.Inputs[i], samples[i])
					}
				}
				rbody, rhl, err := EncodeResponse(&InferResponse{ModelName: "m", ID: req.ID, Outputs: req.Inputs}, req)
				if err != nil {
					t.Fatal(err)
				}
				hv = ""
				if rhl > 0 {
					hv = strconv.Itoa(rhl)
				}
				if (rhl > 0) != binaryOut {
					t.Fatalf("response header length %d with binary output %v", rhl, binaryOut)
				}
				resp, err := DecodeResponse(rbody, hv)
				if err != nil {
					t.Fatal(err)
				}
				if resp.ID != "x" || resp.ModelName != "m" {
					t.Errorf("id %q model %q", resp.ID, resp.ModelName)
				}
				for i := range samples {
					if !tensor.Equal(resp.Outputs[i], samples[i]) {
						t.Errorf("response %s: got %+v, want %+v", samples[i].Name, resp.Outputs[i], samples[i])
					}
				}
			})
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	in := func(s string) string { return `{"inputs":[` + s + `]}` }
	four := []byte{1, 2, 3, 4}
	tests := []struct {
		name    string
		body    string
		header  string
		wantErr string
	}{
		{"not json", "hello", "", "not a valid infer request JSON"},
		{"truncated json", `{"inputs":[{"name":"x"`, "", "not a valid infer request JSON"},
		{"unknown field", `{"inputz":[]}`, "", `unknown field "inputz"`},
		{"trailing", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`) + "garbage", "", "unexpected bytes after the JSON object"},
		{"no inputs", `{"inputs":[]}`, "", `"inputs" is empty`},
		{"empty body", ``, "", "empty"},
		{"no name", in(`{"shape":[1],"datatype":"FP32","data":[1]}`), "", "inputs[0] has no name"},
		{"dup name", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]},{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`), "", `input "x" appears twice`},
		{"datatype", in(`{"name":"x","shape":[1],"datatype":"FLOAT32","data":[1]}`), "", `datatype "FLOAT32" is not one of`},
		{"no shape", in(`{"name":"x","datatype":"FP32","data":[1]}`), "", "has no shape"},
		{"negative shape", in(`{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}`), "", "must be >= 0"},
		{"fractional shape", in(`{"name":"x","shape":[1.5],"datatype":"FP32","data":[1]}`), "", "not a valid infer request JSON"},
		{"no data", in(`{"name":"x","shape":[1],"datatype":"FP32"}`), "", `input "x" has no data`},
		{"null data", in(`{"name":"x","shape":[1],"datatype":"FP32","data":null}`), "", `has no data`},
		{"too few", in(`{"name":"x","shape":[2,2],"datatype":"FP32","data":[1,2,3]}`), "", `input "x" (FP32, shape [2,2]): shape needs 4 elements, data holds 3`},
		{"too many", in(`{"name":"x","shape":[2],"datatype":"FP32","data":[1,2,3]}`), "", "more than the 2 elements"},
		{"string for float", in(`{"name":"x","shape":[1],"datatype":"FP32","data":["1"]}`), "", "FP32 data must be numbers, got a string"},
		{"object", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[{}]}`), "", "got an object"},
		{"null elem", in(`{"name":"x","shape":[1],"datatype":"INT32","data":[null]}`), "", "got null"},
		{"fraction for int", in(`{"name":"x","shape":[1],"datatype":"INT32","data":[1.5]}`), "", "1.5 is not an integer in the INT32 range"},
		{"uint8 range", in(`{"name":"x","shape":[1],"datatype":"UINT8","data":[256]}`), "", "256 is not an integer in the UINT8 range"},
		{"negative uint", in(`{"name":"x","shape":[1],"datatype":"UINT64","data":[-1]}`), "", "not an integer in the UINT64 range"},
		{"fp32 overflow", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1e39]}`), "", "does not fit FP32"},
		{"fp16 overflow", in(`{"name":"x","shape":[1],"datatype":"FP16","data":[70000]}`), "", "does not fit FP16"},
		{"bool number", in(`{"name":"x","shape":[1],"datatype":"BOOL","data":[1]}`), "", "BOOL data must be true or false, got a number"},
		{"bytes number", in(`{"name":"x","shape":[1],"datatype":"BYTES","data":[1]}`), "", "BYTES data must be JSON strings"},
		{"deep", in(`{"name":"x","shape":[1],"datatype":"FP32","data":` + strings.Repeat("[", 100) + "1" + strings.Repeat("]", 100) + `}`), "", "nested deeper than 64"},
		{"bad binary_data_output", `{"parameters":{"binary_data_output":"yes"},"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}]}`, "", "binary_data_output must be true or false"},
		{"classification", `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"y","parameters":{"classification":2}}]}`, "", "classification parameter is not supported"},
		{"bad binary_data", `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"y","parameters":{"binary_data":1}}]}`, "", "binary_data must be true or false"},
		{"dup output", `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[1]}],"outputs":[{"name":"y"},{"name":"y"}]}`, "", `output "y" is requested twice`},
		{"header not int", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`), "abc", `"abc" is not a non-negative integer`},
		{"header negative", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`), "-1", "not a non-negative integer"},
		{"header too big", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1]}`), "9999", "is 9999 but the body has only"},
		{"binary no header", in(`{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}`), "", "no binary section"},
		{"binary and data", in(`{"name":"x","shape":[1],"datatype":"FP32","data":[1],"parameters":{"binary_data_size":4}}`), "", "both data and binary_data_size"},
		{"binary size type", in(`{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":-4}}`), "", "binary_data_size must be a non-negative integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.body), tt.header)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !badinput.Is(err) {
				t.Fatalf("err %T is not an InputError", err)
			}
		})
	}
	binTests := []struct {
		name    string
		header  string
		chunks  [][]byte
		wantErr string
	}{
		{"size mismatch", in(`{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":4}}`), [][]byte{four}, "binary_data_size is 4 bytes but the shape needs 8"},
		{"short section", in(`{"name":"x","shape":[2],"datatype":"FP32","parameters":{"binary_data_size":8}}`), [][]byte{four}, "only 4 bytes of binary data are left"},
		{"trailing bytes", in(`{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":4}}`), [][]byte{four, four}, "4 bytes of binary data follow the last binary input"},
		{"bool byte", in(`{"name":"x","shape":[4],"datatype":"BOOL","parameters":{"binary_data_size":4}}`), [][]byte{four}, "BOOL element 1 is byte 2"},
		{"bytes length", in(`{"name":"x","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}`), [][]byte{{9, 0, 0, 0, 'a', 'b'}}, "length 9 exceeds the 2 bytes left"},
		{"bytes short prefix", in(`{"name":"x","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":7}}`), [][]byte{{1, 0, 0, 0, 'a', 0, 0}}, "too few for its 4-byte length"},
		{"bytes too many", in(`{"name":"x","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":8}}`), [][]byte{{0, 0, 0, 0, 0, 0, 0, 0}}, "more than the 1 elements"},
		{"bytes too few", in(`{"name":"x","shape":[2],"datatype":"BYTES","parameters":{"binary_data_size":4}}`), [][]byte{{0, 0, 0, 0}}, "holds 1 elements, the shape needs 2"},
	}
	for _, tt := range binTests {
		t.Run(tt.name, func(t *testing.T) {
			body, hl := binaryBody(tt.header, tt.chunks...)
			_, err := DecodeRequest(body, hl)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
			if !badinput.Is(err) {
				t.Fatalf("err %T is not an InputError", err)
			}
		})
	}
}

func TestEncodeErrors(t *testing.T) {
	nan := tensor.FromFloat32("y", []int64{2}, []float32{1, float32(math.NaN())})
	if _, _, err := EncodeResponse(&InferResponse{Outputs: []tensor.Tensor{nan}}, nil); err == nil || !strings.Contains(err.Error(), `"y" element 1 is NaN`) {
		t.Fatalf("NaN as JSON: err = %v", err)
	}
	// Binary output carries NaN fine.
	body, hl, err := EncodeResponse(&InferResponse{Outputs: []tensor.Tensor{nan}}, &InferRequest{BinaryDataOutput: true})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := DecodeResponse(body, strconv.Itoa(hl))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := resp.Outputs[0].AsFloat32(); !math.IsNaN(float64(v[1])) {
		t.Fatalf("NaN came back as %v", v)
	}
	bad := tensor.FromStrings("s", []int64{1}, []string{"\xff"})
	if _, _, err := EncodeResponse(&InferResponse{Outputs: []tensor.Tensor{bad}}, nil); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Fatalf("invalid UTF-8 as JSON: err = %v", err)
	}
	invalid := tensor.FromFloat32("y", []int64{3}, []float32{1})
	if _, _, err := EncodeResponse(&InferResponse{Outputs: []tensor.Tensor{invalid}}, nil); err == nil {
		t.Fatal("encoded an invalid tensor")
	}
}

func TestDecodeResponseServerError(t *testing.T) {
	_, err := DecodeResponse(ErrorBody("model x is not ready"), "")
	if err == nil || !strings.Contains(err.Error(), "server error: model x is not ready") {
		t.Fatalf("err = %v", err)
	}
}

func TestMetadataJSON(t *testing.T) {
	md := ModelMetadata{
		Name: "mlp", Versions: []string{"1"}, Platform: "onnxruntime_onnx",
		Inputs:  []TensorMetadata{{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}},
		Outputs: []TensorMetadata{{Name: "y", Datatype: "INT64", Shape: []int64{}}},
	}
	b, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"mlp","versions":["1"],"platform":"onnxruntime_onnx",` +
		`"inputs":[{"name":"x","datatype":"FP32","shape":[-1,4]}],"outputs":[{"name":"y","datatype":"INT64","shape":[]}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	sb, _ := json.Marshal(ServerMetadata{Name: "eas-server", Version: "0.1", Extensions: Extensions})
	if string(sb) != `{"name":"eas-server","version":"0.1","extensions":["binary_tensor_data"]}` {
		t.Fatalf("server metadata %s", sb)
	}
	if string(ErrorBody(`bad "x"`)) != `{"error":"bad \"x\""}` {
		t.Fatalf("error body %s", ErrorBody(`bad "x"`))
	}
}

// checkDecoded is the fuzz property: a decoded request holds valid tensors
// that survive a binary re-encode unchanged.
func checkDecoded(t *testing.T, req *InferRequest) {
	for _, in := range req.Inputs {
		if err := in.Validate(); err != nil {
			t.Fatalf("decoded an invalid tensor: %v", err)
		}
	}
	body, hl, err := EncodeRequest(req, true)
	if err != nil {
		t.Fatal(err)
	}
	req2, err := DecodeRequest(body, strconv.Itoa(hl))
	if err != nil {
		t.Fatalf("re-decode: %v", err)
	}
	for i := range req.Inputs {
		if !tensor.Equal(req.Inputs[i], req2.Inputs[i]) {
			t.Fatalf("round trip changed %q", req.Inputs[i].Name)
		}
	}
}

func FuzzKServeJSON(f *testing.F) {
	body, _, err := EncodeRequest(&InferRequest{Inputs: tensortest.Samples()}, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add([]byte(`{"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4]]}],"outputs":[{"name":"y","parameters":{"binary_data":true}}]}`))
	f.Add([]byte(`{"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","data":["a\u0000\"b"]}]}`))
	f.Add([]byte(`{"inputs":[{"name":"b","shape":[],"datatype":"BOOL","data":true}]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeRequest(body, "")
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("error %v is not an InputError", err)
			}
			return
		}
		checkDecoded(t, req)
	})
}

func FuzzKServeBinary(f *testing.F) {
	body, hl, err := EncodeRequest(&InferRequest{Inputs: tensortest.Samples(), BinaryDataOutput: true}, true)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body, strconv.Itoa(hl))
	f.Add([]byte(`{"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":5}}]}`+"\x01\x00\x00\x00a"), "92")
	f.Add([]byte(`{}`), "2")
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		req, err := DecodeRequest(body, header)
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("error %v is not an InputError", err)
			}
			return
		}
		checkDecoded(t, req)
	})
}
