package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/eas-server/eas-server/engines/torchscript"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/torchpb"
)

// The TorchScript models come from package torchscript's generator
// (Debian's python3-torch, seeded random weights), run once per test binary
// into a temporary directory.
var (
	tsOnce sync.Once
	tsDir  string
	tsErr  error
)

func tsModels(t testing.TB) string {
	t.Helper()
	tsOnce.Do(func() {
		tsDir, tsErr = os.MkdirTemp("", "onnx-torchscript-test-")
		if tsErr != nil {
			return
		}
		out, err := exec.Command("/usr/bin/python3", "../../engines/torchscript/testdata/gen_models.py", tsDir).CombinedOutput()
		if err != nil {
			tsErr = fmt.Errorf("engines/torchscript/testdata/gen_models.py: %v\n%s\n(it needs Debian's python3-torch: run scripts/install-test-deps.sh)", err, out)
		}
	})
	if tsErr != nil {
		t.Fatal(tsErr)
	}
	return tsDir
}

// tsRef is one tensor of the generator's refs.json.
type tsRef struct {
	Name  string    `json:"name"`
	DType string    `json:"dtype"`
	Shape []int64   `json:"shape"`
	Data  []float64 `json:"data"`
}

func (r tsRef) tensor(t testing.TB) tensor.Tensor {
	t.Helper()
	switch r.DType {
	case "float32":
		v := make([]float32, len(r.Data))
		for i, x := range r.Data {
			v[i] = float32(x)
		}
		return tensor.From(r.Name, r.Shape, v)
	case "float64":
		return tensor.From(r.Name, r.Shape, r.Data)
	case "int64":
		v := make([]int64, len(r.Data))
		for i, x := range r.Data {
			v[i] = int64(x)
		}
		return tensor.From(r.Name, r.Shape, v)
	}
	t.Fatalf("refs.json: dtype %s not handled by the test", r.DType)
	return tensor.Tensor{}
}

type tsRefModel struct {
	Args  [][2]string `json:"args"`
	Cases []struct {
		Inputs  []tsRef `json:"inputs"`
		Outputs []tsRef `json:"outputs"`
	} `json:"cases"`
}

func tsRefs(t testing.TB) map[string]tsRefModel {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tsModels(t), "refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]tsRefModel
	mustUnmarshal(t, b, &r)
	return r
}

// checkTS compares outputs with the references, names included.
func checkTS(t testing.TB, what string, got []tensor.Tensor, want []tsRef) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d outputs, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		if got[i].Name != w.Name {
			t.Errorf("%s: output %d is %q, want %q", what, i, got[i].Name, w.Name)
		}
		if err := tensor.Close(got[i], w.tensor(t), tensor.F32Accumulated); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
}

// tsInputs are a case's inputs, named as forward's parameters (named) or
// unnamed (positional).
func tsInputs(t testing.TB, m tsRefModel, c int, named bool) []tensor.Tensor {
	var ins []tensor.Tensor
	for i, r := range m.Cases[c].Inputs {
		x := r.tensor(t)
		x.Name = ""
		if named {
			x.Name = m.Args[i][0]
		}
		ins = append(ins, x)
	}
	return ins
}

var tsRefNames = []string{"mlp", "control", "two", "named", "embed"}

