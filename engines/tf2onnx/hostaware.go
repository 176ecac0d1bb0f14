package tf2onnx

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/eas-server/eas-server/tensor"
)

// The ops that run in the model and, for feature pipelines, on the host
// too: moves, comparisons, Where, GatherNd, Cast, Shape, SparseToDense
// (see hostAware).

// hostAware wraps the ONNX translation of ops that also run on the host
// (Identity-like ops, Reshape, ExpandDims, Squeeze, Equal, NotEqual,
// Where, GatherNd, SparseToDense; Shape and Size of host values), so that feature pipelines keep the values host string
// ops read on the host: as TensorFlow's feature columns make sparse ids
// (ExpandDims, NotEqual to the ignored value, Where, GatherNd, then
// AsString and hashing). On a string, or on a host value not yet in the
// ONNX graph, the op runs on the host only; on a numeric signature input
// or host value already in the graph it runs in the model, and on the host
// too when a host op reads its result (unused host steps are pruned); with
// an input the model computes, it runs in the model.
func hostAware(onnx translator) translator {
	return func(c *converter, n *node) {
		if n.op == "Shape" || n.op == "Size" {
			// The shape of a host value is known on the host: the model
			// need not take the value for it.
			if v := c.peek(n, 0); v != nil && v.host != nil && (v.name == "" || v.dtype == tensor.String) {
				if a, ok := c.hostArg(n, 0); ok {
					if outs, eval, why := c.hostKernel(n, []HostRef{a}); why == "" {
						c.hostStep(n, []HostRef{a}, outs, eval)
						return
					}
				}
			}
			onnx(c, n)
			return
		}
		if n.op != "Reshape" && n.op != "ExpandDims" && n.op != "Squeeze" && n.op != "Equal" && n.op != "NotEqual" && n.op != "Where" && n.op != "GatherNd" && n.op != "SparseToDense" {
			// Identity-like: a host value passes as it is.
			if v := c.peek(n, 0); v != nil && v.host != nil && v.name == "" {
				c.set(n, 0, v)
				return
			}
			onnx(c, n)
			return
		}
		data := []int{0}
		switch n.op {
		case "Equal", "NotEqual", "GatherNd":
			data = []int{0, 1}
		case "SparseToDense":
			data = []int{0, 1, 2, 3}
		}
		hostOnly, some, all := false, false, true
		for _, i := range data {
			v := c.peek(n, i)
			switch {
			case v == nil:
				all = false
			case v.host != nil && (v.name == "" || v.dtype == tensor.String):
				hostOnly, some = true, true
			case v.port != nil && v.dtype == tensor.String:
				hostOnly, some = true, true
			case v.host != nil || v.port != nil:
				some = true
			case v.konst == nil:
				all = false
			}
		}
		if !all || !hostOnly && !some {
			// A value the model computes: the op runs there.
			onnx(c, n)
			return
		}
		var args []HostRef
		if hostOnly {
			for _, i := range data {
				a, ok := c.hostArg(n, i)
				if !ok {
					return
				}
				args = append(args, a)
			}
		} else {
			onnx(c, n)
			if slices.Contains(c.unsup[n.op], n.name) {
				return
			}
			for _, i := range data {
				a, ok := c.hostArg(n, i)
				if !ok {
					return
				}
				args = append(args, a)
			}
		}
		outs, eval, why := c.hostKernel(n, args)
		switch {
		case why != "" && hostOnly:
			c.unsupported(n, why)
		case why != "":
			// The model computes it; host ops cannot read it.
		case hostOnly:
			c.hostStep(n, args, outs, eval)
		default:
			i := c.addStep(HostStep{Op: n.op, Node: n.name, Args: args, eval: eval, outs: outs})
			for j := range outs {
				if v := c.vals[ref{n.name, j}]; v != nil {
					dual := *v
					dual.host = &HostRef{i, j}
					c.set(n, j, &dual)
				}
			}
		}
	}
}

// peek is the value of input i of n, without marking or materializing it.
func (c *converter) peek(n *node, i int) *value {
	if i >= len(n.inputs) {
		return nil
	}
	rr, err := c.g.resolve(n.inputs[i])
	if err != nil {
		return nil
	}
	return c.vals[rr]
}

