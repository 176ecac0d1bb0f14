package tf2onnx

import (
	"fmt"
	"math"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/tensor"
)

var (
	toNCHW     = []int64{0, 3, 1, 2}
	toNHWC     = []int64{0, 2, 3, 1}
	hwioToOIHW = []int64{3, 2, 0, 1}
)

// spatial picks the H and W entries of a 4-element TF attribute (strides,
// dilations, ksize) laid out in data_format.
func spatial(v []int64, nchw bool) ([]int64, error) {
	if len(v) != 4 {
		return nil, fmt.Errorf("expected 4 values, got %v", v)
	}
	if nchw {
		return []int64{v[2], v[3]}, nil
	}
	return []int64{v[1], v[2]}, nil
}

// padAttrs maps TF padding to ONNX auto_pad/pads attributes.
func (c *converter) padArgs(n *node, nchw bool) ([]any, bool) {
	switch p := n.s("padding", "VALID"); p {
	case "SAME":
		return []any{onnxbuild.AttrString("auto_pad", "SAME_UPPER")}, true
	case "VALID":
		return []any{onnxbuild.AttrString("auto_pad", "VALID")}, true
	case "EXPLICIT":
		e := n.ilist("explicit_paddings", nil)
		if len(e) != 8 {
			c.unsupported(n, fmt.Sprintf("explicit_paddings %v must hold 8 values", e))
			return nil, false
		}
		h, w := 1, 2
		if nchw {
			h, w = 2, 3
		}
		return []any{onnxbuild.AttrInts("pads", []int64{e[2*h], e[2*w], e[2*h+1], e[2*w+1]})}, true
	default:
		c.unsupported(n, fmt.Sprintf("padding %q is not supported", p))
		return nil, false
	}
}

func (c *converter) conv2D(n *node, depthwise bool) {
	x, w := c.in(n, 0), c.in(n, 1)
	nchw := n.s("data_format", "NHWC") == "NCHW"
	strides, err1 := spatial(n.ilist("strides", []int64{1, 1, 1, 1}), nchw)
	dil, err2 := spatial(n.ilist("dilations", []int64{1, 1, 1, 1}), nchw)
	if err1 != nil || err2 != nil {
		c.unsupported(n, "strides and dilations must have 4 values")
		return
	}
	pad, ok := c.padArgs(n, nchw)
	if !ok {
		return
	}
	args := []any{onnxbuild.AttrInts("strides", strides), onnxbuild.AttrInts("dilations", dil)}
	args = append(args, pad...)
	var weight string
	if depthwise {
		if w.konst == nil || len(w.konst.Shape) != 4 {
			c.unsupported(n, "the filter must be a constant or variable of rank 4")
			return
		}
		s := w.konst.Shape
		r := c.Op1("Reshape", w.name, c.I64Const([]int64{s[0], s[1], 1, s[2] * s[3]}))
		weight = c.Op1("Transpose", r, onnxbuild.AttrInts("perm", hwioToOIHW))
		args = append(args, onnxbuild.AttrInt("group", s[2]))
	} else {
		weight = c.Op1("Transpose", w.name, onnxbuild.AttrInts("perm", hwioToOIHW))
	}
	in := x.name
	if !nchw {
		in = c.Op1("Transpose", in, onnxbuild.AttrInts("perm", toNCHW))
	}
	out := c.Op1("Conv", append([]any{in, weight}, args...)...)
	if !nchw {
		out = c.Op1("Transpose", out, onnxbuild.AttrInts("perm", toNHWC))
	}
	c.set(n, 0, &value{name: out, dtype: x.dtype, rank: 4})
}

