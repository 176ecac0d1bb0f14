// Package tf2onnx translates the serving signatures of a TensorFlow
// SavedModel (read by package savedmodel) into ONNX models that ONNX Runtime
// runs, so that TensorFlow models are served without libtensorflow.
//
// The translation works on the subgraph one signature needs: function calls
// (StatefulPartitionedCall, PartitionedCall) are inlined, the signature's
// inputs are cut points whatever op produces them, variables become
// initializers, and each TensorFlow op maps to a few ONNX opset-18 nodes.
// Lookup tables filled from constants become ai.onnx.ml LabelEncoders, and
// the string ops between string inputs (or parsed tf.Example features) and
// the model run in Go before it (HostProgram). Control flow becomes ONNX
// Loop and If nodes with subgraphs: TF2's While, If and Case (their
// functions; control.go) and TF1's while loop frames (control_v1.go). Ops
// outside the supported set (TF1 conds, tensor lists, other string ops,
// stateful assignments, custom ops) make the translation fail with one
// error naming every such op, so a deploy fails up front instead of at the
// first request.
package tf2onnx

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	corepb "github.com/wamuir/graft/tensorflow/core/protobuf/for_core_protos_go_proto"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// Opset is the ONNX opset the translation targets.
const Opset = onnxbuild.Opset

// PortKind says how a signature tensor travels to and from the ONNX model,
// given that the ONNX Runtime binding handles neither scalars nor tensors of
// unknown rank.
type PortKind int

const (
	// Plain tensors go as they are.
	Plain PortKind = iota
	// Scalar tensors travel as shape [1].
	Scalar
	// AnyRank tensors travel flattened to one dimension, with their shape
	// as an int64 vector in a companion tensor named Name + ShapeSuffix.
	AnyRank
	// Examples are a vector of serialized tf.Example protos, or one as a
	// scalar, that the graph only parses (ParseExample, ParseSingleExample):
	// the caller parses them in Go and feeds the Features instead.
	Examples
)

// Feature is one feature a ParseExample node reads from an Examples port.
// A dense feature is parsed into one tensor named Input, of shape
// [batch] + Shape; a sparse one (tf.io.VarLenFeature) into a SparseTensor's
// three: Input + SparseIndices (int64 [n, 2]: example, position), Input +
// SparseValues (DType [n]) and Input + SparseShape (int64 [2]: batch, the
// most values an example has). They reach the ONNX model through the host
// stage (Signature.Host), whose leaves they are.
type Feature struct {
	Key     string         // the feature name inside tf.Example
	Input   string         // the ONNX input name
	DType   tensor.DType   // Float32, Int64 or String
	Shape   []int64        // per example, fully known; nil for a sparse feature
	Default *tensor.Tensor // used when an example lacks the feature; nil = required
	Sparse  bool           // a VarLenFeature
	// Single marks a feature parsed from one example (ParseSingleExample,
	// or ParseExampleV2 of a scalar input): without the batch dimension,
	// a dense one is of shape Shape, a sparse one's indices are [n, 1]
	// (position) and its dense shape [1] (the number of values).
	Single bool
}

// The names of a sparse feature's tensors, after its Input.
const (
	SparseIndices = ":indices"
	SparseValues  = ":values"
	SparseShape   = ":dense_shape"
)

// ShapeSuffix names the companion shape tensor of an AnyRank port.
const ShapeSuffix = "__shape"

// OutputSuffix renames an output whose key is also an input key.
const OutputSuffix = "__output"

// Port is one signature input or output as the ONNX model sees it.
type Port struct {
	Key   string       // the signature key, also the ONNX value name
	DType tensor.DType // element type
	Shape []int64      // the signature's shape; nil = unknown rank; -1 = any size
	Kind  PortKind
	// Features are the parsed features of an Examples port, by key.
	Features []Feature
	// Value is the ONNX value name of an output: the key, unless an input
	// has the same key (ONNX names must be unique), then Key + OutputSuffix.
	// Inputs are always named by their key.
	Value string
	// AsFloat32 marks a DT_HALF or DT_BFLOAT16 output that the ONNX model
	// returns as float32; the caller narrows it back to DType.
	AsFloat32 bool
}

