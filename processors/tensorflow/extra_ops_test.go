package tensorflow

import (
	"fmt"
	"math"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

// resizeRef is TensorFlow's resize_bilinear / resize_nearest_neighbor on
// NHWC input, written from the kernels' index arithmetic.
func resizeRef(x nd, oh, ow int64, bilinear, align, half bool) nd {
	out := zeros(x.s[0], oh, ow, x.s[3])
	scale := func(in, o int64) float64 {
		if align && o > 1 {
			return float64(in-1) / float64(o-1)
		}
		return float64(in) / float64(o)
	}
	sh, sw := scale(x.s[1], oh), scale(x.s[2], ow)
	for i := range out.v {
		idx := unravel(i, out.s)
		b, y, xx, ch := idx[0], idx[1], idx[2], idx[3]
		if !bilinear {
			pick := func(d int64, s float64, in int64) int64 {
				var v float64
				switch {
				case half:
					v = math.Floor((float64(d) + 0.5) * s)
				case align:
					v = math.Round(float64(d) * s)
				default:
					v = math.Floor(float64(d) * s)
				}
				return min(int64(v), in-1)
			}
			out.v[i] = x.at([]int64{b, pick(y, sh, x.s[1]), pick(xx, sw, x.s[2]), ch})
			continue
		}
		coord := func(d int64, s float64, in int64) (int64, int64, float64) {
			v := float64(d) * s
			if half {
				v = (float64(d)+0.5)*s - 0.5
			}
			lo := math.Floor(v)
			l := max(int64(lo), 0)
			h := min(int64(math.Ceil(v)), in-1)
			return l, h, v - lo
		}
		y0, y1, fy := coord(y, sh, x.s[1])
		x0, x1, fx := coord(xx, sw, x.s[2])
		top := x.at([]int64{b, y0, x0, ch}) + (x.at([]int64{b, y0, x1, ch})-x.at([]int64{b, y0, x0, ch}))*fx
		bot := x.at([]int64{b, y1, x0, ch}) + (x.at([]int64{b, y1, x1, ch})-x.at([]int64{b, y1, x0, ch}))*fx
		out.v[i] = top + (bot-top)*fy
	}
	return out
}

func TestExtraOps(t *testing.T) {
	f32 := tensor.Float32
	x := rnd(80, -2, 2, 2, 3)
	img := rnd(81, -1, 1, 1, 3, 4, 2)
	cases := []opCase{
		unaryCase("Log1p", rnd(82, 0, 2, 2, 3), math.Log1p),
		unaryCase("Expm1", x, math.Expm1),
		{
			name:  "BroadcastTo",
			feeds: []tensor.Tensor{vals([]int64{3}, 1, 2, 3).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "BroadcastTo", f32, []string{in[0], b.i32(t, 2, 3)}, nil)}
			},
			want: []tensor.Tensor{vals([]int64{2, 3}, 1, 2, 3, 1, 2, 3).f32("")},
		},
		{
			name:  "Cumsum",
			feeds: []tensor.Tensor{vals([]int64{2, 3}, 1, 2, 3, 4, 5, 6).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "Cumsum", f32, []string{in[0], b.i32Scalar(t, 1)}, nil),
					b.op(t, "Cumsum", f32, []string{in[0], b.i32Scalar(t, 1)}, map[string]any{"exclusive": true, "reverse": true})}
			},
			want: []tensor.Tensor{vals([]int64{2, 3}, 1, 3, 6, 4, 9, 15).f32(""), vals([]int64{2, 3}, 5, 3, 0, 11, 6, 0).f32("")},
		},
		{
			name:  "GatherNd",
			feeds: []tensor.Tensor{tensor.FromInt32("i", []int64{2, 2}, []int32{1, 2, 0, 0})},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.node("GatherNd", []string{b.konst(t, x.f32("")), in[0]}, map[string]any{"Tparams": tfType(t, f32), "Tindices": tfType(t, tensor.Int32)})}
			},
			want: []tensor.Tensor{vals([]int64{2}, x.at([]int64{1, 2}), x.at([]int64{0, 0})).f32("")},
		},
		{
			name:  "ReverseV2",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "ReverseV2", f32, []string{in[0], b.i32(t, 1)}, nil)}
			},
			want: []tensor.Tensor{gatherIdx([]int64{2, 3}, func(i []int64) float64 { return x.at([]int64{i[0], 2 - i[1]}) }).f32("")},
		},
	}
	for _, op := range []string{"ResizeBilinear", "ResizeNearestNeighbor"} {
		for _, m := range []struct{ align, half bool }{{false, false}, {true, false}, {false, true}} {
			for _, size := range [][2]int64{{6, 7}, {2, 3}} {
				cases = append(cases, opCase{
					name:  fmt.Sprintf("%s align_corners=%v half_pixel_centers=%v to %v", op, m.align, m.half, size),
					feeds: []tensor.Tensor{img.f32("x")},
					build: func(t testing.TB, b *graphBuilder, in []string) []string {
						return []string{b.op(t, op, f32, []string{in[0], b.i32(t, int32(size[0]), int32(size[1]))}, map[string]any{"align_corners": m.align, "half_pixel_centers": m.half})}
					},
					want: []tensor.Tensor{resizeRef(img, size[0], size[1], op == "ResizeBilinear", m.align, m.half).f32("")},
				})
			}
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runOpCase(t, c) })
	}
}

