package treeensemble

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/processors"
	"github.com/eas-server/eas-server/tensor"
)

// load configures and loads a model of ../../engines/trees/testdata/xgboost.
func load(t *testing.T, name, config string) *Processor {
	t.Helper()
	p := &Processor{}
	if err := p.Configure(processors.Spec{Code: "xgboost", ModelSource: name, ModelConfig: []byte(config)}); err != nil {
		t.Fatal(err)
	}
	if err := p.Load(t.Context(), processors.Files{ModelPath: "../../engines/trees/testdata/xgboost/" + name}); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestTensorsShareABatch runs JSON records, an FP32 tensor and an FP64
// tensor of the same rows in one batch, and alone, and checks every
// answer is the same: XGBoost reads features as float32 whatever the
// payload's precision.
func TestTensorsShareABatch(t *testing.T) {
	p := load(t, "multiclass.json", `{"missing":-999}`)
	F := p.model.NumFeatures
	rows32 := []float32{5.1, 3.5, 1.4, 0.2, 6.7, -999, 5.2, 2.3, 4.9, 2.5, 4.5, 1.7}
	n := len(rows32) / F
	rows64 := make([]float64, len(rows32))
	var recs []string
	for i := range n {
		var kv []string
		for j := range F {
			v := rows32[i*F+j]
			rows64[i*F+j] = float64(v)
			kv = append(kv, strconv.Quote(p.features[j])+":"+strconv.FormatFloat(float64(v), 'g', -1, 32))
		}
		recs = append(recs, "{"+strings.Join(kv, ",")+"}")
	}
	shape := []int64{int64(n), int64(F)}
	var batch []*payload
	for _, mk := range []func() (*payload, error){
		func() (*payload, error) {
			return p.Decode(t.Context(), &processors.Request{Body: []byte("[" + strings.Join(recs, ",") + "]")})
		},
		func() (*payload, error) {
			return p.FromTensors(t.Context(), &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat32("input", shape, rows32)}})
		},
		func() (*payload, error) {
			return p.FromTensors(t.Context(), &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat64("input", shape, rows64)}})
		},
		func() (*payload, error) {
			return p.FromTensors(t.Context(), &processors.TensorPayload{Inputs: []tensor.Tensor{tensor.FromFloat32("input", []int64{0, int64(F)}, nil)}})
		},
	} {
		pl, err := mk()
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, pl)
	}
	if !batch[1].fp32 || !math.IsNaN(float64(batch[1].rows32[5])) || !math.IsNaN(batch[2].rows[5]) || !math.IsNaN(batch[0].rows[5]) {
		t.Fatalf("model_config.missing not applied to every payload: %v %v %v", batch[0].rows, batch[1].rows32, batch[2].rows)
	}
	all, err := p.Run(t.Context(), batch)
	if err != nil || len(all) != len(batch) {
		t.Fatalf("run: %d results, %v", len(all), err)
	}
	want, err := p.ToTensors(t.Context(), batch[0], all[0])
	if err != nil {
		t.Fatal(err)
	}
	if o := want.Outputs[0]; o.Name != "scores" || o.DType != tensor.Float32 || tensor.FormatShape(o.Shape) != tensor.FormatShape([]int64{int64(n), 3}) {
		t.Fatalf("scores tensor %s %s %s", o.Name, o.DType, tensor.FormatShape(o.Shape))
	}
	for i, pl := range batch {
		alone, err := p.Run(t.Context(), []*payload{pl})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []*result{all[i], alone[0]} {
			got, err := p.ToTensors(t.Context(), pl, r)
			if err != nil {
				t.Fatal(err)
			}
			if i == 3 {
				if got.Outputs[0].Shape[0] != 0 || len(got.Outputs[0].Data) != 0 {
					t.Fatalf("empty tensor answered %v", got.Outputs[0].Shape)
				}
				continue
			}
			if !tensor.Equal(got.Outputs[0], want.Outputs[0]) {
				t.Errorf("payload %d: scores differ from the JSON records'", i)
			}
		}
	}
	if enc, err := p.Encode(t.Context(), batch[3], all[3]); err != nil || string(enc.Body) != "[]" {
		t.Fatalf("no records: %v %v", enc, err)
	}
}

// TestFromTensorsRefuses checks a bad KServe payload is a bad request
// before it runs.
func TestFromTensorsRefuses(t *testing.T) {
	p := load(t, "binary.json", "")
	good := tensor.FromFloat32("input", []int64{1, 30}, make([]float32, 30))
	short := good
	short.Data = short.Data[:8]
	for _, c := range []struct {
		name string
		in   []tensor.Tensor
		want string
	}{
		{"none", nil, "0 input tensors; the model takes one FP32 tensor \"input\" of shape [-1, 30]"},
		{"two", []tensor.Tensor{good, good}, "2 input tensors"},
		{"width", []tensor.Tensor{tensor.FromFloat32("input", []int64{1, 3}, []float32{1, 2, 3})}, "shape [1,3], the model takes [-1, 30]"},
		{"rank", []tensor.Tensor{tensor.FromFloat32("input", []int64{30}, make([]float32, 30))}, "the model takes [-1, 30]"},
		{"dtype", []tensor.Tensor{tensor.FromInt32("input", []int64{1, 30}, make([]int32, 30))}, "datatype INT32; the model takes FP32 (or FP64)"},
		{"data", []tensor.Tensor{short}, `input "input": `},
	} {
		_, err := p.FromTensors(t.Context(), &processors.TensorPayload{Inputs: c.in})
		if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a bad request with %q", c.name, err, c.want)
		}
	}
}
