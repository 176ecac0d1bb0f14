package tensorflow

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	examplepb "github.com/wamuir/graft/tensorflow/core/example/example_protos_go_proto"

	"github.com/eas-server/eas-server/engines/tf2onnx"
	"github.com/eas-server/eas-server/internal/badinput"
	"github.com/eas-server/eas-server/tensor"
)

func example(t testing.TB, feats map[string]*examplepb.Feature) string {
	b, err := proto.Marshal(&examplepb.Example{Features: &examplepb.Features{Feature: feats}})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func floatFeature(v ...float32) *examplepb.Feature {
	return &examplepb.Feature{Kind: &examplepb.Feature_FloatList{FloatList: &examplepb.FloatList{Value: v}}}
}

// TestExampleSignatures calls the classify and regress signatures of the
// TF1 and TF2 half_plus_two models with serialized tf.Example protos.
func TestExampleSignatures(t *testing.T) {
	for _, dir := range []string{"saved_model_half_plus_two_cpu/00000123", "saved_model_half_plus_two_tf2_cpu"} {
		m, err := loadModel(t, "tensorflow_cpu_2.3", fixture(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		exs := tensor.FromStrings("inputs", []int64{3}, []string{
			example(t, map[string]*examplepb.Feature{"x": floatFeature(1)}),
			example(t, map[string]*examplepb.Feature{"x": floatFeature(4), "x2": floatFeature(9)}),
			example(t, map[string]*examplepb.Feature{"x": floatFeature(-2), "other": floatFeature(1, 2)}),
		})
		for _, c := range []struct {
			sig, out string
			add      float32
		}{{"classify_x_to_y", "scores", 2}, {"regress_x_to_y", "outputs", 2}, {"regress_x_to_y2", "outputs", 3}} {
			got, err := predict(t, m, c.sig, []tensor.Tensor{exs}, nil)
			if err != nil {
				t.Fatalf("%s %s: %v", dir, c.sig, err)
			}
			want := tensor.FromFloat32(c.out, []int64{3, 1}, []float32{0.5 + c.add, 2 + c.add, -1 + c.add})
			if err := tensor.Close(got[c.out], want, tensor.F32Elementwise); err != nil {
				t.Errorf("%s %s: %v", dir, c.sig, err)
			}
		}
	}
}

func TestParseExamplesErrors(t *testing.T) {
	def := tensor.FromFloat32("", []int64{}, []float32{7})
	port := tf2onnx.Port{Key: "in", Kind: tf2onnx.Examples, Features: []tf2onnx.Feature{
		{Key: "a", Input: "in:a", DType: tensor.Float32, Shape: []int64{2}},
		{Key: "b", Input: "in:b", DType: tensor.Float32, Shape: []int64{2}, Default: &def},
		{Key: "c", Input: "in:c", DType: tensor.Int64, Shape: []int64{}, Default: &[]tensor.Tensor{tensor.FromInt64("", []int64{}, []int64{-1})}[0]},
	}}
	ok := example(t, map[string]*examplepb.Feature{"a": floatFeature(1, 2)})
	got, err := parseExamples(port, tensor.FromStrings("in", []int64{1}, []string{ok}))
	if err != nil {
		t.Fatal(err)
	}
	if b := got[1]; tensor.Close(b, tensor.FromFloat32("in:b", []int64{1, 2}, []float32{7, 7}), tensor.Exact) != nil {
		t.Errorf("default not broadcast: %v", b)
	}
	if c := got[2]; tensor.Close(c, tensor.FromInt64("in:c", []int64{1}, []int64{-1}), tensor.Exact) != nil {
		t.Errorf("scalar default: %v", c)
	}
	for _, tc := range []struct {
		in   tensor.Tensor
		want string
	}{
		{tensor.FromFloat32("in", []int64{1}, []float32{1}), "must be DT_STRING"},
		{tensor.FromStrings("in", []int64{1, 1}, []string{ok}), "must be a vector"},
		{tensor.FromStrings("in", []int64{1}, []string{example(t, map[string]*examplepb.Feature{"a": floatFeature(1)})}), "has 1 values; the signature reads 2"},
		{tensor.FromStrings("in", []int64{1}, []string{example(t, map[string]*examplepb.Feature{"a": {Kind: &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: []int64{1, 2}}}}})}), "must be a float_list"},
		{tensor.FromStrings("in", []int64{2}, []string{ok, example(t, nil)}), `example 1 has no feature "a"`},
	} {
		_, err := parseExamples(port, tc.in)
		if err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("err %v, want an input error containing %q", err, tc.want)
		}
	}
	// One example (ParseSingleExample): a scalar, or [1] as scalar
	// inputs are accepted; not two.
	single := singlePort(port)
	for _, shape := range [][]int64{{}, {1}} {
		got, err := parseExamples(single, tensor.FromStrings("in", shape, []string{ok}))
		if err != nil {
			t.Fatal(err)
		}
		if b := got[1]; tensor.Close(b, tensor.FromFloat32("in:b", []int64{2}, []float32{7, 7}), tensor.Exact) != nil {
			t.Errorf("single example, default: %v", b)
		}
	}
	if _, err := parseExamples(single, tensor.FromStrings("in", []int64{2}, []string{ok, ok})); err == nil || !badinput.Is(err) || !strings.Contains(err.Error(), "is one serialized tf.Example") {
		t.Errorf("two examples for ParseSingleExample: err %v", err)
	}
}

