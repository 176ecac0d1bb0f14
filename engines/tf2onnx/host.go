package tf2onnx

import (
	"fmt"
	"slices"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/tensor"
)

// The host string stage. ONNX has no string operators beyond comparison
// and LabelEncoder (ONNX Runtime's live in the separate
// onnxruntime-extensions library): FarmHash and SipHash, joining,
// splitting, regular expressions and number parsing cannot be built from
// ONNX ops, which have no access to a string's bytes. So the string ops
// between a signature's string inputs (or the features parsed from its
// tf.Example input) and the first op that works on numbers are gathered
// into a HostProgram, which the serving process evaluates in Go for each
// request before the ONNX model runs; its results enter the ONNX graph as
// extra inputs (hash buckets, parsed numbers, split tokens' indices, and
// strings that a LabelEncoder looks up).

// HostProgram is a signature's host string stage: Steps in evaluation
// order (each reads earlier steps only) and the Outputs the ONNX model
// takes as inputs.
type HostProgram struct {
	Steps   []HostStep
	Outputs []HostOutput
}

// HostRef names output Out of step Step.
type HostRef struct{ Step, Out int }

// HostStep is one op of a HostProgram.
type HostStep struct {
	// Op is the TensorFlow op, or HostLeaf for a tensor the request
	// brings (a signature input, or a feature parsed from tf.Example).
	Op string
	// Node is the TensorFlow node the step translates ("" for leaves).
	Node string
	// Leaf names a leaf's tensor: the signature key, or the parsed
	// feature's ONNX input name (Feature.Input, or a sparse feature's
	// Input plus SparseIndices, SparseValues or SparseShape).
	Leaf string
	Args []HostRef
	eval func(args []tensor.Tensor) ([]tensor.Tensor, error)
	outs []hostOut // static facts about each output
}

// HostLeaf is the Op of a step that reads a request tensor.
const HostLeaf = "Leaf"

// hostOut is what translation knows of a step's output.
type hostOut struct {
	dtype    tensor.DType
	rank     int  // -1 when unknown
	batch    bool // dimension 0 is the request's batch dimension
	nonEmpty bool // never without elements (a dense feature)
	konst    *tensor.Tensor
}

// HostOutput is a host result fed to the ONNX model as input Input. It
// travels as computed when its rank is 1 or more, as [1] when it is a
// scalar, and flattened with its shape in Input + ShapeSuffix when its
// rank is unknown. A Padded one, which may have no elements (a sparse
// feature no example has, tokens of empty strings), travels flattened
// behind one filler element, its shape in Input + ShapeSuffix behind one
// too, and the model drops both fillers: the ONNX runtime takes no empty
// inputs.
type HostOutput struct {
	Input  string
	Ref    HostRef
	DType  tensor.DType
	Rank   int
	Padded bool
}

// Run evaluates the program on the request's tensors: leaves by name
// (signature inputs as the request sent them, parsed features by their
// input names). It returns the ONNX inputs, named and shaped as the model
// takes them. Its errors are the request's fault.
func (h *HostProgram) Run(leaves map[string]tensor.Tensor) ([]tensor.Tensor, error) {
	if h == nil {
		return nil, nil
	}
	vals := make([][]tensor.Tensor, len(h.Steps))
	for i, s := range h.Steps {
		if s.Op == HostLeaf {
			t, ok := leaves[s.Leaf]
			if !ok {
				return nil, fmt.Errorf("no tensor %q for the host string stage", s.Leaf)
			}
			if d := s.outs[0].dtype; t.DType != d {
				return nil, fmt.Errorf("%q: dtype %s, %s expected", s.Leaf, t.DType, d)
			}
			vals[i] = []tensor.Tensor{t}
			continue
		}
		args := make([]tensor.Tensor, len(s.Args))
		for j, a := range s.Args {
			args[j] = vals[a.Step][a.Out]
		}
		out, err := s.eval(args)
		if err != nil {
			return nil, fmt.Errorf("%s (%s): %w", s.Op, s.Node, err)
		}
		vals[i] = out
	}
	out := make([]tensor.Tensor, 0, len(h.Outputs))
	for _, o := range h.Outputs {
		t := vals[o.Ref.Step][o.Ref.Out]
		t.Name = o.Input
		switch {
		case o.Padded:
			out = append(out, int64Tensor(o.Input+ShapeSuffix, append([]int64{0}, t.Shape...)))
			t = padded(t)
		case o.Rank == 0:
			t.Shape = []int64{1}
		case o.Rank < 0:
			out = append(out, int64Tensor(o.Input+ShapeSuffix, t.Shape))
			t.Shape = []int64{t.NumElements()}
		}
		out = append(out, t)
	}
	return out, nil
}