// Signature is a translated signature.
type Signature struct {
	Name    string
	Method  string
	Inputs  []Port // sorted by key
	Outputs []Port // sorted by key
	// Model is a serialized ONNX ModelProto.
	Model []byte
	// Batchable is true when every input and output has a dynamic first
	// dimension, so requests can be concatenated along it.
	Batchable bool
	// Host is the string stage the serving process runs in Go on each
	// request before the model (nil when there is none): its outputs are
	// inputs of Model besides the ports' (see HostProgram).
	Host *HostProgram
}

// UnsupportedError lists the ops of a signature that cannot be translated.
type UnsupportedError struct {
	Signature string
	Ops       map[string][]string // op -> nodes using it
	Reasons   map[string]string   // op -> why, where it is more than "not supported"
}

func (e *UnsupportedError) Error() string {
	ops := make([]string, 0, len(e.Ops))
	for op := range e.Ops {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	parts := make([]string, len(ops))
	for i, op := range ops {
		nodes := e.Ops[op]
		more := ""
		if len(nodes) > 3 {
			more = fmt.Sprintf(" and %d more", len(nodes)-3)
			nodes = nodes[:3]
		}
		parts[i] = fmt.Sprintf("%s (%s%s)", op, strings.Join(nodes, ", "), more)
		if r := e.Reasons[op]; r != "" {
			parts[i] += ": " + r
		}
	}
	return fmt.Sprintf("signature %q uses TensorFlow ops that cannot be translated to ONNX: %s; "+
		"export a signature without them (TF1 conds, tensor lists, lookup tables not filled at load nor restored from the checkpoint or written when served, string ops outside the host string stage or on values computed in the model, ragged tensors, stateful updates and custom ops such as TRTEngineOp are not served), "+
		"or convert the model with tf2onnx and put the .onnx file in the model directory", e.Signature, strings.Join(parts, "; "))
}

// Convert translates one signature of m.
func Convert(m *savedmodel.Model, signature string) (*Signature, error) {
	sd, ok := m.MetaGraph.SignatureDef[signature]
	if !ok {
		return nil, fmt.Errorf("no signature %q; the model has %s", signature, strings.Join(m.SignatureNames(), ", "))
	}
	keys, err := m.VariableKeys()
	if err != nil {
		return nil, err
	}
	if m.Variables != nil {
		for v, k := range functionRestoreKeys(m) {
			if m.Variables.Has(k) {
				keys[v] = k // TensorFlow's own restore path wins
			}
		}
	}
	c := &converter{
		model: m, sig: signature, keys: keys,
		g:      newFlatGraph(m.MetaGraph.GraphDef),
		vals:   map[ref]*value{},
		unsup:  map[string][]string{},
		reason: map[string]string{},
		// The prefix keeps generated names apart from signature keys,
		// which name the graph's inputs and outputs.
		Graph: onnxbuild.Graph{Prefix: "_tf2onnx/"},
	}
	return c.run(sd)
}

// value is what a TensorFlow tensor became in the ONNX graph.
type value struct {
	name  string         // ONNX value name
	dtype tensor.DType   // element type; Invalid for resources
	konst *tensor.Tensor // known constant value, when there is one
	rank  int            // -1 when unknown
	port  *inPort        // the signature input this value is, if any
	table string         // the HashTableV2 node of a table handle
	// host marks a value of the host string stage; its name is empty
	// until an ONNX op reads it (materialize).
	host *HostRef
}

// inPort is a signature input while translating: its ONNX inputs and
// adapter nodes are only added when some op reads it as a tensor.
type inPort struct {
	p      *Port
	used   bool
	inputs []*onnxpb.ValueInfoProto
	nodes  []*onnxpb.NodeProto
}

type converter struct {
	model  *savedmodel.Model
	sig    string
	keys   map[string]string
	g      *flatGraph
	vals   map[ref]*value
	unsup  map[string][]string
	reason map[string]string
	fatal  error

	tables     map[string]*tableContents // by HashTableV2 node
	tableInits map[string][]*node        // initializers by table node; nil until searched
	writer     *string                   // a signature writing tables (tableWriter); nil until searched
	usesML     bool                      // the model needs the ai.onnx.ml opset
	host       *HostProgram              // the host string stage, if any

	onnxbuild.Graph
}

func (c *converter) run(sd *corepb.SignatureDef) (*Signature, error) {
	out := &Signature{Name: c.sig, Method: sd.MethodName, Batchable: true}
	graph := &onnxpb.GraphProto{Name: c.sig}
	inKeys := sortedKeys(sd.Inputs)
	ports := make([]*inPort, len(inKeys))
	for i, k := range inKeys {
		ti := sd.Inputs[k]
		p, err := port(k, ti)
		if err != nil {
			return nil, fmt.Errorf("signature %q input %q: %w", c.sig, k, err)
		}
		r, err := c.tensorRef(ti)
		if err != nil {
			return nil, fmt.Errorf("signature %q input %q: %w", c.sig, k, err)
		}
		ip := &inPort{p: &p}
		ports[i] = ip
		v := &value{dtype: p.DType, rank: len(p.Shape), port: ip}
		// Adapter nodes go to the port, not the graph, until used.
		mark := len(c.Nodes)
		switch p.Kind {
		case Plain:
			v.name = k
			ip.inputs = []*onnxpb.ValueInfoProto{onnxbuild.ValueInfo(k, p.DType, p.Shape)}
		case Scalar:
			ip.inputs = []*onnxpb.ValueInfoProto{onnxbuild.ValueInfo(k, p.DType, []int64{1})}
			v.name = c.Op1("Reshape", k, c.I64Const([]int64{}))
		case AnyRank:
			v.rank = -1
			ip.inputs = []*onnxpb.ValueInfoProto{onnxbuild.ValueInfo(k, p.DType, []int64{-1}), onnxbuild.ValueInfo(k+ShapeSuffix, tensor.Int64, []int64{-1})}
			v.name = c.Op1("Reshape", k, k+ShapeSuffix)
		}
		ip.nodes = append(ip.nodes, c.Nodes[mark:]...)
		c.Nodes = c.Nodes[:mark]
		c.vals[r] = v
	}
	outKeys := sortedKeys(sd.Outputs)
	if len(outKeys) == 0 {
		return nil, fmt.Errorf("signature %q has no outputs", c.sig)
	}
	outVals := make([]*value, len(outKeys))
	for i, k := range outKeys {
		ti := sd.Outputs[k]
		p, err := port(k, ti)
		if err != nil {
			return nil, fmt.Errorf("signature %q output %q: %w", c.sig, k, err)
		}
		r, err := c.tensorRef(ti)
		if err != nil {
			return nil, fmt.Errorf("signature %q output %q: %w", c.sig, k, err)
		}
		outVals[i] = c.visit(r)
		c.materialize(outVals[i])
		if outVals[i].table != "" {
			c.fail(fmt.Errorf("output %q is a lookup table handle, not a tensor", k))
		}
		if outVals[i].port != nil {
			outVals[i].port.used = true
		}
		if p.Kind != Plain || len(p.Shape) == 0 || p.Shape[0] != -1 {
			out.Batchable = false
		}
		out.Outputs = append(out.Outputs, p)
	}
	var pre []*onnxpb.NodeProto
	for _, ip := range ports {
		p := ip.p
		if len(p.Features) > 0 {
			if ip.used {
				c.fail(fmt.Errorf("input %q is parsed as tf.Example and also read directly; only one of the two is supported", p.Key))
			}
			p.Kind = Examples
		} else {
			graph.Input = append(graph.Input, ip.inputs...)
			pre = append(pre, ip.nodes...)
		}
		if p.Kind != Plain || len(p.Shape) == 0 || p.Shape[0] != -1 {
			out.Batchable = false
		}
		out.Inputs = append(out.Inputs, *p)
	}
	names, shapes, dtypes, batch := c.hostInputs()
	for i, name := range names {
		graph.Input = append(graph.Input, onnxbuild.ValueInfo(name, dtypes[i], shapes[i]))
	}
	out.Batchable = out.Batchable && batch
	out.Host = c.host
	if c.fatal != nil {
		return nil, fmt.Errorf("signature %q: %w", c.sig, c.fatal)
	}
	if len(c.unsup) > 0 {
		return nil, &UnsupportedError{Signature: c.sig, Ops: c.unsup, Reasons: c.reason}
	}
	for i := range out.Outputs {
		p := &out.Outputs[i]
		v := outVals[i]
		src := v.name
		if v.dtype != p.DType && v.dtype != tensor.Invalid {
			src = c.Op1("Cast", src, onnxbuild.AttrInt("to", onnxbuild.Type(p.DType)))
		}
		wire := p.DType
		if wire == tensor.Float16 || wire == tensor.BFloat16 {
			// The ONNX Runtime binding cannot return half outputs intact:
			// they travel as float32 and are narrowed back in Go.
			wire, p.AsFloat32 = tensor.Float32, true
			src = c.Op1("Cast", src, onnxbuild.AttrInt("to", onnxbuild.Type(wire)))
		}
		p.Value = p.Key
		if _, clash := sd.Inputs[p.Key]; clash {
			p.Value = p.Key + OutputSuffix
		}
		name := p.Value
		switch p.Kind {
		case Plain:
			c.Emit("Identity", []string{src}, []string{name})
			graph.Output = append(graph.Output, onnxbuild.ValueInfo(name, wire, p.Shape))
		case Scalar:
			c.Emit("Reshape", []string{src, c.I64Const([]int64{1})}, []string{name})
			graph.Output = append(graph.Output, onnxbuild.ValueInfo(name, wire, []int64{1}))
		case AnyRank:
			c.Emit("Reshape", []string{src, c.I64Const([]int64{-1})}, []string{name})
			c.Emit("Shape", []string{src}, []string{name + ShapeSuffix})
			graph.Output = append(graph.Output, onnxbuild.ValueInfo(name, wire, []int64{-1}), onnxbuild.ValueInfo(name+ShapeSuffix, tensor.Int64, []int64{-1}))
		}
	}
	if len(out.Inputs) == 0 {
		out.Batchable = false
	}
	graph.Node = append(pre, c.Nodes...)
	graph.Initializer = c.Inits
	b, err := onnxbuild.Model(graph, "eas-server tf2onnx")
	if err != nil {
		return nil, fmt.Errorf("signature %q: encode onnx model: %w", c.sig, err)
	}
	if c.usesML {
		if b, err = withMLOpset(b); err != nil {
			return nil, fmt.Errorf("signature %q: encode onnx model: %w", c.sig, err)
		}
	}
	out.Model = b
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func port(key string, ti *corepb.TensorInfo) (Port, error) {
	if ti.GetName() == "" {
		return Port{}, errors.New("only dense tensors are supported (sparse and composite signature tensors are not)")
	}
	dt, ok := savedmodel.DTypeOf(ti.Dtype)
	if !ok {
		return Port{}, fmt.Errorf("dtype %s is not supported", ti.Dtype)
	}
	shape, err := savedmodel.ShapeOf(ti.TensorShape)
	if err != nil {
		return Port{}, err
	}
	p := Port{Key: key, DType: dt, Shape: shape}
	switch {
	case shape == nil:
		p.Kind = AnyRank
	case len(shape) == 0:
		p.Kind = Scalar
	}
	return p, nil
}

// tensorRef resolves a signature tensor name ("node:0") in the flat graph.
func (c *converter) tensorRef(ti *corepb.TensorInfo) (ref, error) {
	name, idx, _ := savedmodel.SplitInput(ti.GetName())
	return c.g.resolve(ref{name, idx})
}

// visit returns the ONNX value of r, translating what it depends on first.
// Errors are collected (unsupported ops) or kept in c.fatal; the returned
// value is then a placeholder so the walk can go on and find every op.
func (c *converter) visit(r ref) *value {
	type frame struct {
		r    ref
		done bool
	}
	stack := []frame{{r: r}}
	onStack := map[ref]bool{}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rr, err := c.g.resolve(f.r)
		if err != nil {
			c.fail(err)
			c.vals[f.r] = &value{name: "_error", rank: -1}
			continue
		}
		if rr != f.r {
			if v, ok := c.vals[rr]; ok {
				c.vals[f.r] = v
				continue
			}
			if f.done {
				c.vals[f.r] = c.vals[rr]
				continue
			}
			stack = append(stack, frame{r: f.r, done: true}, frame{r: rr})
			continue
		}
		if _, ok := c.vals[rr]; ok {
			continue
		}
		n := c.g.nodes[rr.node]
		if !f.done {
			if onStack[rr] {
				c.fail(fmt.Errorf("cycle through node %q; loops are not supported", n.name))
				c.vals[rr] = &value{name: "_error", rank: -1}
				continue
			}
			onStack[rr] = true
			stack = append(stack, frame{r: rr, done: true})
			if stopsWalk[n.op] {
				continue
			}
			for _, in := range n.inputs {
				if _, ok := c.vals[in]; !ok {
					stack = append(stack, frame{r: in})
				}
			}
			continue
		}
		delete(onStack, rr)
		if _, ok := c.vals[rr]; ok {
			continue
		}
		c.checkControl(n)
		c.translate(n)
		if _, ok := c.vals[rr]; !ok {
			if !slices.Contains(c.unsup[n.op], n.name) {
				c.fail(fmt.Errorf("node %q (%s) has no translated output %d", n.name, n.op, rr.idx))
			}
			c.vals[rr] = &value{name: "_error", rank: -1}
		}
	}
	v := c.vals[r]
	if v == nil {
		return &value{name: "_error", rank: -1}
	}
	return v
}

// stopsWalk lists ops whose inputs are not translated (they are read
// differently, or not at all).
var stopsWalk = map[string]bool{"VariableV2": true, "VarHandleOp": true, "Variable": true, "Placeholder": true}

// statefulOps change state; on a serving path they are refused, whether a
// value or only a control dependency reaches them.
var statefulOps = map[string]bool{
	"Assign": true, "AssignAdd": true, "AssignSub": true, "AssignVariableOp": true,
	"AssignAddVariableOp": true, "AssignSubVariableOp": true, "ScatterUpdate": true,
	"ResourceScatterUpdate": true, "LookupTableInsertV2": true, "LookupTableRemoveV2": true,
}

// checkControl refuses stateful updates that n waits for through control
// inputs (directly or through a NoOp grouping them): the ONNX model would
// silently skip them.
func (c *converter) checkControl(n *node) {
	seen := map[string]bool{}
	var walk func(names []string, depth int)
	walk = func(names []string, depth int) {
		for _, name := range names {
			d := c.g.nodes[name]
			if d == nil || seen[name] || depth > 8 {
				continue
			}
			seen[name] = true
			switch {
			case statefulOps[d.op]:
				c.unsupported(d, unsupportedWhy[d.op])
			case d.op == "NoOp" || d.op == "Identity":
				walk(d.ctrl, depth+1)
			}
		}
	}
	walk(n.ctrl, 0)
}

func (c *converter) fail(err error) {
	if c.fatal == nil {
		c.fatal = err
	}
}

func (c *converter) unsupported(n *node, why string) {
	if !slices.Contains(c.unsup[n.op], n.name) {
		c.unsup[n.op] = append(c.unsup[n.op], n.name)
	}
	if why != "" && c.reason[n.op] == "" {
		c.reason[n.op] = why
	}
}

// in returns the value of n's i-th input.
func (c *converter) in(n *node, i int) *value {
	if i >= len(n.inputs) {
		c.fail(fmt.Errorf("node %q (%s) has %d inputs, needs more than %d", n.name, n.op, len(n.inputs), i))
		return &value{name: "_error", rank: -1}
	}
	rr, err := c.g.resolve(n.inputs[i])
	if err != nil {
		c.fail(err)
		return &value{name: "_error", rank: -1}
	}
	if v := c.vals[rr]; v != nil {
		if v.port != nil {
			v.port.used = true
		}
		c.materialize(v)
		return v
	}
	return &value{name: "_error", rank: -1}
}

// set records output i of n.
func (c *converter) set(n *node, i int, v *value) { c.vals[ref{n.name, i}] = v }
