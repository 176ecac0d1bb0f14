package tensorflow

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/engines/libtf"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// TestLibTensorFlowMissing: without a TensorFlow library only the services
// that ask for it fail, naming where it was looked for; runtime auto on a
// model the translator refuses fails with both reasons; the default (onnx)
// and auto on a model that translates never look for it.
func TestLibTensorFlowMissing(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "nowhere", "libtensorflow_cc.so.2")
	t.Setenv(libtf.EnvLibraryPath, bad)
	if _, err := libtf.Open(); err == nil {
		t.Skip("libtensorflow is already open in this process (a test before this one opened it)")
	}

	b := newBuilder()
	x := b.input(t, "x", tensor.Float32, []int64{-1})
	good := b.save(t, map[string]string{"y": b.op(t, "Relu", tensor.Float32, []string{x}, nil) + ":0"}, map[string]tensor.DType{"y": tensor.Float32})
	b = newBuilder()
	s := b.input(t, "s", tensor.String, []int64{-1})
	refused := b.save(t, map[string]string{"u": b.node("StringUpper", []string{s}, map[string]any{"encoding": "utf-8"}) + ":0"}, map[string]tensor.DType{"u": tensor.String})

	load := func(path, cfg string) (*Model, []string, error) {
		var events []string
		m := New("tensorflow_cpu_2.7")
		spec := processors.Spec{Service: "t", Code: "tensorflow_cpu_2.7", ModelSource: path, ModelConfig: []byte(cfg),
			Event: func(_ bool, reason, msg string) { events = append(events, reason+": "+msg) }}
		if err := m.Configure(spec); err != nil {
			return nil, nil, err
		}
		err := m.Load(context.Background(), processors.Files{ModelPath: path})
		t.Cleanup(func() { m.Close() })
		return m, events, err
	}

	if _, _, err := load(good, `{"runtime":"libtensorflow"}`); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "tensorflow-cpu") {
		t.Errorf("runtime libtensorflow without the library: %v, want an error naming %s and how to install it", err, bad)
	}
	_, _, err := load(refused, `{"runtime":"auto"}`)
	if err == nil || !strings.Contains(err.Error(), "StringUpper") || !strings.Contains(err.Error(), "runtime auto tried libtensorflow") || !strings.Contains(err.Error(), bad) {
		t.Errorf("runtime auto on a refused model without the library: %v, want the translator's and libtensorflow's reasons", err)
	}
	for _, cfg := range []string{``, `{"runtime":"onnx"}`, `{"runtime":"auto","intra_op_threads":1}`} {
		m, events, err := load(good, cfg)
		if err != nil {
			t.Errorf("model_config %q: %v", cfg, err)
			continue
		}
		if m.runtime != RuntimeONNX || len(events) != 0 {
			t.Errorf("model_config %q: runtime %q, events %q; want onnx and none", cfg, m.runtime, events)
		}
		res, err := m.Run(context.Background(), []*request{mustCheck(t, m, tensor.FromFloat32("x", []int64{3}, []float32{-1, 0, 2}))})
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.Close(res[0].outputs[0], tensor.FromFloat32("y", []int64{3}, []float32{0, 0, 2}), tensor.Exact); err != nil {
			t.Error(err)
		}
	}
	if _, _, err := load(good, `{"runtime":"tf"}`); err == nil || !strings.Contains(err.Error(), "libtensorflow") {
		t.Errorf("an unknown runtime: %v, want the error listing the runtimes", err)
	}
}

func mustCheck(t *testing.T, m *Model, in tensor.Tensor) *request {
	t.Helper()
	r, err := m.check(context.Background(), "serving_default", []tensor.Tensor{in}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
