package tensorflow

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// mlpModel builds a two-layer MLP SavedModel (batch dimension -1) with TF1
// and resource variables, and returns it with a Go reference.
func mlpModel(t *testing.T) (string, func(x nd) nd) {
	w1, b1 := rnd(40, -1, 1, 4, 8), rnd(41, -1, 1, 8)
	w2, b2 := rnd(42, -1, 1, 8, 3), rnd(43, -1, 1, 3)
	b := newBuilder()
	x := b.input(t, "x", tensor.Float32, []int64{-1, 4})
	f := tensor.Float32
	h := b.op(t, "Relu", f, []string{b.op(t, "BiasAdd", f, []string{b.op(t, "MatMul", f, []string{x, b.variable(t, w1.f32(""), false)}, nil), b.variable(t, b1.f32(""), false)}, nil)}, nil)
	logits := b.op(t, "BiasAdd", f, []string{b.op(t, "MatMul", f, []string{h, b.variable(t, w2.f32(""), true)}, nil), b.variable(t, b2.f32(""), true)}, nil)
	probs := b.op(t, "Softmax", f, []string{logits}, nil)
	b.outShapes = map[string][]int64{"probs": {-1, 3}, "logits": {-1, 3}}
	dir := b.save(t, map[string]string{"probs": probs, "logits": logits}, map[string]tensor.DType{"probs": f, "logits": f})
	ref := func(x nd) nd {
		plus := func(a, b float64) float64 { return a + b }
		hh := bcast(matmul(x, w1), b1, plus).map1(func(v float64) float64 { return max(v, 0) })
		return bcast(matmul(hh, w2), b2, plus)
	}
	return dir, ref
}

