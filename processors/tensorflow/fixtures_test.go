package tensorflow

import (
	"context"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/internal/require"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
	"github.com/eas-server/eas-server/wire/tfpb"
)

// fixture is a real SavedModel of the conformance folder, copied from
// TensorFlow and TF Serving (see its SOURCE.md); tests skip when it is
// absent, or fail under EAS_REQUIRE_CONFORMANCE=1.
func fixture(t *testing.T, name string) string {
	t.Helper()
	return require.ConformanceDir(t, "tensorflow/"+name)
}

// newModel makes the registered processor for code, as the loader does.
func newModel(t *testing.T, code string) *Model {
	t.Helper()
	e, err := processors.New(code)
	if err != nil {
		t.Fatal(err)
	}
	return e.Processor().(*Model)
}

func loadModel(t *testing.T, code, path string) (*Model, error) {
	t.Helper()
	return loadModelEntry(t, code, path, "")
}

// loadModelEntry configures and loads code with model_path (already local,
// so it is both the source and the fetched copy) and model_entry.
func loadModelEntry(t *testing.T, code, path, entry string) (*Model, error) {
	t.Helper()
	m := newModel(t, code)
	if err := m.Configure(processors.Spec{Service: "test", Code: code, ModelSource: path, ModelEntry: entry, CPU: 1}); err != nil {
		t.Fatalf("configure: %v", err)
	}
	if err := m.Load(context.Background(), processors.Files{ModelPath: path}); err != nil {
		return nil, err
	}
	t.Cleanup(func() { m.Close() })
	return m, nil
}

// decode encodes a PredictRequest and decodes it as the server does.
func decode(t *testing.T, m *Model, sig string, inputs []tensor.Tensor, filter []string) (*request, error) {
	t.Helper()
	body, err := tfpb.EncodeRequest(sig, inputs, filter)
	if err != nil {
		t.Fatal(err)
	}
	return m.Decode(t.Context(), &processors.Request{Body: body})
}

// predict runs one PredictRequest through Decode, Run and Encode, as the
// server does, and decodes the response.
func predict(t *testing.T, m *Model, sig string, inputs []tensor.Tensor, filter []string) (map[string]tensor.Tensor, error) {
	t.Helper()
	p, err := decode(t, m, sig, inputs, filter)
	if err != nil {
		return nil, err
	}
	res, err := m.Run(context.Background(), []*request{p})
	if err != nil {
		return nil, err
	}
	resp, err := m.Encode(t.Context(), p, res[0])
	if err != nil {
		t.Fatal(err)
	}
	outs, err := tfpb.DecodeResponse(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]tensor.Tensor{}
	for _, o := range outs {
		got[o.Name] = o
	}
	return got, nil
}

func TestFixtures(t *testing.T) {
	halfPlus := func(add float32) func(x []float32) []float32 {
		return func(x []float32) []float32 {
			out := make([]float32, len(x))
			for i, v := range x {
				out[i] = 0.5*v + add
			}
			return out
		}
	}
	type call struct {
		sig    string
		inputs map[string][]float32
		shape  []int64
		output string
		want   func(in map[string][]float32) []float32
	}
	x := []float32{1, 2, 5}
	col := []int64{3, 1}
	single := func(name string, f func([]float32) []float32) func(map[string][]float32) []float32 {
		return func(in map[string][]float32) []float32 { return f(in[name]) }
	}
	tests := []struct {
		dir   string
		calls []call
	}{
		{"saved_model_half_plus_two_cpu/00000123", []call{
			{"", map[string][]float32{"x": x}, col, "y", single("x", halfPlus(2))},
			{"regress_x2_to_y3", map[string][]float32{"inputs": x}, col, "outputs", single("inputs", halfPlus(3))},
		}},
		{"saved_model_half_plus_two_tf2_cpu", []call{
			{"", map[string][]float32{"x": {4}}, []int64{1}, "y", single("x", halfPlus(2))},
			{"regress_x2_to_y3", map[string][]float32{"inputs": {4}}, []int64{1}, "outputs", single("inputs", halfPlus(3))},
			{"classify_x2_to_y3", map[string][]float32{"inputs": {-2}}, []int64{1}, "scores", single("inputs", halfPlus(3))},
		}},
		{"saved_model_half_plus_two_2_versions", []call{
			{"serving_default", map[string][]float32{"x": x}, col, "y", single("x", halfPlus(2))},
		}},
		{"saved_model_half_plus_two_cpu_with_saved_model_config/00000123", []call{
			{"", map[string][]float32{"x": x}, col, "y", single("x", halfPlus(2))},
		}},
		{"saved_model_half_plus_three/00000123", []call{
			{"", map[string][]float32{"x": x}, col, "y", single("x", halfPlus(3))},
			{"", map[string][]float32{"x": x}, []int64{3}, "y", single("x", halfPlus(3))},
		}},
		{"matrix_half_plus_two/1", []call{
			{"", map[string][]float32{"x": seq(18)}, []int64{2, 3, 3}, "y", single("x", halfPlus(2))},
		}},
		{"VarsAndArithmeticObjectGraph", []call{
			{"", map[string][]float32{"a": {2}, "b": {3}}, []int64{}, "output_0", func(in map[string][]float32) []float32 {
				return []float32{(in["a"][0]+1)*(in["b"][0]+2)/3 + 5}
			}},
		}},
		{"x_plus_y_v2_debuginfo", []call{
			{"", map[string][]float32{"x": {2.5}, "y": {4}}, []int64{}, "output_0", func(in map[string][]float32) []float32 {
				return []float32{in["x"][0] + in["y"][0]}
			}},
		}},
		{"UninitializedVariable", []call{
			{"", map[string][]float32{"value": {7}}, []int64{}, "output_0", func(in map[string][]float32) []float32 {
				return []float32{in["value"][0] + 1}
			}},
		}},
		// A StatelessWhile (an ONNX Loop): acc += v; v -= 1 while v > 0.
		{"SimpleWhileLoop", []call{
			{"", map[string][]float32{"value": {5.5}}, []int64{}, "output_0", whileSum},
			{"", map[string][]float32{"value": {10}}, []int64{}, "output_0", whileSum},
			{"", map[string][]float32{"value": {-2}}, []int64{}, "output_0", whileSum},
		}},
		{"tf_readvariableop_saved_model", []call{
			{"", map[string][]float32{"input1": {1, 2}, "input2": {3, -1}}, []int64{2, 1, 1}, "", formula1337},
		}},
		{"tf_variablev2_saved_model", []call{
			{"", map[string][]float32{"input1": {1, 2}, "input2": {3, -1}}, []int64{2, 1, 1}, "", formula1337},
		}},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.dir, "/", "_"), func(t *testing.T) {
			m, err := loadModel(t, "tensorflow_cpu_2.3", fixture(t, tc.dir))
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			for _, c := range tc.calls {
				var ins []tensor.Tensor
				for name, v := range c.inputs {
					ins = append(ins, tensor.FromFloat32(name, c.shape, v))
				}
				got, err := predict(t, m, c.sig, ins, nil)
				if err != nil {
					t.Fatalf("signature %q: %v", c.sig, err)
				}
				out := c.output
				if out == "" {
					for k := range got {
						out = k
					}
				}
				g, ok := got[out]
				if !ok {
					t.Fatalf("signature %q: no output %q in %v", c.sig, out, got)
				}
				want := tensor.FromFloat32(out, c.shape, c.want(c.inputs))
				if err := tensor.Close(g, want, tensor.F32Elementwise); err != nil {
					t.Errorf("signature %q: %v (got %v)", c.sig, err, g)
				}
			}
		})
	}
}

