package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// exampleRef is examples/requests/torchscript_mlp_expected.json: the
// example request's input and PyTorch's answer to it.
type exampleRef struct {
	Input, Output struct {
		Shape []int64   `json:"shape"`
		Data  []float64 `json:"data"`
	}
}

// TestTorchScriptFromHTTPWithSDKRequest is EAS's documented PyTorch
// deployment: a TorchScript file named torchscript_model.pt, fetched from an
// http:// URL, served as pytorch_cpu_1.6, and asked the way the EAS SDKs'
// TorchRequest asks (a PredictRequest with inputs by index and an output
// filter, the raw token in Authorization). The answer must be PyTorch's.
func TestTorchScriptFromHTTPWithSDKRequest(t *testing.T) {
	model, err := os.ReadFile("../examples/models/torchscript_mlp.pt")
	if err != nil {
		t.Fatal(err)
	}
	var ref exampleRef
	b, err := os.ReadFile("../examples/requests/torchscript_mlp_expected.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/models/torchscript_model.pt" {
			http.NotFound(w, r)
			return
		}
		w.Write(model)
	}))
	defer files.Close()
	s := newStack(t, fmt.Sprintf(`{"name":"torch_ts","processor":"pytorch_cpu_1.6","token":"T",
		"model_path":%q,"metadata":{"instance":1,"cpu":1}}`, files.URL+"/models/torchscript_model.pt"))

	// What TorchRequest.AddFeedFloat32(0, shape, values); AddFetch(0)
	// marshals.
	in := make([]float32, len(ref.Input.Data))
	for i, v := range ref.Input.Data {
		in[i] = float32(v)
	}
	req := &torchpb.PredictRequest{
		Inputs: []*torchpb.ArrayProto{{
			Dtype:      torchpb.ArrayDataType_DT_FLOAT,
			ArrayShape: &torchpb.ArrayShape{Dim: ref.Input.Shape},
			FloatVal:   in,
		}},
		OutputFilter: []int32{0},
	}
	body, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := s.post(t, "/api/predict/torch_ts", body, nil)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, out)
	}
	var resp torchpb.PredictResponse
	if err := proto.Unmarshal(out, &resp); err != nil {
		t.Fatalf("the answer is not a PredictResponse: %v", err)
	}
	if len(resp.Outputs) != 1 {
		t.Fatalf("%d outputs, want 1", len(resp.Outputs))
	}
	got := resp.Outputs[0]
	if fmt.Sprint(got.GetArrayShape().GetDim()) != fmt.Sprint(ref.Output.Shape) || got.Dtype != torchpb.ArrayDataType_DT_FLOAT {
		t.Fatalf("output %s %v, want DT_FLOAT %v", got.Dtype, got.GetArrayShape().GetDim(), ref.Output.Shape)
	}
	want := make([]float32, len(ref.Output.Data))
	for i, w := range ref.Output.Data {
		want[i] = float32(w)
	}
	if err := tensor.CloseValues("output", got.FloatVal, want, tensor.F32Accumulated); err != nil {
		t.Fatalf("against PyTorch: %v", err)
	}

	// A wrong token is refused before the model runs.
	code, out, _ = s.post(t, "/api/predict/torch_ts", body, map[string]string{"Authorization": "wrong"})
	if code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d %s", code, out)
	}
	// An input libtorch refuses (16 features expected) is a 400 naming the
	// shapes, without a C++ backtrace.
	req.Inputs[0].ArrayShape.Dim = []int64{int64(len(in) / 8), 8}
	body, _ = proto.Marshal(req)
	code, out, _ = s.post(t, "/api/predict/torch_ts", body, nil)
	if code != http.StatusBadRequest || !strings.Contains(string(out), "shapes") || strings.Contains(string(out), "Exception raised from") {
		t.Errorf("a wrong shape: %d %s", code, out)
	}
}
