package triton_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tempRepo makes a repository with one model "m" (the mlp ONNX model at
// version 1) and the given config.pbtxt ("" = none).
func tempRepo(t *testing.T, config string) string {
	t.Helper()
	dir := t.TempDir()
	onnx, err := os.ReadFile(filepath.Join("testdata", "model_repository", "mlp", "1", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "m", "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "m", "1", "model.onnx"), onnx, 0o644); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(dir, "m", "config.pbtxt"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func tritonJSON(gpu int, params ...string) string {
	ps, _ := json.Marshal(params)
	return `{"name":"tri","processor":"triton","processor_params":` + string(ps) + `,"metadata":{"instance":1,"gpu":` + itoa(gpu) + `}}`
}

// TestDeployRefusals checks that what cannot be served fails the deploy
// with a message naming the model, the reason and the fix.
func TestDeployRefusals(t *testing.T) {
	const io = `input [ { name: "input" data_type: TYPE_FP32 dims: [ 16 ] } ] output [ { name: "output" data_type: TYPE_FP32 dims: [ 8 ] } ] `
	cases := []struct {
		name   string
		config string
		gpu    int
		params []string
		want   string
	}{
		{"python backend", `name: "m" backend: "python"`, 0, nil, `backend "python" cannot be served natively here`},
		{"tensorrt plan", `name: "m" platform: "tensorrt_plan"`, 0, nil, `backend "tensorrt_plan" cannot be served natively here`},
		{"libtorch", `name: "m" platform: "pytorch_libtorch"`, 0, nil, `--url=http://<triton-host>:8000`},
		{"unknown platform", `name: "m" platform: "caffe2"`, 0, nil, `unknown backend or platform "caffe2"`},
		{"kind gpu without gpu", `name: "m" max_batch_size: 8 ` + io + `instance_group [ { name: "g0" kind: KIND_GPU count: 1 } ]`, 0, nil, "instance group g0 of model m has kind KIND_GPU but no GPUs are available"},
		{"gpu id out of range", `name: "m" instance_group [ { kind: KIND_GPU gpus: [ 3 ] } ]`, 1, nil, "invalid or unsupported gpu id 3"},
		{"name mismatch", `name: "other"`, 0, nil, `config.pbtxt names the model "other"; the name must match its directory "m"`},
		{"dims mismatch", `name: "m" max_batch_size: 8 input [ { name: "input" data_type: TYPE_FP32 dims: [ 15 ] } ]`, 0, nil, `input "input": config.pbtxt dims [15] do not match the ONNX model's [16]`},
		{"dtype mismatch", `name: "m" max_batch_size: 8 input [ { name: "input" data_type: TYPE_INT64 dims: [ 16 ] } ]`, 0, nil, `config.pbtxt says TYPE_INT64, but the ONNX model has FP32`},
		{"unknown input", `name: "m" max_batch_size: 8 input [ { name: "x" data_type: TYPE_FP32 dims: [ 16 ] } ]`, 0, nil, `unexpected input "x" in config.pbtxt; the ONNX model's inputs are input`},
		{"input missing", `name: "m" max_batch_size: 8 input [ ] output [ { name: "output" data_type: TYPE_FP32 dims: [ 8 ] } ]`, 0, []string{"--strict-model-config=true"}, "config.pbtxt lists no inputs"},
		{"unknown field", `name: "m" max_batch_sise: 8`, 0, nil, `unknown field "max_batch_sise" in ModelConfig`},
		{"syntax", `name: "m" input [ { name: "x" `, 0, nil, `m/config.pbtxt: line 1`},
		{"sequence batching", `name: "m" sequence_batching { }`, 0, nil, `sequence_batching is not supported natively`},
		{"missing version", `name: "m" version_policy: { specific: { versions: [ 2 ] } }`, 0, nil, `no directory 2/`},
		{"strict without config", "", 0, []string{"--strict-model-config=true"}, "config.pbtxt is missing and --strict-model-config is set"},
		{"unknown flags", `name: "m"`, 0, []string{"--foo=1", "--bar", "--log-verbose=1"}, "unknown or unsupported flags --foo, --bar"},
		{"poll mode", `name: "m"`, 0, []string{"--model-control-mode=poll"}, "--model-control-mode=poll is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			repo := tempRepo(t, c.config)
			err := deployErr(t, tritonJSON(c.gpu, append([]string{"--model-repository=" + repo}, c.params...)...))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v\nwant an error containing %q", err, c.want)
			}
		})
	}
}

// TestExitOnErrorFalse keeps serving the good models of a repository with
// a bad one, and reports the bad one in the index.
func TestExitOnErrorFalse(t *testing.T) {
	repo := tempRepo(t, `name: "m" max_batch_size: 8`)
	bad := filepath.Join(repo, "bad")
	os.MkdirAll(filepath.Join(bad, "1"), 0o755)
	os.WriteFile(filepath.Join(bad, "config.pbtxt"), []byte(`name: "bad" backend: "python"`), 0o644)
	s := newStack(t, `{"name":"tri","processor":"triton","token":"`+token+`","processor_params":["--model-repository=`+repo+`","--exit-on-error=false","--strict-readiness=false"],"metadata":{"instance":1}}`)
	auth := map[string]string{"Authorization": token}
	if r := do(t, "GET", s.URL+"/v2/models/m/ready", nil, auth); r.code != 200 {
		t.Fatalf("good model: %d %s", r.code, r.body)
	}
	r := do(t, "POST", s.URL+"/api/predict/tri/v2/repository/index", nil, auth)
	if r.code != 200 || !strings.Contains(string(r.body), `"name":"bad","state":"UNAVAILABLE","reason":"model \"bad\": backend \"python\"`) {
		t.Fatalf("index: %d %s", r.code, r.body)
	}
	if err := deployErr(t, `{"name":"tri","processor":"triton","processor_params":["--model-repository=`+repo+`"],"metadata":{"instance":1}}`); err == nil || !strings.Contains(err.Error(), `backend "python"`) {
		t.Fatalf("default --exit-on-error=true: %v", err)
	}
}
