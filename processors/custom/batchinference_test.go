package custom_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/internal/teststack"
	"github.com/eas-server/eas-server/processors/custom"
	"github.com/eas-server/eas-server/servicejson"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/kserve"
	"github.com/eas-server/eas-server/wire/kservegrpc"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// jt is a tensor as KServe v2 JSON writes it.
type jt = custom.RefTensor

// biCase is one of batch-inference's example classes (testdata/bi_examples.py)
// and the requests it gets.
type biCase struct {
	service, class string
	config         string // model_config's other keys, each ending with a comma
	requests       [][]jt
}

func randTensor(r *rand.Rand, name string, shape ...int64) jt {
	t := jt{Name: name, Shape: shape, Datatype: "FP32"}
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	for range n {
		t.Data = append(t.Data, float64(float32(r.NormFloat64())))
	}
	return t
}

func biCases() []biCase {
	r := rand.New(rand.NewPCG(35, 1))
	var weights [][]float64
	for range 3 {
		var row []float64
		for range 3 {
			row = append(row, float64(float32(r.NormFloat64())))
		}
		weights = append(weights, row)
	}
	w, _ := json.Marshal(weights)
	cs := []biCase{
		{service: "bi_matmul", class: "MatMulModel", config: `"init_args": [` + string(w) + `],`},
		{service: "bi_concat", class: "ConcatModel"},
		{service: "bi_custom", class: "CustomBatcherModel"},
		{service: "bi_seq", class: "SeqModel"},
		{service: "bi_bucket", class: "BucketSeqModel"},
		{service: "bi_two", class: "TwoOutputs", config: `"init_kwargs": {"scale": 2.5},`},
	}
	for range 4 {
		cs[0].requests = append(cs[0].requests, []jt{randTensor(r, "x", 1, 3, 3)})
	}
	cs[0].requests = append(cs[0].requests, []jt{randTensor(r, "x", 2, 3, 3)})
	for _, i := range []int{1, 2} {
		for range 3 {
			cs[i].requests = append(cs[i].requests, []jt{randTensor(r, "x", 1, 2, 3), randTensor(r, "y", 1, 3, 2)})
		}
	}
	for _, l := range []int64{2, 4, 7} {
		cs[3].requests = append(cs[3].requests, []jt{randTensor(r, "seq", 1, l)})
	}
	for _, l := range []int64{8, 4, 9, 5, 2} {
		cs[4].requests = append(cs[4].requests, []jt{randTensor(r, "seq", 1, 1, l)})
	}
	for range 3 {
		cs[5].requests = append(cs[5].requests, []jt{randTensor(r, "x", 1, 4)})
	}
	return cs
}

// reference runs the requests through batch_inference's ModelHost.predict
// in process (testdata/bi_reference.py) on python.
func reference(t *testing.T, python, class, config string, reqs [][]jt) [][]jt {
	return referenceIn(t, python, "bi_examples.py", class, config, reqs)
}