// conv2DTranspose translates Conv2DBackpropInput (Keras Conv2DTranspose):
// inputs are the output size, the HWIO filter (O = the result's channels)
// and the gradient-side input.
func (c *converter) conv2DTranspose(n *node) {
	sizes, w, x := c.in(n, 0), c.in(n, 1), c.in(n, 2)
	nchw := n.s("data_format", "NHWC") == "NCHW"
	strides, err1 := spatial(n.ilist("strides", []int64{1, 1, 1, 1}), nchw)
	dil, err2 := spatial(n.ilist("dilations", []int64{1, 1, 1, 1}), nchw)
	outSize, ok := ints(sizes.konst)
	if err1 != nil || err2 != nil || !ok || len(outSize) != 4 {
		c.unsupported(n, "the output size must be a constant of 4 values, strides and dilations 4 values each")
		return
	}
	hw, _ := spatial(outSize, nchw)
	args := []any{onnxbuild.AttrInts("strides", strides), onnxbuild.AttrInts("dilations", dil), onnxbuild.AttrInts("output_shape", hw)}
	switch p := n.s("padding", "VALID"); p {
	case "SAME":
		args = append(args, onnxbuild.AttrString("auto_pad", "SAME_UPPER"))
	case "VALID":
		args = append(args, onnxbuild.AttrString("auto_pad", "VALID"))
	default:
		c.unsupported(n, fmt.Sprintf("padding %q is not supported", p))
		return
	}
	in := x.name
	if !nchw {
		in = c.Op1("Transpose", in, onnxbuild.AttrInts("perm", toNCHW))
	}
	// ConvTranspose wants [C_in, C_out, kH, kW]; the TF filter is
	// [kH, kW, C_out, C_in].
	weight := c.Op1("Transpose", w.name, onnxbuild.AttrInts("perm", hwioToOIHW))
	out := c.Op1("ConvTranspose", append([]any{in, weight}, args...)...)
	if !nchw {
		out = c.Op1("Transpose", out, onnxbuild.AttrInts("perm", toNHWC))
	}
	c.set(n, 0, &value{name: out, dtype: x.dtype, rank: 4})
}

func (c *converter) pool(n *node) {
	x := c.in(n, 0)
	nchw := n.s("data_format", "NHWC") == "NCHW"
	k, err1 := spatial(n.ilist("ksize", nil), nchw)
	s, err2 := spatial(n.ilist("strides", nil), nchw)
	if err1 != nil || err2 != nil {
		c.unsupported(n, "ksize and strides must have 4 values")
		return
	}
	pad, ok := c.padArgs(n, nchw)
	if !ok {
		return
	}
	op := "MaxPool"
	if n.op == "AvgPool" {
		op = "AveragePool" // count_include_pad=0, as TF averages over real cells
	}
	in := x.name
	if !nchw {
		in = c.Op1("Transpose", in, onnxbuild.AttrInts("perm", toNCHW))
	}
	out := c.Op1(op, append([]any{in, onnxbuild.AttrInts("kernel_shape", k), onnxbuild.AttrInts("strides", s)}, pad...)...)
	if !nchw {
		out = c.Op1("Transpose", out, onnxbuild.AttrInts("perm", toNHWC))
	}
	c.set(n, 0, &value{name: out, dtype: x.dtype, rank: 4})
}

// batchNorm translates inference-mode FusedBatchNorm as
// y = x * scale/sqrt(var+eps) + (offset - mean*scale/sqrt(var+eps)).
func (c *converter) batchNorm(n *node) {
	if n.b("is_training", true) {
		c.unsupported(n, "is_training=true (batch statistics) is not served; export the model in inference mode")
		return
	}
	x, scale, offset, mean, variance := c.in(n, 0), c.in(n, 1), c.in(n, 2), c.in(n, 3), c.in(n, 4)
	eps := c.scalar(n, scale.dtype, float64(n.f("epsilon", 0.0001)))
	mul := c.Op1("Div", scale.name, c.Op1("Sqrt", c.Op1("Add", variance.name, eps)))
	add := c.Op1("Sub", offset.name, c.Op1("Mul", mean.name, mul))
	if n.s("data_format", "NHWC") == "NCHW" {
		axes := c.I64Const([]int64{1, 2})
		mul = c.Op1("Unsqueeze", mul, axes)
		add = c.Op1("Unsqueeze", add, axes)
	}
	xn := x.name
	if x.dtype != scale.dtype {
		xn = c.Op1("Cast", xn, onnxbuild.AttrInt("to", onnxbuild.Type(scale.dtype)))
	}
	y := c.Op1("Add", c.Op1("Mul", xn, mul), add)
	if x.dtype != scale.dtype {
		y = c.Op1("Cast", y, onnxbuild.AttrInt("to", onnxbuild.Type(x.dtype)))
	}
	c.set(n, 0, &value{name: y, dtype: x.dtype, rank: x.rank})
	// Inference mode passes the moving statistics through.
	c.set(n, 1, mean)
	c.set(n, 2, variance)
}