func formula1337(in map[string][]float32) []float32 {
	out := make([]float32, len(in["input1"]))
	for i := range out {
		out[i] = in["input1"][i]*13 + in["input2"][i]*37 - 45
	}
	return out
}

// whileSum is what SimpleWhileLoop's loop computes.
func whileSum(in map[string][]float32) []float32 {
	var acc float32
	for v := in["value"][0]; v > 0; v-- {
		acc += v
	}
	return []float32{acc}
}

func seq(n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(i) - 3
	}
	return out
}

func TestFixturesRefused(t *testing.T) {
	tests := []struct {
		dir  string
		want []string
	}{
		{"tftrt_2.0_saved_model", []string{"TRTEngineOp", `"serving_default"`}},
	}
	for _, tc := range tests {
		t.Run(strings.ReplaceAll(tc.dir, "/", "_"), func(t *testing.T) {
			_, err := loadModel(t, "tensorflow_cpu_2.3", fixture(t, tc.dir))
			if err == nil {
				t.Fatal("load succeeded; want a refusal naming the unsupported ops")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
}

// TestCounterStatefulSignaturesRefused: the counter model has no
// serving_default; get_counter reads the checkpointed value and is served,
// the signatures that assign to the variable are refused by name.
func TestCounterStatefulSignaturesRefused(t *testing.T) {
	m, err := loadModel(t, "tensorflow_cpu_1.15", fixture(t, "saved_model_counter/00000123"))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if m.defaultSig != "get_counter" {
		t.Errorf("default signature %q, want get_counter", m.defaultSig)
	}
	for _, sig := range []string{"incr_counter", "incr_counter_by", "reset_counter"} {
		err := m.refused[sig]
		if err == nil || !strings.Contains(err.Error(), "Assign") || !strings.Contains(err.Error(), sig) {
			t.Errorf("signature %s: refusal %v does not name the Assign op and the signature", sig, err)
		}
	}
	// An empty signature_name (serving_default after decoding) reaches
	// the default signature of a model without serving_default.
	if s, err := m.lookup("serving_default"); err != nil || s.name != "get_counter" {
		t.Errorf("serving_default on a model without it: %v, %v; want get_counter", s, err)
	}
	delta := tensor.FromFloat32("delta", []int64{}, []float32{1})
	if _, err := predict(t, m, "incr_counter_by", []tensor.Tensor{delta}, nil); err == nil || !badinput.Is(err) {
		t.Errorf("incr_counter_by: err %v, want an input error naming the refusal", err)
	}
}

// TestMKLFixture: the mkl model adds Conv2D + BiasAdd (+ StridedSlice) of a
// zero image to the formulas; y3 broadcasts to [1,10,10,1].
func TestMKLFixture(t *testing.T) {
	m, err := loadModel(t, "tensorflow_cpu_1.12", fixture(t, "saved_model_half_plus_two_mkl/00000123"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := predict(t, m, "", []tensor.Tensor{tensor.FromFloat32("x", []int64{2, 1}, []float32{1, 4})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tensor.Close(got["y"], tensor.FromFloat32("y", []int64{2, 1}, []float32{2.5, 4}), tensor.F32Elementwise); err != nil {
		t.Error(err)
	}
	got, err = predict(t, m, "regress_x2_to_y3", []tensor.Tensor{tensor.FromFloat32("inputs", []int64{1, 1}, []float32{4})}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 100)
	for i := range want {
		want[i] = 0.5*4 + 3
	}
	if err := tensor.Close(got["outputs"], tensor.FromFloat32("outputs", []int64{1, 10, 10, 1}, want), tensor.F32Elementwise); err != nil {
		t.Error(err)
	}
}
