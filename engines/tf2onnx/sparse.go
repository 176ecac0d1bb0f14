package tf2onnx

import (
	"fmt"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/tensor"
)

// Sparse tensors and segment reductions: what tf.nn.embedding_lookup_sparse
// and tf.nn.safe_embedding_lookup_sparse are made of, on a SparseTensor's
// indices [N, R], values [N] and dense_shape [R] (signature inputs, a
// parsed VarLen feature, or a split string), as ONNX ops.

// toI64 casts an integer value to int64 unless it is one.
func (c *converter) toI64(v *value) string {
	if v.dtype == tensor.Int64 {
		return v.name
	}
	return c.Op1("Cast", v.name, onnxbuild.AttrInt("to", onnxbuild.Type(tensor.Int64)))
}

// zerosOf is a tensor of shape (a 1-D int64 value) filled with dtype dt's
// zero.
func (c *converter) zerosOf(dt tensor.DType, shape string) string {
	z, err := scalarOf(dt, 0)
	if err != nil {
		c.fail(err)
		return "_error"
	}
	return c.Op1("Expand", c.Constant(z), shape)
}

// translateUnique translates Unique: ONNX Unique unsorted keeps TensorFlow's
// order of first occurrence; idx is its inverse_indices.
func (c *converter) translateUnique(n *node) {
	x := c.in(n, 0)
	outs := c.OpN("Unique", 4, x.name, onnxbuild.AttrInt("sorted", 0))
	c.set(n, 0, &value{name: outs[0], dtype: x.dtype, rank: 1})
	idx := n.dtype("out_idx", tensor.Int32)
	name := outs[2]
	if idx != tensor.Int64 {
		name = c.Op1("Cast", name, onnxbuild.AttrInt("to", onnxbuild.Type(idx)))
	}
	c.set(n, 1, &value{name: name, dtype: idx, rank: 1})
}

// segmentReduce translates SparseSegmentSum/Mean/SqrtN (with or without
// num_segments), SegmentSum and UnsortedSegmentSum: rows of data (picked
// by indices for the sparse ones) summed into their segment's row by
// ScatterND's add reduction, then divided by the segment's count (Mean)
// or its square root (SqrtN). Without num_segments there are as many
// segments as the last segment id plus one (TensorFlow takes the last id;
// the ids are sorted, so it is their maximum); empty segments are zero.
func (c *converter) segmentReduce(n *node) {
	data := c.in(n, 0)
	if !isFloat(data.dtype) && n.op != "SegmentSum" && n.op != "UnsortedSegmentSum" && n.op != "SparseSegmentSum" && n.op != "SparseSegmentSumWithNumSegments" {
		c.unsupported(n, fmt.Sprintf("data of dtype %s", data.dtype))
		return
	}
	var rows, segs *value
	numAt := -1
	switch n.op {
	case "SegmentSum":
		segs = c.in(n, 1)
	case "UnsortedSegmentSum":
		segs, numAt = c.in(n, 1), 2
	default:
		rows, segs = c.in(n, 1), c.in(n, 2)
		if len(n.inputs) > 3 {
			numAt = 3
		}
	}
	if segs.rank > 1 {
		c.unsupported(n, "segment ids of more than one dimension")
		return
	}
	picked := data.name
	if rows != nil {
		picked = c.Op1("Gather", data.name, c.toI64(rows), onnxbuild.AttrInt("axis", 0))
	}
	seg := c.toI64(segs)
	var num string // [1]
	if numAt >= 0 {
		num = c.Op1("Reshape", c.toI64(c.in(n, numAt)), c.I64Const([]int64{1}))
	} else {
		last := c.Op1("ReduceMax", c.Op1("Concat", seg, c.I64Const([]int64{-1}), onnxbuild.AttrInt("axis", 0)), onnxbuild.AttrInt("keepdims", 1))
		num = c.Op1("Add", last, c.I64Const([]int64{1}))
	}
	rest := c.Op1("Slice", c.Op1("Shape", data.name), c.I64Const([]int64{1}), c.I64Const([]int64{1 << 62}))
	outShape := c.Op1("Concat", num, rest, onnxbuild.AttrInt("axis", 0))
	seg2 := c.Op1("Unsqueeze", seg, c.I64Const([]int64{-1}))
	sum := c.Op1("ScatterND", c.zerosOf(data.dtype, outShape), seg2, picked, onnxbuild.AttrString("reduction", "add"))
	out := &value{name: sum, dtype: data.dtype, rank: data.rank}
	if n.op == "SparseSegmentMean" || n.op == "SparseSegmentMeanWithNumSegments" || n.op == "SparseSegmentSqrtN" || n.op == "SparseSegmentSqrtNWithNumSegments" {
		one, _ := scalarOf(data.dtype, 1)
		ones := c.Op1("Expand", c.Constant(one), c.Op1("Shape", seg))
		count := c.Op1("ScatterND", c.zerosOf(data.dtype, num), seg2, ones, onnxbuild.AttrString("reduction", "add"))
		count = c.Op1("Max", count, c.Constant(one))
		if n.op == "SparseSegmentSqrtN" || n.op == "SparseSegmentSqrtNWithNumSegments" {
			count = c.Op1("Sqrt", count)
		}
		flat := c.Op1("Flatten", sum, onnxbuild.AttrInt("axis", 1))
		div := c.Op1("Div", flat, c.Op1("Unsqueeze", count, c.I64Const([]int64{1})))
		out.name = c.Op1("Reshape", div, outShape, onnxbuild.AttrInt("allowzero", 1))
	}
	c.set(n, 0, out)
}

