package tf2onnx

import (
	"fmt"

	attrpb "github.com/wamuir/graft/tensorflow/core/framework/attr_value_go_proto"
	typespb "github.com/wamuir/graft/tensorflow/core/framework/types_go_proto"

	"github.com/eas-server/eas-server/engines/onnxbuild"
	"github.com/eas-server/eas-server/engines/onnxbuild/onnxpb"
	"github.com/eas-server/eas-server/engines/savedmodel"
	"github.com/eas-server/eas-server/tensor"
)

// TF2 control flow: While and StatelessWhile become an ONNX Loop, If and
// StatelessIf an ONNX If, Case and StatelessCase a chain of ONNX Ifs (TF1
// while loops: control_v1.go). Their cond, body and branches are FunctionDefs of
// the graph's library; each is inlined into the flat graph behind a
// synthetic call node (named "<node>:body" and so on, a name TensorFlow
// cannot give a node) whose arguments are synthetic nodes too, and
// translated by a child converter into an ONNX subgraph. Values the
// function reads without changing them (captured tensors and variables:
// loop variables the body returns as they came in, every If argument) are
// read from the outer scope, as ONNX subgraphs may; constants and
// variables of a subgraph become initializers of the main graph.

func init() {
	for op, e := range map[string]opEntry{
		"While":          {(*converter).translateWhile, groupControl, "as Loop"},
		"StatelessWhile": {(*converter).translateWhile, groupControl, "as Loop"},
		"If":             {(*converter).translateIf, groupControl, ""},
		"StatelessIf":    {(*converter).translateIf, groupControl, ""},
		"Case":           {(*converter).translateCase, groupControl, "as nested Ifs"},
		"StatelessCase":  {(*converter).translateCase, groupControl, "as nested Ifs"},
	} {
		opTable[op] = e
	}
	// TF1 control flow outside the loop frames control_v1.go translates
	// (TF1 conds: Switch and Merge without a frame) is refused by name,
	// and the walk does not follow NextIteration's back edge (it would
	// report a cycle instead).
	for _, op := range []string{"Enter", "Merge", "Switch", "NextIteration", "LoopCond",
		"RefEnter", "RefExit", "RefMerge", "RefSwitch", "RefNextIteration"} {
		unsupportedWhy[op] = "TF1 control flow other than a while loop's frame (tf.compat.v1.cond's Switch and Merge) is not translated; export the model with control flow v2 (TensorFlow 2, or tf.compat.v1.enable_control_flow_v2())"
	}
	stopsWalk["NextIteration"] = true
	stopsWalk["RefNextIteration"] = true
	for _, op := range []string{"TensorListReserve", "TensorListFromTensor", "TensorListSetItem", "TensorListGetItem",
		"TensorListStack", "TensorListLength", "TensorListPushBack", "TensorListPopBack", "TensorListElementShape",
		"TensorListResize", "TensorListConcatV2", "TensorListGather", "TensorListScatter", "TensorListScatterV2",
		"TensorListScatterIntoExistingList", "TensorListSplit", "EmptyTensorList",
		"TensorArrayV3", "TensorArrayReadV3", "TensorArrayWriteV3", "TensorArrayGatherV3", "TensorArrayScatterV3",
		"TensorArraySizeV3", "TensorArrayConcatV3", "TensorArraySplitV3"} {
		unsupportedWhy[op] = tensorListWhy
	}
}

const tensorListWhy = "tensor lists (tf.TensorArray, or a Python list grown inside a loop) are not translated"

// maxLoopVars bounds the loop variables and branch outputs of one node.
const maxLoopVars = 1 << 12

// child returns a converter for a subgraph of c: it shares the flat graph,
// the model and the error lists, and has its own values and nodes.
func (c *converter) child(tag string) *converter {
	if c.tables == nil {
		c.tables = map[string]*tableContents{} // shared from now on
	}
	return &converter{
		model: c.model, sig: c.sig, keys: c.keys, g: c.g,
		vals: map[ref]*value{}, unsup: c.unsup, reason: c.reason,
		tables: c.tables, tableInits: c.tableInits, writer: c.writer, usesML: c.usesML,
		Graph: onnxbuild.Graph{Prefix: c.Fresh(tag) + "/"},
	}
}