// TestTorchScriptReferences serves each generated model under pytorch_cpu
// through FromTensors (named and positional) and the Torch protobuf
// (positional inputs and map_inputs) and compares with PyTorch's outputs.
func TestTorchScriptReferences(t *testing.T) {
	refs := tsRefs(t)
	for _, name := range tsRefNames {
		t.Run(name, func(t *testing.T) {
			ref := refs[name]
			m := load(t, "pytorch_cpu_1.10", filepath.Join(tsModels(t), name+".pt"))
			if m.Platform() != "pytorch_libtorch" || !m.torch {
				t.Fatalf("platform %s, torch %v", m.Platform(), m.torch)
			}
			for c := range ref.Cases {
				for _, named := range []bool{false, true} {
					p := checked(t, m, &processors.TensorPayload{Inputs: tsInputs(t, ref, c, named)})
					res, err := m.Run(t.Context(), p)
					if err != nil {
						t.Fatal(err)
					}
					checkTS(t, fmt.Sprintf("case %d FromTensors named=%v", c, named), res[0].Outputs, ref.Cases[c].Outputs)

					body, err := torchpb.EncodeRequest(tsInputs(t, ref, c, true), named, nil)
					if err != nil {
						t.Fatal(err)
					}
					resp, err := roundTrip(t, m, body)
					if err != nil {
						t.Fatalf("case %d torch protobuf named=%v: %v", c, named, err)
					}
					var names []string
					for _, o := range ref.Cases[c].Outputs {
						names = append(names, o.Name)
					}
					outs, err := torchpb.DecodeResponse(resp, names)
					if err != nil {
						t.Fatal(err)
					}
					checkTS(t, fmt.Sprintf("case %d torch protobuf named=%v", c, named), outs, ref.Cases[c].Outputs)
				}
			}
		})
	}
}

// TestTorchScriptBatchEqualsSingleRuns merges cases of row-wise models into
// one Run: each payload gets what it gets alone.
func TestTorchScriptBatchEqualsSingleRuns(t *testing.T) {
	refs := tsRefs(t)
	for _, name := range []string{"mlp", "named", "embed"} {
		t.Run(name, func(t *testing.T) {
			ref := refs[name]
			m := load(t, "pytorch_cpu_1.10", filepath.Join(tsModels(t), name+".pt"))
			var tps []*processors.TensorPayload
			var want [][]tsRef
			for range 2 {
				for c := range ref.Cases {
					tps = append(tps, &processors.TensorPayload{Inputs: tsInputs(t, ref, c, false)})
					want = append(want, ref.Cases[c].Outputs)
				}
			}
			ps := checked(t, m, tps...)
			for _, p := range ps {
				if _, ok := m.BatchKey(p); !ok {
					t.Fatal("a TorchScript payload is not batchable")
				}
			}
			before := m.runs.Load()
			res, err := m.Run(t.Context(), ps)
			if err != nil {
				t.Fatal(err)
			}
			if runs := m.runs.Load() - before; runs != 1 {
				t.Errorf("%d payloads took %d runs, want 1 merged run", len(ps), runs)
			}
			for i := range ps {
				checkTS(t, fmt.Sprintf("payload %d", i), res[i].Outputs, want[i])
			}
		})
	}
}