// hostKernel is the host version of n on args: its outputs and kernel, or
// why there is none.
func (c *converter) hostKernel(n *node, args []HostRef) ([]hostOut, func([]tensor.Tensor) ([]tensor.Tensor, error), string) {
	o := c.hostOutOf(args[0])
	switch n.op {
	case "Reshape":
		s, ok := ints(c.in(n, 1).konst)
		if !ok {
			return nil, nil, "a tensor reshaped on the host needs a constant shape"
		}
		out := hostOut{dtype: o.dtype, rank: len(s), batch: o.batch && len(s) > 0 && s[0] == -1 && o.rank >= 1}
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			t := in[0]
			dims, ok := reshapeDims(t.NumElements(), s)
			if !ok {
				return nil, fmt.Errorf("cannot reshape %s to %v", tensor.FormatShape(t.Shape), s)
			}
			t.Shape = dims
			return []tensor.Tensor{t}, nil
		}, ""
	case "ExpandDims", "Squeeze":
		var axes []int64
		if n.op == "ExpandDims" {
			var ok bool
			if axes, ok = ints(c.in(n, 1).konst); !ok || len(axes) != 1 {
				return nil, nil, "a tensor expanded on the host needs a constant axis"
			}
		} else {
			axes = n.ilist("squeeze_dims", nil)
		}
		out := hostOut{dtype: o.dtype, rank: -1}
		if o.rank >= 0 && n.op == "ExpandDims" {
			out.rank = o.rank + 1
			out.batch = o.batch && axes[0] != 0 && axes[0] != -int64(o.rank)-1
		} else if o.rank >= 0 && len(axes) > 0 {
			out.rank = o.rank - len(axes)
			out.batch = o.batch && !slices.ContainsFunc(axes, func(x int64) bool { return x == 0 || x == -int64(o.rank) })
		}
		expand := n.op == "ExpandDims"
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			t := in[0]
			r := int64(len(t.Shape))
			if expand {
				x := axes[0]
				if x < -r-1 || x > r {
					return nil, fmt.Errorf("axis %d out of range for rank %d", x, r)
				}
				if x < 0 {
					x += r + 1
				}
				t.Shape = slices.Insert(slices.Clone(t.Shape), int(x), 1)
				return []tensor.Tensor{t}, nil
			}
			var shape []int64
			for d, k := range t.Shape {
				drop := len(axes) == 0 && k == 1
				for _, x := range axes {
					if x == int64(d) || x+r == int64(d) {
						if k != 1 {
							return nil, fmt.Errorf("cannot squeeze dimension %d of size %d", d, k)
						}
						drop = true
					}
				}
				if !drop {
					shape = append(shape, k)
				}
			}
			if shape == nil {
				shape = []int64{}
			}
			t.Shape = shape
			return []tensor.Tensor{t}, nil
		}, ""
	case "Equal", "NotEqual":
		b := c.hostOutOf(args[1])
		if o.dtype != b.dtype {
			return nil, nil, fmt.Sprintf("compares %s with %s", o.dtype, b.dtype)
		}
		out := hostOut{dtype: tensor.Bool, rank: max(o.rank, b.rank), batch: o.batch && b.rank == 0 || b.batch && o.rank == 0}
		if o.rank < 0 || b.rank < 0 {
			out.rank = -1
		}
		neq := n.op == "NotEqual"
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			r, err := hostEqual(in[0], in[1], neq)
			return []tensor.Tensor{r}, err
		}, ""
	case "Shape", "Size":
		dt := n.dtype("out_type", tensor.Int32)
		if dt != tensor.Int32 && dt != tensor.Int64 {
			return nil, nil, fmt.Sprintf("out_type %s", dt)
		}
		size := n.op == "Size"
		out := hostOut{dtype: dt, rank: 1}
		if size {
			out.rank = 0
		}
		return []hostOut{out}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			v := in[0].Shape
			shape := []int64{int64(len(v))}
			if size {
				v, shape = []int64{in[0].NumElements()}, []int64{}
			}
			r := tensor.FromInt64("", shape, v)
			if dt == tensor.Int32 {
				r, _ = castTensor(r, tensor.Int32)
			}
			return []tensor.Tensor{r}, nil
		}, ""
	case "SparseToDense":
		if d := c.hostOutOf(args[3]).dtype; d != o.dtype && c.hostOutOf(args[2]).dtype != d {
			return nil, nil, "default_value and values differ in dtype"
		}
		rank := -1
		if k := c.hostOutOf(args[1]).konst; k != nil && len(k.Shape) == 1 {
			rank = int(k.Shape[0])
		}
		return []hostOut{{dtype: c.hostOutOf(args[2]).dtype, rank: rank}}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			r, err := hostSparseToDense(in[0], in[1], in[2], in[3])
			return []tensor.Tensor{r}, err
		}, ""
	case "Where":
		if len(n.inputs) != 1 || o.dtype != tensor.Bool {
			return nil, nil, "Where of a bool tensor is run on the host"
		}
		return []hostOut{{dtype: tensor.Int64, rank: 2}}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			return []tensor.Tensor{hostWhere(in[0])}, nil
		}, ""
	case "GatherNd":
		if d := c.hostOutOf(args[1]).dtype; d != tensor.Int32 && d != tensor.Int64 {
			return nil, nil, fmt.Sprintf("indices of dtype %s", d)
		}
		return []hostOut{{dtype: o.dtype, rank: -1}}, func(in []tensor.Tensor) ([]tensor.Tensor, error) {
			r, err := hostGatherNd(in[0], in[1])
			return []tensor.Tensor{r}, err
		}, ""
	}
	return nil, nil, "not run on the host"
}