// adopt takes back what a child converter found: its first error, the
// tables it read and its initializers (hoisted into c's graph, where the
// subgraph reads them from the outer scope).
func (c *converter) adopt(sub *converter) {
	if sub.fatal != nil {
		c.fail(sub.fatal)
	}
	c.tables, c.tableInits, c.writer = sub.tables, sub.tableInits, sub.writer
	c.usesML = c.usesML || sub.usesML
	c.Inits = append(c.Inits, sub.Inits...)
	sub.Inits = nil
}

// synthetic adds a node to the flat graph that no TensorFlow graph can
// name (names with ':' are not node names): a call of function fn when fn
// is set, otherwise an argument placeholder whose value the converter
// binds itself.
//
// A node refused for one output is translated again for the next, so a
// synthetic node of the same kind may already be there: it is reused.
func (c *converter) synthetic(name, fn string, inputs []ref, depth int) (ref, bool) {
	if old, dup := c.g.nodes[name]; dup {
		same := old.op == "_Arg" && fn == ""
		if fn != "" && (old.op == "PartitionedCall" || old.op == "_Inlined") {
			same = old.attr["f"].GetFunc().GetName() == fn
		}
		if !same {
			c.fail(fmt.Errorf("node %q already exists", name))
			return ref{}, false
		}
		return ref{name, 0}, true
	}
	n := &node{name: name, op: "_Arg", inputs: inputs, depth: depth}
	if fn != "" {
		n.op = "PartitionedCall"
		n.attr = map[string]*attrpb.AttrValue{"f": {Value: &attrpb.AttrValue_Func{Func: &attrpb.NameAttrList{Name: fn}}}}
	}
	c.g.nodes[name] = n
	return ref{name, 0}, true
}

// funcAttr names the library function in n's attribute attr.
func (c *converter) funcAttr(n *node, attr string) (string, bool) {
	f := n.attr[attr].GetFunc()
	if f == nil || c.g.funcs[f.GetName()] == nil {
		c.fail(fmt.Errorf("node %q (%s): attribute %q names no function of the graph's library", n.name, n.op, attr))
		return "", false
	}
	return f.GetName(), true
}

// typeList reads a list(type) attribute.
func typeList(n *node, attr string) []typespb.DataType {
	return n.attr[attr].GetList().GetType()
}

// shapeRanks reads the ranks of an output_shapes attribute: -1 where
// unknown or absent.
func shapeRanks(n *node, count int) []int {
	out := make([]int, count)
	shapes := n.attr["output_shapes"].GetList().GetShape()
	for i := range out {
		out[i] = -1
		if i < len(shapes) && len(shapes) == count && !shapes[i].GetUnknownRank() {
			out[i] = len(shapes[i].GetDim())
		}
	}
	return out
}

// passesThrough reports whether r (a function's output) is the synthetic
// argument arg, directly or through Identity nodes.
func (c *converter) passesThrough(r ref, arg string) bool {
	for hops := 0; hops < 64; hops++ {
		rr, err := c.g.resolve(r)
		if err != nil {
			return false
		}
		if rr.node == arg {
			return true
		}
		n := c.g.nodes[rr.node]
		if n == nil || n.op != "Identity" || rr.idx != 0 || len(n.inputs) == 0 {
			return false
		}
		r = n.inputs[0]
	}
	return false
}

// graphAttr is a GRAPH attribute.
func graphAttr(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: name, Type: onnxpb.AttributeProto_GRAPH, G: g}
}

// asCond makes v a bool predicate as TensorFlow reads one: numbers are
// true when not zero. ONNX's Loop and If take one bool element.
func (c *converter) asCond(n *node, v *value) (string, bool) {
	switch {
	case v.dtype == tensor.Bool:
		return v.name, true
	case v.dtype == tensor.String || v.dtype == tensor.Invalid:
		c.unsupported(n, "a predicate that is not a bool or a number is not translated")
		return "", false
	}
	return c.Op1("Not", c.Op1("Equal", v.name, c.scalar(n, v.dtype, 0))), true
}

