package tensorflow

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

// opCase is one per-op test: a SavedModel built around the op, fed with
// feeds, must answer want, computed in Go by the reference helpers.
type opCase struct {
	name  string
	feeds []tensor.Tensor
	// build adds the op(s) reading the inputs (named as the feeds) and
	// returns the output tensor names, one per want.
	build func(t testing.TB, b *graphBuilder, in []string) []string
	want  []tensor.Tensor
	// tol compares each output with want: tensor.F32Elementwise when unset,
	// tensor.F32Accumulated for ops that sum (matrix products,
	// convolutions, pooling, Softmax); either becomes tensor.F64 for a
	// float64 output (Tolerance.For).
	tol tensor.Tolerance
}

func runOpCase(t *testing.T, c opCase) {
	t.Helper()
	b := newBuilder()
	var ins []string
	for _, f := range c.feeds {
		ins = append(ins, b.input(t, f.Name, f.DType, f.Shape))
	}
	outs := c.build(t, b, ins)
	outputs, types := map[string]string{}, map[string]tensor.DType{}
	for i, o := range outs {
		key := fmt.Sprintf("out%d", i)
		outputs[key], types[key] = o, c.want[i].DType
	}
	dir := b.save(t, outputs, types)
	m, err := loadModel(t, "tensorflow_cpu_2.7", dir)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	got, err := predict(t, m, "", c.feeds, nil)
	if err != nil {
		t.Fatalf("predict: %v", err)
	}
	tol := c.tol
	if tol == (tensor.Tolerance{}) {
		tol = tensor.F32Elementwise
	}
	for i, w := range c.want {
		key := fmt.Sprintf("out%d", i)
		g, ok := got[key]
		if !ok {
			t.Fatalf("no output %s", key)
		}
		if err := tensor.Close(g, w, tol.For(w.DType)); err != nil {
			t.Errorf("%s: %v", key, err)
		}
	}
}

func unaryCase(op string, x nd, f func(float64) float64) opCase {
	return opCase{
		name:  op,
		feeds: []tensor.Tensor{x.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, op, tensor.Float32, in, nil)}
		},
		want: []tensor.Tensor{x.map1(f).f32("")},
	}
}