// strides is the row-major strides of a shape vector (int64 [R]): for
// each i the product of shape[i+1:], built with a triangular mask since
// ONNX has no cumulative product.
func (c *converter) strides(shape string) string {
	r := c.Op1("Shape", shape)
	rr := c.Op1("Concat", r, r, onnxbuild.AttrInt("axis", 0))
	m := c.Op1("Expand", c.Op1("Unsqueeze", shape, c.I64Const([]int64{0})), rr) // m[i][j] = shape[j]
	j := c.Op1("Range", c.I64Scalar(0), c.Op1("Squeeze", r, c.I64Const([]int64{0})), c.I64Scalar(1))
	above := c.Op1("Less", c.Op1("Unsqueeze", j, c.I64Const([]int64{1})), c.Op1("Unsqueeze", j, c.I64Const([]int64{0}))) // j > i
	return c.Op1("ReduceProd", c.Op1("Where", above, m, c.I64Scalar(1)), c.I64Const([]int64{1}), onnxbuild.AttrInt("keepdims", 0))
}

// sparseReshape translates SparseReshape: each index made a linear offset
// in the input shape and split again in the new shape, whose one -1 takes
// what the others leave.
func (c *converter) sparseReshape(n *node) {
	idx, in, want := c.in(n, 0), c.in(n, 1), c.in(n, 2)
	size := c.Op1("ReduceProd", in.name, onnxbuild.AttrInt("keepdims", 1))
	neg := c.Op1("Equal", want.name, c.I64Scalar(-1))
	known := c.Op1("ReduceProd", c.Op1("Where", neg, c.I64Scalar(1), want.name), onnxbuild.AttrInt("keepdims", 1))
	known = c.Op1("Max", known, c.I64Const([]int64{1}))
	shape := c.Op1("Where", neg, c.Op1("Div", size, known), want.name)
	linear := c.Op1("ReduceSum", c.Op1("Mul", idx.name, c.Op1("Unsqueeze", c.strides(in.name), c.I64Const([]int64{0}))), c.I64Const([]int64{1}), onnxbuild.AttrInt("keepdims", 1))
	// A dimension of 0 holds no entries; Max keeps the (unused) divisors
	// from being zero, which ONNX Runtime refuses even on no elements.
	one := c.I64Scalar(1)
	outIdx := c.Op1("Mod", c.Op1("Div", linear, c.Op1("Unsqueeze", c.Op1("Max", c.strides(shape), one), c.I64Const([]int64{0}))),
		c.Op1("Unsqueeze", c.Op1("Max", shape, one), c.I64Const([]int64{0})))
	c.set(n, 0, &value{name: outIdx, dtype: tensor.Int64, rank: 2})
	c.set(n, 1, &value{name: shape, dtype: tensor.Int64, rank: 1})
}