// stridedSlice translates StridedSlice with constant begin, end and
// strides and any masks: one Slice over the sliced axes (axes after an
// ellipsis counted from the end), then Squeeze for shrink_axis_mask and
// Unsqueeze for new_axis_mask.
func (c *converter) stridedSlice(n *node) {
	x := c.in(n, 0)
	bv, ev := c.in(n, 1), c.in(n, 2)
	begin, okB := ints(bv.konst)
	end, okE := ints(ev.konst)
	strides, ok3 := ints(c.in(n, 3).konst)
	if !ok3 || okB && len(begin) != len(strides) || okE && len(end) != len(strides) {
		c.unsupported(n, "strides must be a constant, begin and end of its length")
		return
	}
	k := len(strides)
	// A begin or end element is a constant, or (inside loops, where the
	// index is a loop variable) a [1] slice of the vector computed at run
	// time.
	type index struct {
		v    int64
		name string // "" for the constant v
	}
	vec := map[*value]string{}
	elem := func(consts []int64, ok bool, v *value, i int) index {
		if ok {
			return index{v: consts[i]}
		}
		if vec[v] == "" {
			vec[v] = c.as1D(v)
		}
		return index{name: c.Op1("Slice", vec[v], c.I64Const([]int64{int64(i)}), c.I64Const([]int64{int64(i + 1)}))}
	}
	bm, em := n.i("begin_mask", 0), n.i("end_mask", 0)
	elm, nam, sam := n.i("ellipsis_mask", 0), n.i("new_axis_mask", 0), n.i("shrink_axis_mask", 0)
	bit := func(m int64, i int) bool { return m&(1<<uint(i)) != 0 }
	ell := -1
	for i := range k {
		if bit(elm, i) {
			if ell >= 0 {
				c.unsupported(n, "more than one ellipsis")
				return
			}
			ell = i
		}
	}
	var starts, ends []index
	var axes, steps, squeeze, newAxes []int64
	spec := func(i int, axis int64) {
		st := strides[i]
		if st == 0 {
			c.fail(fmt.Errorf("node %q: StridedSlice stride 0", n.name))
			return
		}
		var b, e index
		if bit(sam, i) {
			b = elem(begin, okB, bv, i)
			if b.name == "" {
				e = index{v: b.v + 1}
				if b.v == -1 {
					e.v = math.MaxInt64
				}
			} else {
				last := c.Op1("Equal", b.name, c.I64Const([]int64{-1}))
				e.name = c.Op1("Where", last, c.I64Const([]int64{math.MaxInt64}), c.Op1("Add", b.name, c.I64Const([]int64{1})))
			}
			st = 1
			squeeze = append(squeeze, axis)
		} else {
			if bit(bm, i) {
				b = index{v: 0}
				if st < 0 {
					b.v = math.MaxInt64
				}
			} else {
				b = elem(begin, okB, bv, i)
			}
			if bit(em, i) {
				e = index{v: math.MaxInt64}
				if st < 0 {
					e.v = math.MinInt64
				}
			} else {
				e = elem(end, okE, ev, i)
			}
		}
		starts, ends, axes, steps = append(starts, b), append(ends, e), append(axes, axis), append(steps, st)
	}
	// Specs before the ellipsis (all of them when there is none) count
	// input axes from 0; output positions count kept and new axes.
	last := k
	if ell >= 0 {
		last = ell
	}
	var ia, outPos int64
	for i := 0; i < last; i++ {
		if bit(nam, i) {
			newAxes = append(newAxes, outPos)
			outPos++
			continue
		}
		spec(i, ia)
		if !bit(sam, i) {
			outPos++
		}
		ia++
	}
	if ell >= 0 {
		ia = -1
		for i := k - 1; i > ell; i-- {
			if bit(nam, i) {
				c.unsupported(n, "new_axis_mask after an ellipsis is not supported")
				return
			}
			spec(i, ia)
			ia--
		}
	}
	pack := func(xs []index) string {
		consts := make([]int64, len(xs))
		var parts []string
		dynamic := false
		for i, x := range xs {
			consts[i] = x.v
			if x.name != "" {
				dynamic = true
				parts = append(parts, x.name)
			} else {
				parts = append(parts, c.I64Const([]int64{x.v}))
			}
		}
		if !dynamic {
			return c.I64Const(consts)
		}
		return c.Op1("Concat", parts, onnxbuild.AttrInt("axis", 0))
	}
	out := x.name
	if len(axes) > 0 {
		out = c.Op1("Slice", x.name, pack(starts), pack(ends), c.I64Const(axes), c.I64Const(steps))
	}
	if len(squeeze) > 0 {
		out = c.Op1("Squeeze", out, c.I64Const(squeeze))
	}
	if len(newAxes) > 0 {
		out = c.Op1("Unsqueeze", out, c.I64Const(newAxes))
	}
	c.set(n, 0, &value{name: out, dtype: x.dtype, rank: addRank(x.rank, len(newAxes)-len(squeeze))})
}

