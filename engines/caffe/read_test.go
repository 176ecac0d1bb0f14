package caffe_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/eas-server/eas-server/engines/caffe"
	"github.com/eas-server/eas-server/engines/caffe/caffetest"
	"github.com/eas-server/eas-server/engines/caffe/netpb"
)

// translate loads def with random weights and translates it.
func translate(t *testing.T, def string) (*caffe.Model, error) {
	t.Helper()
	w, err := caffetest.Weights([]byte(def), 1, false)
	if err != nil {
		return nil, err
	}
	net, err := caffe.Load([]byte(def), w)
	if err != nil {
		return nil, err
	}
	return caffe.Convert(net, caffe.Options{})
}

func mustTranslate(t *testing.T, def string) *caffe.Model {
	t.Helper()
	m, err := translate(t, def)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func wantErr(t *testing.T, def string, wants ...string) {
	t.Helper()
	_, err := translate(t, def)
	if err == nil {
		t.Fatalf("translated; want an error with %q", wants)
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
}

const input = `input: "data" input_shape { dim: 10 dim: 3 dim: 8 dim: 8 }
`

func TestV1FormatUpgrades(t *testing.T) {
	def := `name: "old"
input: "data" input_dim: 1 input_dim: 3 input_dim: 8 input_dim: 8
layers { name: "conv" type: CONVOLUTION bottom: "data" top: "conv" convolution_param { num_output: 4 kernel_size: 3 } }
layers { name: "relu" type: RELU bottom: "conv" top: "conv" }
layers { name: "ip" type: INNER_PRODUCT bottom: "conv" top: "ip" inner_product_param { num_output: 5 } }
layers { name: "prob" type: SOFTMAX bottom: "ip" top: "prob" }
`
	net, err := caffe.Load([]byte(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, l := range net.Layers {
		types = append(types, l.Type)
	}
	if want := []string{"Convolution", "ReLU", "InnerProduct", "Softmax"}; !slices.Equal(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	// V1 weights with legacy 4-D shapes load too.
	w, err := caffetest.Weights([]byte(def), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	var np netpb.NetParameter
	if err := proto.Unmarshal(w, &np); err != nil || len(np.Layers) != 2 || np.Layers[0].Blobs[0].Shape != nil || np.Layers[0].Blobs[0].GetNum() != 4 {
		t.Fatalf("legacy weights not in the V1 form: %v", err)
	}
	net, err = caffe.Load([]byte(def), w)
	if err != nil {
		t.Fatal(err)
	}
	m, err := caffe.Convert(net, caffe.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Outputs) != 1 || m.Outputs[0].Name != "prob" || !slices.Equal(m.Outputs[0].Shape, []int64{-1, 5}) {
		t.Fatalf("outputs %+v", m.Outputs)
	}
}

func TestReaderRefusals(t *testing.T) {
	for name, tc := range map[string]struct{ def, want string }{
		"V0":        {`layers { layer { name: "x" type: "conv" } }`, "V0 format"},
		"mixed":     {`layer { name: "a" type: "ReLU" } layers { name: "b" type: RELU }`, "mixes"},
		"not text":  {"\x00\x01binary", "not a Caffe network definition"},
		"dims":      {`input: "a" input: "b" input_dim: 1 input_dim: 2`, "input_dim"},
		"no names":  {`input_shape { dim: 1 }`, "without input names"},
		"bad field": {`layer { name: "a" type: "ReLU" relu_param { negative_slope: "x" } }`, "not a Caffe network definition"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := caffe.Load([]byte(tc.def), nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := caffe.Load([]byte(input), []byte("\xff\xff\xff")); err == nil || !strings.HasPrefix(err.Error(), "weight:") {
		t.Fatalf("bad weights: %v", err)
	}
	bad, _ := proto.Marshal(&netpb.NetParameter{Layer: []*netpb.LayerParameter{{Name: proto.String("c"),
		Blobs: []*netpb.BlobProto{{Shape: &netpb.BlobShape{Dim: []int64{2, 3}}, Data: []float32{1, 2}}}}}})
	if _, err := caffe.Load([]byte(input), bad); err == nil || !strings.Contains(err.Error(), "does not hold its 2 values") {
		t.Fatalf("blob shape mismatch: %v", err)
	}
}

// TestPhaseRules keeps what Caffe runs in the TEST phase.
func TestPhaseRules(t *testing.T) {
	def := input + `
layer { name: "train_only" type: "Dropout" bottom: "data" top: "data" include { phase: TRAIN } }
layer { name: "test_only" type: "ReLU" bottom: "data" top: "a" include { phase: TEST } }
layer { name: "not_test" type: "Sigmoid" bottom: "data" top: "b" exclude { phase: TEST } }
layer { name: "staged" type: "TanH" bottom: "data" top: "c" include { stage: "deploy" } }
layer { name: "leveled" type: "AbsVal" bottom: "data" top: "d" include { min_level: 1 } }
layer { name: "always" type: "AbsVal" bottom: "a" top: "e" }
`
	net, err := caffe.Load([]byte(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range net.Layers {
		names = append(names, l.Name)
	}
	if want := []string{"test_only", "always"}; !slices.Equal(names, want) {
		t.Fatalf("layers %v, want %v", names, want)
	}
}

func TestUnsupportedLayersAllNamed(t *testing.T) {
	def := input + `
layer { name: "t1" type: "Threshold" bottom: "data" top: "a" }
layer { name: "py" type: "Python" bottom: "a" top: "b" }
layer { name: "t2" type: "Threshold" bottom: "b" top: "c" }
layer { name: "ok" type: "ReLU" bottom: "c" top: "d" }
`
	net, err := caffe.Load([]byte(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = caffe.Convert(net, caffe.Options{})
	var ue *caffe.UnsupportedError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v, want UnsupportedError", err)
	}
	for _, w := range []string{"Python (py)", "Threshold (t1, t2)", "Convolution", "onnx_cpu"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
}

// TestShapes checks Caffe's shape rules where translators usually slip:
// pooling rounding, the batch through Reshape and Flatten, ArgMax's top.
func TestShapes(t *testing.T) {
	for name, tc := range map[string]struct {
		layers    string
		out       []int64
		batchable bool
	}{
		// ceil((8+2-3)/2)+1 = 5; the last window starts inside: kept.
		"pool ceil": {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 } }`, []int64{-1, 3, 5, 5}, true},
		// floor((8-3)/2)+1 = 3 with round_mode FLOOR; 4 with CEIL.
		"pool floor": {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: AVE kernel_size: 3 stride: 2 round_mode: FLOOR } }`, []int64{-1, 3, 3, 3}, true},
		"pool round": {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: AVE kernel_size: 3 stride: 2 } }`, []int64{-1, 3, 4, 4}, true},
		// ceil((8+6-4)/4)+1 = 4, but the last window would start at
		// (4-1)*4 = 12 >= 8+3, in the padding: Caffe drops it.
		"pool clip":  {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: MAX kernel_size: 4 stride: 4 pad: 3 } }`, []int64{-1, 3, 3, 3}, true},
		"global":     {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: AVE global_pooling: true } }`, []int64{-1, 3, 1, 1}, true},
		"reshape":    {`layer { name: "r" type: "Reshape" bottom: "data" top: "r" reshape_param { shape { dim: 0 dim: -1 dim: 16 } } }`, []int64{-1, 12, 16}, true},
		"reshape -1": {`layer { name: "r" type: "Reshape" bottom: "data" top: "r" reshape_param { shape { dim: -1 dim: 3 dim: 64 } } }`, []int64{-1, 3, 64}, true},
		"reshape mid": {`layer { name: "r" type: "Reshape" bottom: "data" top: "r" reshape_param { shape { dim: 2 dim: 4 } axis: 2 num_axes: 1 } }`,
			[]int64{-1, 3, 2, 4, 8}, true},
		"flatten":     {`layer { name: "f" type: "Flatten" bottom: "data" top: "f" }`, []int64{-1, 192}, true},
		"flatten all": {`layer { name: "f" type: "Flatten" bottom: "data" top: "f" flatten_param { axis: 0 } }`, []int64{-1}, false},
		"permute":     {`layer { name: "p" type: "Permute" bottom: "data" top: "p" permute_param { order: 0 order: 2 order: 3 order: 1 } }`, []int64{-1, 8, 8, 3}, true},
		"argmax":      {`layer { name: "a" type: "ArgMax" bottom: "data" top: "a" argmax_param { top_k: 2 out_max_val: true } }`, []int64{-1, 2, 2, 1}, true},
		"argmax axis": {`layer { name: "a" type: "ArgMax" bottom: "data" top: "a" argmax_param { top_k: 2 axis: 1 } }`, []int64{-1, 2, 8, 8}, true},
		"deconv":      {`layer { name: "d" type: "Deconvolution" bottom: "data" top: "d" convolution_param { num_output: 2 kernel_size: 4 stride: 2 pad: 1 } }`, []int64{-1, 2, 16, 16}, true},
		"conv hw": {`layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 6 group: 3 kernel_h: 3 kernel_w: 1 pad_h: 1 pad_w: 0 stride_h: 2 stride_w: 1 dilation: 1 } }`,
			[]int64{-1, 6, 4, 8}, true},
		"crop": {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { kernel_size: 2 stride: 2 } }
layer { name: "c" type: "Crop" bottom: "data" bottom: "p" top: "c" crop_param { offset: 1 } }`, []int64{-1, 3, 4, 4}, true},
		"slice": {`layer { name: "s" type: "Slice" bottom: "data" top: "a" top: "b" slice_param { slice_point: 1 } }
layer { name: "x" type: "Eltwise" bottom: "b" bottom: "b" top: "x" eltwise_param { operation: MAX } }`, []int64{-1, 2, 8, 8}, true},
	} {
		t.Run(name, func(t *testing.T) {
			m := mustTranslate(t, input+tc.layers)
			last := m.Outputs[len(m.Outputs)-1]
			if !slices.Equal(last.Shape, tc.out) {
				t.Errorf("output %q shape %v, want %v", last.Name, last.Shape, tc.out)
			}
			if m.Batchable != tc.batchable {
				t.Errorf("batchable %v, want %v", m.Batchable, tc.batchable)
			}
		})
	}
}

func TestLayerErrors(t *testing.T) {
	for name, tc := range map[string]struct{ layers, want string }{
		"reshape fixes batch":  {`layer { name: "r" type: "Reshape" bottom: "data" top: "r" reshape_param { shape { dim: 10 dim: 192 } } }`, "fixes the batch"},
		"softmax batch":        {`layer { name: "s" type: "Softmax" bottom: "data" top: "s" softmax_param { axis: 0 } }`, "carries the batch"},
		"concat shapes":        {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { kernel_size: 2 stride: 2 } } layer { name: "c" type: "Concat" bottom: "data" bottom: "p" top: "c" }`, "cannot be joined"},
		"missing bottom":       {`layer { name: "r" type: "ReLU" bottom: "nope" top: "r" }`, `bottom "nope"`},
		"group":                {`layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 group: 2 kernel_size: 1 } }`, "group 2 must divide"},
		"no kernel":            {`layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 } }`, "no kernel_size"},
		"kernel too big":       {`layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 4 kernel_size: 9 } }`, "leaves no output"},
		"stochastic":           {`layer { name: "p" type: "Pooling" bottom: "data" top: "p" pooling_param { pool: STOCHASTIC kernel_size: 2 } }`, "STOCHASTIC"},
		"batch stats":          {`layer { name: "b" type: "BatchNorm" bottom: "data" top: "data" batch_norm_param { use_global_stats: false } }`, "use_global_stats"},
		"slice points":         {`layer { name: "s" type: "Slice" bottom: "data" top: "a" top: "b" slice_param { slice_point: 1 slice_point: 2 } }`, "slice_point"},
		"uneven slice":         {`layer { name: "s" type: "Slice" bottom: "data" top: "a" top: "b" }`, "does not split evenly"},
		"eltwise coeff":        {`layer { name: "e" type: "Eltwise" bottom: "data" bottom: "data" top: "e" eltwise_param { coeff: 1 } }`, "coeff"},
		"lrn even":             {`layer { name: "l" type: "LRN" bottom: "data" top: "l" lrn_param { local_size: 4 } }`, "odd"},
		"overwrite input":      {`layer { name: "r" type: "ReLU" bottom: "data" top: "data" }`, "in place"},
		"crop too far":         {`layer { name: "c" type: "Crop" bottom: "data" bottom: "data" top: "c" crop_param { offset: 1 } }`, "exceeds"},
		"log base":             {`layer { name: "l" type: "Log" bottom: "data" top: "l" log_param { base: 0 } }`, "base"},
		"huge kernel":          {`layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 1 kernel_size: 4000000000 } }`, "larger than"},
		"permute repeats axis": {`layer { name: "p" type: "Permute" bottom: "data" top: "p" permute_param { order: 1 order: 1 } }`, "distinct"},
	} {
		t.Run(name, func(t *testing.T) { wantErr(t, input+tc.layers, tc.want) })
	}
	wantErr(t, `input: "data"`, "input_shape")
	wantErr(t, `layer { name: "in" type: "Input" top: "data" }`, `input "data" has no shape`)
	wantErr(t, `layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 1 dim: 0 } } }`, "positive dimensions")
	wantErr(t, `layer { name: "in" type: "Input" top: "data" input_param { shape { dim: 1 dim: 100000 dim: 100000 } } }`, "elements per sample")
}

func TestWeightsChecked(t *testing.T) {
	def := input + `layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" inner_product_param { num_output: 4 } }`
	net, err := caffe.Load([]byte(def), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := caffe.Convert(net, caffe.Options{}); err == nil || !strings.Contains(err.Error(), `layer "ip" (InnerProduct): needs trained blob 0 (weights)`) {
		t.Fatalf("no weights: %v", err)
	}
	shapes, err := caffe.WeightShapes(net)
	if err != nil {
		t.Fatal(err)
	}
	if got := shapes["ip"]; len(got) != 2 || !slices.Equal(got[0], []int64{4, 192}) || !slices.Equal(got[1], []int64{4}) {
		t.Fatalf("weight shapes %v", got)
	}
	w, _ := proto.Marshal(&netpb.NetParameter{Layer: []*netpb.LayerParameter{{Name: proto.String("ip"),
		Blobs: []*netpb.BlobProto{{Shape: &netpb.BlobShape{Dim: []int64{4, 191}}, Data: make([]float32, 4*191)}}}}})
	if net, err = caffe.Load([]byte(def), w); err != nil {
		t.Fatal(err)
	}
	if _, err := caffe.Convert(net, caffe.Options{}); err == nil || !strings.Contains(err.Error(), "holds 764 values") {
		t.Fatalf("wrong count: %v", err)
	}
}

func TestOutputsOption(t *testing.T) {
	def := input + `layer { name: "r" type: "ReLU" bottom: "data" top: "a" }
layer { name: "s" type: "Sigmoid" bottom: "a" top: "b" }
layer { name: "t" type: "TanH" bottom: "a" top: "c" }`
	m := mustTranslate(t, def)
	var names []string
	for _, p := range m.Outputs {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"b", "c"}) || !slices.Equal(m.Blobs, []string{"a", "b", "c"}) {
		t.Fatalf("outputs %v, blobs %v", names, m.Blobs)
	}
	net, _ := caffe.Load([]byte(def), nil)
	if m, err := caffe.Convert(net, caffe.Options{Outputs: []string{"a"}}); err != nil || len(m.Outputs) != 1 || m.Outputs[0].Name != "a" {
		t.Fatalf("Outputs a: %v", err)
	}
	if _, err := caffe.Convert(net, caffe.Options{Outputs: []string{"data"}}); err == nil {
		t.Fatal("an input is not an output")
	}
}
