package triton_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/wire/kserve"
)

const token = "tri-token"

func nativeService(t *testing.T, name string, params ...string) string {
	ps, _ := json.Marshal(append([]string{"--model-repository=" + repoPath(t)}, params...))
	return `{"name":` + quote(name) + `,"processor":"triton","processor_params":` + string(ps) + `,"token":"` + token + `","metadata":{"instance":1,"rpc.keepalive":5000}}`
}

func TestNativeServesRepository(t *testing.T) {
	s := newStack(t, nativeService(t, "tri"))
	auth := map[string]string{"Authorization": token}

	t.Run("metadata", func(t *testing.T) {
		r := do(t, "GET", s.URL+"/v2/models/mlp", nil, auth)
		if r.code != 200 {
			t.Fatalf("%d %s", r.code, r.body)
		}
		var md kserve.ModelMetadata
		json.Unmarshal(r.body, &md)
		if md.Name != "mlp" || md.Platform != "onnxruntime_onnx" || len(md.Versions) != 1 || md.Versions[0] != "1" {
			t.Errorf("metadata %s", r.body)
		}
		if len(md.Inputs) != 1 || md.Inputs[0].Datatype != "FP32" || len(md.Inputs[0].Shape) != 2 || md.Inputs[0].Shape[0] != -1 || md.Inputs[0].Shape[1] != 16 {
			t.Errorf("inputs %+v", md.Inputs)
		}
		r = do(t, "GET", s.URL+"/v2/models/multi_io", nil, auth)
		json.Unmarshal(r.body, &md)
		if strings.Join(md.Versions, ",") != "1,2" {
			t.Errorf("multi_io versions %v, want 1,2 (version_policy all)", md.Versions)
		}
		// conv has no config.pbtxt: auto-completed from the ONNX model.
		r = do(t, "GET", s.URL+"/v2/models/conv", nil, auth)
		json.Unmarshal(r.body, &md)
		if r.code != 200 || len(md.Inputs) != 1 || md.Inputs[0].Name != "image" || len(md.Inputs[0].Shape) != 4 {
			t.Errorf("conv: %d %s", r.code, r.body)
		}
	})

	for _, model := range []string{"mlp", "multi_io", "conv"} {
		for _, c := range loadCases(t, model) {
			t.Run(model+"/"+c.name, func(t *testing.T) {
				for _, url := range []string{
					s.URL + "/v2/models/" + model + "/infer",
					s.URL + "/api/predict/tri/" + model,
					s.URL + "/api/predict/tri/v2/models/" + model + "/infer",
				} {
					r := do(t, "POST", url, c.req, auth)
					if r.code != 200 {
						t.Fatalf("%s: %d %s", url, r.code, r.body)
					}
					resp, err := kserve.DecodeResponse(r.body, r.hdr.Get(kserve.HeaderContentLength))
					if err != nil {
						t.Fatal(err)
					}
					if resp.ModelName != model {
						t.Errorf("model_name %q", resp.ModelName)
					}
					checkOutputs(t, resp.Outputs, c.want)
				}
			})
		}
	}

	t.Run("binary", func(t *testing.T) {
		c := loadCases(t, "mlp")[0]
		ir, err := kserve.DecodeRequest(c.req, "")
		if err != nil {
			t.Fatal(err)
		}
		ir.BinaryDataOutput = true
		body, hlen, err := kserve.EncodeRequest(ir, true)
		if err != nil {
			t.Fatal(err)
		}
		r := do(t, "POST", s.URL+"/api/predict/tri/v2/models/mlp/versions/1/infer", body, map[string]string{"Authorization": token, kserve.HeaderContentLength: itoa(hlen)})
		if r.code != 200 || r.hdr.Get(kserve.HeaderContentLength) == "" {
			t.Fatalf("%d %s", r.code, r.body)
		}
		resp, err := kserve.DecodeResponse(r.body, r.hdr.Get(kserve.HeaderContentLength))
		if err != nil {
			t.Fatal(err)
		}
		checkOutputs(t, resp.Outputs, c.want)
	})

	t.Run("errors", func(t *testing.T) {
		row := strings.Repeat("0.5,", 15) + "0.5"
		nine := "[" + strings.TrimSuffix(strings.Repeat(row+",", 9), ",") + "]"
		cases := []struct {
			name, url, body string
			hdr             map[string]string
			code            int
			want            string
		}{
			{"unknown model", "/v2/models/nope/infer", `{"inputs":[]}`, auth, 404, `not found`},
			{"unknown version", "/v2/models/mlp/versions/7/infer", `{"inputs":[]}`, auth, 404, `not found`},
			{"wrong token", "/v2/models/mlp/infer", `{"inputs":[]}`, map[string]string{"Authorization": "bad"}, 401, "unauthorized"},
			{"unexpected input", "/v2/models/mlp/infer", `{"inputs":[{"name":"x","shape":[1,16],"datatype":"FP32","data":[` + row + `]}]}`, auth, 400, "unexpected inference input 'x' for model 'mlp'"},
			{"batch too large", "/v2/models/mlp/infer", `{"inputs":[{"name":"input","shape":[9,16],"datatype":"FP32","data":` + nine + `}]}`, auth, 400, "batch-size must be <= 8 for 'mlp'"},
			{"wrong dtype", "/v2/models/mlp/infer", `{"inputs":[{"name":"input","shape":[1,16],"datatype":"FP64","data":[` + row + `]}]}`, auth, 400, "data-type is 'FP64', but model 'mlp' expects 'FP32'"},
			{"wrong shape", "/api/predict/tri/mlp", `{"inputs":[{"name":"input","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}`, auth, 400, "Expected [-1,16], got [1,4]"},
			{"missing input", "/v2/models/multi_io/infer", `{"inputs":[{"name":"a","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}`, auth, 400, "expected 3 inputs but got 1"},
			{"several models, none named", "/api/predict/tri", `{"inputs":[]}`, auth, 400, "name one"},
			{"bad json", "/v2/models/mlp/infer", `{"inputs":`, auth, 400, ""},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				r := do(t, "POST", s.URL+c.url, []byte(c.body), c.hdr)
				if r.code != c.code || !strings.Contains(errorText(r.body), c.want) {
					t.Fatalf("got %d %s, want %d with %q", r.code, r.body, c.code, c.want)
				}
			})
		}
	})

	t.Run("ready", func(t *testing.T) {
		for _, u := range []string{"/v2/models/mlp/ready", "/v2/models/multi_io/versions/2/ready", "/api/predict/tri/v2/models/mlp/ready"} {
			if r := do(t, "GET", s.URL+u, nil, auth); r.code != 200 {
				t.Errorf("%s: %d %s", u, r.code, r.body)
			}
		}
	})
}

// errorText is the message of a KServe {"error": ...} body, else the body.
func errorText(b []byte) string {
	var e kserve.ErrorResponse
	if json.Unmarshal(b, &e) == nil && e.Error != "" {
		return e.Error
	}
	return string(b)
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

var _ = http.StatusOK
