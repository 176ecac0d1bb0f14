package tf2onnx

import (
	"fmt"
	"slices"

	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// parseExample turns the outputs of ParseExample / ParseExampleV2 /
// ParseSingleExample into leaves of the host stage: the serving process
// parses the serialized tf.Example protos in Go (classify and regress
// signatures send them) into each dense feature and each sparse (VarLen)
// feature's indices, values and dense shape; the string ops after them run
// in Go too, the rest in the ONNX model. ParseSingleExample, and
// ParseExampleV2 of a scalar, parse one example: features without the
// batch dimension (Feature.Single). Ragged features are refused.
func (c *converter) parseExample(n *node) {
	if len(n.inputs) == 0 {
		c.unsupported(n, "no serialized input")
		return
	}
	src := c.stringSignatureInput(n, "tf.Example parsing is translated only when the serialized protos are a signature input")
	if src == nil {
		return
	}
	p := src.port.p
	single := n.op == "ParseSingleExample" || n.op == "ParseExampleV2" && p.Shape != nil && len(p.Shape) == 0
	if single && (p.Shape == nil || len(p.Shape) != 0) {
		c.unsupported(n, "the serialized example must be a scalar signature input")
		return
	}
	if !single && p.Shape != nil && len(p.Shape) != 1 {
		c.unsupported(n, "the serialized examples must be a vector signature input")
		return
	}
	var nsparse int64
	var keys []string
	var defaults []int // input index of each dense default
	if n.op == "ParseSingleExample" {
		nsparse = n.i("num_sparse", 0)
		for j, k := range n.attr["dense_keys"].GetList().GetS() {
			keys = append(keys, string(k))
			defaults = append(defaults, 1+j)
		}
	} else if n.op == "ParseExample" {
		nsparse = n.i("Nsparse", 0)
		ndense := n.i("Ndense", 0)
		if ndense < 0 || nsparse < 0 || int(2+nsparse+2*ndense) > len(n.inputs) {
			c.unsupported(n, "inputs do not match Nsparse and Ndense")
			return
		}
		for j := range int(ndense) {
			k := c.in(n, 2+int(nsparse)+j).konst
			if k == nil || k.DType != tensor.String || len(k.Strings) != 1 {
				c.unsupported(n, "dense keys must be constant strings")
				return
			}
			keys = append(keys, string(k.Strings[0]))
			defaults = append(defaults, 2+int(nsparse)+int(ndense)+j)
		}
	} else {
		nsparse = n.i("num_sparse", 0)
		if len(n.inputs) < 5 {
			c.unsupported(n, "expected serialized, names, sparse, dense and ragged keys")
			return
		}
		dk, rk := c.in(n, 3).konst, c.in(n, 4).konst
		if dk == nil || dk.DType != tensor.String || rk == nil || len(rk.Strings) > 0 {
			c.unsupported(n, "dense keys must be constant strings and ragged features are not supported")
			return
		}
		for j, k := range dk.Strings {
			keys = append(keys, string(k))
			defaults = append(defaults, 5+j)
		}
	}
	if !c.sparseFeatures(n, p, nsparse, single) {
		return
	}
	types := n.attr["Tdense"].GetList().GetType()
	shapes := n.attr["dense_shapes"].GetList().GetShape()
	if len(types) != len(keys) || len(shapes) != len(keys) {
		c.unsupported(n, "Tdense and dense_shapes do not match the dense keys")
		return
	}
	for j, key := range keys {
		dt, ok := savedmodel.DTypeOf(types[j])
		if !ok || (dt != tensor.Float32 && dt != tensor.Int64 && dt != tensor.String) {
			c.unsupported(n, fmt.Sprintf("feature %q has dtype %s; tf.Example holds float, int64 and bytes", key, types[j]))
			return
		}
		shape, err := savedmodel.ShapeOf(shapes[j])
		if err != nil || shape == nil || slices.Contains(shape, -1) {
			c.unsupported(n, fmt.Sprintf("feature %q needs a fully known shape", key))
			return
		}
		if defaults[j] >= len(n.inputs) {
			c.unsupported(n, "missing dense default")
			return
		}
		var def *tensor.Tensor
		if d := c.in(n, defaults[j]).konst; d != nil && d.NumElements() > 0 {
			if d.DType != dt {
				c.unsupported(n, fmt.Sprintf("feature %q: default of dtype %s for a %s feature", key, d.DType, dt))
				return
			}
			def = d
		} else if d == nil {
			c.unsupported(n, fmt.Sprintf("feature %q: the default value must be a constant", key))
			return
		}
		i := slices.IndexFunc(p.Features, func(f Feature) bool { return f.Key == key })
		if i < 0 {
			p.Features = append(p.Features, Feature{Key: key, Input: p.Key + ":" + key, DType: dt, Shape: shape, Default: def, Single: single})
			i = len(p.Features) - 1
		} else if f := p.Features[i]; f.DType != dt || f.Sparse || f.Single != single || !slices.Equal(f.Shape, shape) {
			c.unsupported(n, fmt.Sprintf("feature %q is parsed twice with different types or shapes", key))
			return
		}
		// Parsed in Go: a leaf of the host stage, an ONNX input once an
		// ONNX op reads it.
		f := p.Features[i]
		rank := 1 + len(shape)
		if single {
			rank = len(shape)
		}
		c.set(n, 3*int(nsparse)+j, c.hostValue(c.hostLeaf(f.Input, hostOut{dtype: dt, rank: rank, nonEmpty: !slices.Contains(shape, 0)})))
	}
}

// sparseFeatures records the nsparse sparse (VarLen) features of n and
// sets their outputs: indices, values and dense shapes, as host leaves.
func (c *converter) sparseFeatures(n *node, p *Port, nsparse int64, single bool) bool {
	if nsparse == 0 {
		return true
	}
	var keys []string
	if n.op == "ParseSingleExample" {
		for _, k := range n.attr["sparse_keys"].GetList().GetS() {
			keys = append(keys, string(k))
		}
		if int64(len(keys)) != nsparse {
			c.unsupported(n, "sparse_keys does not match num_sparse")
			return false
		}
	} else if n.op == "ParseExample" {
		for j := range int(nsparse) {
			k := c.in(n, 2+j).konst
			if k == nil || k.DType != tensor.String || len(k.Strings) != 1 {
				c.unsupported(n, "sparse keys must be constant strings")
				return false
			}
			keys = append(keys, string(k.Strings[0]))
		}
	} else {
		k := c.in(n, 2).konst
		if k == nil || k.DType != tensor.String || int64(len(k.Strings)) != nsparse {
			c.unsupported(n, "sparse keys must be constant strings")
			return false
		}
		for _, s := range k.Strings {
			keys = append(keys, string(s))
		}
	}
	types := n.attr["sparse_types"].GetList().GetType()
	if len(types) != len(keys) {
		c.unsupported(n, "sparse_types does not match the sparse keys")
		return false
	}
	for j, key := range keys {
		dt, ok := savedmodel.DTypeOf(types[j])
		if !ok || (dt != tensor.Float32 && dt != tensor.Int64 && dt != tensor.String) {
			c.unsupported(n, fmt.Sprintf("feature %q has dtype %s; tf.Example holds float, int64 and bytes", key, types[j]))
			return false
		}
		i := slices.IndexFunc(p.Features, func(f Feature) bool { return f.Key == key })
		if i < 0 {
			p.Features = append(p.Features, Feature{Key: key, Input: p.Key + ":" + key, DType: dt, Sparse: true, Single: single})
			i = len(p.Features) - 1
		} else if f := p.Features[i]; f.DType != dt || !f.Sparse || f.Single != single {
			c.unsupported(n, fmt.Sprintf("feature %q is parsed twice with different types or kinds", key))
			return false
		}
		in := p.Features[i].Input
		c.set(n, j, c.hostValue(c.hostLeaf(in+SparseIndices, hostOut{dtype: tensor.Int64, rank: 2})))
		c.set(n, int(nsparse)+j, c.hostValue(c.hostLeaf(in+SparseValues, hostOut{dtype: dt, rank: 1})))
		c.set(n, 2*int(nsparse)+j, c.hostValue(c.hostLeaf(in+SparseShape, hostOut{dtype: tensor.Int64, rank: 1})))
	}
	return true
}
