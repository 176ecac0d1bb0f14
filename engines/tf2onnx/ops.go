package tf2onnx

import (
	"fmt"
	"math"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// Attribute readers. TF2 exports strip attributes equal to their OpDef
// default, so each reader takes the default TensorFlow's ops.pbtxt declares.

func (n *node) s(name, def string) string {
	if a, ok := n.attr[name]; ok {
		return string(a.GetS())
	}
	return def
}

func (n *node) i(name string, def int64) int64 {
	if a, ok := n.attr[name]; ok {
		return a.GetI()
	}
	return def
}

func (n *node) f(name string, def float32) float32 {
	if a, ok := n.attr[name]; ok {
		return a.GetF()
	}
	return def
}

func (n *node) b(name string, def bool) bool {
	if a, ok := n.attr[name]; ok {
		return a.GetB()
	}
	return def
}

func (n *node) ilist(name string, def []int64) []int64 {
	if a, ok := n.attr[name]; ok && a.GetList() != nil {
		return a.GetList().I
	}
	return def
}

func (n *node) dtype(name string, def tensor.DType) tensor.DType {
	if a, ok := n.attr[name]; ok {
		if d, ok := savedmodel.DTypeOf(a.GetType()); ok {
			return d
		}
		return tensor.Invalid
	}
	return def
}

// rankHint reads the rank of output 0 from the _output_shapes attribute TF1
// graphs carry; -1 when absent or unknown.
func (n *node) rankHint() int {
	a, ok := n.attr["_output_shapes"]
	if !ok || a.GetList() == nil || len(a.GetList().Shape) == 0 {
		return -1
	}
	s := a.GetList().Shape[0]
	if s.UnknownRank {
		return -1
	}
	return len(s.Dim)
}

// maxFold bounds the constants folded at translation time.
const maxFold = 1 << 16

// reshapeDims resolves a Reshape target (one -1 allowed) for n elements.
func reshapeDims(n int64, dims []int64) ([]int64, bool) {
	out := append([]int64{}, dims...)
	known, free := int64(1), -1
	for i, d := range out {
		switch {
		case d == -1 && free < 0:
			free = i
		case d < 0:
			return nil, false
		default:
			known *= d
		}
	}
	if free >= 0 {
		if known == 0 || n%known != 0 {
			return nil, false
		}
		out[free] = n / known
		known *= out[free]
	}
	return out, known == n
}

// maxSplits bounds the outputs of Split, SplitV and Unpack.
const maxSplits = 1 << 16

// unsupportedWhy explains ops that are known and deliberately not translated.
var unsupportedWhy = map[string]string{
	"Assign":              "stateful variable updates are not served",
	"AssignAdd":           "stateful variable updates are not served",
	"AssignSub":           "stateful variable updates are not served",
	"AssignVariableOp":    "stateful variable updates are not served",
	"AssignAddVariableOp": "stateful variable updates are not served",
	"AssignSubVariableOp": "stateful variable updates are not served",
	"TRTEngineOp":         "a TensorRT engine can only run inside TensorFlow; export the model without TF-TRT",
	"LookupTableInsertV2": "writes a lookup table when served; translated tables hold what the SavedModel fills them with at load",
	"LookupTableRemoveV2": "writes a lookup table when served; translated tables hold what the SavedModel fills them with at load",
}

// translateConst translates Const.
func (c *converter) translateConst(n *node) {
	t, err := savedmodel.TensorFromProto(n.attr["value"].GetTensor())
	if err != nil {
		c.fail(fmt.Errorf("constant %q: %w", n.name, err))
		return
	}
	c.set(n, 0, c.constValue(t))
}

// translateIdentity translates Identity, StopGradient, Snapshot, PreventGradient, CheckNumerics, EnsureShape, PlaceholderWithDefault.
func (c *converter) translateIdentity(n *node) {
	c.set(n, 0, c.in(n, 0))
}

// translateIdentityN translates IdentityN.
func (c *converter) translateIdentityN(n *node) {
	for i := range n.inputs {
		c.set(n, i, c.in(n, i))
	}
}

// translateNoOp translates NoOp.
func (c *converter) translateNoOp(n *node) {
	c.set(n, 0, &value{name: "_noop", rank: -1})
}

// translateVariable translates VariableV2, Variable, VarHandleOp.
func (c *converter) translateVariable(n *node) {
	t, err := c.model.ReadVariable(n.name, c.keys)
	if err != nil {
		c.fail(err)
		return
	}
	t.Name = ""
	c.set(n, 0, c.constValue(t))
}

// translateReadVariableOp translates ReadVariableOp.
func (c *converter) translateReadVariableOp(n *node) {
	c.set(n, 0, c.in(n, 0))
}

// translateGather translates ResourceGather, GatherV2, Gather.
func (c *converter) translateGather(n *node) {
	params, idx := c.in(n, 0), c.in(n, 1)
	if n.i("batch_dims", 0) != 0 {
		c.unsupported(n, "batch_dims > 0 is not supported")
		return
	}
	axis := int64(0)
	if n.op == "GatherV2" {
		a, ok := ints(c.in(n, 2).konst)
		if !ok || len(a) != 1 {
			c.unsupported(n, "a non-constant axis is not supported")
			return
		}
		axis = a[0]
	}
	c.set(n, 0, &value{name: c.Op1("Gather", params.name, idx.name, onnxbuild.AttrInt("axis", axis)), dtype: params.dtype, rank: -1})
}

// translateMatMul translates MatMul.
func (c *converter) translateMatMul(n *node) {
	a, b := c.in(n, 0), c.in(n, 1)
	an, bn := a.name, b.name
	if n.b("transpose_a", false) {
		an = c.Op1("Transpose", an, onnxbuild.AttrInts("perm", []int64{1, 0}))
	}
	if n.b("transpose_b", false) {
		bn = c.Op1("Transpose", bn, onnxbuild.AttrInts("perm", []int64{1, 0}))
	}
	c.set(n, 0, &value{name: c.Op1("MatMul", an, bn), dtype: a.dtype, rank: 2})
}

// translateBatchMatMul translates BatchMatMul, BatchMatMulV2, BatchMatMulV3.
func (c *converter) translateBatchMatMul(n *node) {
	a, b := c.in(n, 0), c.in(n, 1)
	an, bn := a.name, b.name
	if n.b("adj_x", false) {
		an = c.Op1("Einsum", an, onnxbuild.AttrString("equation", "...ij->...ji"))
	}
	if n.b("adj_y", false) {
		bn = c.Op1("Einsum", bn, onnxbuild.AttrString("equation", "...ij->...ji"))
	}
	v := &value{name: c.Op1("MatMul", an, bn), dtype: a.dtype, rank: maxRank(a, b)}
	if n.op == "BatchMatMulV3" {
		if to := n.dtype("Tout", a.dtype); to != a.dtype {
			v = &value{name: c.Op1("Cast", v.name, onnxbuild.AttrInt("to", onnxbuild.Type(to))), dtype: to, rank: v.rank}
		}
	}
	c.set(n, 0, v)
}

// translateEinsum translates Einsum.
func (c *converter) translateEinsum(n *node) {
	var ins []string
	for i := range n.inputs {
		ins = append(ins, c.in(n, i).name)
	}
	c.set(n, 0, &value{name: c.Op1("Einsum", ins, onnxbuild.AttrString("equation", n.s("equation", ""))), dtype: c.in(n, 0).dtype, rank: -1})
}

// translateBiasAdd translates BiasAdd, BiasAddV1.
func (c *converter) translateBiasAdd(n *node) {
	x, b := c.in(n, 0), c.in(n, 1)
	bn := b.name
	if n.s("data_format", "NHWC") == "NCHW" {
		r := x.rank
		if r < 0 {
			r = n.rankHint()
		}
		if r < 0 {
			r = 4
		}
		if r > 2 {
			axes := make([]int64, r-2)
			for i := range axes {
				axes[i] = int64(i + 1)
			}
			bn = c.Op1("Unsqueeze", bn, c.I64Const(axes))
		}
	}
	c.set(n, 0, &value{name: c.Op1("Add", x.name, bn), dtype: x.dtype, rank: x.rank})
}

// translateAddN translates AddN.
func (c *converter) translateAddN(n *node) {
	var ins []string
	for i := range n.inputs {
		ins = append(ins, c.in(n, i).name)
	}
	c.set(n, 0, &value{name: c.Op1("Sum", ins), dtype: c.in(n, 0).dtype, rank: c.in(n, 0).rank})
}

// translateDivNoNan translates DivNoNan.
func (c *converter) translateDivNoNan(n *node) {
	x, y := c.in(n, 0), c.in(n, 1)
	zero := c.scalar(n, y.dtype, 0)
	isZero := c.Op1("Equal", y.name, zero)
	div := c.Op1("Div", x.name, y.name)
	c.set(n, 0, &value{name: c.Op1("Where", isZero, zero, div), dtype: x.dtype, rank: maxRank(x, y)})
}

// translateSquare translates Square.
func (c *converter) translateSquare(n *node) {
	x := c.in(n, 0)
	c.set(n, 0, c.same(n, c.Op1("Mul", x.name, x.name)))
}

// translateSquaredDifference translates SquaredDifference.
func (c *converter) translateSquaredDifference(n *node) {
	x, y := c.in(n, 0), c.in(n, 1)
	d := c.Op1("Sub", x.name, y.name)
	c.set(n, 0, &value{name: c.Op1("Mul", d, d), dtype: x.dtype, rank: maxRank(x, y)})
}

// translateRsqrt translates Rsqrt.
func (c *converter) translateRsqrt(n *node) {
	x := c.in(n, 0)
	c.set(n, 0, c.same(n, c.Op1("Reciprocal", c.Op1("Sqrt", x.name))))
}

// translateErfc translates Erfc as 1 - Erf(x): ONNX has Erf only. It loses
// the relative precision of erfc's far tail (x > 4 or so), where gelu
// multiplies it by x/2 anyway.
func (c *converter) translateErfc(n *node) {
	x := c.in(n, 0)
	c.set(n, 0, c.same(n, c.Op1("Sub", c.scalar(n, x.dtype, 1), c.Op1("Erf", x.name))))
}

// translateNotEqual translates NotEqual.
func (c *converter) translateNotEqual(n *node) {
	a, b := c.in(n, 0), c.in(n, 1)
	c.set(n, 0, &value{name: c.Op1("Not", c.Op1("Equal", a.name, b.name)), dtype: tensor.Bool, rank: maxRank(a, b)})
}

// translateFloorDiv translates FloorDiv.
func (c *converter) translateFloorDiv(n *node) {
	a, b := c.in(n, 0), c.in(n, 1)
	if isFloat(a.dtype) {
		c.set(n, 0, &value{name: c.Op1("Floor", c.Op1("Div", a.name, b.name)), dtype: a.dtype, rank: maxRank(a, b)})
		return
	}
	c.unsupported(n, "integer FloorDiv is not translated")
}

// translateFloorMod translates FloorMod.
func (c *converter) translateFloorMod(n *node) {
	a, b := c.in(n, 0), c.in(n, 1)
	if isFloat(a.dtype) {
		c.unsupported(n, "floating FloorMod is not translated")
		return
	}
	c.set(n, 0, &value{name: c.Op1("Mod", a.name, b.name, onnxbuild.AttrInt("fmod", 0)), dtype: a.dtype, rank: maxRank(a, b)})
}

// translateCast translates Cast.
func (c *converter) translateCast(n *node) {
	x := c.in(n, 0)
	to := n.dtype("DstT", tensor.Float32)
	if to == tensor.Invalid {
		c.unsupported(n, "the target dtype is not supported")
		return
	}
	c.set(n, 0, &value{name: c.Op1("Cast", x.name, onnxbuild.AttrInt("to", onnxbuild.Type(to))), dtype: to, rank: x.rank})
}

// translateClipByValue translates ClipByValue.
func (c *converter) translateClipByValue(n *node) {
	x, lo, hi := c.in(n, 0), c.in(n, 1), c.in(n, 2)
	c.set(n, 0, c.same(n, c.Op1("Max", c.Op1("Min", x.name, hi.name), lo.name)))
}

// translateRelu6 translates Relu6.
func (c *converter) translateRelu6(n *node) {
	x := c.in(n, 0)
	c.set(n, 0, c.same(n, c.Op1("Clip", x.name, c.scalar(n, x.dtype, 0), c.scalar(n, x.dtype, 6))))
}

// translateLeakyRelu translates LeakyRelu.
func (c *converter) translateLeakyRelu(n *node) {
	x := c.in(n, 0)
	c.set(n, 0, c.same(n, c.Op1("LeakyRelu", x.name, onnxbuild.AttrFloat("alpha", n.f("alpha", 0.2)))))
}

// translateSoftmax translates Softmax, LogSoftmax.
func (c *converter) translateSoftmax(n *node) {
	x := c.in(n, 0)
	c.set(n, 0, c.same(n, c.Op1(n.op, x.name, onnxbuild.AttrInt("axis", -1))))
}

// translatePad translates Pad, PadV2, MirrorPad.
func (c *converter) translatePad(n *node) {
	x, p := c.in(n, 0), c.in(n, 1)
	pads := c.Op1("Reshape", c.Op1("Transpose", c.asInt64(p), onnxbuild.AttrInts("perm", []int64{1, 0})), c.I64Const([]int64{-1}))
	args := []any{x.name, pads}
	switch n.op {
	case "PadV2":
		args = append(args, c.in(n, 2).name)
	case "MirrorPad":
		if mode := n.s("mode", ""); mode != "REFLECT" {
			c.unsupported(n, fmt.Sprintf("mode %s has no ONNX equivalent (only REFLECT)", mode))
			return
		}
		args = append(args, onnxbuild.AttrString("mode", "reflect"))
	}
	c.set(n, 0, &value{name: c.Op1("Pad", args...), dtype: x.dtype, rank: x.rank})
}

// translateReshape translates Reshape.
func (c *converter) translateReshape(n *node) {
	x, s := c.in(n, 0), c.in(n, 1)
	r := -1
	if is, ok := ints(s.konst); ok {
		r = len(is)
		// Fold small constants: ParseExample defaults and shape
		// arithmetic read them as constants.
		if x.konst != nil && x.konst.NumElements() <= maxFold {
			if shape, ok := reshapeDims(x.konst.NumElements(), is); ok {
				t := *x.konst
				t.Shape = shape
				c.set(n, 0, c.constValue(t))
				return
			}
		}
	}
	// allowzero: a 0 in TensorFlow's shape is a dimension of size 0, not
	// ONNX's default "copy the input's dimension".
	c.set(n, 0, &value{name: c.Op1("Reshape", x.name, c.as1D(s), onnxbuild.AttrInt("allowzero", 1)), dtype: x.dtype, rank: r})
}

// translateShape translates Shape, Size, Rank.
func (c *converter) translateShape(n *node) {
	x := c.in(n, 0)
	out := n.dtype("out_type", tensor.Int32)
	var v string
	r := 1
	switch n.op {
	case "Shape":
		v = c.Op1("Shape", x.name)
	case "Size":
		v, r = c.Op1("Size", x.name), 0
	case "Rank":
		v, r = c.Op1("Size", c.Op1("Shape", x.name)), 0
		out = tensor.Int32
	}
	if out != tensor.Int64 {
		v = c.Op1("Cast", v, onnxbuild.AttrInt("to", onnxbuild.Type(out)))
	}
	c.set(n, 0, &value{name: v, dtype: out, rank: r})
}

// translateSqueeze translates Squeeze.
func (c *converter) translateSqueeze(n *node) {
	x := c.in(n, 0)
	dims := n.ilist("squeeze_dims", nil)
	if len(dims) == 0 {
		c.set(n, 0, &value{name: c.Op1("Squeeze", x.name), dtype: x.dtype, rank: -1})
		return
	}
	c.set(n, 0, &value{name: c.Op1("Squeeze", x.name, c.I64Const(dims)), dtype: x.dtype, rank: addRank(x.rank, -len(dims))})
}

// translateExpandDims translates ExpandDims.
func (c *converter) translateExpandDims(n *node) {
	x, a := c.in(n, 0), c.in(n, 1)
	c.set(n, 0, &value{name: c.Op1("Unsqueeze", x.name, c.as1D(a)), dtype: x.dtype, rank: addRank(x.rank, 1)})
}

// translateTranspose translates Transpose.
func (c *converter) translateTranspose(n *node) {
	x, p := c.in(n, 0), c.in(n, 1)
	perm, ok := ints(p.konst)
	if !ok {
		c.unsupported(n, "a non-constant permutation is not supported")
		return
	}
	// tf.tensordot transposes by the identity when its axes are already
	// last (every Keras Dense on 3-D activations): no copy.
	identity := x.rank == len(perm)
	for i, d := range perm {
		identity = identity && d == int64(i)
	}
	if identity {
		c.set(n, 0, x)
		return
	}
	c.set(n, 0, &value{name: c.Op1("Transpose", x.name, onnxbuild.AttrInts("perm", perm)), dtype: x.dtype, rank: len(perm)})
}

// translateConcat translates ConcatV2, Concat.
func (c *converter) translateConcat(n *node) {
	k := len(n.inputs) - 1
	axisIdx, first := k, 0
	if n.op == "Concat" {
		axisIdx, first = 0, 1
	}
	axis, ok := ints(c.in(n, axisIdx).konst)
	if !ok || len(axis) != 1 {
		c.unsupported(n, "a non-constant axis is not supported")
		return
	}
	var ins []string
	var konsts []tensor.Tensor
	for i := first; i < first+k; i++ {
		v := c.in(n, i)
		ins = append(ins, v.name)
		if v.konst != nil && len(v.konst.Shape) == 1 && (axis[0] == 0 || axis[0] == -1) {
			konsts = append(konsts, *v.konst)
		}
	}
	x := c.in(n, first)
	// Fold vectors of constants: shape arithmetic (tf.tensordot's
	// permutation, Keras Dense on 3-D inputs) must stay constant for the
	// ops that read it (Transpose's perm).
	if len(konsts) == k {
		if t, err := tensor.Concat(konsts); err == nil && t.NumElements() <= maxFold {
			c.set(n, 0, c.constValue(t))
			return
		}
	}
	c.set(n, 0, &value{name: c.Op1("Concat", ins, onnxbuild.AttrInt("axis", axis[0])), dtype: x.dtype, rank: x.rank})
}

// translatePack translates Pack.
func (c *converter) translatePack(n *node) {
	axis := n.i("axis", 0)
	ax := c.I64Const([]int64{axis})
	var ins []string
	for i := range n.inputs {
		ins = append(ins, c.Op1("Unsqueeze", c.in(n, i).name, ax))
	}
	x := c.in(n, 0)
	c.set(n, 0, &value{name: c.Op1("Concat", ins, onnxbuild.AttrInt("axis", axis)), dtype: x.dtype, rank: addRank(x.rank, 1)})
}

// translateUnpack translates Unpack.
func (c *converter) translateUnpack(n *node) {
	x := c.in(n, 0)
	num, axis := n.i("num", 0), n.i("axis", 0)
	if num <= 0 || num > maxSplits {
		c.unsupported(n, fmt.Sprintf("num must be between 1 and %d", maxSplits))
		return
	}
	parts := c.OpN("Split", int(num), x.name, onnxbuild.AttrInt("axis", axis), onnxbuild.AttrInt("num_outputs", num))
	ax := c.I64Const([]int64{axis})
	for i, p := range parts {
		c.set(n, i, &value{name: c.Op1("Squeeze", p, ax), dtype: x.dtype, rank: addRank(x.rank, -1)})
	}
}

// translateSplit translates Split.
func (c *converter) translateSplit(n *node) {
	a, x := c.in(n, 0), c.in(n, 1)
	axis, ok := ints(a.konst)
	num := n.i("num_split", 1)
	if !ok || len(axis) != 1 || num <= 0 || num > maxSplits {
		c.unsupported(n, "a non-constant axis is not supported")
		return
	}
	for i, p := range c.OpN("Split", int(num), x.name, onnxbuild.AttrInt("axis", axis[0]), onnxbuild.AttrInt("num_outputs", num)) {
		c.set(n, i, &value{name: p, dtype: x.dtype, rank: x.rank})
	}
}

// translateSplitV translates SplitV.
func (c *converter) translateSplitV(n *node) {
	x, s, a := c.in(n, 0), c.in(n, 1), c.in(n, 2)
	sizes, ok1 := ints(s.konst)
	axis, ok2 := ints(a.konst)
	if !ok1 || !ok2 || len(axis) != 1 || len(sizes) > maxSplits {
		c.unsupported(n, "non-constant sizes or axis are not supported")
		return
	}
	splitIn := c.I64Const(sizes)
	for _, sz := range sizes {
		if sz < 0 {
			// One size is inferred: sizes = dim - sum(others).
			var known int64
			for _, z := range sizes {
				if z >= 0 {
					known += z
				}
			}
			dim := c.Op1("Gather", c.Op1("Shape", x.name), c.I64Const([]int64{axis[0]}))
			rest := c.Op1("Sub", dim, c.I64Const([]int64{known}))
			var pieces []string
			for _, z := range sizes {
				if z < 0 {
					pieces = append(pieces, rest)
				} else {
					pieces = append(pieces, c.I64Const([]int64{z}))
				}
			}
			splitIn = c.Op1("Concat", pieces, onnxbuild.AttrInt("axis", 0))
			break
		}
	}
	for i, p := range c.OpN("Split", len(sizes), x.name, splitIn, onnxbuild.AttrInt("axis", axis[0])) {
		c.set(n, i, &value{name: p, dtype: x.dtype, rank: x.rank})
	}
}

// translateSlice translates Slice.
func (c *converter) translateSlice(n *node) {
	x, b, s := c.in(n, 0), c.in(n, 1), c.in(n, 2)
	begin, size := c.as1D(b), c.as1D(s)
	minus1 := c.Op1("Equal", size, c.I64Const([]int64{-1}))
	end := c.Op1("Where", minus1, c.I64Const([]int64{math.MaxInt64}), c.Op1("Add", begin, size))
	c.set(n, 0, &value{name: c.Op1("Slice", x.name, begin, end), dtype: x.dtype, rank: x.rank})
}

// translateTile translates Tile.
func (c *converter) translateTile(n *node) {
	x, m := c.in(n, 0), c.in(n, 1)
	c.set(n, 0, &value{name: c.Op1("Tile", x.name, c.as1D(m)), dtype: x.dtype, rank: x.rank})
}

// translateFill translates Fill.
func (c *converter) translateFill(n *node) {
	d, v := c.in(n, 0), c.in(n, 1)
	c.set(n, 0, &value{name: c.Op1("Expand", v.name, c.as1D(d)), dtype: v.dtype, rank: -1})
}

// translateRange translates Range.
func (c *converter) translateRange(n *node) {
	s, l, d := c.in(n, 0), c.in(n, 1), c.in(n, 2)
	c.set(n, 0, &value{name: c.Op1("Range", s.name, l.name, d.name), dtype: s.dtype, rank: 1})
}

// translateZerosOnesLike translates ZerosLike, OnesLike.
func (c *converter) translateZerosOnesLike(n *node) {
	x := c.in(n, 0)
	f := 0.0
	if n.op == "OnesLike" {
		f = 1
	}
	c.set(n, 0, &value{name: c.Op1("Expand", c.scalar(n, x.dtype, f), c.Op1("Shape", x.name)), dtype: x.dtype, rank: x.rank})
}

// translateSelect translates Select, SelectV2.
func (c *converter) translateSelect(n *node) {
	cond, t, e := c.in(n, 0), c.in(n, 1), c.in(n, 2)
	cn := cond.name
	if n.op == "Select" && cond.rank == 1 && t.rank > 1 {
		// TF1 Select picks whole rows with a vector condition.
		axes := make([]int64, t.rank-1)
		for i := range axes {
			axes[i] = int64(i + 1)
		}
		cn = c.Op1("Unsqueeze", cn, c.I64Const(axes))
	}
	c.set(n, 0, &value{name: c.Op1("Where", cn, t.name, e.name), dtype: t.dtype, rank: maxRank(t, e)})
}

// translateArgMinMax translates ArgMax, ArgMin.
func (c *converter) translateArgMinMax(n *node) {
	x, a := c.in(n, 0), c.in(n, 1)
	axis, ok := ints(a.konst)
	if !ok || len(axis) != 1 {
		c.unsupported(n, "a non-constant axis is not supported")
		return
	}
	out := n.dtype("output_type", tensor.Int64)
	v := c.Op1(n.op, x.name, onnxbuild.AttrInt("axis", axis[0]), onnxbuild.AttrInt("keepdims", 0))
	if out != tensor.Int64 {
		v = c.Op1("Cast", v, onnxbuild.AttrInt("to", onnxbuild.Type(out)))
	}
	c.set(n, 0, &value{name: v, dtype: out, rank: addRank(x.rank, -1)})
}

// translateOneHot translates OneHot.
func (c *converter) translateOneHot(n *node) {
	idx, depth, on, off := c.in(n, 0), c.in(n, 1), c.in(n, 2), c.in(n, 3)
	vals := c.Op1("Concat", c.Op1("Reshape", off.name, c.I64Const([]int64{1})), c.Op1("Reshape", on.name, c.I64Const([]int64{1})), onnxbuild.AttrInt("axis", 0))
	// TF gives an all-off row for an out-of-range index, ONNX wraps
	// negative ones: map negatives to depth, which is out of range.
	in64 := c.asInt64(idx)
	d64 := c.asInt64(depth)
	neg := c.Op1("Less", in64, c.I64Scalar(0))
	safe := c.Op1("Where", neg, c.Op1("Reshape", d64, c.I64Const([]int64{})), in64)
	c.set(n, 0, &value{name: c.Op1("OneHot", safe, d64, vals, onnxbuild.AttrInt("axis", n.i("axis", -1))), dtype: on.dtype, rank: addRank(idx.rank, 1)})
}

// translateTopKV2 translates TopKV2.
func (c *converter) translateTopKV2(n *node) {
	x, k := c.in(n, 0), c.in(n, 1)
	outs := c.OpN("TopK", 2, x.name, c.as1D(k), onnxbuild.AttrInt("axis", -1), onnxbuild.AttrInt("largest", 1), onnxbuild.AttrInt("sorted", 1))
	c.set(n, 0, &value{name: outs[0], dtype: x.dtype, rank: x.rank})
	it := n.dtype("index_type", tensor.Int32)
	c.set(n, 1, &value{name: c.Op1("Cast", outs[1], onnxbuild.AttrInt("to", onnxbuild.Type(it))), dtype: it, rank: x.rank})
}

// translateAllAny translates All, Any.
func (c *converter) translateAllAny(n *node) {
	x, axes := c.in(n, 0), c.in(n, 1)
	keep := int64(0)
	if n.b("keep_dims", false) {
		keep = 1
	}
	red := "ReduceMin"
	if n.op == "Any" {
		red = "ReduceMax"
	}
	xi := c.Op1("Cast", x.name, onnxbuild.AttrInt("to", int64(onnxpb.TensorProto_INT32)))
	r := c.Op1(red, xi, c.as1D(axes), onnxbuild.AttrInt("keepdims", keep), onnxbuild.AttrInt("noop_with_empty_axes", 1))
	c.set(n, 0, &value{name: c.Op1("Cast", r, onnxbuild.AttrInt("to", int64(onnxpb.TensorProto_BOOL))), dtype: tensor.Bool, rank: -1})
}

// translateWhere translates Where.
func (c *converter) translateWhere(n *node) {
	x := c.in(n, 0)
	c.set(n, 0, &value{name: c.Op1("Transpose", c.Op1("NonZero", x.name), onnxbuild.AttrInts("perm", []int64{1, 0})), dtype: tensor.Int64, rank: 2})
}

// translateSpaceDepth translates SpaceToDepth, DepthToSpace.
func (c *converter) translateSpaceDepth(n *node) {
	x := c.in(n, 0)
	bs := n.i("block_size", 0)
	if bs < 2 {
		c.unsupported(n, fmt.Sprintf("block_size %d must be at least 2", bs))
		return
	}
	args := []any{onnxbuild.AttrInt("blocksize", bs)}
	if n.op == "DepthToSpace" {
		args = append(args, onnxbuild.AttrString("mode", "DCR"))
	}
	in := x.name
	nchw := n.s("data_format", "NHWC") == "NCHW"
	if !nchw {
		in = c.Op1("Transpose", in, onnxbuild.AttrInts("perm", toNCHW))
	}
	out := c.Op1(n.op, append([]any{in}, args...)...)
	if !nchw {
		out = c.Op1("Transpose", out, onnxbuild.AttrInts("perm", toNHWC))
	}
	c.set(n, 0, &value{name: out, dtype: x.dtype, rank: 4})
}

// translateBroadcastTo translates BroadcastTo.
func (c *converter) translateBroadcastTo(n *node) {
	x, sh := c.in(n, 0), c.in(n, 1)
	r := -1
	if is, ok := ints(sh.konst); ok {
		r = len(is)
	}
	c.set(n, 0, &value{name: c.Op1("Expand", x.name, c.as1D(sh)), dtype: x.dtype, rank: r})
}

// translateLog1pExpm1 translates Log1p, Expm1.
func (c *converter) translateLog1pExpm1(n *node) {
	x := c.in(n, 0)
	one := c.scalar(n, x.dtype, 1)
	if n.op == "Log1p" {
		c.set(n, 0, c.same(n, c.Op1("Log", c.Op1("Add", x.name, one))))
	} else {
		c.set(n, 0, c.same(n, c.Op1("Sub", c.Op1("Exp", x.name), one)))
	}
}

// translateCumsum translates Cumsum.
func (c *converter) translateCumsum(n *node) {
	x, a := c.in(n, 0), c.in(n, 1)
	ex, rev := int64(0), int64(0)
	if n.b("exclusive", false) {
		ex = 1
	}
	if n.b("reverse", false) {
		rev = 1
	}
	axis := c.Op1("Reshape", c.asInt64(a), c.I64Const([]int64{}))
	c.set(n, 0, c.same(n, c.Op1("CumSum", x.name, axis, onnxbuild.AttrInt("exclusive", ex), onnxbuild.AttrInt("reverse", rev))))
}

// translateGatherNd translates GatherNd.
func (c *converter) translateGatherNd(n *node) {
	params, idx := c.in(n, 0), c.in(n, 1)
	c.set(n, 0, &value{name: c.Op1("GatherND", params.name, c.asInt64(idx)), dtype: params.dtype, rank: -1})
}

// translateReverseV2 translates ReverseV2.
func (c *converter) translateReverseV2(n *node) {
	x, a := c.in(n, 0), c.in(n, 1)
	axes, ok := ints(a.konst)
	if !ok {
		c.unsupported(n, "a non-constant axis is not supported")
		return
	}
	if len(axes) == 0 {
		c.set(n, 0, x)
		return
	}
	k := len(axes)
	starts, ends, steps := make([]int64, k), make([]int64, k), make([]int64, k)
	for i := range axes {
		starts[i], ends[i], steps[i] = -1, math.MinInt64, -1
	}
	c.set(n, 0, c.same(n, c.Op1("Slice", x.name, c.I64Const(starts), c.I64Const(ends), c.I64Const(axes), c.I64Const(steps))))
}

// translatePlaceholder translates Placeholder.
func (c *converter) translatePlaceholder(n *node) {
	c.unsupported(n, fmt.Sprintf("placeholder %q is not an input of the signature, so it has no value", n.name))
}

func isFloat(d tensor.DType) bool {
	return d == tensor.Float32 || d == tensor.Float64 || d == tensor.Float16 || d == tensor.BFloat16
}

func maxRank(a, b *value) int {
	if a.rank < 0 || b.rank < 0 {
		return -1
	}
	return max(a.rank, b.rank)
}

func addRank(r, d int) int {
	if r < 0 {
		return -1
	}
	return r + d
}

// scalar adds a scalar constant of dtype dt.
func (c *converter) scalar(n *node, dt tensor.DType, f float64) string {
	t, err := scalarOf(dt, f)
	if err != nil {
		c.fail(fmt.Errorf("node %q: %w", n.name, err))
		return "_error"
	}
	return c.Constant(t)
}