// FuzzParseExamples parses arbitrary bytes as a serialized tf.Example.
func FuzzParseExamples(f *testing.F) {
	f.Add([]byte(example(f, map[string]*examplepb.Feature{"a": floatFeature(1, 2), "s": {Kind: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{[]byte("x")}}}}})))
	f.Add([]byte{})
	def := tensor.FromStrings("", []int64{}, []string{"d"})
	port := tf2onnx.Port{Key: "in", Kind: tf2onnx.Examples, Features: []tf2onnx.Feature{
		{Key: "a", Input: "in:a", DType: tensor.Float32, Shape: []int64{2}},
		{Key: "s", Input: "in:s", DType: tensor.String, Shape: []int64{1}, Default: &def},
		{Key: "n", Input: "in:n", DType: tensor.Int64, Shape: []int64{}},
		{Key: "ids", Input: "in:ids", DType: tensor.Int64, Sparse: true},
		{Key: "tags", Input: "in:tags", DType: tensor.String, Sparse: true},
		{Key: "w", Input: "in:w", DType: tensor.Float32, Sparse: true},
	}}
	f.Add([]byte(example(f, map[string]*examplepb.Feature{"a": floatFeature(1, 2), "n": {Kind: &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: []int64{4}}}},
		"ids":  {Kind: &examplepb.Feature_Int64List{Int64List: &examplepb.Int64List{Value: []int64{7, 8, 9}}}},
		"tags": {Kind: &examplepb.Feature_BytesList{BytesList: &examplepb.BytesList{Value: [][]byte{[]byte("x"), []byte("")}}}},
		"w":    floatFeature(0.5)})))
	single := singlePort(port)
	f.Fuzz(func(t *testing.T, data []byte) {
		// Twice, so that sparse indices span examples.
		out, err := parseExamples(port, tensor.FromStrings("in", []int64{2}, []string{string(data), string(data)}))
		if err != nil {
			if !badinput.Is(err) {
				t.Fatalf("error %v is not an input error", err)
			}
			return
		}
		for _, o := range out {
			if err := o.Validate(); err != nil {
				t.Fatalf("feature %s: %v", o.Name, err)
			}
		}
		if len(out) != 3+3*3 {
			t.Fatalf("%d tensors, want 12", len(out))
		}
		for k := 3; k < len(out); k += 3 {
			idx, vals, shape := out[k], out[k+1], out[k+2]
			iv, _ := idx.AsInt64()
			sv, _ := shape.AsInt64()
			if len(idx.Shape) != 2 || idx.Shape[1] != 2 || vals.Shape[0] != idx.Shape[0] || len(sv) != 2 || sv[0] != 2 {
				t.Fatalf("sparse %s: indices %v, values %v, dense shape %v", vals.Name, idx.Shape, vals.Shape, sv)
			}
			for j := 0; j < len(iv); j += 2 {
				if iv[j] < 0 || iv[j] >= sv[0] || iv[j+1] < 0 || iv[j+1] >= sv[1] {
					t.Fatalf("sparse %s: index (%d, %d) outside %v", vals.Name, iv[j], iv[j+1], sv)
				}
			}
		}
		// The same example alone, parsed as ParseSingleExample reads
		// it (a scalar): the batch of one's features, unbatched.
		batch, err := parseExamples(port, tensor.FromStrings("in", []int64{1}, []string{string(data)}))
		if err != nil {
			t.Fatalf("parsed twice but not once: %v", err)
		}
		one, err := parseExamples(single, tensor.FromStrings("in", []int64{}, []string{string(data)}))
		if err != nil {
			t.Fatalf("parsed in a batch but not alone: %v", err)
		}
		checkUnbatched(t, single, batch, one)
	})
}

// singlePort is port with every feature parsed from one example.
func singlePort(port tf2onnx.Port) tf2onnx.Port {
	port.Shape = []int64{}
	port.Features = slices.Clone(port.Features)
	for i := range port.Features {
		port.Features[i].Single = true
	}
	return port
}

// checkUnbatched checks that one (a single example's features) is batch
// (the same example's as a batch of one) without the batch dimension.
func checkUnbatched(t *testing.T, port tf2onnx.Port, batch, one []tensor.Tensor) {
	t.Helper()
	if len(one) != len(batch) {
		t.Fatalf("%d tensors alone, %d in a batch", len(one), len(batch))
	}
	for _, o := range one {
		if err := o.Validate(); err != nil {
			t.Fatalf("feature %s: %v", o.Name, err)
		}
	}
	k := 0
	for _, f := range port.Features {
		if !f.Sparse {
			b := batch[k]
			b.Shape = f.Shape
			if err := tensor.Close(one[k], b, tensor.Exact); err != nil {
				t.Fatalf("dense %s: %v", f.Key, err)
			}
			k++
			continue
		}
		bi, _ := batch[k].AsInt64()
		oi, _ := one[k].AsInt64()
		if len(one[k].Shape) != 2 || one[k].Shape[1] != 1 || len(oi)*2 != len(bi) {
			t.Fatalf("sparse %s: indices %v alone, %v in a batch", f.Key, one[k].Shape, batch[k].Shape)
		}
		for j := range oi {
			if bi[2*j] != 0 || bi[2*j+1] != oi[j] {
				t.Fatalf("sparse %s: index %d is %d alone, (%d, %d) in a batch", f.Key, j, oi[j], bi[2*j], bi[2*j+1])
			}
		}
		if err := tensor.Close(one[k+1], batch[k+1], tensor.Exact); err != nil {
			t.Fatalf("sparse %s values: %v", f.Key, err)
		}
		bs, _ := batch[k+2].AsInt64()
		if err := tensor.Close(one[k+2], tensor.FromInt64(one[k+2].Name, []int64{1}, bs[1:]), tensor.Exact); err != nil {
			t.Fatalf("sparse %s dense shape: %v", f.Key, err)
		}
		k += 3
	}
}
