package tensorflow

import (
	"math"
	"testing"

	"github.com/eas-server/eas-server/tensor"
)

func TestArrayOps(t *testing.T) {
	x := rnd(20, -2, 2, 2, 3, 4)
	emb := rnd(21, -1, 1, 3, 4)
	sum := func(a, b float64) float64 { return a + b }
	f32 := tensor.Float32
	cases := []opCase{
		{
			name:  "Reshape Shape Size Rank",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				r := b.op(t, "Reshape", f32, []string{in[0], b.i32(t, -1, 4)}, nil)
				return []string{r, b.op(t, "Shape", f32, in, nil), b.op(t, "Size", f32, in, nil), b.op(t, "Rank", f32, in, nil)}
			},
			want: []tensor.Tensor{nd{[]int64{6, 4}, x.v}.f32(""), tensor.FromInt32("", []int64{3}, []int32{2, 3, 4}),
				tensor.FromInt32("", []int64{}, []int32{24}), tensor.FromInt32("", []int64{}, []int32{3})},
		},
		{
			name:  "Reshape from dynamic shape (Shape, StridedSlice, Pack)",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				s := b.op(t, "Shape", f32, in, nil)
				batch := b.op(t, "StridedSlice", tensor.Int32, []string{s, b.i32(t, 0), b.i32(t, 1), b.i32(t, 1)}, map[string]any{"shrink_axis_mask": 1, "Index": tfType(t, tensor.Int32)})
				shape := b.op(t, "Pack", tensor.Int32, []string{batch, b.i32Scalar(t, -1)}, map[string]any{"N": 2})
				return []string{b.op(t, "Reshape", f32, []string{in[0], shape}, nil)}
			},
			want: []tensor.Tensor{nd{[]int64{2, 12}, x.v}.f32("")},
		},
		{
			name:  "Squeeze ExpandDims",
			feeds: []tensor.Tensor{nd{[]int64{2, 1, 3}, x.v[:6]}.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				sq := b.op(t, "Squeeze", f32, in, map[string]any{"squeeze_dims": []int64{1}})
				return []string{sq, b.op(t, "ExpandDims", f32, []string{sq, b.i32Scalar(t, -1)}, nil), b.op(t, "Squeeze", f32, in, nil)}
			},
			want: []tensor.Tensor{nd{[]int64{2, 3}, x.v[:6]}.f32(""), nd{[]int64{2, 3, 1}, x.v[:6]}.f32(""), nd{[]int64{2, 3}, x.v[:6]}.f32("")},
		},
		{
			name:  "Transpose",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "Transpose", f32, []string{in[0], b.i32(t, 2, 0, 1)}, nil)}
			},
			want: []tensor.Tensor{transpose(x, 2, 0, 1).f32("")},
		},
		{
			name:  "ConcatV2",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "ConcatV2", f32, []string{in[0], in[0], b.i32Scalar(t, -1)}, map[string]any{"N": 2})}
			},
			want: []tensor.Tensor{gatherIdx([]int64{2, 3, 8}, func(i []int64) float64 { return x.at([]int64{i[0], i[1], i[2] % 4}) }).f32("")},
		},
		{
			name:  "Pack Unpack",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				p := b.op(t, "Pack", f32, []string{in[0], in[0]}, map[string]any{"N": 2, "axis": 1})
				u := b.op(t, "Unpack", f32, in, map[string]any{"num": 3, "axis": 1})
				return []string{p, u + ":2"}
			},
			want: []tensor.Tensor{gatherIdx([]int64{2, 2, 3, 4}, func(i []int64) float64 { return x.at([]int64{i[0], i[2], i[3]}) }).f32(""),
				gatherIdx([]int64{2, 4}, func(i []int64) float64 { return x.at([]int64{i[0], 2, i[1]}) }).f32("")},
		},
		{
			name:  "Split SplitV",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				s := b.op(t, "Split", f32, []string{b.i32Scalar(t, 2), in[0]}, map[string]any{"num_split": 2})
				v := b.op(t, "SplitV", f32, []string{in[0], b.i32(t, 1, -1), b.i32Scalar(t, 2)}, map[string]any{"num_split": 2})
				return []string{s + ":1", v + ":1"}
			},
			want: []tensor.Tensor{gatherIdx([]int64{2, 3, 2}, func(i []int64) float64 { return x.at([]int64{i[0], i[1], i[2] + 2}) }).f32(""),
				gatherIdx([]int64{2, 3, 3}, func(i []int64) float64 { return x.at([]int64{i[0], i[1], i[2] + 1}) }).f32("")},
		},
		{
			name:  "Slice",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "Slice", f32, []string{in[0], b.i32(t, 1, 1, 0), b.i32(t, -1, 2, 3)}, nil)}
			},
			want: []tensor.Tensor{gatherIdx([]int64{1, 2, 3}, func(i []int64) float64 { return x.at([]int64{i[0] + 1, i[1] + 1, i[2]}) }).f32("")},
		},
		{
			name:  "Tile",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "Tile", f32, []string{in[0], b.i32(t, 1, 2, 1)}, nil)}
			},
			want: []tensor.Tensor{gatherIdx([]int64{2, 6, 4}, func(i []int64) float64 { return x.at([]int64{i[0], i[1] % 3, i[2]}) }).f32("")},
		},
		{
			name:  "Fill Range ZerosLike OnesLike",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				fill := b.op(t, "Fill", f32, []string{b.i32(t, 2, 2), b.konst(t, tensor.FromFloat32("", []int64{}, []float32{1.5}))}, nil)
				rg := b.op(t, "Range", tensor.Int32, []string{b.i32Scalar(t, 1), b.i32Scalar(t, 10), b.i32Scalar(t, 3)}, map[string]any{"Tidx": tfType(t, tensor.Int32)})
				return []string{fill, rg, b.op(t, "ZerosLike", f32, in, nil), b.op(t, "OnesLike", f32, in, nil)}
			},
			want: []tensor.Tensor{tensor.FromFloat32("", []int64{2, 2}, []float32{1.5, 1.5, 1.5, 1.5}), tensor.FromInt32("", []int64{3}, []int32{1, 4, 7}),
				zeros(x.s...).f32(""), zeros(x.s...).map1(func(float64) float64 { return 1 }).f32("")},
		},
		{
			name:  "Select SelectV2",
			feeds: []tensor.Tensor{vals([]int64{2}, 1, 0).as("c", tensor.Bool), vals([]int64{2, 2}, 1, 2, 3, 4).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				neg := b.op(t, "Neg", f32, in[1:], nil)
				row := b.op(t, "ExpandDims", tensor.Bool, []string{in[0], b.i32Scalar(t, 0)}, nil)
				return []string{b.op(t, "Select", f32, []string{in[0], in[1], neg}, nil), b.op(t, "SelectV2", f32, []string{row, in[1], neg}, nil)}
			},
			want: []tensor.Tensor{vals([]int64{2, 2}, 1, 2, -3, -4).f32(""), vals([]int64{2, 2}, 1, -2, 3, -4).f32("")},
		},
		{
			name:  "ArgMax ArgMin",
			feeds: []tensor.Tensor{vals([]int64{2, 3}, 1, 5, 2, 9, -1, 0).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, "ArgMax", f32, []string{in[0], b.i32Scalar(t, 1)}, nil),
					b.op(t, "ArgMin", f32, []string{in[0], b.i32Scalar(t, 1)}, map[string]any{"output_type": tfType(t, tensor.Int32)})}
			},
			want: []tensor.Tensor{tensor.FromInt64("", []int64{2}, []int64{1, 0}), tensor.FromInt32("", []int64{2}, []int32{0, 1})},
		},
		{
			name:  "OneHot",
			feeds: []tensor.Tensor{tensor.FromInt32("i", []int64{3}, []int32{2, -1, 0})},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				on := b.konst(t, tensor.FromFloat32("", []int64{}, []float32{5}))
				off := b.konst(t, tensor.FromFloat32("", []int64{}, []float32{-1}))
				return []string{b.op(t, "OneHot", f32, []string{in[0], b.i32Scalar(t, 3), on, off}, map[string]any{"TI": tfType(t, tensor.Int32)})}
			},
			want: []tensor.Tensor{vals([]int64{3, 3}, -1, -1, 5, -1, -1, -1, 5, -1, -1).f32("")},
		},
		{
			name:  "TopKV2",
			feeds: []tensor.Tensor{vals([]int64{2, 4}, 1, 7, 3, 5, 0, -1, 8, 2).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				k := b.op(t, "TopKV2", f32, []string{in[0], b.i32Scalar(t, 2)}, nil)
				return []string{k, k + ":1"}
			},
			want: []tensor.Tensor{vals([]int64{2, 2}, 7, 5, 8, 2).f32(""), tensor.FromInt32("", []int64{2, 2}, []int32{1, 3, 2, 3})},
		},
		{
			name:  "GatherV2 ResourceGather",
			feeds: []tensor.Tensor{tensor.FromInt32("i", []int64{3}, []int32{2, 0, 2})},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				params := b.konst(t, x.f32(""))
				g := b.node("GatherV2", []string{params, in[0], b.i32Scalar(t, 1)}, map[string]any{"Tparams": tfType(t, f32), "Tindices": tfType(t, tensor.Int32), "Taxis": tfType(t, tensor.Int32)})
				b.variable(t, emb.f32(""), true)
				// ResourceGather reads the handle, not the value.
				h := b.nodes[len(b.nodes)-1].Input[0]
				rg := b.node("ResourceGather", []string{h, in[0]}, map[string]any{"dtype": tfType(t, f32), "Tindices": tfType(t, tensor.Int32)})
				return []string{g, rg}
			},
			want: []tensor.Tensor{gatherIdx([]int64{2, 3, 4}, func(i []int64) float64 { return x.at([]int64{i[0], []int64{2, 0, 2}[i[1]], i[2]}) }).f32(""),
				gatherIdx([]int64{3, 4}, func(i []int64) float64 { return emb.at([]int64{[]int64{2, 0, 2}[i[0]], i[1]}) }).f32("")},
		},
		{
			name:  "Pad PadV2 MirrorPad",
			feeds: []tensor.Tensor{vals([]int64{2, 3}, 1, 2, 3, 4, 5, 6).f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				p := b.konst(t, tensor.FromInt32("", []int64{2, 2}, []int32{1, 0, 0, 2}))
				return []string{b.op(t, "Pad", f32, []string{in[0], p}, nil),
					b.op(t, "PadV2", f32, []string{in[0], p, b.konst(t, tensor.FromFloat32("", []int64{}, []float32{9}))}, nil),
					b.op(t, "MirrorPad", f32, []string{in[0], p}, map[string]any{"mode": "REFLECT"})}
			},
			want: []tensor.Tensor{vals([]int64{3, 5}, 0, 0, 0, 0, 0, 1, 2, 3, 0, 0, 4, 5, 6, 0, 0).f32(""),
				vals([]int64{3, 5}, 9, 9, 9, 9, 9, 1, 2, 3, 9, 9, 4, 5, 6, 9, 9).f32(""),
				vals([]int64{3, 5}, 4, 5, 6, 5, 4, 1, 2, 3, 2, 1, 4, 5, 6, 5, 4).f32("")},
		},
		{
			name:  "IdentityN PlaceholderWithDefault",
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				d := b.node("PlaceholderWithDefault", []string{in[0]}, map[string]any{"dtype": tfType(t, f32)})
				n := b.node("IdentityN", []string{in[0], d}, nil)
				return []string{n + ":1"}
			},
			want: []tensor.Tensor{x.f32("")},
		},
	}
	for _, r := range []struct {
		op   string
		init float64
		f    func(a, b float64) float64
	}{
		{"Sum", 0, sum}, {"Max", math.Inf(-1), math.Max}, {"Min", math.Inf(1), math.Min},
		{"Prod", 1, func(a, b float64) float64 { return a * b }},
	} {
		cases = append(cases, opCase{
			name:  r.op,
			feeds: []tensor.Tensor{x.f32("x")},
			build: func(t testing.TB, b *graphBuilder, in []string) []string {
				return []string{b.op(t, r.op, f32, []string{in[0], b.i32(t, 0, 2)}, map[string]any{"keep_dims": true}),
					b.op(t, r.op, f32, []string{in[0], b.i32Scalar(t, -1)}, nil)}
			},
			want: []tensor.Tensor{reduce(x, []int{0, 2}, true, r.init, r.f).f32(""), reduce(x, []int{-1}, false, r.init, r.f).f32("")},
		})
	}
	mean := reduce(x, []int{1}, false, 0, sum).map1(func(v float64) float64 { return v / 3 })
	cases = append(cases, opCase{
		name:  "Mean",
		feeds: []tensor.Tensor{x.f32("x")},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.op(t, "Mean", f32, []string{in[0], b.i32(t, 1)}, nil)}
		},
		want: []tensor.Tensor{mean.f32("")},
	}, opCase{
		name:  "All Any",
		feeds: []tensor.Tensor{vals([]int64{2, 2}, 1, 0, 1, 1).as("x", tensor.Bool)},
		build: func(t testing.TB, b *graphBuilder, in []string) []string {
			return []string{b.node("All", []string{in[0], b.i32Scalar(t, 1)}, nil), b.node("Any", []string{in[0], b.i32Scalar(t, 0)}, nil)}
		},
		want: []tensor.Tensor{vals([]int64{2}, 0, 1).as("", tensor.Bool), vals([]int64{2}, 1, 1).as("", tensor.Bool)},
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { runOpCase(t, c) })
	}
}

