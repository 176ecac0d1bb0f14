package tf2onnx

import (
	"fmt"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/tensor"
)

// HostInput is a tensor the serving process computes in Go from a string
// signature input, before the ONNX model runs, and feeds as an extra ONNX
// input: string hashing (StringToHashBucketFast, StringToHashBucketStrong)
// has no ONNX operator (ONNX Runtime's string ops live in the separate
// onnxruntime-extensions library), and FarmHash and SipHash cannot be built
// from ONNX ops, which have no access to a string's bytes.
type HostInput struct {
	Input   string    // the ONNX input name
	Op      string    // "StringToHashBucketFast" or "StringToHashBucketStrong"
	Buckets int64     // num_buckets, at least 1
	Key     [2]uint64 // StringToHashBucketStrong's key
}

// HostTensors computes the host inputs of port p from the request tensor t
// (of p's dtype, checked by the caller), shaped as the ONNX model takes
// them: t's shape for a Plain port, [1] for a Scalar one, flattened for an
// AnyRank one (whose shape companion the caller feeds with the input).
func (p Port) HostTensors(t tensor.Tensor) ([]tensor.Tensor, error) {
	if len(p.Host) == 0 {
		return nil, nil
	}
	if t.DType != tensor.String {
		return nil, fmt.Errorf("input %q: dtype %s, string expected", p.Key, t.DType)
	}
	shape := t.Shape
	switch p.Kind {
	case Scalar:
		shape = []int64{1}
	case AnyRank:
		shape = []int64{int64(len(t.Strings))}
	}
	out := make([]tensor.Tensor, len(p.Host))
	for i, h := range p.Host {
		if h.Buckets < 1 {
			return nil, fmt.Errorf("input %q: %s with %d buckets", p.Key, h.Op, h.Buckets)
		}
		v := make([]int64, len(t.Strings))
		for j, s := range t.Strings {
			var f uint64
			if h.Op == "StringToHashBucketStrong" {
				f = SipHash24(h.Key, s)
			} else {
				f = Fingerprint64(s)
			}
			v[j] = int64(f % uint64(h.Buckets))
		}
		out[i] = tensor.FromInt64(h.Input, shape, v)
	}
	return out, nil
}

// hostInputShape is the ONNX shape of a host input of p.
func hostInputShape(p *Port) []int64 {
	switch p.Kind {
	case Scalar:
		return []int64{1}
	case AnyRank:
		return []int64{-1}
	}
	return p.Shape
}

// stringSignatureInput is n's first input when it is a string signature
// input, which the serving process can work on in Go before the model;
// otherwise it refuses n, saying why, and returns nil.
func (c *converter) stringSignatureInput(n *node, why string) *value {
	rr, err := c.g.resolve(n.inputs[0])
	if err != nil {
		c.fail(err)
		return nil
	}
	src := c.vals[rr]
	if src == nil || src.port == nil || src.port.p.DType != tensor.String {
		c.unsupported(n, why)
		return nil
	}
	return src
}

// stringToHashBucket translates StringToHashBucketFast and
// StringToHashBucketStrong of a string signature input into a host input:
// the hashing runs in Go before the model (HostInput), the graph reads its
// int64 result.
func (c *converter) stringToHashBucket(n *node) {
	if len(n.inputs) != 1 {
		c.unsupported(n, "expected one input")
		return
	}
	src := c.stringSignatureInput(n, "string hashing is translated only when it reads a string signature input directly (it runs in Go before the ONNX model)")
	if src == nil {
		return
	}
	h := HostInput{Op: n.op, Buckets: n.i("num_buckets", 0)}
	if h.Buckets < 1 {
		c.unsupported(n, "num_buckets must be at least 1")
		return
	}
	suffix := fmt.Sprintf(":hash_bucket_fast:%d", h.Buckets)
	if n.op == "StringToHashBucketStrong" {
		k := n.ilist("key", nil)
		if len(k) != 2 {
			c.unsupported(n, "the key attribute must hold two integers")
			return
		}
		h.Key = [2]uint64{uint64(k[0]), uint64(k[1])}
		suffix = fmt.Sprintf(":hash_bucket_strong:%d:%d:%d", h.Buckets, h.Key[0], h.Key[1])
	}
	p := src.port.p
	h.Input = p.Key + suffix
	if !hasHost(p, h.Input) {
		p.Host = append(p.Host, h)
	}
	v := &value{name: h.Input, dtype: tensor.Int64, rank: len(p.Shape)}
	switch p.Kind {
	case Scalar:
		v.name = c.Op1("Reshape", h.Input, c.I64Const([]int64{}))
	case AnyRank:
		v.rank = -1
		v.name = c.Op1("Reshape", h.Input, p.Key+ShapeSuffix)
	}
	c.set(n, 0, v)
}

func hasHost(p *Port, input string) bool {
	for _, h := range p.Host {
		if h.Input == input {
			return true
		}
	}
	return false
}

// bucketize translates Bucketize: the index of the first boundary above x
// (std::upper_bound, as TensorFlow's kernel), that is the number of
// boundaries x is not below. Integer inputs are compared as float32, as the
// kernel compares them with its float boundaries.
func (c *converter) bucketize(n *node) {
	x := c.in(n, 0)
	a, ok := n.attr["boundaries"]
	if !ok || a.GetList() == nil {
		c.unsupported(n, "no boundaries attribute")
		return
	}
	bs := a.GetList().F
	for i := 1; i < len(bs); i++ {
		if bs[i] < bs[i-1] {
			c.unsupported(n, "boundaries must be sorted")
			return
		}
	}
	if len(bs) == 0 {
		zero := c.Constant(tensor.FromInt32("", []int64{}, []int32{0}))
		c.set(n, 0, &value{name: c.Op1("Expand", zero, c.Op1("Shape", x.name)), dtype: tensor.Int32, rank: x.rank})
		return
	}
	var bound string
	xv := x.name
	switch x.dtype {
	case tensor.Float64:
		f := make([]float64, len(bs))
		for i, b := range bs {
			f[i] = float64(b)
		}
		bound = c.Constant(tensor.FromFloat64("", []int64{int64(len(f))}, f))
	case tensor.Float32, tensor.Int32, tensor.Int64:
		bound = c.F32Const(append([]float32(nil), bs...), []int64{int64(len(bs))})
		if x.dtype != tensor.Float32 {
			xv = c.Op1("Cast", xv, onnxbuild.AttrInt("to", onnxbuild.Type(tensor.Float32)))
		}
	default:
		c.unsupported(n, fmt.Sprintf("input dtype %s is not supported", x.dtype))
		return
	}
	// !(x < b) counts what upper_bound passes over, NaN included (it is
	// below no boundary, so it lands in the last bucket as in TensorFlow).
	notBelow := c.Op1("Not", c.Op1("Less", c.Op1("Unsqueeze", xv, c.I64Const([]int64{-1})), bound))
	cnt := c.Op1("ReduceSum", c.Op1("Cast", notBelow, onnxbuild.AttrInt("to", onnxbuild.Type(tensor.Int32))), c.I64Const([]int64{-1}), onnxbuild.AttrInt("keepdims", 0))
	c.set(n, 0, &value{name: cnt, dtype: tensor.Int32, rank: x.rank})
}