// padded is t flattened behind one filler element (zero, or "").
func padded(t tensor.Tensor) tensor.Tensor {
	n := t.NumElements()
	p := tensor.Tensor{Name: t.Name, DType: t.DType, Shape: []int64{n + 1}}
	if t.DType == tensor.String {
		p.Strings = append([][]byte{{}}, t.Strings...)
	} else {
		p.Data = append(make([]byte, t.DType.Size(), t.DType.Size()+len(t.Data)), t.Data...)
	}
	return p
}

func int64Tensor(name string, v []int64) tensor.Tensor {
	return tensor.FromInt64(name, []int64{int64(len(v))}, v)
}

// hostValue is the value of a host step's output, not yet in the ONNX
// graph: c.materialize makes it an ONNX input when an ONNX op reads it.
func (c *converter) hostValue(r HostRef) *value {
	o := c.host.Steps[r.Step].outs[r.Out]
	return &value{dtype: o.dtype, rank: o.rank, host: &r, konst: o.konst}
}

// addStep appends a step and returns its index.
func (c *converter) addStep(s HostStep) int {
	if c.host == nil {
		c.host = &HostProgram{}
	}
	c.host.Steps = append(c.host.Steps, s)
	return len(c.host.Steps) - 1
}

// hostLeaf returns the leaf step reading request tensor name, adding it.
func (c *converter) hostLeaf(name string, o hostOut) HostRef {
	if c.host != nil {
		for i, s := range c.host.Steps {
			if s.Op == HostLeaf && s.Leaf == name {
				return HostRef{i, 0}
			}
		}
	}
	return HostRef{c.addStep(HostStep{Op: HostLeaf, Leaf: name, outs: []hostOut{o}}), 0}
}

// materialize gives host value v an ONNX name: the host output feeding
// it, added once per step output.
func (c *converter) materialize(v *value) {
	if v.host == nil || v.name != "" {
		return
	}
	r := *v.host
	s := c.host.Steps[r.Step]
	o := s.outs[r.Out]
	input := s.Leaf
	if s.Op != HostLeaf {
		input = fmt.Sprintf("host:%s:%d", s.Node, r.Out)
	}
	pad := o.rank != 0 && !o.batch && !o.nonEmpty
	if !slices.ContainsFunc(c.host.Outputs, func(h HostOutput) bool { return h.Input == input }) {
		c.host.Outputs = append(c.host.Outputs, HostOutput{Input: input, Ref: r, DType: o.dtype, Rank: o.rank, Padded: pad})
	}
	switch {
	case pad:
		rest := func(x string) string {
			return c.Op1("Slice", x, c.I64Const([]int64{1}), c.I64Const([]int64{1 << 62}), c.I64Const([]int64{0}))
		}
		v.name = c.Op1("Reshape", rest(input), rest(input+ShapeSuffix), onnxbuild.AttrInt("allowzero", 1))
	case o.rank == 0:
		v.name = c.Op1("Reshape", input, c.I64Const([]int64{}))
	case o.rank < 0:
		v.name = c.Op1("Reshape", input, input+ShapeSuffix, onnxbuild.AttrInt("allowzero", 1))
	default:
		v.name = input
	}
}

// prune drops the steps no output needs (constants of folded steps,
// leaves read only through folded ones), renumbering the rest.
func (h *HostProgram) prune() {
	need := make([]bool, len(h.Steps))
	for _, o := range h.Outputs {
		need[o.Ref.Step] = true
	}
	for i := len(h.Steps) - 1; i >= 0; i-- {
		if need[i] {
			for _, a := range h.Steps[i].Args {
				need[a.Step] = true
			}
		}
	}
	index := make([]int, len(h.Steps))
	var kept []HostStep
	for i, s := range h.Steps {
		if need[i] {
			index[i] = len(kept)
			for j := range s.Args {
				s.Args[j].Step = index[s.Args[j].Step]
			}
			kept = append(kept, s)
		}
	}
	for j := range h.Outputs {
		h.Outputs[j].Ref.Step = index[h.Outputs[j].Ref.Step]
	}
	h.Steps = kept
}