func binaryCase(op string, x, y nd, outType tensor.DType, f func(a, b float64) float64) opCase {
	return opCase{
		name:  op,
		feeds: []tensor.Tensor{x.f32("x"), y.f32("y")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, op, tensor.Float32, in, nil)}
		},
		want: []tensor.Tensor{bcast(x, y, f).as("", outType)},
	}
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func TestElementwiseOps(t *testing.T) {
	x := rnd(1, -3, 3, 2, 3)
	pos := rnd(2, 0.1, 3, 2, 3)
	y := rnd(3, -2, 2, 3)
	yz := vals([]int64{3}, 0, 2, -0.5)
	const selu, seluA = 1.0507009873554804934193349852946, 1.6732632423543772848170429916717
	cases := []opCase{
		unaryCase("Sqrt", pos, math.Sqrt),
		unaryCase("Rsqrt", pos, func(v float64) float64 { return 1 / math.Sqrt(v) }),
		unaryCase("Neg", x, func(v float64) float64 { return -v }),
		unaryCase("Abs", x, math.Abs),
		unaryCase("Floor", x, math.Floor),
		unaryCase("Ceil", x, math.Ceil),
		unaryCase("Round", vals([]int64{5}, 0.5, 1.5, 2.5, -0.5, 2.4), math.RoundToEven),
		unaryCase("Relu", x, func(v float64) float64 { return math.Max(v, 0) }),
		unaryCase("Relu6", rnd(4, -3, 9, 2, 3), func(v float64) float64 { return math.Min(math.Max(v, 0), 6) }),
		unaryCase("Elu", x, func(v float64) float64 {
			if v > 0 {
				return v
			}
			return math.Exp(v) - 1
		}),
		unaryCase("Selu", x, func(v float64) float64 {
			if v > 0 {
				return selu * v
			}
			return selu * seluA * (math.Exp(v) - 1)
		}),
		unaryCase("Sigmoid", x, sigmoid),
		unaryCase("Tanh", x, math.Tanh),
		unaryCase("Softplus", x, func(v float64) float64 { return math.Log1p(math.Exp(v)) }),
		unaryCase("Softsign", x, func(v float64) float64 { return v / (1 + math.Abs(v)) }),
		unaryCase("Erf", x, math.Erf),
		unaryCase("Exp", x, math.Exp),
		unaryCase("Log", pos, math.Log),
		unaryCase("Square", x, func(v float64) float64 { return v * v }),
		unaryCase("Sign", vals([]int64{3}, -2, 0, 3), func(v float64) float64 { return math.Copysign(b2f(v != 0), v) }),
		unaryCase("Reciprocal", pos, func(v float64) float64 { return 1 / v }),
		unaryCase("Sin", x, math.Sin),
		unaryCase("Cos", x, math.Cos),
		unaryCase("Identity", x, func(v float64) float64 { return v }),
		unaryCase("StopGradient", x, func(v float64) float64 { return v }),
		{
			name:  "LeakyRelu",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "LeakyRelu", tensor.Float32, in, map[string]any{"alpha": float32(0.3)})}
			},
			want: []tensor.Tensor{x.map1(func(v float64) float64 { return math.Max(v, 0.3*v) }).f32("")},
		},
		binaryCase("Add", x, y, tensor.Float32, func(a, b float64) float64 { return a + b }),
		binaryCase("AddV2", x, y, tensor.Float32, func(a, b float64) float64 { return a + b }),
		binaryCase("Sub", x, y, tensor.Float32, func(a, b float64) float64 { return a - b }),
		binaryCase("Mul", x, y, tensor.Float32, func(a, b float64) float64 { return a * b }),
		binaryCase("RealDiv", x, y, tensor.Float32, func(a, b float64) float64 { return a / b }),
		binaryCase("DivNoNan", x, yz, tensor.Float32, func(a, b float64) float64 {
			if b == 0 {
				return 0
			}
			return a / b
		}),
		binaryCase("FloorDiv", x, y, tensor.Float32, func(a, b float64) float64 { return math.Floor(a / b) }),
		binaryCase("Maximum", x, y, tensor.Float32, math.Max),
		binaryCase("Minimum", x, y, tensor.Float32, math.Min),
		binaryCase("Pow", pos, y, tensor.Float32, math.Pow),
		binaryCase("SquaredDifference", x, y, tensor.Float32, func(a, b float64) float64 { return (a - b) * (a - b) }),
		binaryCase("Equal", vals([]int64{3}, 1, 2, 3), vals([]int64{3}, 1, 0, 3), tensor.Bool, func(a, b float64) float64 { return b2f(a == b) }),
		binaryCase("NotEqual", vals([]int64{3}, 1, 2, 3), vals([]int64{3}, 1, 0, 3), tensor.Bool, func(a, b float64) float64 { return b2f(a != b) }),
		binaryCase("Less", x, y, tensor.Bool, func(a, b float64) float64 { return b2f(a < b) }),
		binaryCase("LessEqual", x, y, tensor.Bool, func(a, b float64) float64 { return b2f(a <= b) }),
		binaryCase("Greater", x, y, tensor.Bool, func(a, b float64) float64 { return b2f(a > b) }),
		binaryCase("GreaterEqual", x, y, tensor.Bool, func(a, b float64) float64 { return b2f(a >= b) }),
	}
	bx, by := vals([]int64{4}, 1, 1, 0, 0), vals([]int64{4}, 1, 0, 1, 0)
	for _, lc := range []struct {
		op string
		f  func(a, b bool) bool
	}{{"LogicalAnd", func(a, b bool) bool { return a && b }}, {"LogicalOr", func(a, b bool) bool { return a || b }}} {
		cases = append(cases, opCase{
			name:  lc.op,
			feeds: []tensor.Tensor{bx.as("x", tensor.Bool), by.as("y", tensor.Bool)},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.node(lc.op, in, nil)}
			},
			want: []tensor.Tensor{bcast(bx, by, func(a, b float64) float64 { return b2f(lc.f(a != 0, b != 0)) }).as("", tensor.Bool)},
		})
	}
	cases = append(cases, opCase{
		name:  "LogicalNot",
		feeds: []tensor.Tensor{bx.as("x", tensor.Bool)},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.node("LogicalNot", in, nil)}
		},
		want: []tensor.Tensor{bx.map1(func(v float64) float64 { return 1 - v }).as("", tensor.Bool)},
	}, opCase{
		name:  "Cast",
		feeds: []tensor.Tensor{x.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.node("Cast", in, map[string]any{"SrcT": tfType(t, tensor.Float32), "DstT": tfType(t, tensor.Int32)})}
		},
		want: []tensor.Tensor{x.map1(math.Trunc).as("", tensor.Int32)},
	}, opCase{
		name:  "ClipByValue",
		feeds: []tensor.Tensor{x.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			lo := b.konst(t, tensor.FromFloat32("", []int64{}, []float32{-1}))
			hi := b.konst(t, tensor.FromFloat32("", []int64{}, []float32{0.5}))
			return []string{b.op(t, "ClipByValue", tensor.Float32, []string{in[0], lo, hi}, nil)}
		},
		want: []tensor.Tensor{x.map1(func(v float64) float64 { return math.Min(math.Max(v, -1), 0.5) }).f32("")},
	}, opCase{
		name:  "AddN",
		feeds: []tensor.Tensor{x.f32("x"), pos.f32("y")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "AddN", tensor.Float32, []string{in[0], in[1], in[0]}, map[string]any{"N": 3})}
		},
		want: []tensor.Tensor{bcast(bcast(x, pos, func(a, b float64) float64 { return a + b }), x, func(a, b float64) float64 { return a + b }).f32("")},
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runOpCase(t, c) })
	}
}

