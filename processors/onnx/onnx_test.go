package onnx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// refFile is the JSON written by scripts/gen-test-models.py beside each model.
type refFile struct {
	Model string    `json:"model"`
	Cases []refCase `json:"cases"`
}

type refCase struct {
	Name    string       `json:"name"`
	Inputs  []jsonTensor `json:"inputs"`
	Outputs []jsonTensor `json:"outputs"`
}

type jsonTensor struct {
	Name     string            `json:"name"`
	DataType string            `json:"datatype"`
	Shape    []int64           `json:"shape"`
	Data     []json.RawMessage `json:"data"`
}

func (j jsonTensor) tensor(t testing.TB) tensor.Tensor {
	t.Helper()
	dt, err := tensor.ParseDType(j.DataType)
	if err != nil {
		t.Fatal(err)
	}
	switch dt {
	case tensor.Float32:
		v := make([]float32, len(j.Data))
		for i, d := range j.Data {
			var f float64
			mustUnmarshal(t, d, &f)
			v[i] = float32(f)
		}
		return tensor.FromFloat32(j.Name, j.Shape, v)
	case tensor.Float64:
		v := make([]float64, len(j.Data))
		for i, d := range j.Data {
			mustUnmarshal(t, d, &v[i])
		}
		return tensor.FromFloat64(j.Name, j.Shape, v)
	case tensor.Int64:
		v := make([]int64, len(j.Data))
		for i, d := range j.Data {
			mustUnmarshal(t, d, &v[i])
		}
		return tensor.FromInt64(j.Name, j.Shape, v)
	case tensor.Float16:
		v := make([]uint16, len(j.Data))
		for i, d := range j.Data {
			var f float32
			mustUnmarshal(t, d, &f)
			v[i] = tensor.Float32ToFloat16(f)
		}
		return tensor.FromFloat16Bits(j.Name, j.Shape, v)
	case tensor.String:
		v := make([]string, len(j.Data))
		for i, d := range j.Data {
			mustUnmarshal(t, d, &v[i])
		}
		return tensor.FromStrings(j.Name, j.Shape, v)
	case tensor.Bool:
		v := make([]bool, len(j.Data))
		for i, d := range j.Data {
			mustUnmarshal(t, d, &v[i])
		}
		return tensor.FromBool(j.Name, j.Shape, v)
	}
	t.Fatalf("reference dtype %s not handled", dt)
	return tensor.Tensor{}
}

func mustUnmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func loadRefs(t testing.TB, name string) refFile {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatalf("%v; regenerate with /usr/bin/python3 scripts/gen-test-models.py", err)
	}
	var r refFile
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func (c refCase) payload(t testing.TB) *processors.TensorPayload {
	p := &processors.TensorPayload{}
	for _, in := range c.Inputs {
		p.Inputs = append(p.Inputs, in.tensor(t))
	}
	return p
}

// refTol is the tolerance against the numpy references, which
// scripts/gen-test-models.py computes in float64: matrix products,
// convolutions and sums, whose order ONNX Runtime's kernels choose.
var refTol = tensor.F32Accumulated

