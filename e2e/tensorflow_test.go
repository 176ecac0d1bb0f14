package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// TestTensorFlowSavedModelThroughHTTP deploys a real TF1 SavedModel (from the
// shared conformance folder) under an EAS TensorFlow code: GET answers EAS's
// signature JSON, and the TF protobuf gives y = 0.5x + 2.
func TestTensorFlowSavedModelThroughHTTP(t *testing.T) {
	dir := require.ConformanceDir(t, "tensorflow/saved_model_half_plus_two_cpu")
	s := newStack(t, `{"name":"tf","processor":"tensorflow_cpu_1.15","model_path":"`+dir+`","token":"T","metadata":{"instance":1,"cpu":1}}`)

	req, _ := http.NewRequest("GET", s.url+"/api/predict/tf", nil)
	req.Header.Set("Authorization", "T")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var sig struct {
		SignatureName string `json:"signature_name"`
		Inputs        []struct {
			Name  string  `json:"name"`
			Shape []int64 `json:"shape"`
			Type  string  `json:"type"`
		} `json:"inputs"`
	}
	if err := json.Unmarshal(b, &sig); err != nil || sig.SignatureName != "serving_default" || len(sig.Inputs) != 1 || sig.Inputs[0].Type != "DT_FLOAT" {
		t.Fatalf("GET signature: %s (%v)", b, err)
	}

	x := tensor.FromFloat32("x", []int64{3, 1}, []float32{1, 2, 5})
	body, err := tfpb.EncodeRequest("", []tensor.Tensor{x}, nil)
	if err != nil {
		t.Fatal(err)
	}
	code, out, _ := s.post(t, "/api/predict/tf", body, nil)
	if code != 200 {
		t.Fatalf("predict: %d %s", code, out)
	}
	outs, err := tfpb.DecodeResponse(out)
	if err != nil {
		t.Fatal(err)
	}
	want := tensor.FromFloat32("y", []int64{3, 1}, []float32{2.5, 3, 4.5})
	if len(outs) != 1 {
		t.Fatalf("outputs = %v", outs)
	}
	if err := tensor.Close(outs[0], want, tensor.F32Elementwise); err != nil {
		t.Fatal(err)
	}
	code, out, _ = s.post(t, "/api/predict/tf", []byte("not a protobuf \xff"), nil)
	if code != 400 || !strings.Contains(string(out), "PredictRequest") {
		t.Errorf("garbage body: %d %s", code, out)
	}
}
