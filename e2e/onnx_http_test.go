// Package e2e holds whole-stack tests: real service.json files deployed by
// the real loader, served by the real router over HTTP, with real models.
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/all"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/hiepb"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/torchpb"
)

const onnxTestdata = "../processors/onnx/testdata"

// refs is a reference file of scripts/gen-test-models.py: inputs and
// numpy-computed outputs in KServe v2 JSON tensor form.
type refs struct {
	Model string `json:"model"`
	Cases []struct {
		Name    string          `json:"name"`
		Inputs  json.RawMessage `json:"inputs"`
		Outputs json.RawMessage `json:"outputs"`
	} `json:"cases"`
}

type stack struct {
	url   string
	token string // the services' token; "" = "T"
}

func newStack(t *testing.T, services ...string) *stack {
	t.Helper()
	return &stack{url: teststack.Start(t, services...).URL}
}

func (s *stack) post(t *testing.T, path string, body []byte, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", s.url+path, bytes.NewReader(body))
	tok := s.token
	if tok == "" {
		tok = "T"
	}
	req.Header.Set("Authorization", tok)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func tensorsOf(t *testing.T, raw json.RawMessage, key string) []tensor.Tensor {
	t.Helper()
	switch key {
	case "inputs":
		req, err := kserve.DecodeRequest([]byte(`{"inputs":`+string(raw)+`}`), "")
		if err != nil {
			t.Fatalf("reference inputs: %v", err)
		}
		return req.Inputs
	default:
		resp, err := kserve.DecodeResponse([]byte(`{"model_name":"ref","outputs":`+string(raw)+`}`), "")
		if err != nil {
			t.Fatalf("reference outputs: %v", err)
		}
		return resp.Outputs
	}
}

// TestONNXModelsThroughEveryCodec sends every reference case of every test
// model through HTTP in the four wire formats and compares the outputs with
// the numpy references (tensor.F32Accumulated).
func TestONNXModelsThroughEveryCodec(t *testing.T) {
	checkRefs(t, onnxTestdata, tensor.F32Accumulated)
}

// TestRealArchitectures does the same for real architectures exported by
// PyTorch (scripts/export-real-models.py: a small BERT and MobileNetV3),
// against PyTorch's own outputs, within tensor.F32Reformulated: ONNX
// Runtime computes the network with other kernels than PyTorch.
func TestRealArchitectures(t *testing.T) {
	checkRefs(t, "testdata/real", tensor.F32Reformulated)
}

func checkRefs(t *testing.T, dir string, tol tensor.Tolerance) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(files) == 0 {
		t.Fatal("no reference files in " + dir)
	}
	for _, f := range files {
		var r refs
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		t.Run(name, func(t *testing.T) {
			model := filepath.Join(dir, r.Model)
			s := newStack(t,
				fmt.Sprintf(`{"name":"torch","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, model),
				fmt.Sprintf(`{"name":"hie","processor":"onnx_cpu","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, model))
			for _, c := range r.Cases {
				in := tensorsOf(t, c.Inputs, "inputs")
				want := tensorsOf(t, c.Outputs, "outputs")
				for _, codec := range []string{"torch", "hie", "kserve-json", "kserve-binary"} {
					got, err := s.infer(t, codec, in, namesOf(want))
					if err != nil {
						t.Errorf("%s/%s: %v", c.Name, codec, err)
						continue
					}
					compareTol(t, c.Name+"/"+codec, got, want, tol)
				}
			}
		})
	}
}

func compare(t *testing.T, label string, got, want []tensor.Tensor) {
	t.Helper()
	compareTol(t, label, got, want, tensor.F32Accumulated)
}

func compareTol(t *testing.T, label string, got, want []tensor.Tensor, tol tensor.Tolerance) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d outputs, want %d", label, len(got), len(want))
		return
	}
	for i := range want {
		g := got[i]
		if g.Name != want[i].Name {
			t.Errorf("%s: output %d named %q, want %q", label, i, g.Name, want[i].Name)
		}
		if err := tensor.Close(g, want[i], tol); err != nil {
			t.Errorf("%s: output %q: %v", label, want[i].Name, err)
		}
	}
}

func namesOf(ts []tensor.Tensor) []string {
	var names []string
	for _, x := range ts {
		names = append(names, x.Name)
	}
	return names
}

// inferTo sends in to service over the Torch protobuf.
func (s *stack) inferTo(t *testing.T, service string, in []tensor.Tensor, outNames []string) ([]tensor.Tensor, error) {
	t.Helper()
	body, err := torchpb.EncodeRequest(in, true, nil)
	if err != nil {
		return nil, err
	}
	code, out, _ := s.post(t, "/api/predict/"+service, body, nil)
	if code != 200 {
		return nil, fmt.Errorf("status %d: %s", code, out)
	}
	return torchpb.DecodeResponse(out, outNames)
}

// infer sends in through one codec and decodes the outputs. The Torch
// response is positional: outNames names its outputs.
func (s *stack) infer(t *testing.T, codec string, in []tensor.Tensor, outNames []string) ([]tensor.Tensor, error) {
	t.Helper()
	switch codec {
	case "torch":
		body, err := torchpb.EncodeRequest(in, true, nil)
		if err != nil {
			return nil, err
		}
		code, out, _ := s.post(t, "/api/predict/torch", body, nil)
		if code != 200 {
			return nil, fmt.Errorf("status %d: %s", code, out)
		}
		return torchpb.DecodeResponse(out, outNames)
	case "hie":
		body, err := hiepb.EncodeDataProto(in)
		if err != nil {
			return nil, err
		}
		code, out, _ := s.post(t, "/api/predict/hie", body, nil)
		if code != 200 {
			return nil, fmt.Errorf("status %d: %s", code, out)
		}
		return hiepb.DecodeResponse(out)
	default:
		binary := codec == "kserve-binary"
		req := &kserve.InferRequest{ID: "r1", Inputs: in, BinaryDataOutput: binary}
		body, hlen, err := kserve.EncodeRequest(req, binary)
		if err != nil {
			return nil, err
		}
		hdr := map[string]string{}
		if hlen > 0 {
			hdr[kserve.HeaderContentLength] = strconv.Itoa(hlen)
		}
		code, out, h := s.post(t, "/v2/models/torch/infer", body, hdr)
		if code != 200 {
			return nil, fmt.Errorf("status %d: %s", code, out)
		}
		if binary && h.Get(kserve.HeaderContentLength) == "" {
			return nil, fmt.Errorf("binary output asked for, but the response has no %s header", kserve.HeaderContentLength)
		}
		resp, err := kserve.DecodeResponse(out, h.Get(kserve.HeaderContentLength))
		if err != nil {
			return nil, err
		}
		if resp.ID != "r1" || resp.ModelName != "torch" {
			return nil, fmt.Errorf("response id %q model %q, want r1 torch", resp.ID, resp.ModelName)
		}
		return resp.Outputs, nil
	}
}

// TestBadTensorRequests checks that bad bodies get 400 with a readable
// message and that the service keeps serving.
func TestBadTensorRequests(t *testing.T) {
	model := filepath.Join(onnxTestdata, "mlp.onnx")
	s := newStack(t,
		fmt.Sprintf(`{"name":"torch","processor":"pytorch_cpu_1.10","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, model),
		fmt.Sprintf(`{"name":"hie","processor":"onnx_cpu","model_path":%q,"token":"T","metadata":{"instance":1,"cpu":1}}`, model))
	good := []tensor.Tensor{tensor.FromFloat32("input", []int64{1, 16}, make([]float32, 16))}
	wrongShape := []tensor.Tensor{tensor.FromFloat32("input", []int64{1, 15}, make([]float32, 15))}
	unknown := []tensor.Tensor{tensor.FromFloat32("nope", []int64{1, 16}, make([]float32, 16))}
	goodTorch, _ := torchpb.EncodeRequest(good, true, nil)
	shapeTorch, _ := torchpb.EncodeRequest(wrongShape, true, nil)
	unknownHIE, _ := hiepb.EncodeDataProto(unknown)
	shapeKServe, _, _ := kserve.EncodeRequest(&kserve.InferRequest{Inputs: wrongShape}, false)

	cases := []struct {
		name, path string
		body       []byte
		want       string
	}{
		{"wrong shape torch", "/api/predict/torch", shapeTorch, "input"},
		{"wrong shape kserve", "/v2/models/hie/infer", shapeKServe, "[1,15]"},
		{"unknown input", "/api/predict/hie", unknownHIE, "nope"},
		{"garbage", "/api/predict/torch", []byte("\xff\xfe garbage"), "PredictRequest"},
		{"truncated protobuf", "/api/predict/torch", goodTorch[:len(goodTorch)-7], "PredictRequest"},
		{"garbage kserve", "/v2/models/torch/infer", []byte("{not json"), ""},
	}
	for _, tc := range cases {
		code, out, _ := s.post(t, tc.path, tc.body, nil)
		if code != 400 || !strings.Contains(string(out), tc.want) {
			t.Errorf("%s: %d %q, want 400 mentioning %q", tc.name, code, out, tc.want)
		}
	}
	if _, err := s.infer(t, "torch", good, []string{"output"}); err != nil {
		t.Fatalf("after bad requests the service must keep serving: %v", err)
	}
}