func (c refCase) check(t testing.TB, res any) {
	t.Helper()
	r, ok := res.(*processors.TensorResult)
	if !ok {
		t.Fatalf("%s: result is %T", c.Name, res)
	}
	if len(r.Outputs) != len(c.Outputs) {
		t.Fatalf("%s: %d outputs, want %d", c.Name, len(r.Outputs), len(c.Outputs))
	}
	for i, want := range c.Outputs {
		got := r.Outputs[i]
		if got.Name != want.Name {
			t.Errorf("%s: output %d is %q, want %q", c.Name, i, got.Name, want.Name)
		}
		if err := tensor.Close(got, want.tensor(t), refTol); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}

// load configures and loads a testdata model under code. A missing ONNX
// Runtime library fails the test with the fix, never skips it.
func load(t testing.TB, code, modelPath string, mutate ...func(*processors.Spec)) *Model {
	t.Helper()
	if _, err := processors.New(code); err != nil {
		t.Fatal(err) // the code is registered
	}
	m := New(code)
	spec := processors.Spec{Service: "test", Code: code, ModelSource: modelPath, CPU: 1}
	for _, f := range mutate {
		f(&spec)
	}
	if err := m.Configure(spec); err != nil {
		t.Fatalf("configure: %v", err)
	}
	if err := m.Load(context.Background(), processors.Files{ModelPath: modelPath}); err != nil {
		if errors.Is(err, ErrLibrary) {
			t.Fatalf("%v\n(the tests need the ONNX Runtime library: run scripts/fetch-onnxruntime.sh)", err)
		}
		t.Fatalf("load: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var refModels = []string{"mlp", "multi_io", "seq", "int_bool", "conv", "batch_sum", "strings", "half"}

func TestReferenceOutputs(t *testing.T) {
	for _, name := range refModels {
		refs := loadRefs(t, name)
		for _, code := range []string{"onnx_cpu", "pytorch_cpu_1.10"} {
			t.Run(name+"/"+code, func(t *testing.T) {
				m := load(t, code, filepath.Join("testdata", refs.Model))
				for _, c := range refs.Cases {
					res, err := m.Run(t.Context(), checked(t, m, c.payload(t)))
					if err != nil {
						t.Fatalf("%s: %v", c.Name, err)
					}
					c.check(t, res[0])
				}
			})
		}
	}
}

// TestBatchEqualsSingleRuns merges the cases of each model into one Run and
// compares every payload's outputs with the references, which were computed
// one case at a time. Cases whose trailing shapes differ (seq, int_bool) and
// outputs that do not follow the batch (batch_sum) must still come back right.
func TestBatchEqualsSingleRuns(t *testing.T) {
	for _, name := range refModels {
		t.Run(name, func(t *testing.T) {
			refs := loadRefs(t, name)
			m := load(t, "onnx_cpu", filepath.Join("testdata", refs.Model))
			batch := make([]*processors.TensorPayload, len(refs.Cases))
			for i, c := range refs.Cases {
				batch[i] = c.payload(t)
			}
			res, err := m.Run(t.Context(), checked(t, m, batch...))
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(batch) {
				t.Fatalf("%d results for %d payloads", len(res), len(batch))
			}
			for i, c := range refs.Cases {
				c.check(t, res[i])
			}
			wantNoBatch := name == "batch_sum"
			if got := m.noBatch.Load(); got != wantNoBatch {
				t.Errorf("noBatch = %v after a merged run, want %v", got, wantNoBatch)
			}
		})
	}
}

func TestBatchKey(t *testing.T) {
	m := load(t, "onnx_cpu", "testdata/seq.onnx")
	mk := func(n, tt int64) *processors.TensorPayload {
		return &processors.TensorPayload{Inputs: []tensor.Tensor{
			tensor.FromFloat32("tokens", []int64{n, tt, 6}, make([]float32, n*tt*6))}}
	}
	k1, ok1 := keyOf(m, mk(1, 3))
	k2, ok2 := keyOf(m, mk(4, 3))
	k3, ok3 := keyOf(m, mk(1, 5))
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("batchable payloads refused: %v %v %v", ok1, ok2, ok3)
	}
	if k1 != k2 {
		t.Errorf("same trailing shape, different keys: %q %q", k1, k2)
	}
	if k1 == k3 {
		t.Errorf("different sequence lengths share key %q", k1)
	}
	if _, ok := keyOf(m, &processors.TensorPayload{Inputs: []tensor.Tensor{
		tensor.FromFloat32("tokens", []int64{1, 3, 5}, make([]float32, 15))}}); ok {
		t.Error("a payload that does not fit the model got a batch key")
	}

	// batch_sum's output does not follow the batch: once a merged run shows
	// it, its payloads stop getting keys.
	bs := load(t, "onnx_cpu", "testdata/batch_sum.onnx")
	p := &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat32("x", []int64{1, 3}, []float32{1, 2, 3})}}
	if _, ok := keyOf(bs, p); !ok {
		t.Fatal("batch_sum refused a key before any run")
	}
	if _, err := bs.Run(t.Context(), checked(t, bs, p, p)); err != nil {
		t.Fatal(err)
	}
	if _, ok := keyOf(bs, p); ok {
		t.Error("batch_sum still batchable after its output showed it does not follow the batch")
	}
}

func f32(name string, shape []int64) tensor.Tensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return tensor.FromFloat32(name, shape, make([]float32, n))
}