func TestMathAndLayoutOps(t *testing.T) {
	f32 := tensor.Float32
	x := rnd(90, -0.9, 0.9, 2, 3)
	big := rnd(91, 1.1, 3, 2, 3)
	cases := []opCase{
		unaryCase("Tan", x, math.Tan), unaryCase("Asin", x, math.Asin), unaryCase("Acos", x, math.Acos),
		unaryCase("Atan", x, math.Atan), unaryCase("Sinh", x, math.Sinh), unaryCase("Cosh", x, math.Cosh),
		unaryCase("Asinh", x, math.Asinh), unaryCase("Acosh", big, math.Acosh), unaryCase("Atanh", x, math.Atanh),
		binaryCase("Div", x, big, f32, func(a, b float64) float64 { return a / b }),
		{
			name:  "TruncateDiv int32",
			feeds: []tensor.Tensor{tensor.FromInt32("x", []int64{4}, []int32{7, -7, 7, -7}), tensor.FromInt32("y", []int64{4}, []int32{2, 2, -2, -2})},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "TruncateDiv", tensor.Int32, in, nil)}
			},
			want: []tensor.Tensor{tensor.FromInt32("", []int64{4}, []int32{3, -3, -3, 3})},
		},
		{
			name:  "IsInf",
			feeds: []tensor.Tensor{vals([]int64{3}, math.Inf(1), 1, math.Inf(-1)).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "IsInf", f32, in, nil)}
			},
			want: []tensor.Tensor{vals([]int64{3}, 1, 0, 1).as("", tensor.Bool)},
		},
		{
			name:  "Where",
			feeds: []tensor.Tensor{vals([]int64{2, 3}, 0, 1, 0, 1, 1, 0).as("x", tensor.Bool)},
			build: func(t testing.TB, b *graphBuilder, in []string) []string { return []string{b.node("Where", in, nil)} },
			want:  []tensor.Tensor{tensor.FromInt64("", []int64{3, 2}, []int64{0, 1, 1, 0, 1, 1})},
		},
	}
	// SpaceToDepth / DepthToSpace on NHWC, from TF's index definitions.
	img := rnd(92, -1, 1, 1, 4, 6, 2)
	const bs = 2
	s2d := gatherIdx([]int64{1, 2, 3, 8}, func(i []int64) float64 {
		c := i[3] % 2
		off := i[3] / 2
		return img.at([]int64{i[0], i[1]*bs + off/bs, i[2]*bs + off%bs, c})
	})
	cases = append(cases, opCase{
		name:  "SpaceToDepth DepthToSpace",
		feeds: []tensor.Tensor{img.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			s := b.op(t, "SpaceToDepth", f32, in, map[string]any{"block_size": bs})
			return []string{s, b.op(t, "DepthToSpace", f32, []string{s}, map[string]any{"block_size": bs})}
		},
		want: []tensor.Tensor{s2d.f32(""), img.f32("")},
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runOpCase(t, c) })
	}
}