// TestStridedSlice covers the masks: begin/end masks, negative strides,
// shrink, new axes and an ellipsis, each against index arithmetic.
func TestStridedSlice(t *testing.T) {
	x := rnd(30, -2, 2, 3, 4, 5)
	type ss struct {
		name                  string
		begin, end, strides   []int32
		bm, em, elm, nam, sam int
		shape                 []int64
		src                   func(i []int64) []int64
	}
	cases := []ss{
		{"x[1:3, :, 1:4:2]", []int32{1, 0, 1}, []int32{3, 0, 4}, []int32{1, 1, 2}, 0, 2, 0, 0, 0, []int64{2, 4, 2},
			func(i []int64) []int64 { return []int64{i[0] + 1, i[1], 1 + 2*i[2]} }},
		{"x[::-1, -1]", []int32{0, -1}, []int32{0, 0}, []int32{-1, 1}, 1, 1, 0, 0, 2, []int64{3, 5},
			func(i []int64) []int64 { return []int64{2 - i[0], 3, i[1]} }},
		{"x[..., 0]", []int32{0, 0}, []int32{0, 1}, []int32{1, 1}, 0, 0, 1, 0, 2, []int64{3, 4},
			func(i []int64) []int64 { return []int64{i[0], i[1], 0} }},
		{"x[:, tf.newaxis, 2, ::2]", []int32{0, 0, 2, 0}, []int32{0, 0, 3, 0}, []int32{1, 1, 1, 2}, 9, 9, 0, 2, 4, []int64{3, 1, 3},
			func(i []int64) []int64 { return []int64{i[0], 2, 2 * i[2]} }},
		{"x[1, ..., 1:-1]", []int32{1, 0, 1}, []int32{2, 0, -1}, []int32{1, 1, 1}, 0, 0, 2, 0, 1, []int64{4, 3},
			func(i []int64) []int64 { return []int64{1, i[0], i[1] + 1} }},
	}
	for _, c := range cases {
		want := gatherIdx(c.shape, func(i []int64) float64 { return x.at(c.src(i)) })
		attrs := map[string]any{"begin_mask": c.bm, "end_mask": c.em, "ellipsis_mask": c.elm, "new_axis_mask": c.nam, "shrink_axis_mask": c.sam, "Index": tfType(t, tensor.Int32)}
		t.Run(c.name, func(t *testing.T) {
			runOpCase(t, opCase{
				feeds: []tensor.Tensor{x.f32("x")},
				build: func(t testing.TB, b *graphBuilder, in []string) []string {
					return []string{b.op(t, "StridedSlice", tensor.Float32, []string{in[0], b.i32(t, c.begin...), b.i32(t, c.end...), b.i32(t, c.strides...)}, attrs)}
				},
				want: []tensor.Tensor{want.f32("")},
			})
		})
		// begin and end computed at run time (a loop's index is).
		t.Run(c.name+" fed begin and end", func(t *testing.T) {
			n := []int64{int64(len(c.begin))}
			runOpCase(t, opCase{
				feeds: []tensor.Tensor{x.f32("x"), tensor.FromInt32("begin", n, c.begin), tensor.FromInt32("end", n, c.end)},
				build: func(t testing.TB, b *graphBuilder, in []string) []string {
					return []string{b.op(t, "StridedSlice", tensor.Float32, []string{in[0], in[1], in[2], b.i32(t, c.strides...)}, attrs)}
				},
				want: []tensor.Tensor{want.f32("")},
			})
		})
	}
}
