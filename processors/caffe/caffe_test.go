package caffe

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/processors"
)

const tinyNet = `name: "tiny"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 2 dim: 4 dim: 4 } } }
layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" convolution_param { num_output: 3 kernel_size: 3 pad: 1 } }
layer { name: "relu" type: "ReLU" bottom: "conv" top: "conv" }
layer { name: "ip" type: "InnerProduct" bottom: "conv" top: "ip" inner_product_param { num_output: 5 } }
layer { name: "prob" type: "Softmax" bottom: "ip" top: "prob" }
`

func configure(code, source string, config string) error {
	return New(code).Configure(processors.Spec{Code: code, ModelSource: source, ModelConfig: []byte(config)})
}

func TestConfigure(t *testing.T) {
	if err := configure(CodeCPU, "m.zip", `{"model":"a/deploy.prototxt","weight":"w.caffemodel","intra_op_threads":2}`); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		source, config, want string
	}{
		"no model_path": {"", "", "model_path: required"},
		"unknown key":   {"m.zip", `{"weights":"w"}`, `unknown field "weights"`},
		"outside":       {"m.zip", `{"model":"../deploy.prototxt"}`, "model_config.model"},
		"onnx option":   {"m.zip", `{"graph_optimization":"fast"}`, "graph_optimization"},
	} {
		if err := configure(CodeCPU, tc.source, tc.config); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	err := New(CodeCPU).Configure(processors.Spec{Code: CodeCPU, ModelSource: "m.zip", ModelEntry: "deploy.prototxt"})
	if err == nil || !strings.Contains(err.Error(), "model_config") {
		t.Errorf("model_entry: %v", err)
	}
}

// TestFindsFiles resolves the two files by model_config's names, below an
// archive's top folder, or as the only ones of their kind.
func TestFindsFiles(t *testing.T) {
	dir := modelDir(t, []byte(tinyNet), false)
	top := t.TempDir()
	nested := filepath.Join(top, "caffe_model")
	if err := os.Rename(dir, nested); err != nil {
		t.Fatal(err)
	}
	for _, config := range []map[string]any{
		nil,
		{"model": "deploy.prototxt", "weight": "weights.caffemodel"},
		{"model": "caffe_model/deploy.prototxt"},
	} {
		m := load(t, top, config)
		if got := predict(t, m, inputsFor(m, 3, 1), nil); len(got) != 1 || got[0].Name != "prob" || got[0].Shape[0] != 3 {
			t.Errorf("config %v: outputs %v", config, got)
		}
	}
	os.WriteFile(filepath.Join(nested, "other.caffemodel"), []byte{}, 0o644)
	for name, tc := range map[string]struct {
		config map[string]any
		want   string
	}{
		"two weights": {nil, "2 .caffemodel files"},
		"missing":     {map[string]any{"model": "nope.prototxt"}, `model_config.model: "nope.prototxt" is not in model_path`},
		"bad weights": {map[string]any{"weight": "other.caffemodel"}, "needs trained blob"},
	} {
		m := New(CodeCPU)
		raw, _ := json.Marshal(tc.config)
		if err := m.Configure(processors.Spec{Code: CodeCPU, ModelSource: top, ModelConfig: raw}); err != nil {
			t.Fatal(err)
		}
		if err := m.Load(context.Background(), processors.Files{ModelPath: top}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	m := New(CodeCPU)
	m.Configure(processors.Spec{Code: CodeCPU, ModelSource: "x"})
	if err := m.Load(context.Background(), processors.Files{ModelPath: filepath.Join(nested, "deploy.prototxt")}); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Errorf("a file as model_path: %v", err)
	}
}

func TestMetadataAndClose(t *testing.T) {
	m := load(t, modelDir(t, []byte(tinyNet), false), nil)
	md := m.Metadata()
	if len(md.Inputs) != 1 || md.Inputs[0].Name != "data" || md.Inputs[0].Shape[0] != -1 || md.Outputs[0].Name != "prob" || md.Outputs[0].DType != "FP32" {
		t.Fatalf("metadata %+v", md)
	}
	// An intermediate blob loads the every-blob session.
	if got := predict(t, m, inputsFor(m, 1, 1), []string{"conv", "prob"}); len(got) != 2 || got[0].Name != "conv" || got[0].Shape[1] != 3 {
		t.Fatalf("conv+prob: %v", got)
	}
	if m.all == nil {
		t.Fatal("no every-blob session")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Decode(t.Context(), &processors.Request{}); err == nil {
		t.Fatal("decoded after Close")
	}
}

// TestGPUCodeWithoutCUDA fails the deploy of caffe_gpu with the reason
// where ONNX Runtime has no CUDA provider.
func TestGPUCodeWithoutCUDA(t *testing.T) {
	dir := modelDir(t, []byte(tinyNet), false)
	m := New(CodeGPU)
	if err := m.Configure(processors.Spec{Code: CodeGPU, ModelSource: dir, GPU: 1}); err != nil {
		t.Fatal(err)
	}
	err := m.Load(context.Background(), processors.Files{ModelPath: dir})
	defer m.Close()
	if err == nil {
		if p := m.main.rt.Metadata().Extra["execution_provider"]; p != "CUDAExecutionProvider" {
			t.Fatalf("GPU code loaded with provider %v", p)
		}
		return
	}
	if !strings.Contains(err.Error(), "caffe_cpu") {
		t.Fatalf("err = %v, want it to suggest caffe_cpu", err)
	}
}

func TestCodesRegistered(t *testing.T) {
	for _, code := range []string{CodeCPU, CodeGPU} {
		if _, err := processors.New(code); err != nil {
			t.Error(err)
		}
	}
}

func TestWarmup(t *testing.T) {
	m := load(t, "../../examples/models/caffe_lenet", nil)
	if err := m.Warmup(context.Background(), "../../examples/requests/caffe_lenet.pb"); err != nil {
		t.Fatal(err)
	}
	two := processors.EncodeWarmup([][]byte{mustRead(t, "../../examples/requests/caffe_lenet.pb"), []byte("junk")})
	f := filepath.Join(t.TempDir(), "warm.bin")
	os.WriteFile(f, two, 0o644)
	if err := m.Warmup(context.Background(), f); err == nil || !strings.Contains(err.Error(), "request 2 of 2") {
		t.Fatalf("a bad second request: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