func TestInputErrors(t *testing.T) {
	mlp := load(t, "onnx_cpu", "testdata/mlp.onnx")
	multi := load(t, "onnx_cpu", "testdata/multi_io.onnx")
	short := f32("input", []int64{1, 16})
	short.Data = short.Data[:60]
	tests := []struct {
		name  string
		m     *Model
		p     *processors.TensorPayload
		wants []string // substrings of the message
	}{
		{"wrong trailing dim", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("input", []int64{1, 15})}},
			[]string{`"input"`, "[1,15]", "[-1,16]"}},
		{"wrong rank", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("input", []int64{16})}},
			[]string{`"input"`, "[16]", "[-1,16]"}},
		{"unknown input", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("inputs", []int64{1, 16})}},
			[]string{`unknown input "inputs"`, `"input" FP32 [-1,16]`}},
		{"bad dtype", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat64("input", []int64{1, 16}, make([]float64, 16))}},
			[]string{`"input"`, "FP64", "expects FP32"}},
		{"data shorter than shape", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{short}},
			[]string{`"input"`}},
		{"zero rows", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("input", []int64{0, 16})}},
			[]string{`"input"`, "no elements"}},
		{"no inputs", mlp, &processors.TensorPayload{},
			[]string{"no input tensors", `"input" FP32 [-1,16]`}},
		{"too many positional", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("", []int64{1, 16}), f32("", []int64{1, 16})}},
			[]string{"2 input tensors", "has 1"}},
		{"unknown output", mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("input", []int64{1, 16})}, Outputs: []string{"logits"}},
			[]string{`unknown output "logits"`, `"output" FP32 [-1,8]`}},
		{"missing input", multi, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("a", []int64{1, 4}), f32("b", []int64{1, 4})}},
			[]string{`missing input "w" FP64 [-1,1]`}},
		{"duplicate input", multi, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("a", []int64{1, 4}), f32("a", []int64{1, 4})}},
			[]string{`"a" given twice`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.m.FromTensors(t.Context(), tt.p)
			if err == nil {
				t.Fatal("no error")
			}
			if !badinput.Is(err) {
				t.Fatalf("error is not an input error (would be 500): %v", err)
			}
			for _, w := range tt.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// The model keeps serving after bad inputs.
	if _, err := mlp.Run(t.Context(), checked(t, mlp, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("input", []int64{2, 16})}})); err != nil {
		t.Fatalf("run after bad inputs: %v", err)
	}
}

func TestPositionalInputsAndOutputFilter(t *testing.T) {
	refs := loadRefs(t, "multi_io")
	m := load(t, "pytorch_cpu_1.6", "testdata/multi_io.onnx")
	c := refs.Cases[1]
	p := c.payload(t)
	for i := range p.Inputs {
		p.Inputs[i].Name = "" // Torch positional inputs arrive unnamed
	}
	p.Outputs = []string{"total", "sum"}
	res, err := m.Run(t.Context(), checked(t, m, p))
	if err != nil {
		t.Fatal(err)
	}
	want := refCase{Name: c.Name, Outputs: []jsonTensor{c.Outputs[2], c.Outputs[0]}}
	want.check(t, res[0])
}

