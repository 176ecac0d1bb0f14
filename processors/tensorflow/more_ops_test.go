package tensorflow

import (
	"math"
	"strings"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

// TestMoreOps covers the remaining aliases, dtypes and data formats.
func TestMoreOps(t *testing.T) {
	f32 := tensor.Float32
	x := rnd(70, -2, 2, 2, 3)
	img := rnd(71, -1, 1, 1, 5, 5, 2)
	filt := rnd(72, -1, 1, 3, 3, 2, 3)
	nchw := transpose(img, 0, 3, 1, 2)
	var cases []opCase
	for _, op := range []string{"Snapshot", "PreventGradient", "EnsureShape"} {
		cases = append(cases, unaryCase(op, x, func(v float64) float64 { return v }))
	}
	cases = append(cases, opCase{
		// A NoOp grouping harmless nodes, reached only by control inputs.
		name:  "NoOp control dependency",
		feeds: []tensor.Tensor{x.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			g := b.node("NoOp", []string{"^" + b.op(t, "Neg", f32, in, nil)}, nil)
			return []string{b.op(t, "Identity", f32, []string{in[0], "^" + g}, nil)}
		},
		want: []tensor.Tensor{x.f32("")},
	}, opCase{
		name:  "CheckNumerics",
		feeds: []tensor.Tensor{x.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "CheckNumerics", f32, in, map[string]any{"message": "bad"})}
		},
		want: []tensor.Tensor{x.f32("")},
	}, opCase{
		name:  "IsNan",
		feeds: []tensor.Tensor{vals([]int64{3}, 1, math.NaN(), -1).f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "IsNan", f32, in, nil)}
		},
		want: []tensor.Tensor{vals([]int64{3}, 0, 1, 0).as("", tensor.Bool)},
	}, opCase{
		name:  "FloorMod int32 and Add int32",
		feeds: []tensor.Tensor{tensor.FromInt32("x", []int64{4}, []int32{7, -7, 7, -7}), tensor.FromInt32("y", []int64{4}, []int32{3, 3, -3, -3})},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "FloorMod", tensor.Int32, in, nil), b.op(t, "AddV2", tensor.Int32, in, nil)}
		},
		want: []tensor.Tensor{tensor.FromInt32("", []int64{4}, []int32{1, 2, -2, -1}), tensor.FromInt32("", []int64{4}, []int32{10, -4, 4, -10})},
	}, opCase{
		name:  "Mul float64",
		feeds: []tensor.Tensor{x.as("x", tensor.Float64), x.as("y", tensor.Float64)},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "Mul", tensor.Float64, in, nil)}
		},
		want: []tensor.Tensor{bcast(x, x, func(a, b float64) float64 { return a * b }).as("", tensor.Float64)},
	}, opCase{
		name:  "BatchMatMul and Gather",
		feeds: []tensor.Tensor{nd{[]int64{1, 2, 3}, x.v}.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			w := b.konst(t, rnd(73, -1, 1, 1, 3, 2).f32(""))
			g := b.node("Gather", []string{b.konst(t, x.f32("")), b.i32(t, 1, 1, 0)}, map[string]any{"Tparams": tfType(t, f32), "Tindices": tfType(t, tensor.Int32)})
			return []string{b.op(t, "BatchMatMul", f32, []string{in[0], w}, nil), g}
		},
		want: []tensor.Tensor{nd{[]int64{1, 2, 2}, matmul(x, nd{[]int64{3, 2}, rnd(73, -1, 1, 1, 3, 2).v}).v}.f32(""),
			gatherIdx([]int64{3, 3}, func(i []int64) float64 { return x.at([]int64{[]int64{1, 1, 0}[i[0]], i[1]}) }).f32("")},
		tol: tensor.F32Accumulated,
	}, opCase{
		name:  "Concat (axis first)",
		feeds: []tensor.Tensor{x.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "Concat", f32, []string{b.i32Scalar(t, 0), in[0], in[0]}, map[string]any{"N": 2})}
		},
		want: []tensor.Tensor{gatherIdx([]int64{4, 3}, func(i []int64) float64 { return x.at([]int64{i[0] % 2, i[1]}) }).f32("")},
	}, opCase{
		name:  "Conv2D NCHW",
		feeds: []tensor.Tensor{nchw.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			attrs := map[string]any{"strides": []int64{1, 1, 2, 2}, "padding": "SAME", "data_format": "NCHW"}
			return []string{b.op(t, "Conv2D", f32, []string{in[0], b.konst(t, filt.f32(""))}, attrs)}
		},
		want: []tensor.Tensor{transpose(conv2d(img, filt, 2, 1, true, false), 0, 3, 1, 2).f32("")},
		tol:  tensor.F32Accumulated,
	}, opCase{
		name:  "Conv2D EXPLICIT padding",
		feeds: []tensor.Tensor{img.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			attrs := map[string]any{"strides": []int64{1, 1, 1, 1}, "padding": "EXPLICIT", "explicit_paddings": []int64{0, 0, 1, 1, 1, 1, 0, 0}}
			return []string{b.op(t, "Conv2D", f32, []string{in[0], b.konst(t, filt.f32(""))}, attrs)}
		},
		// Symmetric padding of 1 with a 3x3 kernel and stride 1 is SAME.
		want: []tensor.Tensor{conv2d(img, filt, 1, 1, true, false).f32("")},
		tol:  tensor.F32Accumulated,
	}, opCase{
		name:  "AvgPool NCHW",
		feeds: []tensor.Tensor{nchw.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			attrs := map[string]any{"ksize": []int64{1, 1, 2, 2}, "strides": []int64{1, 1, 2, 2}, "padding": "VALID", "data_format": "NCHW"}
			return []string{b.op(t, "AvgPool", f32, in, attrs)}
		},
		want: []tensor.Tensor{transpose(pool2d(img, 2, 2, false, false), 0, 3, 1, 2).f32("")},
		tol:  tensor.F32Accumulated,
	})
	scale, offset := vals([]int64{2}, 1.5, 0.5), vals([]int64{2}, 0.25, -1)
	mean, variance := vals([]int64{2}, 0.1, -0.2), vals([]int64{2}, 1, 0.5)
	bn := zeros(img.s...)
	for i, v := range img.v {
		c := i % 2
		bn.v[i] = (v-mean.v[c])/math.Sqrt(variance.v[c]+0.0001)*scale.v[c] + offset.v[c]
	}
	for _, op := range []string{"FusedBatchNorm", "FusedBatchNormV2"} {
		cases = append(cases, opCase{
			name:  op + " NCHW with default epsilon",
			feeds: []tensor.Tensor{nchw.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				ins := []string{in[0], b.konst(t, scale.f32("")), b.konst(t, offset.f32("")), b.konst(t, mean.f32("")), b.konst(t, variance.f32(""))}
				return []string{b.op(t, op, f32, ins, map[string]any{"is_training": false, "data_format": "NCHW"})}
			},
			want: []tensor.Tensor{transpose(bn, 0, 3, 1, 2).f32("")},
		})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runOpCase(t, c) })
	}
}