// output emits an Identity (with a Cast to dt where v has another dtype)
// to a fresh name of c's graph and declares it as a subgraph output of
// unknown shape: ONNX Runtime wants subgraph outputs to be values the
// subgraph itself computes.
func (c *converter) output(v *value, dt tensor.DType) *onnxpb.ValueInfoProto {
	if v.port != nil {
		v.port.used = true
	}
	src := v.name
	if v.dtype != dt && v.dtype != tensor.Invalid {
		src = c.Op1("Cast", src, onnxbuild.AttrInt("to", onnxbuild.Type(dt)))
	}
	name := c.Fresh("out")
	c.Emit("Identity", []string{src}, []string{name})
	return onnxbuild.ValueInfo(name, dt, nil)
}

// translateWhile translates While, StatelessWhile as an ONNX Loop without
// a trip count: the cond function, run on the initial values before the
// Loop, is its first condition; the body subgraph runs the body function,
// then the cond function on the new values. Loop variables the body
// returns unchanged (captured tensors and variables, maximum_iterations)
// are not carried: the subgraph reads them from the outer scope.
// parallel_iterations is ignored; loop variables are declared with unknown
// shapes, so shapes may change from one iteration to the next.
func (c *converter) translateWhile(n *node) {
	condFn, ok1 := c.funcAttr(n, "cond")
	bodyFn, ok2 := c.funcAttr(n, "body")
	if !ok1 || !ok2 {
		return
	}
	types := typeList(n, "T")
	k := len(n.inputs)
	if len(types) != k || k > maxLoopVars {
		c.fail(fmt.Errorf("node %q (%s) has %d inputs and %d types in T", n.name, n.op, k, len(types)))
		return
	}
	ranks := shapeRanks(n, k)

	// The body inlined behind synthetic arguments, to see which loop
	// variables it passes through.
	args := make([]ref, k)
	for i := range args {
		var ok bool
		if args[i], ok = c.synthetic(fmt.Sprintf("%s:arg%d", n.name, i), "", nil, n.depth+1); !ok {
			return
		}
	}
	body, ok := c.synthetic(n.name+":body", bodyFn, args, n.depth+1)
	if !ok {
		return
	}
	carried := make([]bool, k)
	dts := make([]tensor.DType, k)
	for i := range k {
		carried[i] = !c.passesThrough(ref{body.node, i}, args[i].node)
		if c.fatal != nil {
			return
		}
		dt, ok := savedmodel.DTypeOf(types[i])
		switch {
		case types[i] == typespb.DataType_DT_VARIANT:
			c.unsupported(n, "a loop variable is a tensor list: "+tensorListWhy)
			return
		case !ok && carried[i]:
			c.unsupported(n, fmt.Sprintf("loop variable %d (%s) changes in the loop; only tensors may", i, types[i]))
			return
		case carried[i] && c.in(n, i).table != "":
			c.unsupported(n, "a lookup table handle changes in the loop")
			return
		}
		dts[i] = dt
	}

	// The first condition, in this graph.
	cond0, ok := c.synthetic(n.name+":cond0", condFn, n.inputs, n.depth+1)
	if !ok {
		return
	}
	cv := c.visit(cond0)
	if cv.port != nil {
		cv.port.used = true
	}
	first, ok := c.asCond(n, cv)
	if !ok {
		return
	}

	// The body subgraph: (iteration, condition, carried...) ->
	// (condition, carried...).
	sub := c.child("while")
	bg := &onnxpb.GraphProto{Name: n.name}
	bg.Input = append(bg.Input, onnxbuild.ValueInfo(sub.Fresh("iteration"), tensor.Int64, []int64{}),
		onnxbuild.ValueInfo(sub.Fresh("cond"), tensor.Bool, []int64{}))
	var inits []string
	for i := range k {
		if !carried[i] {
			sub.vals[args[i]] = c.in(n, i)
			continue
		}
		name := sub.Fresh("var")
		bg.Input = append(bg.Input, onnxbuild.ValueInfo(name, dts[i], nil))
		sub.vals[args[i]] = &value{name: name, dtype: dts[i], rank: ranks[i]}
		inits = append(inits, c.in(n, i).name)
	}
	news := make([]ref, k)
	for i := range news {
		news[i] = ref{body.node, i}
	}
	condNext, ok := c.synthetic(n.name+":cond", condFn, news, n.depth+1)
	if !ok {
		return
	}
	var outs []*onnxpb.ValueInfoProto
	for i := range k {
		if carried[i] {
			outs = append(outs, sub.output(sub.visit(news[i]), dts[i]))
		}
	}
	if next, ok := sub.asCond(n, sub.visit(condNext)); ok {
		bg.Output = append([]*onnxpb.ValueInfoProto{sub.output(&value{name: next, dtype: tensor.Bool}, tensor.Bool)}, outs...)
	}
	bg.Node = sub.Nodes
	c.adopt(sub)
	if c.fatal != nil {
		return
	}

	if len(inits) == 0 {
		// Nothing changes from one iteration to the next.
		c.unsupported(n, "a loop whose variables all stay the same is not translated")
		return
	}
	finals := c.OpN("Loop", len(inits), append([]string{"", first}, inits...), graphAttr("body", bg))
	j := 0
	for i := range k {
		if !carried[i] {
			c.set(n, i, c.in(n, i))
			continue
		}
		c.set(n, i, &value{name: finals[j], dtype: dts[i], rank: ranks[i]})
		j++
	}
}

