package tf2onnx

import (
	"fmt"
	"strings"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	funcpb "github.com/wamuir/graft/tensorflow/core/framework/function_go_proto"
	graphpb "github.com/wamuir/graft/tensorflow/core/framework/graph_go_proto"
	nodepb "github.com/wamuir/graft/tensorflow/core/framework/node_def_go_proto"

	"github.com/eas-server/eas-server/engines/savedmodel"
)

// ref names one output of a node in the flattened graph.
type ref struct {
	node string
	idx  int
}

func (r ref) String() string { return fmt.Sprintf("%s:%d", r.node, r.idx) }

// node is a TensorFlow node after function inlining: its data inputs resolved
// to refs in the flat graph (control inputs dropped: the translated graph is
// dataflow only).
type node struct {
	name   string
	op     string
	inputs []ref
	ctrl   []string // control inputs, checked for stateful updates
	attr   map[string]*attrpb.AttrValue
	depth  int // function-call nesting the node was inlined at
}

// maxInlineDepth bounds nested function calls; TF2 exports nest two or three.
const maxInlineDepth = 32

// maxFlatNodes bounds the graph after inlining, so that functions calling
// functions several times over cannot blow up exponentially.
const maxFlatNodes = 1 << 20

// flatGraph is the main graph with function calls inlined on demand.
type flatGraph struct {
	nodes map[string]*node
	alias map[ref]ref // outputs of inlined calls and their functions' args
	funcs map[string]*funcpb.FunctionDef
	seq   int
}

func newFlatGraph(g *graphpb.GraphDef) *flatGraph {
	fg := &flatGraph{nodes: map[string]*node{}, alias: map[ref]ref{}, funcs: map[string]*funcpb.FunctionDef{}}
	for _, f := range g.GetLibrary().GetFunction() {
		fg.funcs[f.GetSignature().GetName()] = f
	}
	for _, n := range g.GetNode() {
		fg.nodes[n.Name] = &node{name: n.Name, op: n.Op, inputs: graphInputs(n), ctrl: controlInputs(n.Input, ""), attr: n.Attr}
	}
	return fg
}

func graphInputs(n *nodepb.NodeDef) []ref {
	var out []ref
	for _, in := range n.Input {
		name, idx, ctrl := savedmodel.SplitInput(in)
		if !ctrl {
			out = append(out, ref{name, idx})
		}
	}
	return out
}

func controlInputs(ins []string, prefix string) []string {
	var out []string
	for _, in := range ins {
		if strings.HasPrefix(in, "^") {
			out = append(out, prefix+in[1:])
		}
	}
	return out
}

// callOps are the function-call ops inlined into the flat graph.
var callOps = map[string]bool{"StatefulPartitionedCall": true, "PartitionedCall": true}

// resolve follows aliases to the node output that really produces r,
// inlining a called function the first time one of its outputs is needed.
func (g *flatGraph) resolve(r ref) (ref, error) {
	for hops := 0; ; hops++ {
		if hops > 1<<16 {
			return r, fmt.Errorf("alias cycle at %s", r)
		}
		if a, ok := g.alias[r]; ok {
			r = a
			continue
		}
		n := g.nodes[r.node]
		if n == nil {
			return r, fmt.Errorf("graph has no node %q", r.node)
		}
		if callOps[n.op] {
			if n.depth >= maxInlineDepth {
				return r, fmt.Errorf("function calls nest deeper than %d at %q (a recursive function?)", maxInlineDepth, n.name)
			}
			if err := g.inline(n); err != nil {
				return r, err
			}
			if _, ok := g.alias[r]; !ok {
				return r, fmt.Errorf("call %q has no output %d", n.name, r.idx)
			}
			continue
		}
		return r, nil
	}
}