// TestTrainingBatchNormRefused: a batch norm left in training mode (the
// OpDef default when the attribute is stripped) is refused by name.
func TestTrainingBatchNormRefused(t *testing.T) {
	b := newBuilder()
	x := b.input(t, "x", tensor.Float32, []int64{1, 2, 2, 1})
	one := b.konst(t, vals([]int64{1}, 1).f32(""))
	y := b.op(t, "FusedBatchNormV3", tensor.Float32, []string{x, one, one, one, one}, nil)
	dir := b.save(t, map[string]string{"y": y}, map[string]tensor.DType{"y": tensor.Float32})
	_, err := loadModel(t, "tensorflow_cpu_2.7", dir)
	if err == nil || !containsAll(err.Error(), "FusedBatchNormV3", "is_training", "serving_default") {
		t.Errorf("err = %v, want a refusal naming FusedBatchNormV3 and is_training", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// TestHalfPrecision: DT_HALF inputs and outputs, with the arithmetic in
// half precision and the output narrowed back from the float32 the runtime
// returns.
func TestHalfPrecision(t *testing.T) {
	in := []float32{0.5, -2, 1000, 3.25}
	bits := make([]uint16, len(in))
	want := make([]uint16, len(in))
	for i, v := range in {
		bits[i] = tensor.Float32ToFloat16(v)
		want[i] = tensor.Float32ToFloat16(v * 2)
	}
	runOpCase(t, opCase{
		feeds: []tensor.Tensor{tensor.FromFloat16Bits("x", []int64{4}, bits)},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "AddV2", tensor.Float16, []string{in[0], in[0]}, nil)}
		},
		want: []tensor.Tensor{tensor.FromFloat16Bits("", []int64{4}, want)},
	})
}

// TestOutputKeyEqualsInputKey: a signature may name an output like an
// input; ONNX names must be unique, the response still uses the key.
func TestOutputKeyEqualsInputKey(t *testing.T) {
	b := newBuilder()
	x := b.input(t, "x", tensor.Float32, []int64{-1})
	y := b.op(t, "Neg", tensor.Float32, []string{x}, nil)
	b.outShapes = map[string][]int64{"x": {-1}}
	dir := b.save(t, map[string]string{"x": y}, map[string]tensor.DType{"x": tensor.Float32})
	m, err := loadModel(t, "tensorflow_cpu_2.7", dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, filter := range [][]string{nil, {"x"}} {
		got, err := predict(t, m, "", []tensor.Tensor{tensor.FromFloat32("x", []int64{2}, []float32{1, -3})}, filter)
		if err != nil {
			t.Fatal(err)
		}
		if err := tensor.Close(got["x"], tensor.FromFloat32("x", []int64{2}, []float32{-1, 3}), tensor.Exact); err != nil {
			t.Errorf("filter %v: %v", filter, err)
		}
	}
}
