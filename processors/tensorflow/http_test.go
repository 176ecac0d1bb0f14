package tensorflow_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	_ "github.com/eas-server/eas-server/processors/tensorflow"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// TestHTTPStack deploys real SavedModels through the service manager and
// calls them over HTTP with the EAS TF protobuf and KServe v2 JSON.
func TestHTTPStack(t *testing.T) {
	good, _ := filepath.Abs(require.ConformanceDir(t, "tensorflow/saved_model_half_plus_two_tf2_cpu"))
	bad, _ := filepath.Abs(require.ConformanceDir(t, "tensorflow/tftrt_2.0_saved_model"))
	st := teststack.New(t, teststack.Options{AllowFailedDeploys: true},
		fmt.Sprintf(`{"name":"tf","processor":"tensorflow_cpu_2.3","model_path":%q,"token":"T","metadata":{"instance":1}}`, good),
		fmt.Sprintf(`{"name":"trt","processor":"tensorflow_cpu_2.4","model_path":%q,"token":"T","metadata":{"instance":1}}`, bad))
	if err := st.DeployErrors["tf"]; err != nil {
		t.Fatalf("deploy tf: %v", err)
	}
	if err := st.DeployErrors["trt"]; err == nil || !strings.Contains(err.Error(), "TRTEngineOp") || !strings.Contains(err.Error(), "serving_default") {
		t.Errorf("deploy of the TF-TRT model: err %v, want one naming TRTEngineOp and serving_default", err)
	}
	ts := st.HTTP

	call := func(method, path string, body []byte) (int, []byte) {
		code, b, _ := teststack.Do(t, method, ts.URL+path, "T", body)
		return code, b
	}

	body, _ := tfpb.EncodeRequest("", []tensor.Tensor{tensor.FromFloat32("x", []int64{1}, []float32{3})}, nil)
	code, resp := call(http.MethodPost, "/api/predict/tf", body)
	if code != http.StatusOK {
		t.Fatalf("predict: %d %s", code, resp)
	}
	outs, err := tfpb.DecodeResponse(resp)
	if err != nil || len(outs) != 1 {
		t.Fatalf("response %v, %v", outs, err)
	}
	if err := tensor.Close(outs[0], tensor.FromFloat32("y", []int64{1}, []float32{3.5}), tensor.F32Elementwise); err != nil {
		t.Error(err)
	}

	body, _ = tfpb.EncodeRequest("regress_x2_to_y3", []tensor.Tensor{tensor.FromFloat32("inputs", []int64{1}, []float32{3})}, []string{"outputs"})
	if code, resp = call(http.MethodPost, "/api/predict/tf", body); code != http.StatusOK {
		t.Fatalf("regress_x2_to_y3: %d %s", code, resp)
	}
	if outs, _ = tfpb.DecodeResponse(resp); len(outs) != 1 || tensor.Close(outs[0], tensor.FromFloat32("outputs", []int64{1}, []float32{4.5}), tensor.F32Elementwise) != nil {
		t.Errorf("regress_x2_to_y3 = %v", outs)
	}

	body, _ = tfpb.EncodeRequest("", []tensor.Tensor{tensor.FromInt32("x", []int64{1}, []int32{3})}, nil)
	if code, resp = call(http.MethodPost, "/api/predict/tf", body); code != http.StatusBadRequest || !strings.Contains(string(resp), "DT_FLOAT") {
		t.Errorf("wrong dtype: %d %s, want 400 naming DT_FLOAT", code, resp)
	}

	if code, resp = call(http.MethodGet, "/api/predict/tf", nil); code != http.StatusOK || !strings.Contains(string(resp), "serving_default") {
		t.Errorf("GET: %d %s", code, resp)
	}

	kreq := `{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","data":[5]}]}`
	code, resp = call(http.MethodPost, "/v2/models/tf/infer", []byte(kreq))
	if code != http.StatusOK {
		t.Fatalf("kserve infer: %d %s", code, resp)
	}
	var kr struct {
		Outputs []struct {
			Name string    `json:"name"`
			Data []float64 `json:"data"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal(resp, &kr); err != nil || len(kr.Outputs) != 1 || kr.Outputs[0].Data[0] != 4.5 {
		t.Errorf("kserve response %s (%v)", resp, err)
	}

	// The TF-TRT model never became ready.
	if code, resp = call(http.MethodPost, "/api/predict/trt", body); code == http.StatusOK {
		t.Errorf("TF-TRT model answered: %s", resp)
	}
}