// sparseFillEmptyRows translates SparseFillEmptyRows: an entry (row, 0,
// ...) holding default_value is added for each row without entries, and
// the entries are put in row order (keeping the input's order within a
// row, as TensorFlow's kernel) by sorting on row * count + position.
func (c *converter) sparseFillEmptyRows(n *node) {
	idx, vals, shape, def := c.in(n, 0), c.in(n, 1), c.in(n, 2), c.in(n, 3)
	zero := c.I64Const([]int64{0})
	one := c.I64Const([]int64{1})
	nrows := c.Op1("Slice", shape.name, zero, one) // [1]
	row := c.Op1("Gather", idx.name, c.I64Scalar(0), onnxbuild.AttrInt("axis", 1))
	cnt := c.Op1("ScatterElements", c.zerosOf(tensor.Int64, nrows), row, c.Op1("Expand", c.I64Scalar(1), c.Op1("Shape", row)), onnxbuild.AttrString("reduction", "add"))
	empty := c.Op1("Equal", cnt, c.I64Scalar(0))
	erows := c.Op1("Reshape", c.Op1("NonZero", empty), c.I64Const([]int64{-1})) // [E]
	ne := c.Op1("Shape", erows)
	rankLess := c.Op1("Sub", c.Op1("Slice", c.Op1("Shape", idx.name), one, c.I64Const([]int64{2})), one)
	fillIdx := c.Op1("Concat", c.Op1("Unsqueeze", erows, one), c.zerosOf(tensor.Int64, c.Op1("Concat", ne, rankLess, onnxbuild.AttrInt("axis", 0))), onnxbuild.AttrInt("axis", 1))
	d := def.name
	if def.rank != 0 {
		d = c.Op1("Reshape", d, c.I64Const([]int64{}))
	}
	allIdx := c.Op1("Concat", idx.name, fillIdx, onnxbuild.AttrInt("axis", 0))
	allVals := c.Op1("Concat", vals.name, c.Op1("Expand", d, ne), onnxbuild.AttrInt("axis", 0))
	allRows := c.Op1("Concat", row, erows, onnxbuild.AttrInt("axis", 0))
	total := c.Op1("Shape", allRows)
	pos := c.Op1("Range", c.I64Scalar(0), c.Op1("Squeeze", total, zero), c.I64Scalar(1))
	key := c.Op1("Add", c.Op1("Mul", allRows, total), pos)
	perm := c.OpN("TopK", 2, key, total, onnxbuild.AttrInt("largest", 0), onnxbuild.AttrInt("sorted", 1))[1]
	inv := c.Op1("ScatterElements", c.zerosOf(tensor.Int64, total), perm, pos)
	c.set(n, 0, &value{name: c.Op1("Gather", allIdx, perm, onnxbuild.AttrInt("axis", 0)), dtype: tensor.Int64, rank: 2})
	c.set(n, 1, &value{name: c.Op1("Gather", allVals, perm, onnxbuild.AttrInt("axis", 0)), dtype: vals.dtype, rank: 1})
	c.set(n, 2, &value{name: empty, dtype: tensor.Bool, rank: 1})
	c.set(n, 3, &value{name: c.Op1("Slice", inv, zero, c.Op1("Shape", row)), dtype: tensor.Int64, rank: 1})
}

// sparseToDense translates SparseToDense: default_value everywhere but at
// the indices, set by ScatterND (repeated indices are TensorFlow's error
// and are not checked).
func (c *converter) sparseToDense(n *node) {
	idx, shape, vals, def := c.in(n, 0), c.in(n, 1), c.in(n, 2), c.in(n, 3)
	ix := c.toI64(idx)
	switch idx.rank {
	case 0:
		ix = c.Op1("Reshape", ix, c.I64Const([]int64{1, 1}))
	case 1:
		ix = c.Op1("Unsqueeze", ix, c.I64Const([]int64{-1}))
	case 2:
	default:
		c.unsupported(n, "sparse_indices of unknown rank")
		return
	}
	sh := c.as1D(shape)
	d := def.name
	if def.rank != 0 {
		d = c.Op1("Reshape", d, c.I64Const([]int64{}))
	}
	base := c.Op1("Expand", d, sh)
	// Scalar values apply to every index.
	v := c.Op1("Expand", vals.name, c.Op1("Slice", c.Op1("Shape", ix), c.I64Const([]int64{0}), c.I64Const([]int64{1})))
	rank := -1
	if shape.konst != nil && len(shape.konst.Shape) == 1 {
		rank = int(shape.konst.Shape[0])
	}
	c.set(n, 0, &value{name: c.Op1("ScatterND", base, ix, v), dtype: vals.dtype, rank: rank})
}