func TestRequestErrors(t *testing.T) {
	m, err := loadModel(t, "tensorflow_cpu_1.15", fixture(t, "saved_model_half_plus_two_cpu/00000123"))
	if err != nil {
		t.Fatal(err)
	}
	x := tensor.FromFloat32("x", []int64{2, 1}, []float32{1, 2})
	tests := []struct {
		name   string
		sig    string
		inputs []tensor.Tensor
		filter []string
		want   string
	}{
		{"unknown signature", "nope", []tensor.Tensor{x}, nil, `unknown signature_name "nope"`},
		{"missing required feature", "classify_x_to_y", []tensor.Tensor{tensor.FromStrings("inputs", []int64{1}, []string{""})}, nil, `no feature "x"`},
		{"not an example", "regress_x_to_y", []tensor.Tensor{tensor.FromStrings("inputs", []int64{1}, []string{"\xff\xff"})}, nil, "not a serialized tf.Example"},
		{"unknown input", "", []tensor.Tensor{tensor.FromFloat32("z", []int64{1, 1}, []float32{1})}, nil, `no input "z"`},
		{"wrong dtype", "", []tensor.Tensor{tensor.FromInt32("x", []int64{1, 1}, []int32{1})}, nil, "DT_INT32, but the signature expects DT_FLOAT"},
		{"wrong shape", "", []tensor.Tensor{tensor.FromFloat32("x", []int64{1, 2}, []float32{1, 2})}, nil, "shape"},
		{"unknown output", "", []tensor.Tensor{x}, []string{"y", "q"}, `no output "q"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Decode refuses a bad request before it queues.
			_, err := decode(t, m, tc.sig, tc.inputs, tc.filter)
			if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want an input error containing %q", err, tc.want)
			}
		})
	}
}

func TestOutputFilterAndBatching(t *testing.T) {
	dir, ref := mlpModel(t)
	m, err := loadModel(t, "tensorflow_cpu_2.4", dir)
	if err != nil {
		t.Fatal(err)
	}
	x1, x2 := rnd(50, -1, 1, 2, 4), rnd(51, -1, 1, 3, 4)
	got, err := predict(t, m, "serving_default", []tensor.Tensor{x1.f32("x")}, []string{"logits"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("output_filter [logits] returned %d outputs", len(got))
	}
	if err := tensor.Close(got["logits"], ref(x1).f32("logits"), tensor.F32Accumulated); err != nil {
		t.Error(err)
	}

	// Two requests with the same key run as one merged ONNX run and split.
	p1, err1 := decode(t, m, "serving_default", []tensor.Tensor{x1.f32("x")}, nil)
	p2, err2 := decode(t, m, "serving_default", []tensor.Tensor{x2.f32("x")}, nil)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	k1, ok1 := m.BatchKey(p1)
	k2, ok2 := m.BatchKey(p2)
	if !ok1 || !ok2 || k1 != k2 {
		t.Fatalf("batch keys %q/%v %q/%v; want equal batchable keys", k1, ok1, k2, ok2)
	}
	// Another output filter, or other trailing dimensions, is another key.
	pf, err := decode(t, m, "serving_default", []tensor.Tensor{x1.f32("x")}, []string{"logits"})
	if err != nil {
		t.Fatal(err)
	}
	if kf, ok := m.BatchKey(pf); !ok || kf == k1 {
		t.Errorf("output_filter [logits] has key %q/%v, want a batchable key other than %q", kf, ok, k1)
	}
	res, err := m.Run(context.Background(), []*request{p1, p2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d results for 2 requests", len(res))
	}
	for i, x := range []nd{x1, x2} {
		var logits tensor.Tensor
		for _, o := range res[i].outputs {
			if o.Name == "logits" {
				logits = o
			}
		}
		if err := tensor.Close(logits, ref(x).f32("logits"), tensor.F32Accumulated); err != nil {
			t.Errorf("payload %d: %v", i, err)
		}
	}

	// KServe v2 payloads reach the default signature, checked as Decode
	// checks a body.
	kp, err := m.FromTensors(t.Context(), &processors.TensorPayload{Inputs: []tensor.Tensor{x2.f32("x")}, Outputs: []string{"logits"}})
	if err != nil {
		t.Fatal(err)
	}
	kr, err := m.Run(context.Background(), []*request{kp})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := m.ToTensors(t.Context(), kp, kr[0])
	if err != nil || len(tr.Outputs) != 1 {
		t.Fatalf("ToTensors: %v, %v", tr, err)
	}
	if err := tensor.Close(tr.Outputs[0], ref(x2).f32("logits"), tensor.F32Accumulated); err != nil {
		t.Error(err)
	}
	if _, err := m.FromTensors(t.Context(), &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat32("x", []int64{1, 5}, make([]float32, 5))}}); err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), "shape") {
		t.Errorf("KServe payload of the wrong shape: err %v, want an input error naming the shape", err)
	}
}

func TestMetadata(t *testing.T) {
	m, err := loadModel(t, "tensorflow_cpu_1.14", fixture(t, "saved_model_half_plus_two_cpu/00000123"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m.MetadataJSON())
	want := `{"signature_name":"serving_default","inputs":[{"name":"x","shape":[-1,1],"type":"DT_FLOAT"}],"outputs":[{"name":"y","shape":[-1,1],"type":"DT_FLOAT"}]}`
	if string(b) != want {
		t.Errorf("signature JSON\n got %s\nwant %s", b, want)
	}
	md := m.Metadata()
	if md.Processor != "tensorflow_cpu_1.14" || len(md.Inputs) != 1 || md.Inputs[0].DType != "FP32" {
		t.Errorf("metadata %+v", md)
	}
	if sigs, _ := md.Extra["signatures"].(map[string]SignatureJSON); len(sigs) != 5 {
		t.Errorf("signatures in metadata: %v, want all 5", md.Extra["signatures"])
	}
}

func TestGPUCodeWithoutCUDA(t *testing.T) {
	code := "tensorflow_gpu_2.7"
	m := newModel(t, code)
	dir := fixture(t, "matrix_half_plus_two/1")
	if err := m.Configure(processors.Spec{Code: code, ModelSource: dir, GPU: 1}); err != nil {
		t.Fatal(err)
	}
	err := m.Load(context.Background(), processors.Files{ModelPath: dir})
	defer m.Close()
	if err == nil {
		// A CUDA-enabled ONNX Runtime on a GPU host: fine, as long as
		// the session really uses CUDA.
		if p := m.sigs["serving_default"].rt.Metadata().Extra["execution_provider"]; p != "CUDAExecutionProvider" {
			t.Fatalf("GPU code loaded with provider %v", p)
		}
		return
	}
	for _, w := range []string{"CUDA", code, "tensorflow_cpu_2.7"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
}

func TestCodesRegistered(t *testing.T) {
	for _, c := range []string{"tensorflow_cpu_1.12", "tensorflow_cpu_1.14", "tensorflow_cpu_1.15", "tensorflow_cpu_2.3", "tensorflow_cpu_2.4", "tensorflow_cpu_2.7",
		"tensorflow_gpu_1.12", "tensorflow_gpu_1.14", "tensorflow_gpu_1.15", "tensorflow_gpu_2.4", "tensorflow_gpu_2.7"} {
		e, err := processors.New(c)
		if err != nil {
			t.Errorf("%s: %v", c, err)
			continue
		}
		if got := e.Processor().(*Model).info.gpu; got != strings.Contains(c, "gpu") {
			t.Errorf("%s: gpu = %v", c, got)
		}
		if !e.ServesTensors() || e.Platform() != "tensorflow_savedmodel" || e.BatchKey() == nil {
			t.Errorf("%s: serves tensors %v, platform %q, batch key %v; want KServe doors and batching", c, e.ServesTensors(), e.Platform(), e.BatchKey() != nil)
		}
	}
}

// TestONNXExportServedDirectly: a .onnx file in the model directory is
// served as serving_default without translating the SavedModel.
func TestONNXExportServedDirectly(t *testing.T) {
	dir, ref := mlpModel(t)
	m, err := loadModel(t, "tensorflow_cpu_2.3", dir)
	if err != nil {
		t.Fatal(err)
	}
	// The translation of our own model stands in for a tf2onnx export.
	export := t.TempDir()
	if err := os.WriteFile(filepath.Join(export, "model.onnx"), exportOf(t, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	_ = m
	m2, err := loadModel(t, "tensorflow_cpu_2.3", export)
	if err != nil {
		t.Fatal(err)
	}
	if m2.source != "model.onnx" {
		t.Errorf("source %q, want model.onnx", m2.source)
	}
	x := rnd(60, -1, 1, 2, 4)
	got, err := predict(t, m2, "", []tensor.Tensor{x.f32("x")}, []string{"logits"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Close(got["logits"], ref(x).f32("logits"), tensor.F32Accumulated); err != nil {
		t.Error(err)
	}

	// Two exports are ambiguous unless model_entry picks one; a third one
	// two directories down is too deep to be an export.
	if err := os.WriteFile(filepath.Join(export, "other.onnx"), exportOf(t, dir), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(export, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(deep, "deep.onnx"), []byte("not searched"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = loadModel(t, "tensorflow_cpu_2.3", export)
	if err == nil || !strings.Contains(err.Error(), "2 .onnx files") || !strings.Contains(err.Error(), "model_entry") {
		t.Errorf("two .onnx files: err %v, want one counting them and naming model_entry", err)
	}
	m3, err := loadModelEntry(t, "tensorflow_cpu_2.3", export, "other.onnx")
	if err != nil {
		t.Fatal(err)
	}
	if m3.source != "other.onnx" {
		t.Errorf("source %q, want other.onnx (model_entry)", m3.source)
	}
}

func TestConfigure(t *testing.T) {
	for _, tc := range []struct {
		spec processors.Spec
		want string
	}{
		{processors.Spec{}, "model_path: required"},
		{processors.Spec{ModelSource: "oss://bucket/tf/", ModelEntry: "saved_model.pb"}, "model_entry"},
		{processors.Spec{ModelSource: "oss://bucket/tf/", ModelEntry: "../model.onnx"}, "model_entry"},
		{processors.Spec{ModelSource: "oss://bucket/tf/", ModelConfig: []byte(`{"intra_op_thread": 2}`)}, `unknown field "intra_op_thread"`},
		{processors.Spec{ModelSource: "oss://bucket/tf/", ModelConfig: []byte(`{"graph_optimization": "max"}`)}, "graph_optimization"},
		{processors.Spec{ModelSource: "oss://bucket/tf/", ModelEntry: "export/model.onnx", ModelConfig: []byte(`{"intra_op_threads": 2}`)}, ""},
	} {
		tc.spec.Code = "tensorflow_cpu_2.7"
		err := newModel(t, tc.spec.Code).Configure(tc.spec)
		if (tc.want == "" && err != nil) || (tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want))) {
			t.Errorf("%+v: err %v, want %q", tc.spec, err, tc.want)
		}
	}
}

func TestNotLoaded(t *testing.T) {
	m := newModel(t, "tensorflow_cpu_2.7")
	body, _ := tfpb.EncodeRequest("", []tensor.Tensor{tensor.FromFloat32("x", []int64{1}, []float32{1})}, nil)
	if _, err := m.Decode(t.Context(), &processors.Request{Body: body}); !errors.Is(err, errNotLoaded) {
		t.Errorf("Decode before Load: %v", err)
	}
	if _, err := m.FromTensors(t.Context(), &processors.TensorPayload{}); !errors.Is(err, errNotLoaded) {
		t.Errorf("FromTensors before Load: %v", err)
	}
	if _, err := m.Run(context.Background(), nil); !errors.Is(err, errNotLoaded) {
		t.Errorf("Run before Load: %v", err)
	}
}

func TestWarmup(t *testing.T) {
	m, err := loadModel(t, "tensorflow_cpu_2.3", fixture(t, "matrix_half_plus_two/1"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good, _ := tfpb.EncodeRequest("", []tensor.Tensor{tensor.FromFloat32("x", []int64{1, 3, 3}, make([]float32, 9))}, nil)
	bad, _ := tfpb.EncodeRequest("", []tensor.Tensor{tensor.FromFloat32("x", []int64{1, 2}, []float32{1, 2})}, nil)
	os.WriteFile(filepath.Join(dir, "good.pb"), good, 0o644)
	os.WriteFile(filepath.Join(dir, "bad.pb"), bad, 0o644)
	if err := m.Warmup(context.Background(), filepath.Join(dir, "good.pb")); err != nil {
		t.Errorf("warm-up: %v", err)
	}
	if err := m.Warmup(context.Background(), filepath.Join(dir, "bad.pb")); err == nil || !strings.Contains(err.Error(), "shape") {
		t.Errorf("warm-up with a wrong shape: err %v", err)
	}
	if err := m.Warmup(context.Background(), filepath.Join(dir, "missing.pb")); err == nil {
		t.Error("warm-up with a missing file succeeded")
	}
}

// TestConcurrentRuns: Run is safe from many goroutines (go test -race).
func TestConcurrentRuns(t *testing.T) {
	dir, ref := mlpModel(t)
	m, err := loadModel(t, "tensorflow_cpu_2.3", dir)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 16)
	for g := range 16 {
		go func() {
			x := rnd(uint64(100+g), -1, 1, int64(1+g%4), 4)
			got, err := predict(t, m, "", []tensor.Tensor{x.f32("x")}, []string{"logits"})
			if err == nil {
				err = tensor.Close(got["logits"], ref(x).f32("logits"), tensor.F32Accumulated)
			}
			errs <- err
		}()
	}
	for range 16 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