// hostEqual compares a and b element-wise (one may be a scalar); floats
// by value, other dtypes by their bytes.
func hostEqual(a, b tensor.Tensor, neq bool) (tensor.Tensor, error) {
	shape := a.Shape
	na, nb := a.NumElements(), b.NumElements()
	switch {
	case slices.Equal(a.Shape, b.Shape):
	case len(b.Shape) == 0:
	case len(a.Shape) == 0:
		shape = b.Shape
	default:
		return tensor.Tensor{}, fmt.Errorf("shapes %s and %s: only equal shapes or a scalar are served", tensor.FormatShape(a.Shape), tensor.FormatShape(b.Shape))
	}
	n := max(na, nb)
	if na == 0 || nb == 0 {
		n = 0
	}
	out := make([]bool, n)
	sz := a.DType.Size()
	for i := range out {
		ia, ib := i, i
		if len(a.Shape) == 0 {
			ia = 0
		}
		if len(b.Shape) == 0 {
			ib = 0
		}
		var eq bool
		switch a.DType {
		case tensor.String:
			eq = bytes.Equal(a.Strings[ia], b.Strings[ib])
		case tensor.Float32:
			eq = math.Float32frombits(binary.LittleEndian.Uint32(a.Data[4*ia:])) == math.Float32frombits(binary.LittleEndian.Uint32(b.Data[4*ib:]))
		case tensor.Float64:
			eq = math.Float64frombits(binary.LittleEndian.Uint64(a.Data[8*ia:])) == math.Float64frombits(binary.LittleEndian.Uint64(b.Data[8*ib:]))
		default:
			eq = bytes.Equal(a.Data[sz*ia:sz*(ia+1)], b.Data[sz*ib:sz*(ib+1)])
		}
		out[i] = eq != neq
	}
	return tensor.FromBool("", shape, out), nil
}

// hostWhere is the coordinates of t's true elements, row-major.
func hostWhere(t tensor.Tensor) tensor.Tensor {
	r := len(t.Shape)
	var idx []int64
	k := int64(0)
	coord := make([]int64, r)
	for i, b := range t.Data {
		if b != 0 {
			rem := int64(i)
			for d := r - 1; d >= 0; d-- {
				coord[d] = rem % t.Shape[d]
				rem /= t.Shape[d]
			}
			idx = append(idx, coord...)
			k++
		}
	}
	return tensor.FromInt64("", []int64{k, int64(r)}, idx)
}