// hostInputs declares the ONNX inputs of the host outputs and says
// whether each keeps the request's batch dimension first.
func (c *converter) hostInputs() (inputs []string, shapes [][]int64, dtypes []tensor.DType, batch bool) {
	batch = true
	if c.host == nil {
		return nil, nil, nil, true
	}
	c.host.prune()
	if len(c.host.Outputs) == 0 {
		c.host = nil
		return nil, nil, nil, true
	}
	for _, o := range c.host.Outputs {
		st := c.host.Steps[o.Ref.Step].outs[o.Ref.Out]
		var shape []int64
		switch {
		case o.Padded:
			shape = []int64{-1}
			inputs, shapes, dtypes = append(inputs, o.Input+ShapeSuffix), append(shapes, []int64{-1}), append(dtypes, tensor.Int64)
		case o.Rank == 0:
			shape = []int64{1}
		case o.Rank < 0:
			shape = []int64{-1}
			inputs, shapes, dtypes = append(inputs, o.Input+ShapeSuffix), append(shapes, []int64{-1}), append(dtypes, tensor.Int64)
		default:
			shape = make([]int64, o.Rank)
			for i := range shape {
				shape[i] = -1
			}
		}
		if o.Rank < 1 || !st.batch {
			batch = false
		}
		inputs, shapes, dtypes = append(inputs, o.Input), append(shapes, shape), append(dtypes, o.DType)
	}
	return inputs, shapes, dtypes, batch
}

// hostArg returns input i of n as a host step output: a host value, a
// signature input (a leaf; reading it this way does not make it an ONNX
// input) or a constant. Otherwise it refuses n and returns false.
func (c *converter) hostArg(n *node, i int) (HostRef, bool) {
	if i >= len(n.inputs) {
		c.fail(fmt.Errorf("node %q (%s) has %d inputs, needs more than %d", n.name, n.op, len(n.inputs), i))
		return HostRef{}, false
	}
	rr, err := c.g.resolve(n.inputs[i])
	if err != nil {
		c.fail(err)
		return HostRef{}, false
	}
	v := c.vals[rr]
	switch {
	case v == nil:
		return HostRef{}, false
	case v.host != nil:
		return *v.host, true
	case v.port != nil:
		p := v.port.p
		rank := len(p.Shape)
		if p.Kind == AnyRank {
			rank = -1
		}
		return c.hostLeaf(p.Key, hostOut{dtype: p.DType, rank: rank, batch: p.Kind == Plain && len(p.Shape) > 0 && p.Shape[0] == -1}), true
	case v.konst != nil:
		k := *v.konst
		return HostRef{c.addStep(HostStep{Op: "Const", Node: n.name + "/const", eval: func([]tensor.Tensor) ([]tensor.Tensor, error) {
			return []tensor.Tensor{k}, nil
		}, outs: []hostOut{{dtype: k.DType, rank: len(k.Shape), konst: &k}}}), 0}, true
	}
	c.unsupported(n, "string ops run in Go before the ONNX model, on string signature inputs, features parsed from tf.Example and constants; this one reads a value computed inside the model")
	return HostRef{}, false
}

// hostOutOf is what is known of a host step output.
func (c *converter) hostOutOf(r HostRef) hostOut { return c.host.Steps[r.Step].outs[r.Out] }

// isHostString reports whether input i of n is a string that lives on the
// host (a host value not yet in the ONNX graph): ops that merely move it
// (Identity, Reshape, ...) keep it there.
func (c *converter) isHostString(n *node, i int) bool {
	if i >= len(n.inputs) {
		return false
	}
	rr, err := c.g.resolve(n.inputs[i])
	if err != nil {
		return false
	}
	v := c.vals[rr]
	return v != nil && v.dtype == tensor.String && (v.host != nil || v.port != nil)
}

// isPort reports whether input i of n is a signature input.
func (c *converter) isPort(n *node, i int) bool {
	rr, err := c.g.resolve(n.inputs[i])
	return err == nil && c.vals[rr] != nil && c.vals[rr].port != nil
}

// hostStep adds a step of n evaluating eval on args, with outputs outs,
// and records n's outputs as host values.
func (c *converter) hostStep(n *node, args []HostRef, outs []hostOut, eval func([]tensor.Tensor) ([]tensor.Tensor, error)) {
	// On constants only, the step is folded at translation time.
	konst := make([]tensor.Tensor, 0, len(args))
	for _, a := range args {
		if k := c.hostOutOf(a).konst; k != nil {
			konst = append(konst, *k)
		}
	}
	if len(konst) == len(args) {
		res, err := eval(konst)
		if err != nil {
			c.unsupported(n, fmt.Sprintf("on its constant inputs: %v", err))
			return
		}
		for j, r := range res {
			r.Name = ""
			c.set(n, j, c.constValue(r))
		}
		return
	}
	i := c.addStep(HostStep{Op: n.op, Node: n.name, Args: args, eval: eval, outs: outs})
	for j := range outs {
		c.set(n, j, c.hostValue(HostRef{i, j}))
	}
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
