package custom

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eas-server/eas-server/internal/pyvenv"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/processors/custom/frame"
	"github.com/eas-server/eas-server/tensor"
)

// RefTensor is a tensor as KServe v2 JSON and testdata/bi_reference.py
// write it; the stack tests (package custom_test) use it too.
type RefTensor struct {
	Name     string    `json:"name,omitempty"`
	Shape    []int64   `json:"shape"`
	Datatype string    `json:"datatype"`
	Data     []float64 `json:"data"`
}

// TestBatchFrameAsModelHost: one Batch frame of several requests gets, per
// request, what batch-inference's ModelHost answers when the same requests
// reach it as one batch: the class's batcher pads (SeqBatcher), groups
// (BucketSeqBatcher, a MultiBatcher: one predict_batch per group, answers
// back in request order), concatenates requests of several rows, and
// answers several outputs, on the real batch_inference and on the stand-in.
func TestBatchFrameAsModelHost(t *testing.T) {
	venv := pyvenv.Python(t, "batch-inference")
	r := rand.New(rand.NewPCG(35, 2))
	rt := func(name string, shape ...int64) RefTensor {
		t := RefTensor{Name: name, Shape: shape, Datatype: "FP32"}
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		for range n {
			t.Data = append(t.Data, float64(float32(r.NormFloat64())))
		}
		return t
	}
	type batchCase struct {
		class, config string
		requests      [][]RefTensor
	}
	cases := []batchCase{
		{class: "SeqModel", requests: [][]RefTensor{{rt("seq", 1, 2)}, {rt("seq", 1, 7)}, {rt("seq", 2, 4)}}},
		{class: "BucketSeqModel", requests: [][]RefTensor{{rt("seq", 1, 1, 8)}, {rt("seq", 1, 1, 4)}, {rt("seq", 1, 1, 9)},
			{rt("seq", 1, 1, 5)}, {rt("seq", 1, 1, 2)}, {rt("seq", 3, 1, 3)}}},
		{class: "CustomBatcherModel", requests: [][]RefTensor{{rt("x", 1, 2, 3), rt("y", 1, 3, 2)}, {rt("x", 2, 2, 3), rt("y", 2, 3, 2)}}},
		{class: "MatMulModel", config: `"init_args": [[[1, 2, 3], [4, 5, 6], [7, 8, 9.5]]]`,
			requests: [][]RefTensor{{rt("x", 1, 3, 3)}, {rt("x", 2, 3, 3)}, {rt("x", 1, 3, 3)}}},
		{class: "TwoOutputs", config: `"init_kwargs": {"scale": 0.5}`, requests: [][]RefTensor{{rt("x", 1, 4)}, {rt("x", 3, 4)}}},
	}
	entry, err := filepath.Abs(filepath.Join("testdata", "bi_examples.py"))
	if err != nil {
		t.Fatal(err)
	}
	want := make([][][]RefTensor, len(cases))
	for i, c := range cases {
		job := map[string]any{"module": entry, "class": c.class, "requests": c.requests, "together": true}
		if c.config != "" {
			if err := json.Unmarshal([]byte("{"+c.config+"}"), &job); err != nil {
				t.Fatal(err)
			}
		}
		in, _ := json.Marshal(job)
		cmd := exec.Command(venv, filepath.Join("testdata", "bi_reference.py"))
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("reference %s: %v", c.class, err)
		}
		if err := json.Unmarshal(out, &want[i]); err != nil {
			t.Fatalf("reference %s: %v: %s", c.class, err, out)
		}
	}
	run := func(t *testing.T, python string) {
		t.Setenv(EnvPython, python)
		log := slog.New(slog.DiscardHandler)
		for i, c := range cases {
			py, err := pythonCommand(t.Context(), "test", entry, filepath.Dir(entry), true, log)
			if err != nil {
				t.Fatal(err)
			}
			config := fmt.Sprintf(`{"class": %q %s}`, c.class, map[bool]string{true: "", false: ", " + c.config}[c.config == ""])
			p := newPool("test", log, frame.InitInfo{Service: "test", Entry: entry, ModelConfig: config, Threads: 1}, py.command, 64<<20)
			startPool(t, p)
			var reqs [][]tensor.Tensor
			for _, req := range c.requests {
				var ts []tensor.Tensor
				for _, x := range req {
					v := make([]float32, len(x.Data))
					for k, f := range x.Data {
						v[k] = float32(f)
					}
					ts = append(ts, tensor.FromFloat32(x.Name, x.Shape, v))
				}
				reqs = append(reqs, ts)
			}
			body, err := frame.AppendBatch(nil, reqs)
			if err != nil {
				t.Fatal(err)
			}
			res := p.send(t.Context(), frame.Batch, body)
			if res.Err != nil || res.Status != http.StatusOK {
				t.Fatalf("%s: %v %d %s", c.class, res.Err, res.Status, res.Body)
			}
			got, err := frame.ParseBatch(res.Body)
			if err != nil || len(got) != len(c.requests) {
				t.Fatalf("%s: %d answers, %v", c.class, len(got), err)
			}
			for j := range got {
				if len(got[j]) != len(want[i][j]) {
					t.Fatalf("%s request %d: %d outputs, want %d", c.class, j, len(got[j]), len(want[i][j]))
				}
				for k, w := range want[i][j] {
					g := got[j][k]
					if g.Name != w.Name || g.DType.String() != w.Datatype || fmt.Sprint(g.Shape) != fmt.Sprint(w.Shape) {
						t.Errorf("%s request %d output %d: %s %v %v, want %s %s %v", c.class, j, k, g.Name, g.DType, g.Shape, w.Name, w.Datatype, w.Shape)
						continue
					}
					var gv []float64
					switch g.DType {
					case tensor.Float32:
						v, _ := tensor.Values[float32](g)
						for _, x := range v {
							gv = append(gv, float64(x))
						}
					case tensor.Float64:
						gv, _ = tensor.Values[float64](g)
					}
					if err := tensor.CloseValues(w.Name, gv, w.Data, tensor.F32Accumulated.For(tensor.Float64)); err != nil {
						t.Errorf("%s request %d: %v", c.class, j, err)
					}
				}
			}
		}
	}
	t.Run("batch-inference", func(t *testing.T) { run(t, venv) })
	t.Run("stand-in", func(t *testing.T) {
		py, err := exec.LookPath("python3")
		if err != nil || exec.Command(py, "-c", "import numpy").Run() != nil {
			require.Missing(t, require.Python, "python3 with numpy (Debian's python3-numpy) is needed for the stand-in")
		}
		if exec.Command(py, "-c", "import batch_inference").Run() == nil {
			t.Skip("python3 has a batch_inference of its own, so the stand-in is not used")
		}
		run(t, py)
	})
}