// outTypes reads n's Tout: the dtypes of its outputs, all tensors.
func (c *converter) outTypes(n *node) ([]tensor.DType, bool) {
	types := typeList(n, "Tout")
	if len(types) > maxLoopVars {
		c.fail(fmt.Errorf("node %q (%s) has %d outputs", n.name, n.op, len(types)))
		return nil, false
	}
	dts := make([]tensor.DType, len(types))
	for i, t := range types {
		dt, ok := savedmodel.DTypeOf(t)
		if !ok {
			why := fmt.Sprintf("output %d is a %s; only tensors are translated", i, t)
			if t == typespb.DataType_DT_VARIANT {
				why = "an output is a tensor list: " + tensorListWhy
			}
			c.unsupported(n, why)
			return nil, false
		}
		dts[i] = dt
	}
	return dts, true
}

// branch translates function fn of n, called on args (values of c's
// scope), as a subgraph without inputs returning outputs of dtypes dts;
// nil when the flat graph cannot take it (c.fatal says why).
func (c *converter) branch(n *node, tag, fn string, args []*value, dts []tensor.DType) *onnxpb.GraphProto {
	sub := c.child(tag)
	refs := make([]ref, len(args))
	for i, v := range args {
		a, ok := c.synthetic(fmt.Sprintf("%s:%s_arg%d", n.name, tag, i), "", nil, n.depth+1)
		if !ok {
			return nil
		}
		sub.vals[a] = v
		refs[i] = a
	}
	call, ok := c.synthetic(n.name+":"+tag, fn, refs, n.depth+1)
	if !ok {
		return nil
	}
	g := &onnxpb.GraphProto{Name: n.name + "/" + tag}
	for i, dt := range dts {
		g.Output = append(g.Output, sub.output(sub.visit(ref{call.node, i}), dt))
	}
	g.Node = sub.Nodes
	c.adopt(sub)
	return g
}

// call translates function fn of n, called on args, into c's own graph
// and returns its outputs as dtypes dts.
func (c *converter) call(n *node, tag, fn string, args []*value, dts []tensor.DType) []string {
	outs := make([]string, len(dts))
	refs := make([]ref, len(args))
	for i, v := range args {
		a, ok := c.synthetic(fmt.Sprintf("%s:%s_arg%d", n.name, tag, i), "", nil, n.depth+1)
		if !ok {
			return outs
		}
		c.vals[a] = v
		refs[i] = a
	}
	call, ok := c.synthetic(n.name+":"+tag, fn, refs, n.depth+1)
	if !ok {
		return outs
	}
	for i, dt := range dts {
		v := c.visit(ref{call.node, i})
		if v.port != nil {
			v.port.used = true
		}
		outs[i] = v.name
		if v.dtype != dt && v.dtype != tensor.Invalid {
			outs[i] = c.Op1("Cast", v.name, onnxbuild.AttrInt("to", onnxbuild.Type(dt)))
		}
	}
	return outs
}