func softmax(a nd, logOut bool) nd {
	n := a.s[len(a.s)-1]
	out := zeros(a.s...)
	for r := 0; r < len(a.v); r += int(n) {
		row := a.v[r : r+int(n)]
		m := slicesMax(row)
		var s float64
		for _, v := range row {
			s += math.Exp(v - m)
		}
		for i, v := range row {
			if logOut {
				out.v[r+i] = v - m - math.Log(s)
			} else {
				out.v[r+i] = math.Exp(v-m) / s
			}
		}
	}
	return out
}

func slicesMax(v []float64) float64 {
	m := math.Inf(-1)
	for _, x := range v {
		m = math.Max(m, x)
	}
	return m
}

func TestNNOps(t *testing.T) {
	x := rnd(10, -1, 1, 3, 4)
	w := rnd(11, -1, 1, 4, 5)
	bias := rnd(12, -1, 1, 5)
	img := rnd(13, -1, 1, 2, 5, 6, 3)
	filt := rnd(14, -1, 1, 3, 3, 3, 4)
	dw := rnd(15, -1, 1, 3, 3, 3, 2)
	plus := func(a, b float64) float64 { return a + b }
	cases := []opCase{
		{
			name:  "MatMul with TF1 variable and BiasAdd",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				wv := b.variable(t, w.f32(""), false)
				bv := b.variable(t, bias.f32(""), true)
				mm := b.op(t, "MatMul", tensor.Float32, []string{in[0], wv}, nil)
				return []string{b.op(t, "BiasAdd", tensor.Float32, []string{mm, bv}, nil)}
			},
			want: []tensor.Tensor{bcast(matmul(x, w), bias, plus).f32("")},
			tol:  tensor.F32Accumulated,
		},
		{
			name:  "MatMul transposed",
			feeds: []tensor.Tensor{transpose(x, 1, 0).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				wt := b.konst(t, transpose(w, 1, 0).f32(""))
				return []string{b.op(t, "MatMul", tensor.Float32, []string{in[0], wt}, map[string]any{"transpose_a": true, "transpose_b": true})}
			},
			want: []tensor.Tensor{matmul(x, w).f32("")},
			tol:  tensor.F32Accumulated,
		},
		{
			name:  "BatchMatMulV2 adj_y",
			feeds: []tensor.Tensor{vals([]int64{2, 1, 2}, 1, 2, 3, 4).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				y := b.konst(t, vals([]int64{2, 3, 2}, 1, 0, 0, 1, 1, 1, 2, 0, 0, 2, -1, 1).f32(""))
				return []string{b.op(t, "BatchMatMulV2", tensor.Float32, []string{in[0], y}, map[string]any{"adj_y": true})}
			},
			want: []tensor.Tensor{vals([]int64{2, 1, 3}, 1, 2, 3, 6, 8, 1).f32("")},
			tol:  tensor.F32Accumulated,
		},
		{
			name:  "Einsum",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "Einsum", tensor.Float32, []string{in[0], b.konst(t, w.f32(""))}, map[string]any{"equation": "ij,jk->ik", "N": 2})}
			},
			want: []tensor.Tensor{matmul(x, w).f32("")},
			tol:  tensor.F32Accumulated,
		},
		{
			name:  "BiasAdd NCHW",
			feeds: []tensor.Tensor{transpose(img, 0, 3, 1, 2).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				bb := b.konst(t, vals([]int64{3}, 1, 2, 3).f32(""))
				return []string{b.op(t, "BiasAdd", tensor.Float32, []string{in[0], bb}, map[string]any{"data_format": "NCHW"})}
			},
			want: []tensor.Tensor{transpose(bcast(img, vals([]int64{3}, 1, 2, 3), plus), 0, 3, 1, 2).f32("")},
		},
		{
			name:  "Softmax",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "Softmax", tensor.Float32, in, nil), b.op(t, "LogSoftmax", tensor.Float32, in, nil)}
			},
			want: []tensor.Tensor{softmax(x, false).f32(""), softmax(x, true).f32("")},
			tol:  tensor.F32Accumulated,
		},
	}
	for _, cc := range []struct {
		stride, dil int64
		pad         string
	}{{1, 1, "SAME"}, {2, 1, "SAME"}, {1, 2, "VALID"}, {2, 1, "VALID"}} {
		cases = append(cases, opCase{
			name:  fmt.Sprintf("Conv2D %s stride %d dilation %d", cc.pad, cc.stride, cc.dil),
			feeds: []tensor.Tensor{img.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				f := b.variable(t, filt.f32(""), true)
				attrs := map[string]any{"strides": []int64{1, cc.stride, cc.stride, 1}, "padding": cc.pad, "dilations": []int64{1, cc.dil, cc.dil, 1}}
				return []string{b.op(t, "Conv2D", tensor.Float32, []string{in[0], f}, attrs)}
			},
			want: []tensor.Tensor{conv2d(img, filt, cc.stride, cc.dil, cc.pad == "SAME", false).f32("")},
			tol:  tensor.F32Accumulated,
		})
		if cc.dil == 1 {
			cases = append(cases, opCase{
				name:  fmt.Sprintf("DepthwiseConv2dNative %s stride %d", cc.pad, cc.stride),
				feeds: []tensor.Tensor{img.f32("x")},
				build: func(t testing.TB, b *graphBuilder, in []string) []string {
					f := b.konst(t, dw.f32(""))
					attrs := map[string]any{"strides": []int64{1, cc.stride, cc.stride, 1}, "padding": cc.pad}
					return []string{b.op(t, "DepthwiseConv2dNative", tensor.Float32, []string{in[0], f}, attrs)}
				},
				want: []tensor.Tensor{conv2d(img, dw, cc.stride, 1, cc.pad == "SAME", true).f32("")},
				tol:  tensor.F32Accumulated,
			})
			for _, pool := range []string{"MaxPool", "AvgPool"} {
				tol := tensor.F32Accumulated // an average sums its window
				if pool == "MaxPool" {
					tol = tensor.Exact // picks one of the inputs
				}
				cases = append(cases, opCase{
					name:  fmt.Sprintf("%s %s stride %d", pool, cc.pad, cc.stride),
					feeds: []tensor.Tensor{img.f32("x")},
					build: func(t testing.TB, b *graphBuilder, in []string) []string {
						attrs := map[string]any{"ksize": []int64{1, 3, 3, 1}, "strides": []int64{1, cc.stride, cc.stride, 1}, "padding": cc.pad}
						return []string{b.op(t, pool, tensor.Float32, in, attrs)}
					},
					want: []tensor.Tensor{pool2d(img, 3, cc.stride, cc.pad == "SAME", pool == "MaxPool").f32("")},
					tol:  tol,
				})
			}
		}
	}
	// Conv2DBackpropInput: the adjoint of a stride-2 SAME convolution from
	// [2,5,6,4] to [2,3,3,3] images, checked through <conv(u), v> =
	// <u, convT(v)> against the reference convolution.
	tin := rnd(16, -1, 1, 2, 3, 3, 4)
	filtT := rnd(17, -1, 1, 3, 3, 3, 4)
	cases = append(cases, opCase{
		name:  "Conv2DBackpropInput SAME stride 2",
		feeds: []tensor.Tensor{tin.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			sizes := b.i32(t, 2, 5, 6, 3)
			f := b.konst(t, filtT.f32(""))
			attrs := map[string]any{"strides": []int64{1, 2, 2, 1}, "padding": "SAME"}
			return []string{b.op(t, "Conv2DBackpropInput", tensor.Float32, []string{sizes, f, in[0]}, attrs)}
		},
		want: []tensor.Tensor{convTranspose(tin, filtT, []int64{2, 5, 6, 3}, 2).f32("")},
		tol:  tensor.F32Accumulated,
	})
	// FusedBatchNormV3 in inference mode.
	scale, offset := vals([]int64{3}, 1, 2, 0.5), vals([]int64{3}, 0, -1, 1)
	mean, variance := vals([]int64{3}, 0.1, -0.2, 0.3), vals([]int64{3}, 1, 0.5, 2)
	bn := zeros(img.s...)
	for i, v := range img.v {
		c := i % 3
		bn.v[i] = (v-mean.v[c])/math.Sqrt(variance.v[c]+0.001)*scale.v[c] + offset.v[c]
	}
	cases = append(cases, opCase{
		name:  "FusedBatchNormV3",
		feeds: []tensor.Tensor{img.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			ins := []string{in[0], b.konst(t, scale.f32("")), b.konst(t, offset.f32("")), b.variable(t, mean.f32(""), false), b.variable(t, variance.f32(""), true)}
			return []string{b.op(t, "FusedBatchNormV3", tensor.Float32, ins, map[string]any{"epsilon": float32(0.001), "is_training": false, "U": tfType(t, tensor.Float32)})}
		},
		want: []tensor.Tensor{bn.f32("")},
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runOpCase(t, c) })
	}
}

// convTranspose is TF's Conv2DBackpropInput for SAME padding: every input
// cell scatters filter-weighted values into the output.
func convTranspose(x, w nd, outShape []int64, stride int64) nd {
	out := zeros(outShape...)
	_, ph := samePad(outShape[1], w.s[0], stride, 1)
	_, pw := samePad(outShape[2], w.s[1], stride, 1)
	for b := range x.s[0] {
		for i := range x.s[1] {
			for j := range x.s[2] {
				for ci := range x.s[3] {
					v := x.at([]int64{b, i, j, ci})
					for p := range w.s[0] {
						for q := range w.s[1] {
							y, xx := i*stride+p-ph, j*stride+q-pw
							if y < 0 || y >= outShape[1] || xx < 0 || xx >= outShape[2] {
								continue
							}
							for co := range w.s[2] {
								idx := ((b*outShape[1]+y)*outShape[2]+xx)*outShape[3] + co
								out.v[idx] += v * w.at([]int64{p, q, co, ci})
							}
						}
					}
				}
			}
		}
	}
	return out
}

var _ = sort.Ints