// hostGatherNd is GatherNd: each index tuple of the last dimension of
// indices picks a slice of params; one outside params is an error.
func hostGatherNd(p, indices tensor.Tensor) (tensor.Tensor, error) {
	iv, err := indicesOf(indices)
	if err != nil {
		return tensor.Tensor{}, err
	}
	if len(indices.Shape) == 0 {
		return tensor.Tensor{}, fmt.Errorf("indices must be at least a vector")
	}
	m := int(indices.Shape[len(indices.Shape)-1])
	if m > len(p.Shape) {
		return tensor.Tensor{}, fmt.Errorf("index depth %d for params of rank %d", m, len(p.Shape))
	}
	slice := int64(1)
	for _, d := range p.Shape[m:] {
		slice *= d
	}
	shape := append(slices.Clone(indices.Shape[:len(indices.Shape)-1]), p.Shape[m:]...)
	out := tensor.Tensor{DType: p.DType, Shape: shape}
	sz := int64(p.DType.Size())
	count := 0
	if m > 0 {
		count = len(iv) / m
	} else {
		count = 1
		for _, d := range indices.Shape[:len(indices.Shape)-1] {
			count *= int(d)
		}
	}
	for k := range count {
		off := int64(0)
		for j := range m {
			x := iv[k*m+j]
			if x < 0 || x >= p.Shape[j] {
				return tensor.Tensor{}, fmt.Errorf("indices[%d] = %v does not index into param shape %s", k, iv[k*m:k*m+m], tensor.FormatShape(p.Shape))
			}
			off = off*p.Shape[j] + x
		}
		off *= slice
		if p.DType == tensor.String {
			out.Strings = append(out.Strings, p.Strings[off:off+slice]...)
		} else {
			out.Data = append(out.Data, p.Data[off*sz:(off+slice)*sz]...)
		}
	}
	if p.DType == tensor.String && out.Strings == nil {
		out.Strings = [][]byte{}
	}
	return out, nil
}

// indicesOf reads an int32 or int64 tensor.
func indicesOf(t tensor.Tensor) ([]int64, error) {
	if t.DType == tensor.Int32 {
		v, err := t.AsInt32()
		out := make([]int64, len(v))
		for i, x := range v {
			out[i] = int64(x)
		}
		return out, err
	}
	return t.AsInt64()
}

// hostCast wraps Cast: a constant is cast at translation, and a cast of a
// numeric signature input or host value also runs on the host when a host
// op reads it (AsString of cast ids).
func hostCast(onnx translator) translator {
	return func(c *converter, n *node) {
		to := n.dtype("DstT", tensor.Float32)
		v := c.peek(n, 0)
		if v != nil && v.konst != nil {
			if r, ok := castTensor(*v.konst, to); ok {
				c.set(n, 0, c.constValue(r))
				return
			}
		}
		onnx(c, n)
		if v == nil || v.host == nil && v.port == nil || slices.Contains(c.unsup[n.op], n.name) {
			return
		}
		if !castable(v.dtype, to) {
			return
		}
		a, ok := c.hostArg(n, 0)
		if !ok {
			return
		}
		o := c.hostOutOf(a)
		i := c.addStep(HostStep{Op: n.op, Node: n.name, Args: []HostRef{a}, outs: []hostOut{{dtype: to, rank: o.rank, batch: o.batch}},
			eval: func(in []tensor.Tensor) ([]tensor.Tensor, error) {
				r, _ := castTensor(in[0], to)
				return []tensor.Tensor{r}, nil
			}})
		if w := c.vals[ref{n.name, 0}]; w != nil {
			dual := *w
			dual.host = &HostRef{i, 0}
			c.set(n, 0, &dual)
		}
	}
}

// castable reports whether castTensor casts from to to.
func castable(from, to tensor.DType) bool {
	ok := func(d tensor.DType) bool {
		return d == tensor.Bool || d == tensor.Int32 || d == tensor.Int64 || d == tensor.Float32 || d == tensor.Float64
	}
	return ok(from) && ok(to)
}