// translateIf translates If, StatelessIf as an ONNX If: each branch
// function becomes a subgraph without inputs that reads the If's arguments
// from the outer scope.
func (c *converter) translateIf(n *node) {
	thenFn, ok1 := c.funcAttr(n, "then_branch")
	elseFn, ok2 := c.funcAttr(n, "else_branch")
	if !ok1 || !ok2 {
		return
	}
	if len(n.inputs) == 0 {
		c.fail(fmt.Errorf("node %q (%s) has no predicate", n.name, n.op))
		return
	}
	dts, ok := c.outTypes(n)
	if !ok {
		return
	}
	pred, ok := c.asCond(n, c.in(n, 0))
	if !ok {
		return
	}
	var args []*value
	for i := 1; i < len(n.inputs); i++ {
		args = append(args, c.in(n, i))
	}
	tg := c.branch(n, "then", thenFn, args, dts)
	eg := c.branch(n, "else", elseFn, args, dts)
	if c.fatal != nil || tg == nil || eg == nil {
		return
	}
	ranks := shapeRanks(n, len(dts))
	outs := c.OpN("If", len(dts), pred, graphAttr("then_branch", tg), graphAttr("else_branch", eg))
	for i, name := range outs {
		c.set(n, i, &value{name: name, dtype: dts[i], rank: ranks[i]})
	}
}

// translateCase translates Case, StatelessCase (tf.switch_case) as a chain
// of ONNX Ifs, branch k taken when branch_index is k and the last one
// otherwise (out of range included), as TensorFlow does.
func (c *converter) translateCase(n *node) {
	var fns []string
	for _, f := range n.attr["branches"].GetList().GetFunc() {
		if c.g.funcs[f.GetName()] == nil {
			c.fail(fmt.Errorf("node %q (%s): branch %q is not in the graph's library", n.name, n.op, f.GetName()))
			return
		}
		fns = append(fns, f.GetName())
	}
	if len(fns) == 0 || len(fns) > maxLoopVars || len(n.inputs) == 0 {
		c.fail(fmt.Errorf("node %q (%s) has %d branches and %d inputs", n.name, n.op, len(fns), len(n.inputs)))
		return
	}
	dts, ok := c.outTypes(n)
	if !ok {
		return
	}
	idx := c.in(n, 0)
	if idx.dtype != tensor.Int32 && idx.dtype != tensor.Int64 {
		c.unsupported(n, "branch_index must be an integer")
		return
	}
	var args []*value
	for i := 1; i < len(n.inputs); i++ {
		args = append(args, c.in(n, i))
	}
	// preds[k]: branch k is taken unless an earlier one was.
	idx64 := c.Op1("Reshape", c.asInt64(idx), c.I64Const([]int64{}))
	preds := make([]string, len(fns)-1)
	for k := range preds {
		preds[k] = c.Op1("Equal", idx64, c.I64Scalar(int64(k)))
	}
	// from emits, in sc's scope, the choice among branches k...: an If
	// between branch k and the rest, or the last branch itself.
	var from func(sc *converter, k int) []string
	from = func(sc *converter, k int) []string {
		tag := fmt.Sprintf("branch%d", k)
		if k == len(fns)-1 {
			return sc.call(n, tag, fns[k], args, dts)
		}
		tg := sc.branch(n, tag, fns[k], args, dts)
		sub := sc.child("case")
		eg := &onnxpb.GraphProto{Name: fmt.Sprintf("%s/after%d", n.name, k)}
		for i, o := range from(sub, k+1) {
			eg.Output = append(eg.Output, sub.output(&value{name: o, dtype: dts[i]}, dts[i]))
		}
		eg.Node = sub.Nodes
		sc.adopt(sub)
		if c.fatal != nil || tg == nil {
			return make([]string, len(dts))
		}
		return sc.OpN("If", len(dts), preds[k], graphAttr("then_branch", tg), graphAttr("else_branch", eg))
	}
	outs := from(c, 0)
	if c.fatal != nil {
		return
	}
	ranks := shapeRanks(n, len(dts))
	for i, name := range outs {
		c.set(n, i, &value{name: name, dtype: dts[i], rank: ranks[i]})
	}
}