// TestTorchScriptOutputsAndMetadata: inputs are forward's parameters with
// any dtype and shape; output names come from forward's declared return type
// (a tuple here), dtypes and ranks from the first run; the Torch
// protobuf output_filter indexes forward's results.
func TestTorchScriptOutputsAndMetadata(t *testing.T) {
	refs := tsRefs(t)
	ref := refs["two"]
	m := load(t, "pytorch_cpu_1.9", filepath.Join(tsModels(t), "two.pt"), func(s *processors.Spec) { s.CPU = 2 })
	md := m.Metadata()
	got, _ := json.Marshal([]any{md.Inputs, md.Outputs})
	if want := `[[{"name":"a","datatype":"","shape":[-1]},{"name":"b","datatype":"","shape":[-1]}],[{"name":"output__0","datatype":"","shape":[-1]},{"name":"output__1","datatype":"","shape":[-1]}]]`; string(got) != want {
		t.Errorf("metadata before a run\n got %s\nwant %s", got, want)
	}
	// A Dict's keys are known only from a run.
	named := load(t, "pytorch_cpu_1.9", filepath.Join(tsModels(t), "named.pt"))
	if md := named.Metadata(); len(md.Outputs) != 0 || md.Extra["outputs_known"] != false {
		t.Errorf("a Dict output before a run: outputs %v, outputs_known %v", md.Outputs, md.Extra["outputs_known"])
	}
	if md.Extra["batchable"] != true || md.Extra["intra_op_threads"] != 2 || md.Extra["platform"] != "pytorch_libtorch" {
		t.Errorf("extra = %v", md.Extra)
	}

	ins := tsInputs(t, ref, 0, false)
	body, err := torchpb.EncodeRequest(ins, false, []int32{1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := roundTrip(t, m, body)
	if err != nil {
		t.Fatal(err)
	}
	outs, err := torchpb.DecodeResponse(resp, []string{"output__1"})
	if err != nil {
		t.Fatal(err)
	}
	checkTS(t, "output_filter [1]", outs, ref.Cases[0].Outputs[1:])

	got, _ = json.Marshal(m.Metadata().Outputs)
	if want := `[{"name":"output__0","datatype":"FP32","shape":[-1,-1]},{"name":"output__1","datatype":"FP32","shape":[-1,-1]}]`; string(got) != want {
		t.Errorf("outputs after a run\n got %s\nwant %s", got, want)
	}

	body, _ = torchpb.EncodeRequest(ins, false, []int32{2})
	if _, err := roundTrip(t, m, body); !badinput.Is(err) || !strings.Contains(err.Error(), "output_filter") {
		t.Errorf("output_filter out of range: %v", err)
	}

	// KServe output names are checked against what forward returned.
	p := checked(t, m, &processors.TensorPayload{Inputs: ins, Outputs: []string{"output__1"}})
	res, err := m.Run(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	checkTS(t, "KServe output output__1", res[0].Outputs, ref.Cases[0].Outputs[1:])
	p = checked(t, m, &processors.TensorPayload{Inputs: ins, Outputs: []string{"nope"}})
	if _, err := m.Run(t.Context(), p); !badinput.Is(err) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown output: %v", err)
	}
}

func TestTorchScriptInputErrors(t *testing.T) {
	m := load(t, "pytorch_cpu_1.10", filepath.Join(tsModels(t), "two.pt"))
	x := tensor.From("", []int64{2, 4}, make([]float32, 8))
	for _, tc := range []struct {
		name string
		ins  []tensor.Tensor
		want string
	}{
		{"missing input", []tensor.Tensor{x}, `missing input "b" (any dtype and shape)`},
		{"unknown name", []tensor.Tensor{tensor.From("c", []int64{1}, []float32{1})}, `unknown input "c"`},
		{"string dtype", []tensor.Tensor{x, {DType: tensor.String, Shape: []int64{1}, Strings: [][]byte{[]byte("a")}}}, "cannot be passed to a TorchScript model"},
		{"no elements", []tensor.Tensor{x, tensor.From("", []int64{0, 4}, []float32{})}, "no elements"},
		{"bad data size", []tensor.Tensor{x, {DType: tensor.Float32, Shape: []int64{2, 4}, Data: make([]byte, 4)}}, `input "b"`},
	} {
		_, err := m.FromTensors(t.Context(), &processors.TensorPayload{Inputs: tc.ins})
		if !badinput.Is(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a bad input mentioning %q", tc.name, err, tc.want)
		}
	}
	// A shape the model raises on is the client's error too.
	p := checked(t, m, &processors.TensorPayload{Inputs: []tensor.Tensor{x, tensor.From("", []int64{3}, make([]float32, 3))}})
	if _, err := m.Run(t.Context(), p); !badinput.Is(err) {
		t.Errorf("a run the model raises on: %v, want a bad input", err)
	}
}

// TestTorchScriptRefusedByCode: onnx_* serves ONNX only and says so, judged
// by content whatever the file's name.
func TestTorchScriptRefusedByCode(t *testing.T) {
	src := filepath.Join(tsModels(t), "mlp.pt")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	renamed := filepath.Join(t.TempDir(), "model.bin")
	writeFile(t, renamed, b)
	for _, tc := range []struct{ code, want string }{
		{"onnx_cpu", "serves ONNX only"},
		{"onnx_cu100", "serves ONNX only"},
	} {
		for _, path := range []string{src, renamed} {
			m := New(tc.code)
			err := m.Configure(processors.Spec{Code: tc.code, ModelSource: path})
			if err == nil {
				err = m.Load(t.Context(), processors.Files{ModelPath: path})
				m.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "TorchScript") {
				t.Errorf("%s %s: %v, want a refusal mentioning %q", tc.code, filepath.Base(path), err, tc.want)
			}
		}
	}
	// The same renamed file is TorchScript to pytorch_cpu.
	m := load(t, "pytorch_cpu_1.6", renamed)
	if !m.torch {
		t.Error("model.bin holding TorchScript was not served by libtorch")
	}
	// A torch.save checkpoint is a zip but not TorchScript.
	ckpt := filepath.Join(tsModels(t), "state_dict.pt")
	m = New("pytorch_cpu_1.10")
	if err := m.Configure(processors.Spec{Code: "pytorch_cpu_1.10", ModelSource: ckpt}); err != nil {
		t.Fatal(err)
	}
	err = m.Load(t.Context(), processors.Files{ModelPath: ckpt})
	if err == nil || !strings.Contains(err.Error(), "torch.jit.save") || !strings.Contains(err.Error(), "not a TorchScript archive") {
		t.Errorf("checkpoint: %v", err)
	}
}

// TestTorchScriptMissingShim runs this test binary again with the shim
// pointing nowhere (the library is opened once per process): the TorchScript
// deploy fails with the package's fix, and an ONNX model still loads.
func TestTorchScriptMissingShim(t *testing.T) {
	if os.Getenv("EAS_TS_MISSING_SHIM_CHILD") == "1" {
		path := os.Getenv("EAS_TS_MODEL")
		m := New("pytorch_cpu_1.10")
		if err := m.Configure(processors.Spec{Code: "pytorch_cpu_1.10", ModelSource: path}); err != nil {
			fmt.Println("configure:", err)
			os.Exit(3)
		}
		err := m.Load(context.Background(), processors.Files{ModelPath: path})
		fmt.Println(err)
		if !errors.Is(err, torchscript.ErrLibrary) {
			os.Exit(4)
		}
		o := New("pytorch_cpu_1.10")
		if err := o.Configure(processors.Spec{Code: "pytorch_cpu_1.10", ModelSource: "testdata/mlp.onnx"}); err != nil {
			fmt.Println("onnx configure:", err)
			os.Exit(5)
		}
		if err := o.Load(context.Background(), processors.Files{ModelPath: "testdata/mlp.onnx"}); err != nil {
			fmt.Println("onnx load:", err)
			os.Exit(6)
		}
		o.Close()
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestTorchScriptMissingShim$")
	cmd.Env = append(os.Environ(), "EAS_TS_MISSING_SHIM_CHILD=1",
		"EAS_TS_MODEL="+filepath.Join(tsModels(t), "mlp.pt"), torchscript.EnvLibraryPath+"=/nonexistent/libeas_torchshim.so")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	for _, w := range []string{"build-torchshim.sh", torchscript.EnvLibraryPath, "/nonexistent/libeas_torchshim.so"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("message does not mention %q:\n%s", w, out)
		}
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if tsDir != "" {
		os.RemoveAll(tsDir)
	}
	os.Exit(code)
}

// TorchScriptCaseForTest gives the external HTTP test (package onnx_test) a
// generated TorchScript model: its path, forward's parameter names and
// case c's inputs (named as the parameters) and reference outputs.
func TorchScriptCaseForTest(t testing.TB, model string, c int) (path string, args []string, ins, outs []tensor.Tensor) {
	ref := tsRefs(t)[model]
	for _, a := range ref.Args {
		args = append(args, a[0])
	}
	for _, o := range ref.Cases[c].Outputs {
		outs = append(outs, o.tensor(t))
	}
	return filepath.Join(tsModels(t), model+".pt"), args, tsInputs(t, ref, c, true), outs
}

// TestTorchScriptOnGPUCode: pytorch_gpu_* loads TorchScript onto CUDA
// (model_config.device_id); with a libtorch built without CUDA, or no GPU,
// the deploy fails with libtorch's reason and the two ways out.
func TestTorchScriptOnGPUCode(t *testing.T) {
	src := filepath.Join(tsModels(t), "mlp.pt")
	rt, err := torchscript.OpenRuntime()
	if err != nil {
		t.Fatal(err)
	}
	m := New("pytorch_gpu_1.10")
	if err := m.Configure(processors.Spec{Code: "pytorch_gpu_1.10", ModelSource: src}); err != nil {
		t.Fatal(err)
	}
	err = m.Load(t.Context(), processors.Files{ModelPath: src})
	defer m.Close()
	if rt.CUDADevices > 0 {
		if err != nil {
			t.Fatalf("libtorch sees %d GPUs: %v", rt.CUDADevices, err)
		}
		if got := m.Metadata().Extra["execution_provider"]; got != "libtorch:cuda:0" {
			t.Errorf("execution_provider = %v, want libtorch:cuda:0", got)
		}
		return
	}
	want := "0 CUDA device"
	if rt.CUDADevices < 0 {
		want = "built without CUDA"
	}
	for _, w := range []string{want, "runs TorchScript on CUDA", "TORCH_DIR=", `processor "pytorch_cpu_1.10"`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("pytorch_gpu_1.10 on libtorch %s (CUDA devices %d): %v, want it to say %q", rt.TorchVersion, rt.CUDADevices, err, w)
		}
	}
}

// TestTorchScriptThreadsProcessWide: libtorch has one intra-op pool per
// process, so two TorchScript services with different metadata.cpu both run
// with the one deployed last, and both report it; each still answers right.
func TestTorchScriptThreadsProcessWide(t *testing.T) {
	ref := tsRefs(t)["mlp"]
	a := load(t, "pytorch_cpu_1.10", filepath.Join(tsModels(t), "mlp.pt"), func(s *processors.Spec) { s.CPU = 2 })
	if got := a.Metadata().Extra["intra_op_threads"]; got != 2 {
		t.Fatalf("first service: intra_op_threads %v, want 2", got)
	}
	b := load(t, "pytorch_cpu_1.10", filepath.Join(tsModels(t), "mlp.pt"), func(s *processors.Spec) { s.CPU = 3 })
	for name, m := range map[string]*Model{"first": a, "second": b} {
		if got := m.Metadata().Extra["intra_op_threads"]; got != 3 {
			t.Errorf("%s service: intra_op_threads %v, want 3 (the last deploy's)", name, got)
		}
		p := checked(t, m, &processors.TensorPayload{Inputs: tsInputs(t, ref, 0, false)})
		res, err := m.Run(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		checkTS(t, name, res[0].Outputs, ref.Cases[0].Outputs)
	}
}

// TestTorchScriptOptimizeConfig: model_config.torchscript_optimize reaches
// libtorch (metadata says so) and the answers stay PyTorch's within
// tensor.F32Reformulated (optimising rewrites the graph).
func TestTorchScriptOptimizeConfig(t *testing.T) {
	ref := tsRefs(t)["mlp"]
	m := load(t, "pytorch_cpu_1.10", filepath.Join(tsModels(t), "mlp.pt"), func(s *processors.Spec) {
		s.ModelConfig = []byte(`{"torchscript_optimize":"inference"}`)
	})
	if got := m.Metadata().Extra["optimize"]; got != "inference" {
		t.Errorf("metadata optimize = %v", got)
	}
	p := checked(t, m, &processors.TensorPayload{Inputs: tsInputs(t, ref, 1, false)})
	res, err := m.Run(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range ref.Cases[1].Outputs {
		if err := tensor.Close(res[0].Outputs[i], w.tensor(t), tensor.F32Reformulated); err != nil {
			t.Error(err)
		}
	}
}