// referenceIn is reference for a class of testdata/module; config's
// "tensor": "pt" hands the class torch tensors.
func referenceIn(t *testing.T, python, module, class, config string, reqs [][]jt) [][]jt {
	t.Helper()
	job := map[string]any{"module": filepath.Join(testdataDir(t), module), "class": class, "requests": reqs}
	var cfg map[string]any
	if err := json.Unmarshal([]byte("{"+strings.TrimSuffix(strings.TrimSpace(config), ",")+"}"), &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range cfg {
		job[k] = v
	}
	in, _ := json.Marshal(job)
	cmd := exec.Command(python, filepath.Join(testdataDir(t), "bi_reference.py"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference %s: %v\n%s", class, err, stderr.Bytes())
	}
	var got [][]jt
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("reference %s: %v: %s", class, err, out)
	}
	return got
}

// infer posts one request to the KServe v2 JSON door.
func infer(t *testing.T, st *teststack.Stack, service string, inputs []jt) (int, []jt, string) {
	body, _ := json.Marshal(map[string]any{"inputs": inputs})
	code, b, _ := teststack.Do(t, http.MethodPost, st.URL+"/v2/models/"+service+"/infer", token, body)
	if code != 200 {
		return code, nil, string(b)
	}
	var resp struct {
		Outputs []jt `json:"outputs"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("%s: %v: %s", service, err, b)
	}
	return code, resp.Outputs, ""
}

// sameOutputs compares a request's outputs under tol.
func sameOutputs(got, want []jt, tol tensor.Tolerance) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d outputs, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Datatype != w.Datatype || fmt.Sprint(g.Shape) != fmt.Sprint(w.Shape) {
			return fmt.Errorf("output %d: %s %s %v, want %s %s %v", i, g.Name, g.Datatype, g.Shape, w.Name, w.Datatype, w.Shape)
		}
		if err := tensor.CloseValues(w.Name, f32(g), f32(w), tol.For(tensor.Float64)); err != nil {
			return err
		}
	}
	return nil
}

func biSpec(t *testing.T, c biCase, extra string) string {
	return spec(c.service, "python", filepath.Join(testdataDir(t), "bi_examples.py"),
		fmt.Sprintf(`"model_config": {%s "class": %q}, %s`, c.config, c.class, extra))
}

// TestBatchInferenceExamples: batch-inference's example classes, deployed
// unchanged with processor_type python, answer through the KServe v2 JSON
// door exactly what ModelHost.predict answers in process, on the real
// batch_inference (the pinned venv of scripts/python-venv.sh) and on
// eas-server's stand-in (python3 without batch_inference).
func TestBatchInferenceExamples(t *testing.T) {
	venv := pyvenv.Python(t, "batch-inference")
	cases := biCases()
	want := make([][][]jt, len(cases))
	for i, c := range cases {
		want[i] = reference(t, venv, c.class, c.config, c.requests)
	}
	check := func(t *testing.T, python, pkg string) {
		t.Setenv("EAS_PYTHON", python)
		var specs []string
		for _, c := range cases {
			specs = append(specs, biSpec(t, c, ""))
		}
		specs = append(specs, spec("bi_raises", "python", filepath.Join(testdataDir(t), "bi_examples.py"), `"model_config": {"class": "Raises"},`))
		specs = append(specs, spec("allspark", "python", filepath.Join(testdataDir(t), "state.py"), ""))
		st := teststack.Start(t, specs...)
		for i, c := range cases {
			// One at a time: each request is a batch of one on both sides.
			for j, req := range c.requests {
				code, got, msg := infer(t, st, c.service, req)
				if code != 200 {
					t.Errorf("%s request %d: %d %s", c.class, j, code, msg)
					continue
				}
				if err := sameOutputs(got, want[i][j], tensor.Exact); err != nil {
					t.Errorf("%s request %d: %v", c.class, j, err)
				}
			}
			code, meta, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/predict/"+c.service, token, nil)
			if code != 200 || !strings.Contains(string(meta), "batch-inference "+c.class) || !strings.Contains(string(meta), pkg) {
				t.Errorf("%s metadata: %d %s; want the class and %q", c.class, code, meta, pkg)
			}
		}
		// The class's error fails its request, as ModelHost.predict raises it.
		code, _, msg := infer(t, st, "bi_raises", []jt{{Name: "x", Shape: []int64{1, 1}, Datatype: "FP32", Data: []float64{1}}})
		if code != 500 || !strings.Contains(msg, "Raises raised ValueError: no such luck") {
			t.Errorf("raises: %d %s", code, msg)
		}
		// An allspark processor is no tensor model: the KServe doors refuse it.
		code, _, msg = infer(t, st, "allspark", []jt{{Name: "x", Shape: []int64{1, 1}, Datatype: "FP32", Data: []float64{1}}})
		if code != 400 || !strings.Contains(msg, "not a tensor model") {
			t.Errorf("allspark over KServe: %d %s", code, msg)
		}
		// Wrong inputs are the client's: 400 naming predict_batch's arguments.
		code, _, msg = infer(t, st, "bi_concat", cases[1].requests[0][:1])
		if code != 400 || !strings.Contains(msg, "ConcatModel.predict_batch takes 2 inputs (x, y)") {
			t.Errorf("one input of two: %d %s", code, msg)
		}
		// The EAS TensorFlow protobuf door carries the same tensors.
		req := cases[1].requests[2]
		var ins []tensor.Tensor
		for _, in := range req {
			ins = append(ins, floatTensor(t, in))
		}
		body, err := tfpb.EncodeRequest("", ins, nil)
		if err != nil {
			t.Fatal(err)
		}
		code, b, _ := teststack.Do(t, http.MethodPost, st.URL+"/api/predict/bi_concat", token, body)
		if code != 200 {
			t.Fatalf("tf protobuf: %d %s", code, b)
		}
		outs, err := tfpb.DecodeResponse(b)
		if err != nil || len(outs) != 1 {
			t.Fatalf("tf protobuf answer: %v %v", outs, err)
		}
		if err := tensor.Close(outs[0], floatTensor(t, want[1][2][0]), tensor.Exact); err != nil {
			t.Errorf("tf protobuf: %v", err)
		}
		// KServe v2 binary tensors and gRPC carry them too, outputs included
		// (binary ones over HTTP).
		kreq := &kserve.InferRequest{Inputs: ins, BinaryDataOutput: true}
		kb, hl, err := kserve.EncodeRequest(kreq, true)
		if err != nil {
			t.Fatal(err)
		}
		code, b, hdr := teststack.Do(t, http.MethodPost, st.URL+"/v2/models/bi_concat/infer", token, kb,
			kserve.HeaderContentLength, strconv.Itoa(hl))
		if code != 200 {
			t.Fatalf("kserve binary: %d %s", code, b)
		}
		kresp, err := kserve.DecodeResponse(b, hdr.Get(kserve.HeaderContentLength))
		if err != nil || len(kresp.Outputs) != 1 {
			t.Fatalf("kserve binary answer: %v %v", kresp, err)
		}
		if err := tensor.Close(kresp.Outputs[0], floatTensor(t, want[1][2][0]), tensor.Exact); err != nil {
			t.Errorf("kserve binary: %v", err)
		}
		gresp, err := st.GRPC(t).ModelInfer(metadata.AppendToOutgoingContext(t.Context(), "authorization", token), kservegrpc.RequestFromTensors("bi_concat", "", "g", ins, nil))
		if err != nil {
			t.Fatalf("grpc: %v", err)
		}
		gouts, err := kservegrpc.TensorsFromResponse(gresp)
		if err != nil || len(gouts) != 1 {
			t.Fatalf("grpc answer: %v %v", gouts, err)
		}
		if err := tensor.Close(gouts[0], floatTensor(t, want[1][2][0]), tensor.Exact); err != nil {
			t.Errorf("grpc: %v", err)
		}
		// Concurrent requests batch: the scheduler forms batches of several
		// (up to @batching's max_batch_size, 10) and each request still gets
		// its own answer.
		r := rand.New(rand.NewPCG(7, 7))
		var reqs [][]jt
		for range 40 {
			reqs = append(reqs, []jt{randTensor(r, "x", 1, 3, 3)})
		}
		ref := reference(t, venv, cases[0].class, cases[0].config, reqs)
		var wg sync.WaitGroup
		for i, req := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, got, msg := infer(t, st, "bi_matmul", req)
				if code != 200 {
					t.Errorf("concurrent %d: %d %s", i, code, msg)
					return
				}
				if err := sameOutputs(got, ref[i], tensor.F32Accumulated); err != nil {
					t.Errorf("concurrent %d: %v", i, err)
				}
			}()
		}
		wg.Wait()
		sum, count := batchSizes(t, st, "bi_matmul")
		if count == 0 || sum <= count {
			t.Errorf("bi_matmul: %v requests in %v runs; want runs of several", sum, count)
		}
	}
	t.Run("batch-inference", func(t *testing.T) { check(t, venv, "batch-inference 1.0") })
	t.Run("stand-in", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err != nil {
			require.Missing(t, require.Python, "no python3 on PATH")
		}
		if exec.Command(py, "-c", "import numpy").Run() != nil {
			require.Missing(t, require.Python, "python3 lacks numpy (Debian's python3-numpy)")
		}
		if exec.Command(py, "-c", "import batch_inference").Run() == nil {
			t.Skip("python3 has a batch_inference of its own, so the stand-in is not used")
		}
		check(t, py, "eas-server's stand-in")
	})
}

func floatTensor(t *testing.T, j jt) tensor.Tensor {
	t.Helper()
	v := make([]float32, len(j.Data))
	for i, x := range j.Data {
		v[i] = float32(x)
	}
	return tensor.FromFloat32(j.Name, j.Shape, v)
}

// f32 rounds JSON numbers of an FP32 tensor to float32, as they were.
func f32(j jt) []float64 {
	if j.Datatype != "FP32" {
		return j.Data
	}
	out := make([]float64, len(j.Data))
	for i, x := range j.Data {
		out[i] = float64(float32(x))
	}
	return out
}

// TestBatchInferenceTorch: batch-inference's PyTorch classes
// (testdata/bi_torch.py, ConcatBatcher(tensor="pt")) get torch tensors and
// answer through HTTP what ModelHost.predict answers in process, on Debian's
// python3-torch (the venv of scripts/python-venv.sh batch-inference-torch).
func TestBatchInferenceTorch(t *testing.T) {
	python := pyvenv.Python(t, "batch-inference-torch")
	if exec.Command(python, "-c", "import torch").Run() != nil {
		require.Missing(t, require.Python, "%s cannot import torch: install Debian's python3-torch", python)
	}
	t.Setenv("EAS_PYTHON", python)
	r := rand.New(rand.NewPCG(35, 3))
	cases := []biCase{
		{service: "bi_torch", class: "MyTorchModel"},
		{service: "bi_fc", class: "BatchFCModule", config: `"init_args": [16, 8], "init_kwargs": {"seed": 3},`},
	}
	for range 3 {
		cases[0].requests = append(cases[0].requests, []jt{randTensor(r, "x", 1, 3, 3)})
		cases[1].requests = append(cases[1].requests, []jt{randTensor(r, "input", 2, 16)})
	}
	var specs []string
	for _, c := range cases {
		specs = append(specs, spec(c.service, "python", filepath.Join(testdataDir(t), "bi_torch.py"),
			fmt.Sprintf(`"model_config": {%s "class": %q},`, c.config, c.class)))
	}
	st := teststack.Start(t, specs...)
	for _, c := range cases {
		want := referenceIn(t, python, "bi_torch.py", c.class, c.config+`"tensor": "pt",`, c.requests)
		for j, req := range c.requests {
			code, got, msg := infer(t, st, c.service, req)
			if code != 200 {
				t.Errorf("%s request %d: %d %s", c.class, j, code, msg)
				continue
			}
			if err := sameOutputs(got, want[j], tensor.Exact); err != nil {
				t.Errorf("%s request %d: %v", c.class, j, err)
			}
		}
		code, meta, _ := teststack.Do(t, http.MethodGet, st.URL+"/api/predict/"+c.service, token, nil)
		if code != 200 || !strings.Contains(string(meta), `"tensor":"pt"`) {
			t.Errorf("%s metadata: %d %s; want tensor pt", c.class, code, meta)
		}
	}
}

// TestBatchInferenceLoadErrors: a batch-inference module that cannot be
// served fails its deploy saying why.
func TestBatchInferenceLoadErrors(t *testing.T) {
	t.Setenv("EAS_PYTHON", pyvenv.Python(t, "batch-inference"))
	mod := filepath.Join(testdataDir(t), "bi_examples.py")
	none := teststack.WriteFile(t, t.TempDir(), "plain.py", "import batch_inference\n\nclass NotDecorated:\n    def predict_batch(self, x):\n        return x\n")
	st := teststack.Start(t, echoSpec)
	for _, tc := range []struct {
		name, js string
		want     string
	}{
		{"several", spec("several", "python", mod, ""), "defines several @batching classes (BucketSeqModel, ConcatModel,"},
		{"noclass", spec("noclass", "python", mod, `"model_config": {"class": "Nope"},`), "model_config.class 'Nope': bi_examples.py defines no such class"},
		{"undecorated", spec("undecorated", "python", none, `"model_config": {"class": "NotDecorated"},`), "'NotDecorated' is not decorated with batch_inference's @batching"},
		{"nodecorated", spec("nodecorated", "python", none, ""), "plain.py defines no class decorated with @batching"},
		{"badargs", spec("badargs", "python", mod, `"model_config": {"class": "MatMulModel"},`), "TypeError"},
	} {
		s, err := servicejson.Parse([]byte(tc.js))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, err = st.Manager.Deploy(t.Context(), s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