func TestConcurrentRuns(t *testing.T) {
	refs := loadRefs(t, "conv")
	m := load(t, "onnx_cpu", "testdata/conv.onnx")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				c := refs.Cases[(g+i)%len(refs.Cases)]
				res, err := m.Run(context.Background(), checked(t, m, c.payload(t)))
				if err != nil {
					errs <- err
					return
				}
				got := res[0].Outputs[0]
				if err := tensor.Close(got, c.Outputs[0].tensor(t), refTol); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCancelledContext(t *testing.T) {
	m := load(t, "onnx_cpu", "testdata/mlp.onnx")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := m.Run(ctx, checked(t, m, &processors.TensorPayload{Inputs: []tensor.Tensor{f32("input", []int64{1, 16})}}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestMetadata(t *testing.T) {
	m := load(t, "pytorch_cpu_1.9", "testdata/int_bool.onnx", func(s *processors.Spec) { s.CPU = 2 })
	md := m.Metadata()
	got, _ := json.Marshal(struct {
		P   string
		In  []processors.IOSpec
		Out []processors.IOSpec
	}{md.Processor, md.Inputs, md.Outputs})
	want := `{"P":"pytorch_cpu_1.9",` +
		`"In":[{"name":"ids","datatype":"INT64","shape":[-1,-1]},{"name":"mask","datatype":"BOOL","shape":[-1,-1]}],` +
		`"Out":[{"name":"emb","datatype":"FP32","shape":[-1,-1,3]},{"name":"kept","datatype":"INT64","shape":[-1,-1]},` +
		`{"name":"count","datatype":"INT64","shape":[-1]},{"name":"inverted","datatype":"BOOL","shape":[-1,-1]}]}`
	if string(got) != want {
		t.Errorf("metadata\n got %s\nwant %s", got, want)
	}
	if md.Extra["intra_op_threads"] != 2 || md.Extra["execution_provider"] != "CPUExecutionProvider" || m.Platform() != "onnxruntime_onnx" {
		t.Errorf("extra = %v", md.Extra)
	}
}

// TestTorchScriptRefused: files that look like PyTorch but are not
// TorchScript archives (a zip named .onnx, a .pt or .pth that is no
// TorchScript) are refused with what to do; a real TorchScript file loads
// (TestTorchScriptReferences).
func TestTorchScriptRefused(t *testing.T) {
	dir := t.TempDir()
	pt := filepath.Join(dir, "model.pt")
	zipped := filepath.Join(dir, "zipped", "model.onnx")
	onlyPT := filepath.Join(dir, "onlypt")
	for _, p := range []string{pt, zipped, filepath.Join(onlyPT, "sub", "traced.pth")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("PK\x03\x04 torch.jit.save archive"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, code, path, entry string
		atConfigure             bool
		want                    string
	}{
		{"pt file", "pytorch_cpu_1.10", pt, "", false, "not a TorchScript archive"},
		{"pt entry", "pytorch_cpu_1.10", dir, "model.pt", false, "not a TorchScript archive"},
		{"zip named onnx", "pytorch_cpu_1.10", zipped, "", false, "neither an ONNX model nor a TorchScript archive"},
		{"dir with only a non-TorchScript pth", "pytorch_cpu_1.10", onlyPT, "", false, "not a TorchScript archive"},
		{"pt file under onnx_cpu", "onnx_cpu", pt, "", true, "serves ONNX only"},
		{"pt entry under pytorch_gpu", "pytorch_gpu_1.10", dir, "model.pt", false, "not a TorchScript archive"},
		{"dir with only pth under onnx_cpu", "onnx_cpu", onlyPT, "", false, "serves ONNX only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(tt.code)
			err := m.Configure(processors.Spec{Code: tt.code, ModelSource: tt.path, ModelEntry: tt.entry})
			if (err != nil) != tt.atConfigure {
				t.Fatalf("configure error = %v, want one: %v", err, tt.atConfigure)
			}
			if err == nil {
				err = m.Load(t.Context(), processors.Files{ModelPath: tt.path})
			}
			if err == nil || !strings.Contains(err.Error(), "torch.onnx.export(") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v does not refuse with %q and the export recipe", err, tt.want)
			}
		})
	}
}

func TestModelDirectory(t *testing.T) {
	mlp, err := os.ReadFile("testdata/mlp.onnx")
	if err != nil {
		t.Fatal(err)
	}
	conv, err := os.ReadFile("testdata/conv.onnx")
	if err != nil {
		t.Fatal(err)
	}
	one := t.TempDir()
	writeFile(t, filepath.Join(one, "export", "model.onnx"), mlp)
	writeFile(t, filepath.Join(one, "README.txt"), []byte("hi"))
	two := t.TempDir()
	writeFile(t, filepath.Join(two, "a.onnx"), mlp)
	writeFile(t, filepath.Join(two, "b", "c.onnx"), conv)
	empty := t.TempDir()

	tests := []struct {
		name, dir, entry string
		wantInput        string // "" = want an error containing wantErr
		wantErr          string
	}{
		{"single nested file", one, "", "input", ""},
		{"entry picks one", two, "b/c.onnx", "image", ""},
		{"two files need an entry", two, "", "", "set model_entry"},
		{"entry missing", two, "nope.onnx", "", `model_entry: "nope.onnx" not found`},
		{"no model", empty, "", "", "no .onnx file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New("onnx_cpu")
			if err := m.Configure(processors.Spec{Code: "onnx_cpu", ModelSource: tt.dir, ModelEntry: tt.entry, CPU: 1}); err != nil {
				t.Fatal(err)
			}
			err := m.Load(t.Context(), processors.Files{ModelPath: tt.dir})
			defer m.Close()
			if tt.wantInput == "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := m.Metadata().Inputs[0].Name; got != tt.wantInput {
				t.Errorf("loaded a model with input %q, want %q", got, tt.wantInput)
			}
		})
	}
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestConfigure(t *testing.T) {
	tests := []struct {
		name        string
		spec        processors.Spec
		wantThreads int
		wantErr     string
	}{
		{"cpu sets threads", processors.Spec{ModelSource: "m.onnx", CPU: 3}, 3, ""},
		{"model_config object", processors.Spec{ModelSource: "m.onnx", CPU: 3, ModelConfig: []byte(`{"intra_op_threads":2,"allow_spinning":false}`)}, 2, ""},
		{"model_config string", processors.Spec{ModelSource: "m.onnx", ModelConfig: []byte(`{"intra_op_threads": 5}`)}, 5, ""},
		{"blank config", processors.Spec{ModelSource: "m.onnx", CPU: 1, ModelConfig: []byte(" ")}, 1, ""},
		{"unknown key", processors.Spec{ModelSource: "m.onnx", ModelConfig: []byte(`{"threads":2}`)}, 0, `unknown field "threads"`},
		{"bad level", processors.Spec{ModelSource: "m.onnx", ModelConfig: []byte(`{"graph_optimization":"max"}`)}, 0, "must be one of all, extended, basic, disable"},
		{"negative threads", processors.Spec{ModelSource: "m.onnx", ModelConfig: []byte(`{"intra_op_threads":-1}`)}, 0, "between 0 and 1024, got -1"},
		{"bad torchscript_optimize", processors.Spec{ModelSource: "m.onnx", ModelConfig: []byte(`{"torchscript_optimize":"max"}`)}, 0, "torchscript_optimize: must be one of none, freeze, inference"},
		{"no model_path", processors.Spec{}, 0, "model_path: required"},
		{"escaping entry", processors.Spec{ModelSource: "dir", ModelEntry: "../x.onnx"}, 0, "model_entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New("onnx_cpu")
			tt.spec.Code = "onnx_cpu"
			err := m.Configure(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.threads != tt.wantThreads {
				t.Errorf("threads = %d, want %d", m.threads, tt.wantThreads)
			}
		})
	}
}

func TestGPUCodeWithoutCUDA(t *testing.T) {
	for _, code := range []string{"pytorch_gpu_1.10", "onnx_cu100"} {
		t.Run(code, func(t *testing.T) {
			m := New(code)
			if err := m.Configure(processors.Spec{Code: code, ModelSource: "testdata/mlp.onnx", GPU: 1}); err != nil {
				t.Fatal(err)
			}
			err := m.Load(t.Context(), processors.Files{ModelPath: "testdata/mlp.onnx"})
			defer m.Close()
			if err == nil {
				// A CUDA-enabled ONNX Runtime on a GPU host: then the
				// session must really use CUDA, never fall back silently.
				if p := m.Metadata().Extra["execution_provider"]; p != "CUDAExecutionProvider" {
					t.Fatalf("GPU code loaded with provider %v", p)
				}
				return
			}
			// What is missing is checked by TestGPUDeployErrors.
			cpu := codes[code].cpu
			for _, w := range []string{"CUDA", code, cpu} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestRegisteredCodes(t *testing.T) {
	want := []string{"onnx_cpu", "onnx_cu100"}
	for _, v := range []string{"1.6", "1.7", "1.9", "1.10"} {
		want = append(want, "pytorch_cpu_"+v, "pytorch_gpu_"+v)
	}
	for _, c := range want {
		info, ok := processors.Lookup(c)
		if !ok {
			t.Errorf("code %s not registered", c)
			continue
		}
		e := info.Factory()
		if !e.ServesTensors() || e.BatchKey() == nil {
			t.Errorf("%s: does not serve tensors or batch", c)
		}
		if got := e.Processor().(*Model).info.gpu; got != strings.Contains(c, "gpu") && got != strings.Contains(c, "cu100") {
			t.Errorf("%s: gpu = %v", c, got)
		}
	}
}

// TestMissingLibrary runs this test binary again with ONNXRUNTIME_LIB
// pointing nowhere: the environment is process-wide, so the failure path
// needs a fresh process.
func TestMissingLibrary(t *testing.T) {
	if os.Getenv("EAS_ONNX_MISSING_LIB_CHILD") == "1" {
		m := New("onnx_cpu")
		if err := m.Configure(processors.Spec{Code: "onnx_cpu", ModelSource: "testdata/mlp.onnx"}); err != nil {
			fmt.Println("configure:", err)
			os.Exit(3)
		}
		err := m.Load(context.Background(), processors.Files{ModelPath: "testdata/mlp.onnx"})
		fmt.Println(err)
		if errors.Is(err, ErrLibrary) {
			os.Exit(0)
		}
		os.Exit(4)
	}
	for _, lib := range []string{"/nonexistent/libonnxruntime.so", "testdata/mlp.onnx"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibrary$")
		cmd.Env = append(os.Environ(), "EAS_ONNX_MISSING_LIB_CHILD=1", EnvLibraryPath+"="+lib)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child with %s: %v\n%s", lib, err, out)
		}
		for _, w := range []string{lib, "fetch-onnxruntime.sh", EnvLibraryPath} {
			if !strings.Contains(string(out), w) {
				t.Errorf("message for %s does not mention %q:\n%s", lib, w, out)
			}
		}
	}
}

// TestSessionOptions loads with every model_config knob set away from its
// default and checks the answers do not change.
func TestSessionOptions(t *testing.T) {
	refs := loadRefs(t, "conv")
	for _, cfg := range []string{
		`{"allow_spinning": false, "graph_optimization": "disable", "inter_op_threads": 1, "intra_op_threads": 2}`,
		`{"graph_optimization": "basic"}`,
		`{"graph_optimization": "extended", "allow_spinning": true}`,
	} {
		t.Run(cfg, func(t *testing.T) {
			m := load(t, "onnx_cpu", "testdata/conv.onnx", func(s *processors.Spec) { s.ModelConfig = []byte(cfg) })
			for _, c := range refs.Cases {
				res, err := m.Run(t.Context(), checked(t, m, c.payload(t)))
				if err != nil {
					t.Fatal(err)
				}
				c.check(t, res[0])
			}
		})
	}
}

// TestGeneratorReproducesTestdata reruns scripts/gen-test-models.py into a
// temporary directory and compares every file with the committed ones, so
// the models, references and examples cannot drift from the script. Models
// and request bodies must match byte for byte; references numerically
// (sameJSON), since float64 BLAS may differ in the last bits between machines.
func TestGeneratorReproducesTestdata(t *testing.T) {
	if testing.Short() {
		t.Skip("runs python; skipped with -short")
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import onnx, numpy").CombinedOutput(); err != nil {
		require.Missing(t, require.Python, "/usr/bin/python3 cannot import onnx and numpy (install python3-onnx and python3-numpy: scripts/install-test-deps.sh): %v\n%s", err, out)
	}
	out, ex := t.TempDir(), t.TempDir()
	cmd := exec.Command("/usr/bin/python3", "../../scripts/gen-test-models.py", "--out", out, "--examples", ex)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s\n(it needs Debian's python3-onnx: run scripts/install-test-deps.sh)", err, b)
	}
	pairs := map[string]string{
		filepath.Join(ex, "models", "mlp.onnx"):         "../../examples/models/mlp.onnx",
		filepath.Join(ex, "requests", "pytorch_mlp.pb"): "../../examples/requests/pytorch_mlp.pb",
	}
	walk := func(root string) []string {
		var rel []string
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				r, _ := filepath.Rel(root, p)
				rel = append(rel, r)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return rel
	}
	gen, committed := walk(out), walk("testdata")
	var ours []string
	for _, c := range committed {
		if !strings.HasPrefix(c, "fuzz"+string(filepath.Separator)) {
			ours = append(ours, c)
		}
	}
	if !slices.Equal(gen, ours) {
		t.Errorf("testdata holds %v, the generator writes %v", ours, gen)
	}
	for _, g := range gen {
		pairs[filepath.Join(out, g)] = filepath.Join("testdata", g)
	}
	for g, c := range pairs {
		want, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(c)
		if err != nil {
			t.Errorf("%v; rerun /usr/bin/python3 scripts/gen-test-models.py and commit", err)
			continue
		}
		if bytes.Equal(got, want) {
			continue
		}
		if strings.HasSuffix(c, ".json") {
			if err := sameJSON(got, want); err == nil {
				continue
			} else {
				t.Errorf("%s: %v", c, err)
			}
		}
		t.Errorf("%s differs from what scripts/gen-test-models.py writes; rerun it and commit", c)
	}
}

// sameJSON compares two JSON documents: numbers in arrays (a tensor's data)
// by tensor.CloseValues under tensor.F32Elementwise (the generator rounds
// float64 results to float32 and writes them with numpy's repr; another
// numpy may sum in another order), other numbers as one-element lists.
func sameJSON(a, b []byte) error {
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &y); err != nil {
		return err
	}
	var cmp func(path string, x, y any) error
	cmp = func(path string, x, y any) error {
		switch xv := x.(type) {
		case float64:
			yv, ok := y.(float64)
			if !ok {
				return fmt.Errorf("%s: %v != %v", path, x, y)
			}
			return tensor.CloseValues(path, []float64{xv}, []float64{yv}, tensor.F32Elementwise)
		case []any:
			yv, ok := y.([]any)
			if !ok || len(xv) != len(yv) {
				return fmt.Errorf("%s: lengths differ", path)
			}
			if xn, yn, ok := numbers(xv, yv); ok {
				return tensor.CloseValues(path, xn, yn, tensor.F32Elementwise)
			}
			for i := range xv {
				if err := cmp(fmt.Sprintf("%s[%d]", path, i), xv[i], yv[i]); err != nil {
					return err
				}
			}
		case map[string]any:
			yv, ok := y.(map[string]any)
			if !ok || len(xv) != len(yv) {
				return fmt.Errorf("%s: keys differ", path)
			}
			for k := range xv {
				if err := cmp(path+"."+k, xv[k], yv[k]); err != nil {
					return err
				}
			}
		default:
			if x != y {
				return fmt.Errorf("%s: %v != %v", path, x, y)
			}
		}
		return nil
	}
	return cmp("", x, y)
}

// numbers returns x and y as numbers when both are lists of numbers only.
func numbers(x, y []any) (xn, yn []float64, ok bool) {
	for i := range x {
		a, okx := x[i].(float64)
		b, oky := y[i].(float64)
		if !okx || !oky {
			return nil, nil, false
		}
		xn, yn = append(xn, a), append(yn, b)
	}
	return xn, yn, len(x) > 0
}

// TestExternalData loads a model whose weights live in a file beside it, as
// torch.onnx.export writes models over 2 GB, from its directory.
func TestExternalData(t *testing.T) {
	refs := loadRefs(t, "mlp")
	m := load(t, "pytorch_cpu_1.10", "testdata/external")
	for _, c := range refs.Cases {
		res, err := m.Run(t.Context(), checked(t, m, c.payload(t)))
		if err != nil {
			t.Fatal(err)
		}
		c.check(t, res[0])
	}
}