// castTensor casts between bool, int32, int64, float32 and float64 as
// C++'s static_cast does (floats to integers truncate).
func castTensor(t tensor.Tensor, to tensor.DType) (tensor.Tensor, bool) {
	if !castable(t.DType, to) {
		return t, false
	}
	n := int(t.NumElements())
	out := tensor.Tensor{DType: to, Shape: slices.Clone(t.Shape), Data: make([]byte, 0, n*to.Size())}
	for i := range n {
		var f float64
		var k int64
		isF := false
		switch t.DType {
		case tensor.Bool:
			k = int64(t.Data[i])
		case tensor.Int32:
			k = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		case tensor.Int64:
			k = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		case tensor.Float32:
			f, isF = float64(math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))), true
		case tensor.Float64:
			f, isF = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:])), true
		}
		if !isF {
			f = float64(k)
		} else {
			k = int64(f)
		}
		switch to {
		case tensor.Bool:
			b := byte(0)
			if isF && f != 0 || !isF && k != 0 {
				b = 1
			}
			out.Data = append(out.Data, b)
		case tensor.Int32:
			out.Data = binary.LittleEndian.AppendUint32(out.Data, uint32(int32(k)))
		case tensor.Int64:
			out.Data = binary.LittleEndian.AppendUint64(out.Data, uint64(k))
		case tensor.Float32:
			out.Data = binary.LittleEndian.AppendUint32(out.Data, math.Float32bits(float32(f)))
		case tensor.Float64:
			out.Data = binary.LittleEndian.AppendUint64(out.Data, math.Float64bits(f))
		}
	}
	return out, true
}

// hostSparseToDense is SparseToDense: default everywhere but at the
// indices (a scalar, a vector for a 1-D output, or [n, rank]), which take
// values (one each, or one for all); an index outside the shape is an
// error.
func hostSparseToDense(indices, shapeT, vals, def tensor.Tensor) (tensor.Tensor, error) {
	iv, err := indicesOf(indices)
	if err != nil {
		return tensor.Tensor{}, err
	}
	shape, err := indicesOf(shapeT)
	if err != nil {
		return tensor.Tensor{}, err
	}
	if len(shapeT.Shape) > 1 || vals.DType != def.DType || def.NumElements() != 1 {
		return tensor.Tensor{}, fmt.Errorf("output_shape must be a vector and default_value a scalar of the values' dtype")
	}
	rank := len(shape)
	n, m := int64(1), rank
	switch len(indices.Shape) {
	case 0:
	case 1:
		n, m = indices.Shape[0], 1
	case 2:
		n, m = indices.Shape[0], int(indices.Shape[1])
	default:
		return tensor.Tensor{}, fmt.Errorf("sparse_indices of rank %d", len(indices.Shape))
	}
	if m != rank {
		return tensor.Tensor{}, fmt.Errorf("indices of %d dimensions for an output of rank %d", m, rank)
	}
	nv := vals.NumElements()
	if nv != 1 && nv != n || len(vals.Shape) > 1 {
		return tensor.Tensor{}, fmt.Errorf("%d values for %d indices", nv, n)
	}
	total := int64(1)
	for _, d := range shape {
		if d < 0 {
			return tensor.Tensor{}, fmt.Errorf("output_shape %v has a negative dimension", shape)
		}
		total *= d
		if total > 1<<27 {
			return tensor.Tensor{}, fmt.Errorf("output_shape %v is too large", shape)
		}
	}
	out := tensor.Tensor{DType: vals.DType, Shape: shape}
	sz := int64(vals.DType.Size())
	if vals.DType == tensor.String {
		out.Strings = make([][]byte, total)
		for i := range out.Strings {
			out.Strings[i] = def.Strings[0]
		}
	} else {
		out.Data = bytes.Repeat(def.Data[:sz], int(total))
	}
	for k := range n {
		off := int64(0)
		for j := range m {
			x := iv[int(k)*m+j]
			if x < 0 || x >= shape[j] {
				return tensor.Tensor{}, fmt.Errorf("index %v is out of bounds for shape %v", iv[int(k)*m:int(k)*m+m], shape)
			}
			off = off*shape[j] + x
		}
		src := k
		if nv == 1 {
			src = 0
		}
		if vals.DType == tensor.String {
			out.Strings[off] = vals.Strings[src]
		} else {
			copy(out.Data[off*sz:(off+1)*sz], vals.Data[src*sz:(src+1)*sz])
		}
	}
	return out, nil
}