// inline copies the body of the function n calls into the flat graph under
// the prefix "<call name>/", binds its arguments to n's inputs and aliases
// n's outputs to the body's return values. The call node itself is marked
// "inlined" so it is done once.
func (g *flatGraph) inline(n *node) error {
	fa := n.attr["f"].GetFunc()
	if fa == nil {
		return fmt.Errorf("call %q names no function", n.name)
	}
	f := g.funcs[fa.Name]
	if f == nil {
		return fmt.Errorf("call %q: function %q is not in the graph's library", n.name, fa.Name)
	}
	if len(g.nodes)+len(f.NodeDef) > maxFlatNodes {
		return fmt.Errorf("call %q: inlining function %q would make the graph larger than %d nodes", n.name, fa.Name, maxFlatNodes)
	}
	n.op = "_Inlined"
	g.seq++
	prefix := n.name + "/"
	sig := f.GetSignature()
	args := map[string]ref{}
	for i, a := range sig.GetInputArg() {
		if a.NumberAttr != "" || a.TypeListAttr != "" {
			return fmt.Errorf("function %q: list argument %q is not supported", fa.Name, a.Name)
		}
		if i >= len(n.inputs) {
			return fmt.Errorf("call %q passes %d inputs, function %q takes %d", n.name, len(n.inputs), fa.Name, len(sig.GetInputArg()))
		}
		args[a.Name] = n.inputs[i]
	}
	local := map[string]*nodepb.NodeDef{}
	for _, nd := range f.NodeDef {
		local[nd.Name] = nd
	}
	// fref turns a function-body input ("arg", "node:out_arg:i") into a ref.
	fref := func(s string) (ref, bool, error) {
		if strings.HasPrefix(s, "^") {
			return ref{}, false, nil
		}
		parts := strings.Split(s, ":")
		if len(parts) == 1 {
			if r, ok := args[s]; ok {
				return r, true, nil
			}
			if _, ok := local[s]; ok {
				return ref{prefix + s, 0}, true, nil
			}
			return ref{}, false, fmt.Errorf("function %q: unknown input %q", fa.Name, s)
		}
		nd := local[parts[0]]
		if nd == nil {
			return ref{}, false, fmt.Errorf("function %q: input %q names no node", fa.Name, s)
		}
		idx := 0
		if len(parts) == 3 {
			if _, err := fmt.Sscanf(parts[2], "%d", &idx); err != nil {
				return ref{}, false, fmt.Errorf("function %q: bad input %q", fa.Name, s)
			}
		}
		return ref{prefix + parts[0], outputOffset(nd, parts[1]) + idx}, true, nil
	}
	for _, nd := range f.NodeDef {
		nn := &node{name: prefix + nd.Name, op: nd.Op, attr: nd.Attr, ctrl: controlInputs(nd.Input, prefix), depth: n.depth + 1}
		for _, in := range nd.Input {
			r, ok, err := fref(in)
			if err != nil {
				return err
			}
			if ok {
				nn.inputs = append(nn.inputs, r)
			}
		}
		g.nodes[nn.name] = nn
	}
	for i, oa := range sig.GetOutputArg() {
		ret, ok := f.Ret[oa.Name]
		if !ok {
			return fmt.Errorf("function %q: output %q has no return value", fa.Name, oa.Name)
		}
		r, _, err := fref(ret)
		if err != nil {
			return err
		}
		g.alias[ref{n.name, i}] = r
	}
	return nil
}

// inlineBody inlines call n (if not yet done) and returns the names of
// its body's nodes in the flat graph; tables are filled by functions the
// init op calls for their effect, whose outputs nothing reads.
func (g *flatGraph) inlineBody(n *node) ([]string, error) {
	fa := n.attr["f"].GetFunc()
	if fa == nil || g.funcs[fa.Name] == nil {
		return nil, fmt.Errorf("call %q names no function of the library", n.name)
	}
	if callOps[n.op] {
		if err := g.inline(n); err != nil {
			return nil, err
		}
	}
	var body []string
	for _, nd := range g.funcs[fa.Name].NodeDef {
		body = append(body, n.name+"/"+nd.Name)
	}
	return body, nil
}

// multiOutputs lists, for ops with several output arguments, each
// argument's name; a "node:arg:i" input counts outputs from the argument's
// start. Ops not listed have one output argument (maybe a list).
var multiOutputs = map[string][]string{
	"FusedBatchNorm":      {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"},
	"FusedBatchNormV2":    {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"},
	"FusedBatchNormV3":    {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2", "reserve_space_3"},
	"TopKV2":              {"values", "indices"},
	"TopK":                {"values", "indices"},
	"Unique":              {"y", "idx"},
	"MaxPoolWithArgmax":   {"output", "argmax"},
	"LookupTableFindV2":   {"values"},
	"LookupTableSizeV2":   {"size"},
	"LookupTableExportV2": {"keys", "values"},
	"StringSplit":         {"indices", "values", "shape"},
	"StringSplitV2":       {"indices", "values", "shape"},
	"SparseFillEmptyRows": {"output_indices", "output_values", "empty_row_indicator", "reverse_index_map"},
	"SparseReshape":       {"output_indices", "output_shape"},
}

func outputOffset(nd *nodepb.NodeDef, arg string) int {
	if sizes := listOutputs(nd); sizes != nil {
		off := 0
		for _, a := range sizes {
			if a.name == arg {
				return off
			}
			off += a.n
		}
		return 0
	}
	for i, a := range multiOutputs[nd.Op] {
		if a == arg {
			return i
		}
	}
	return 0
}

type listOutput struct {
	name string
	n    int
}

// listOutputs gives the output arguments of ops whose outputs are lists
// sized by attributes (tf.Example parsing), nil for other ops.
func listOutputs(nd *nodepb.NodeDef) []listOutput {
	n := func(name string) int { return int(nd.Attr[name].GetI()) }
	l := func(name string) int { return len(nd.Attr[name].GetList().GetType()) }
	switch nd.Op {
	case "ParseExample":
		s := n("Nsparse")
		return []listOutput{{"sparse_indices", s}, {"sparse_values", s}, {"sparse_shapes", s}, {"dense_values", l("Tdense")}}
	case "ParseSingleExample":
		s := n("num_sparse")
		return []listOutput{{"sparse_indices", s}, {"sparse_values", s}, {"sparse_shapes", s}, {"dense_values", l("Tdense")}}
	case "ParseExampleV2":
		s, r := n("num_sparse"), l("ragged_value_types")
		return []listOutput{{"sparse_indices", s}, {"sparse_values", s}, {"sparse_shapes", s}, {"dense_values", l("Tdense")},
			{"ragged_values", r}, {"ragged_row_splits", r}}
	}
	return nil
}