// resize translates ResizeBilinear / ResizeNearestNeighbor (NHWC, the size
// input holding the new height and width) to ONNX Resize, choosing the
// coordinate transformation that matches TensorFlow's align_corners and
// half_pixel_centers.
func (c *converter) resize(n *node) {
	x, size := c.in(n, 0), c.in(n, 1)
	align, half := n.b("align_corners", false), n.b("half_pixel_centers", false)
	bilinear := n.op == "ResizeBilinear"
	args := []any{}
	switch {
	case align && half:
		c.unsupported(n, "align_corners and half_pixel_centers together are invalid")
		return
	case align:
		args = append(args, onnxbuild.AttrString("coordinate_transformation_mode", "align_corners"))
	case half && bilinear:
		args = append(args, onnxbuild.AttrString("coordinate_transformation_mode", "half_pixel"))
	case half:
		args = append(args, onnxbuild.AttrString("coordinate_transformation_mode", "tf_half_pixel_for_nn"))
	default:
		args = append(args, onnxbuild.AttrString("coordinate_transformation_mode", "asymmetric"))
	}
	if bilinear {
		args = append(args, onnxbuild.AttrString("mode", "linear"))
	} else {
		args = append(args, onnxbuild.AttrString("mode", "nearest"))
		if align {
			args = append(args, onnxbuild.AttrString("nearest_mode", "round_prefer_ceil"))
		} else {
			args = append(args, onnxbuild.AttrString("nearest_mode", "floor"))
		}
	}
	// Output sizes in NCHW: N and C from the input, H and W from size.
	src := x.name
	if bilinear && x.dtype != tensor.Float32 {
		// TF's bilinear resize returns float32 whatever the input.
		src = c.Op1("Cast", src, onnxbuild.AttrInt("to", onnxbuild.Type(tensor.Float32)))
	}
	in := c.Op1("Transpose", src, onnxbuild.AttrInts("perm", toNCHW))
	nc := c.Op1("Slice", c.Op1("Shape", in), c.I64Const([]int64{0}), c.I64Const([]int64{2}))
	sizes := c.Op1("Concat", nc, c.asInt64(size), onnxbuild.AttrInt("axis", 0))
	out := c.Op1("Resize", append([]any{in, "", "", sizes}, args...)...)
	out = c.Op1("Transpose", out, onnxbuild.AttrInts("perm", toNHWC))
	dt := x.dtype
	if bilinear {
		dt = tensor.Float32
	}
	c.set(n, 0, &value{name: out, dtype: dt, rank: 4})
}
